"""Lazy registries: integrations are looked up by name and imported only when used.

Each registry maps a name to ``"module:Class"``; importing the module is deferred so that,
for instance, the docker SDK is loaded only by a suite that asks for a docker sandbox.
"""

from __future__ import annotations

import importlib
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnknownName(LookupError):
    pass


class LazyRegistry(Generic[T]):
    def __init__(self, kind: str, entries: dict[str, str]):
        self.kind = kind
        self._entries = dict(entries)
        self._loaded: dict[str, type[T]] = {}

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def register(self, name: str, target: str) -> None:
        self._entries[name] = target
        self._loaded.pop(name, None)

    def get(self, name: str) -> type[T]:
        if name not in self._loaded:
            try:
                target = self._entries[name]
            except KeyError:
                raise UnknownName(
                    f"unknown {self.kind} '{name}'; known: {', '.join(self.names())}") from None
            self._loaded[name] = load_target(target)
        return self._loaded[name]


def load_target(target: str) -> Any:
    """The object a ``"module:Name"`` string names, its module imported now."""
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)
