"""What a group of the store's queries is given: the store's connection, and, for the groups that
add trials of a configuration the store may not have yet, the store's suite basics.

Each group (``store.reviews``, ``store.runs``, ``store.views``...) is its own object made with
what it needs, so a group's dependencies are its constructor's arguments rather than whatever
else a shared ``self`` happened to offer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .lazydb import Database


class Queries:
    """One group of named queries over the store's connection."""

    def __init__(self, db: Database):
        self.db = db


class Configurations(Protocol):
    """The store's configuration rows, as importers need them (:meth:`Store.ensure_configuration`)."""

    def ensure_configuration(self, suite_id: str, model: str, cli: str, provider: str | None = None,
                             price_key: str | None = None, cli_version: str | None = None,
                             extra_args: list[str] | None = None) -> int: ...
