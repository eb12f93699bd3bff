"""The rows a trial's transcript is stored as: one :class:`EventRow` per event, one
:class:`UsageRow` per model call that carried usage.

They cross from the runner's event loop to the store writer's thread, to the live feed and
to the importers' transactions, and they are inserted positionally (``executemany`` over
the store's ``EVENT_SQL`` and ``USAGE_SQL``, whose columns are these fields in this order:
tests/core/test_rows.py holds the two to each other). NamedTuples, so a row is still the
tuple SQLite binds, with names and types for the rest of the code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .usage import TokenUsage


class EventRow(NamedTuple):
    trial_id: int | None  # None only in an importer's batch, before its trial's row exists
    seq: int  # 1, 2, ... within the trial
    ts: float | None  # wall time; None: an imported event whose file gave none
    kind: str  # an EventKind value
    stream: str  # stdout, stderr, runner, proxy; an importer's source name
    text: str
    data: bytes | None  # the raw line the event came from (stored once, with its first event), or its JSON


class UsageRow(NamedTuple):
    trial_id: int | None  # as EventRow's
    seq: int  # the seq of the event that carried the usage
    source: str  # "stdout" (the CLI's stream or session files), "proxy", or an importer's source
    model: str | None
    uncached_input: int
    cached_input: int
    cache_write: int
    output: int
    reasoning: int
    cost_usd: float | None
    reported_cost_usd: float | None  # the CLI's own figure, when it gives one
    cache_write_1h: int | None  # None: a source that does not say (the importers)

    @classmethod
    def of(cls, trial_id: int | None, seq: int, source: str, model: str | None, usage: TokenUsage,
           cost_usd: float | None, reported_cost_usd: float | None, cache_write_1h: int | None) -> UsageRow:
        """A call's row from its :class:`~.usage.TokenUsage` (its five token classes)."""
        return cls(trial_id, seq, source, model, usage.uncached_input, usage.cached_input, usage.cache_write,
                   usage.output, usage.reasoning, cost_usd, reported_cost_usd, cache_write_1h)
