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


def load(target: str) -> Any:
    """The object a ``"module:Name"`` names (a class, usually), its module imported now."""
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


class LazyRegistry(Generic[T]):
    def __init__(self, kind: str, entries: dict[str, str]):
        self.kind = kind
        self._entries = dict(entries)
        self._loaded: dict[str, type[T]] = {}
        self.generation = 0  # counts changes, for callers that cache what they built from the entries

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def register(self, name: str, target: str) -> None:
        self._entries[name] = target
        self._loaded.pop(name, None)
        self.generation += 1

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)
        self._loaded.pop(name, None)
        self.generation += 1

    def get(self, name: str) -> type[T]:
        if name not in self._loaded:
            try:
                target = self._entries[name]
            except KeyError:
                raise UnknownName(
                    f"unknown {self.kind} '{name}'; known: {', '.join(self.names())}") from None
            self._loaded[name] = load(target)
        return self._loaded[name]

