"""The feed's meters: at once on a status change, at most every METER_EVERY seconds for a trial
that only printed, and never lost (a trial that printed and then went quiet still gets its
latest meter)."""

from __future__ import annotations

from types import SimpleNamespace

import orjson

from agentmeter_tui.core.run import feed as feed_module
from agentmeter_tui.core.run.feed import MAX_LIVE, METER_EVERY, Feed, FeedOptions


class FakeTrial:
    def __init__(self, trial_id: int):
        self.id, self.tokens = trial_id, 0

    def meter(self) -> dict:
        return {"id": self.id, "tokens": {"output": self.tokens}}


def rows(seq: int) -> list[tuple]:
    return [(1, seq, 0.0, "assistant", "stdout", "text", None)]


def test_meters_of_printing_trials_are_paced_and_status_changes_are_not(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(feed_module.time, "monotonic", lambda: clock[0])
    trials = {1: FakeTrial(1), 2: FakeTrial(2)}
    runner = SimpleNamespace(scheduler=SimpleNamespace(running=trials))
    feed = Feed(runner)  # type: ignore[arg-type]

    def tick(seq: int, printing=(1, 2)):
        for trial_id in printing:
            trials[trial_id].tokens = seq
            feed.trial_events(trials[trial_id], rows(seq))
        collected = feed._collect()
        events, _dropped, meters, finished = collected or ({}, {}, [], [])
        return events, meters, finished

    events, meters, _ = tick(1)
    assert set(events) == {1, 2} and [m["id"] for m in meters] == [1, 2]  # first meters at once
    clock[0] += 0.1
    events, meters, _ = tick(2)
    assert set(events) == {1, 2} and meters == []  # events every tick, meters wait
    feed.trial_changed(trials[2])  # e.g. a status change
    clock[0] += 0.1
    events, meters, _ = tick(3)
    assert [m["id"] for m in meters] == [2]
    clock[0] += METER_EVERY
    events, meters, _ = tick(4, printing=())  # both went quiet; trial 1's latest figures still go out
    assert events == {} and [(m["id"], m["tokens"]["output"]) for m in meters] == [(1, 3)]
    clock[0] += METER_EVERY
    assert feed._collect() is None  # nothing new since: nothing sent


def test_a_flood_is_kept_as_a_tail_and_a_count(monkeypatch):
    """A trial that prints far more than a tick can carry: the feed keeps the newest MAX_LIVE
    events and counts the rest, and each subscriber's tick says how many it skipped."""
    trial = FakeTrial(7)
    runner = SimpleNamespace(scheduler=SimpleNamespace(running={7: trial}), run_id=1, suite=None,
                             db="x.db", started=0)
    monkeypatch.setattr(Feed, "progress", lambda self: {})
    feed = Feed(runner)  # type: ignore[arg-type]
    printed = 0
    for size in (3, MAX_LIVE + 1, 2 * MAX_LIVE, 10, 7 * MAX_LIVE):  # batches as the writer hands them
        feed.trial_events(trial, [(7, printed + i, 0.0, "assistant", "stdout", f"line {printed + i}", None)
                                  for i in range(size)])
        printed += size
        tail = feed._live[trial]  # never the whole flood: the batches that hold the newest MAX_LIVE
        assert tail.count - len(tail.batches[0]) < MAX_LIVE <= tail.count or tail.count == printed
    events, dropped, _, _ = feed._collect()
    kept = events[7]
    assert len(kept) + dropped[7] == printed  # every event is sent or counted
    assert [row[0] for row in kept] == list(range(printed - len(kept), printed))  # the newest, in order
    for options in (FeedOptions(max_events=200), FeedOptions(max_events=MAX_LIVE)):
        feed.subscribers[object()] = options  # type: ignore[index]
    messages = feed._encode((events, dropped, [], []))
    for options, raw in messages.items():
        tick = orjson.loads(raw)
        sent = tick["events"]["7"]
        assert len(sent) == options.max_events and tick["skipped"]["7"] == printed - options.max_events
        assert sent[-1][0] == printed - 1
