"""The feed's bytes did not change when its records got types: the runner and a client are
separate processes, perhaps of different versions, and each must read what the other writes.
A live event was a list and is a tuple now; orjson writes both as the same JSON array."""

from __future__ import annotations

import socket
import threading
from typing import Literal, get_args, get_origin, get_type_hints

import orjson
import pytest

from agentmeter_tui.core.paths import socket_path
from agentmeter_tui.core.run.control import (
    FEED_TYPES,
    LIVE_TEXT,
    ControlClient,
    ControlError,
    FeedMessage,
    Tick,
    encode,
    feed_message,
)
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


# -- feed_message: a line read is taken for the message its tag says, or skipped --------------

SENT = [
    {"ok": True, "type": "snapshot", "run_id": 1, "suite": "s", "db": "a.db", "pid": 7, "started": 1.0,
     "progress": {"done": 0}, "running": [], "subscribers": 1, "done": [], "nodes": [], "forecast_cells": {},
     "prepared": []},
    {"type": "tick", "ts": 2.0, "meters": [], "events": {3: [(1, 2.0, "assistant", "stdout", "hi")]}},
    {"type": "preparing", "text": "task images 1/2"},
    {"type": "finished", "status": "finished", "progress": {"done": 2, "total": 2}},
]


def test_each_message_of_the_feed_is_taken_for_itself():
    for sent in SENT:
        line = orjson.loads(encode(sent))
        message = feed_message(line)
        assert message is not None and message["type"] == sent["type"]
        assert message == line  # the fields as they came: only the tag is checked


def test_the_tags_it_knows_are_the_unions():
    tags = [get_type_hints(member)["type"] for member in get_args(FeedMessage)]  # Required[...] unwrapped
    assert all(get_origin(tag) is Literal and len(get_args(tag)) == 1 for tag in tags)  # one tag each
    assert FEED_TYPES == {get_args(tag)[0] for tag in tags} and len(tags) == len(FEED_TYPES)


def test_an_unknown_type_or_none_is_skipped():
    assert feed_message({"type": "gossip", "text": "a newer runner's"}) is None
    assert feed_message({"progress": {"done": 1}}) is None  # no type at all
    assert feed_message({"type": None}) is None
    assert feed_message(["tick"]) is None  # not even an object


def test_a_refusal_to_be_followed_raises():
    with pytest.raises(ControlError, match="2 clients follow the feed already"):
        feed_message({"ok": False, "error": "2 clients follow the feed already"})
    with pytest.raises(ControlError, match="refused"):
        feed_message({"ok": False})


class OneShotRunner:
    """A control socket that sends ``lines`` to the first client, then closes."""

    def __init__(self, db, lines: list[bytes]):
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        path = socket_path(db)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.server.bind(str(path))
        self.server.listen(1)
        self.thread = threading.Thread(target=self._serve, args=(lines,))
        self.thread.start()

    def _serve(self, lines: list[bytes]) -> None:
        conn, _ = self.server.accept()
        with conn:
            conn.recv(4096)  # the subscribe request
            conn.sendall(b"".join(lines))
        self.server.close()


def test_subscribe_yields_the_messages_it_knows_and_skips_the_rest(tmp_path):
    db = tmp_path / "a.db"
    lines = [encode(SENT[0]), encode({"type": "gossip"}), encode({"no": "type"}), *map(encode, SENT[1:])]
    runner = OneShotRunner(db, lines)
    with ControlClient(db) as client:
        got = [message["type"] for message in client.subscribe()]
    runner.thread.join()
    assert got == ["snapshot", "tick", "preparing", "finished"]


def test_subscribe_raises_a_refusal(tmp_path):
    db = tmp_path / "a.db"
    runner = OneShotRunner(db, [encode({"ok": False, "error": "32 clients follow the feed already"})])
    with ControlClient(db) as client, pytest.raises(ControlError, match="32 clients"):
        next(client.subscribe())
    runner.thread.join()
