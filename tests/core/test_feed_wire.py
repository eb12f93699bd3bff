"""The feed's bytes did not change when its records got types: the runner and a client are
separate processes, perhaps of different versions, and each must read what the other writes.
A live event was a list and is a tuple now; orjson writes both as the same JSON array."""

from __future__ import annotations

import orjson

from agentmeter_tui.core.run.control import LIVE_TEXT, Tick, encode
from agentmeter_tui.core.run.feed import Tail
from agentmeter_tui.ui.live_state import LiveState


def test_a_ticks_live_events_are_the_bytes_the_lists_were():
    rows = [(3, seq, 1.5 + seq, "assistant", "stdout", f"line {seq} " + "x" * LIVE_TEXT, None)
            for seq in (1, 2, 3)]
    tail = Tail()
    tail.add(rows)
    live, left_out = tail.take()
    assert left_out == 0
    before = [[r[1], r[2], r[3], r[4], r[5][:LIVE_TEXT]] for r in rows]  # what the feed built until now
    tick: Tick = {"type": "tick", "ts": 9.0, "meters": [], "finished": [], "events": {3: live}}
    wire = encode(tick)
    assert wire == encode({**tick, "events": {3: before}})
    assert orjson.loads(wire)["events"] == {"3": before}


def test_a_client_applies_a_tick_of_the_new_runner():
    meter = {"id": 3, "task": "t", "model": "m", "cli": "c", "trial": 0, "status": "running", "elapsed": 1.0}
    rows = [(3, seq, 2.0, "assistant", "stdout", f"line {seq}", b"raw") for seq in (1, 2)]
    tail = Tail()
    tail.add(rows)
    live, _ = tail.take()
    state = LiveState(clock=lambda: 10.0)
    summary = state.apply(orjson.loads(encode({"type": "tick", "ts": 10.0, "meters": [meter], "events": {3: live}})))
    assert summary.events == 2 and summary.changed == {3}
    assert list(state.trials[3].events) == [(1, 2.0, "assistant", "stdout", "line 1"),
                                           (2, 2.0, "assistant", "stdout", "line 2")]
