"""A worker lost under several Harbor trials (CI, tests/core/test_fleet_harbor.py): the first
trial to see it dropped that node's engine, whose pool cancelled the calls still waiting for a
thread; the second trial's await raised CancelledError, which no ``except Exception`` catches,
so the trial vanished: its row stayed "running" forever while the run ended 0 with its cell
counted done. Now a call cancelled by the engine's close is the engine's error (the trial ends
infra-invalid and is rerun), and a trial whose await is cancelled under it, by whatever, still
ends with a final row."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest
import requests

from agentmeter_tui.core.run.lifecycle import TrialOutcome
from agentmeter_tui.core.run.trial import TrialRun
from agentmeter_tui.core.sandboxes.docker.engine import Engine
from agentmeter_tui.core.suites.budget import Budget
from agentmeter_tui.core.vocab import TrialStatus


async def test_a_call_waiting_for_a_thread_when_the_engine_closes_is_the_engines_error():
    engine = Engine("amh-n3", None, SimpleNamespace(close=lambda: None), False, executor=ThreadPoolExecutor(1, "test-engine"))
    busy, release = threading.Event(), threading.Event()

    def hold() -> None:
        busy.set()
        release.wait(60)

    holding = asyncio.ensure_future(engine.call(hold))  # the pool's one thread
    await asyncio.get_running_loop().run_in_executor(None, busy.wait, 60)
    waiting = asyncio.ensure_future(engine.call(lambda: "never run"))  # queued behind it
    await asyncio.sleep(0)  # submitted
    engine.close()  # another trial on the node lost it
    with pytest.raises(requests.exceptions.ConnectionError, match="docker engine amh-n3 lost"):
        await waiting
    with pytest.raises(requests.exceptions.ConnectionError, match="docker engine amh-n3 lost"):
        await engine.call(lambda: "after close")  # refused by the pool: the same error
    release.set()
    await holding


async def test_the_callers_own_cancellation_stays_a_cancellation():
    engine = Engine("amh-n3", None, SimpleNamespace(close=lambda: None), False, executor=ThreadPoolExecutor(1, "test-engine"))
    release = threading.Event()
    call = asyncio.ensure_future(engine.call(release.wait, 60))
    await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    release.set()
    engine.close()


def _trial() -> tuple[TrialRun, list[TrialOutcome], list[str]]:
    ended: list[TrialOutcome] = []
    logged: list[str] = []

    async def call(fn, *args):
        return 7  # the trial's row id

    ctx = SimpleNamespace(suite=SimpleNamespace(budget_for=lambda task: Budget()),
                          sink=SimpleNamespace(trial_changed=lambda trial: None), log=logged.append, call=call,
                          caps=SimpleNamespace(reached=lambda model: None, add=lambda *spent: None))
    plan = SimpleNamespace(task=SimpleNamespace(id="probe"), trial_index=1,
                           config=SimpleNamespace(cli=SimpleNamespace(adapter="reference", label="reference"),
                                                  model=SimpleNamespace(id="none")))
    trial = TrialRun(ctx, plan)  # type: ignore[arg-type]

    async def finish(outcome: TrialOutcome) -> None:
        ended.append(outcome)

    trial._row = lambda **fields: fields  # type: ignore[method-assign]
    trial._finish = finish  # type: ignore[method-assign]
    return trial, ended, logged


async def test_a_trial_whose_await_is_cancelled_under_it_still_ends():
    trial, ended, logged = _trial()

    async def run() -> TrialOutcome:
        future = asyncio.get_running_loop().create_future()
        future.cancel()  # cancelled by someone else, not this trial's task
        return await future

    trial._run = run  # type: ignore[method-assign]
    assert await trial.execute() == TrialStatus.INFRA_INVALID
    (outcome,) = ended
    assert outcome.status == TrialStatus.INFRA_INVALID and "cancelled under it" in (outcome.reason or "")
    assert any("cancelled under it" in line for line in logged), logged


async def test_a_trial_whose_own_task_is_cancelled_is_cancelled():
    trial, ended, _ = _trial()
    started = asyncio.Event()

    async def run() -> TrialOutcome:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    trial._run = run  # type: ignore[method-assign]
    task = asyncio.ensure_future(trial.execute())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ended == []  # the runner's shutdown ends it, as before
