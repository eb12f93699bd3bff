"""The rows a trial's transcript is stored as: one :data:`EventRow` per event, one
:class:`UsageRow` per model call that carried usage.

They cross from the runner's event loop to the store writer's thread, to the live feed and
to the importers' transactions, and they are inserted positionally (``executemany`` over
the store's ``EVENT_SQL`` and ``USAGE_SQL``, whose columns are :data:`EVENT_FIELDS` and
UsageRow's fields in this order: tests/core/test_rows.py holds the two to each other).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .usage import TokenUsage

# An event's row, typed field by field: (trial_id, seq, ts, kind, stream, text, data).
#   trial_id  None only in an importer's batch, before its trial's row exists
#   seq       1, 2, ... within the trial
#   ts        wall time; None: an imported event whose file gave none
#   kind      an EventKind value; stream: stdout, stderr, runner, proxy, or an importer's source
#   data      the raw line the event came from (stored once, with its first event), or its JSON
# A plain tuple rather than a NamedTuple: one is made for every line an agent prints, and a
# NamedTuple cost 0.25 us more per row to build (its __new__ is Python; 300 ns against 56) and
# is never untracked by the garbage collector as a plain tuple is, so a full collection over
# the rows a flood keeps alive (the writer's backlog, the feed's tails) took 63 ms for 300k
# rows against 8 ms. A usage row is one per model call: that one has names.
EventRow = tuple[int | None, int, float | None, str, str, str, bytes | None]
EVENT_FIELDS = ("trial_id", "seq", "ts", "kind", "stream", "text", "data")


class UsageRow(NamedTuple):
    trial_id: int | None  # as an EventRow's
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
