"""The feed's meters: at once on a status change, at most every METER_EVERY seconds for a trial
that only printed, and never lost (a trial that printed and then went quiet still gets its
latest meter)."""

from __future__ import annotations

from types import SimpleNamespace

from agentmeter_tui.core.run import feed as feed_module
from agentmeter_tui.core.run.feed import METER_EVERY, Feed


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
        return collected or ({}, [], [])

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
