"""Provides :class:`UiSession`, what the screens share, and :class:`FeedClient`.

A session is one store (read on its own thread), the grid and live models built from it and
from the runner's feed, the reviewer's name, and a way to send the runner control requests.
The feed client is an asyncio task in the app's loop: it reads the runner's JSON lines and
hands each message to a callback; it reconnects when the runner drops a slow client, and
reports the end (schedule finished, runner gone) once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, overload

import orjson

from ..core.run.control import (
    Answer,
    BudgetReply,
    ControlError,
    FeedMessage,
    HoldReply,
    PauseReply,
    encode,
    feed_message,
    open_async,
)
from ..core.vocab import FINAL_STATUSES
from .data import StoreThread, SuiteOverview, grid_rows, latest_scores, overview
from .grid_state import GridState
from .live_state import LiveState, TickSummary

RECONNECTS = 3


class FeedClient:
    def __init__(self, db: Path, on_message: Callable[[FeedMessage], None],
                 on_end: Callable[[str, str | None], None]):
        self.db = db
        self.on_message, self.on_end = on_message, on_end

    async def run(self) -> None:
        """Subscribe and forward messages until the runner says it finished or is gone."""
        failures = 0
        while True:
            try:
                reader, writer = await open_async(self.db)
            except ControlError as exc:
                failures += 1
                if failures > RECONNECTS:
                    self.on_end("lost", str(exc))
                    return
                await asyncio.sleep(0.5)
                continue
            failures = 0
            try:
                writer.write(encode({"op": "subscribe"}))
                await writer.drain()
                while line := await reader.readline():
                    if (message := feed_message(orjson.loads(line))) is None:
                        continue  # a type this client does not know (a newer runner's)
                    self.on_message(message)
                    if message["type"] == "finished":
                        self.on_end(message.get("status", "finished"), None)
                        return
            except (ConnectionError, asyncio.IncompleteReadError, orjson.JSONDecodeError, ValueError, ControlError):
                pass  # ControlError: refused (the door full); tried again like a drop
            finally:
                writer.close()
            failures += 1  # dropped without "finished": a backlog drop or the runner died
            if failures > RECONNECTS:
                self.on_end("lost", "the runner closed the connection")
                return


async def control_request(db: Path, op: str, **fields: Any) -> Any:
    """One request on its own connection (the feed connection only streams): the reply, which
    ``UiSession.request`` types by its op; a refusal raises ControlError with its words."""
    reader, writer = await open_async(db)
    try:
        writer.write(encode({"op": op, **fields}))
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 10)
    finally:
        writer.close()
    if not line:
        raise ControlError("the runner closed the connection")
    reply = orjson.loads(line)
    if not reply.get("ok"):
        raise ControlError(reply.get("error", f"{op} failed"))
    return reply


class UiSession:
    def __init__(self, db: Path, *, reviewer: str, live: bool, suite_id: str | None = None,
                 on_exit_stop_runner: bool = False, blind: bool = False, blind_seed: int | None = None,
                 flag: str | None = None, by_flags: bool = False):
        self.db = db
        self.flag = flag  # review only trials a triage scanner flagged so (issue 35)
        self.by_flags = by_flags  # flagged trials first in the review queue
        self.reviewer = reviewer
        self.blind = blind  # blind review: no model, CLI, tokens, cost, flags or grid position on screen
        self.blind_seed = blind_seed
        self.live_mode = live
        self.suite_id = suite_id
        self.stop_runner_on_exit = on_exit_stop_runner  # the demo's runner is ours to stop
        self.store = StoreThread(db)
        self.live = LiveState()
        self.grid = GridState([], [])
        self.overview = SuiteOverview(suite_id)
        self.scores: dict[int, float] = {}  # trial id -> its agreed score (a median may be a half)

    async def load(self) -> None:
        """Read the suite's shape and its trials so far (once; the feed keeps them current)."""
        self.overview = await self.store.call(overview, self.suite_id)
        self.suite_id = self.overview.suite_id
        grid = GridState(self.overview.models, self.overview.clis, self.overview.per_cell_total)
        if self.suite_id is not None:
            grid.load(await self.store.call(grid_rows, self.suite_id))
            self.scores = await self.store.call(latest_scores, self.suite_id)
        grid.ams = self.grid.ams
        self.grid = grid

    def apply(self, message: FeedMessage) -> TickSummary:
        """One feed message into both states (live and grid); returns the live state's summary of it."""
        summary = self.live.apply(message)
        if message["type"] == "snapshot":  # the tag says which message it is (as in LiveState.apply)
            if self.suite_id is None:
                self.suite_id = message.get("suite")
            # ``done``: trials this run finished before we subscribed, perhaps after we read the store
            self.grid.apply_meters(message.get("done") or [])
            self.grid.apply_meters(message.get("running") or [])
        elif message["type"] == "tick":
            self.grid.apply_meters(message.get("meters") or [])
            self.grid.apply_meters(message.get("finished") or [])
        return summary

    async def refresh(self) -> TickSummary:
        """Re-read the suite's trials and scores from the store, whose final rows win over the
        feed's meters (on attach, and after the run ends, when nothing more will come to
        correct a missed message); returns what changed for the live screen."""
        if self.suite_id is None:
            return TickSummary()
        rows = await self.store.call(grid_rows, self.suite_id)
        self.scores = await self.store.call(latest_scores, self.suite_id)
        followed = set() if self.live.ended else {t.id for t in self.live.trials.values()}
        self.grid.reconcile(rows, followed)
        return self.live.settle({row["id"]: (row["status"], row.get("reason")) for row in rows
                                 if row["status"] in FINAL_STATUSES})

    # The ops whose replies the screens read; the others get the generic Answer.
    @overload
    async def request(self, op: Literal["pause", "resume"], **fields: Any) -> PauseReply: ...
    @overload
    async def request(self, op: Literal["budget"], **fields: Any) -> BudgetReply: ...
    @overload
    async def request(self, op: str, **fields: Any) -> Answer: ...

    async def request(self, op: str, **fields: Any) -> Any:
        return await control_request(self.db, op, **fields)

    async def hold_budget(self, trial_id: int, seconds: float) -> HoldReply:
        """Hold (``seconds`` > 0) or release (0) a trial's budget kill while its budget dialog is open."""
        return await control_request(self.db, "hold", trial=trial_id, seconds=seconds)

    def close(self) -> None:
        self.store.close()
