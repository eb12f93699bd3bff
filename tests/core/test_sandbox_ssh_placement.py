"""Placement of trials on host slots: spread over hosts, per-host slots, per-provider limits
across hosts, host labels, hosts going down and up, and giving up when every host stays down."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from agentmeter_tui.core.run.placement import Host, Placement
from agentmeter_tui.core.suites.taskfolders import EnvironmentSection
from tests.waiting import settle


def plan(name: str, provider: str = "p", labels: list[str] | None = None) -> SimpleNamespace:
    task = SimpleNamespace(spec=SimpleNamespace(environment=EnvironmentSection(host_labels=labels or [])))
    return SimpleNamespace(name=name, task=task, config=SimpleNamespace(model=SimpleNamespace(provider=provider)))


def take_all(placement: Placement, queue: list) -> list[tuple[str, str]]:
    taken = []
    while (got := placement.try_take(queue)) is not None:
        taken.append((got[0].name, got[1].host))
    return taken


def test_trials_spread_over_hosts_and_respect_their_slots():
    placement = Placement([Host("a", 2), Host("b", 2)])
    queue = [plan(f"t{i}") for i in range(6)]
    taken = take_all(placement, queue)
    assert [host for _, host in taken] == ["a", "b", "a", "b"]  # least loaded first
    assert [name for name, _ in taken] == ["t0", "t1", "t2", "t3"]  # schedule order kept
    assert len(queue) == 2 and placement.hosts["a"].busy == 2


def test_provider_limits_hold_across_hosts_without_blocking_other_providers():
    placement = Placement([Host("a", 4), Host("b", 4)], provider_limits={"slow": 1})
    queue = [plan("s1", "slow"), plan("s2", "slow"), plan("f1", "fast"), plan("f2", "fast")]
    taken = take_all(placement, queue)
    assert [name for name, _ in taken] == ["s1", "f1", "f2"]  # s2 waits; the fast ones pass it
    assert [p.name for p in queue] == ["s2"] and placement.provider_busy["slow"] == 1


def test_released_slots_and_labels():
    placement = Placement([Host("small", 1), Host("gpu", 1, frozenset({"gpu"}))])
    queue = [plan("needs-gpu", labels=["gpu"]), plan("any1"), plan("any2")]
    got = placement.try_take(queue)
    assert (got[0].name, got[1].host) == ("needs-gpu", "gpu")
    got2 = placement.try_take(queue)
    assert (got2[0].name, got2[1].host) == ("any1", "small")
    assert placement.try_take(queue) is None  # both hosts full
    placement.release(got[1])
    got3 = placement.try_take(queue)
    assert (got3[0].name, got3[1].host) == ("any2", "gpu")


def test_a_down_host_gets_nothing_until_it_is_up_again():
    placement = Placement([Host("a", 2), Host("b", 2)])
    placement.mark_down("a", "connection lost")
    queue = [plan(f"t{i}") for i in range(4)]
    assert [host for _, host in take_all(placement, queue)] == ["b", "b"]
    assert placement.capacity() == 2 and placement.snapshot()[0]["reason"] == "connection lost"
    placement.mark_up("a")
    assert [host for _, host in take_all(placement, queue)] == ["a", "a"]


async def test_take_waits_for_a_slot_and_the_slot_reaches_the_sandbox_by_token():
    placement = Placement([Host("a", 1)])
    queue = [plan("first"), plan("second")]
    first = await placement.take(queue)
    placement.bind("token-1", first[1])
    assert placement.slot_for("token-1").host == "a"
    waiting = asyncio.ensure_future(placement.take(queue))
    await settle()
    assert not waiting.done()
    placement.release(first[1], "token-1")
    second = await waiting
    assert second[0].name == "second" and placement.slot_for("token-1") is None


async def test_take_gives_up_when_every_host_stays_down():
    placement = Placement([Host("a", 1)])
    placement.give_up_after = 0.1
    dropped = []
    placement.on_give_up = dropped.append
    placement.mark_down("a", "gone")
    queue = [plan("t1"), plan("t2")]
    assert await placement.take(queue, poll=0.02) is None
    assert queue == [] and dropped == [2]


async def test_take_returns_when_the_run_stops():
    placement = Placement([Host("a", 1)])
    queue = [plan("t1"), plan("t2")]
    await placement.take(queue)
    stopping = False
    waiting = asyncio.ensure_future(placement.take(queue, lambda: stopping, poll=0.02))
    await settle()
    assert not waiting.done()
    stopping = True
    assert await waiting is None
