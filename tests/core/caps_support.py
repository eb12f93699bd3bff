"""The capped suite of the caps' tests (issue 25), what the scripted server served it, and a
fixture that starts detached runs and stops them after the test, whatever its outcome."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import textwrap
from pathlib import Path

import psutil
import pytest

from agentmeter_tui.core import procs
from agentmeter_tui.core.store import Store
from tests.conftest import FIXTURES, agentmeter
from tests.waiting import pid_running, wait_for

CALL = 1000  # tokens per scripted call: 900 in, 100 out
CALLS = 5  # calls per trial
TURN = f'usage = {{ uncached_input = {CALL - 100}, output = 100 }}\ndelay_ms = 50\n'
PROVIDERS = {"m1": "p1", "m2": "p2"}


def steps_scenario() -> str:
    """CALLS calls: shell steps, a result file, a closing text."""
    steps = [f'shell = "echo step {i} >> steps.txt"' for i in range(CALLS - 2)]
    steps += ['shell = "echo done > result.txt"', 'text = "Written."']
    return "".join(f"[[turns]]\n{step}\n{TURN}" for step in steps)


def capped_suite(tmp_path: Path, caps: str, *, proxy: bool, budget_tokens: int | None = None,
                 trials: int = 4, concurrency: int = 4, models: dict[str, str] | None = None,
                 scenarios: dict[str, str] | None = None) -> Path:
    """Scripted models on scripted providers (``models``: model -> provider; m1 on p1 and m2
    on p2 unless given), each playing ``scenarios[model]`` or CALLS calls of CALL tokens."""
    models = models or PROVIDERS
    suite = tmp_path / "capped"
    shutil.copytree(FIXTURES / "suites" / "slow" / "work", suite / "work")
    (suite / "scenarios").mkdir()
    for model in models:
        (suite / "scenarios" / f"{model}.toml").write_text((scenarios or {}).get(model) or steps_scenario())
    (suite / "prices.toml").write_text('as_of = "2026-11-01"\n' + "".join(
        f'[models.{model}]\ninput = "3"\noutput = "15"\n' for model in models))
    budget = f"\n[budgets.default]\nwall_seconds = 600\ntokens = {budget_tokens}\n" if budget_tokens else ""
    entries = "".join(f'[[models]]\nid = "{m}"\nprovider = "{p}"\n' for m, p in models.items())
    providers = "".join(f'[providers.{p}]\nkind = "scripted"\n' for p in sorted(set(models.values())))
    (suite / "suite.toml").write_text(textwrap.dedent(f"""\
        [suite]
        id = "capped"
        trials = {trials}
        concurrency = {concurrency}
        max_retries = 0
        pricing = "prices.toml"
        proxy = {str(proxy).lower()}
        """) + entries + '[[clis]]\nadapter = "reference"\n' + providers + budget + caps)
    return suite


def served_calls(row: dict) -> list[list]:
    """The scripted server's own record of a trial's calls: [turn, status, completed, usage]."""
    return (json.loads(row["extra"] or "{}").get("scripted") or {}).get("served", [])


def served_tokens(store: Store, model: str | None = None) -> int:
    """Tokens the scripted server served, over every trial (of ``model``)."""
    total = 0
    for row in store.trials("capped"):
        if model in (None, row["model"]):
            total += sum(sum(call[3]) for call in served_calls(row))
    return total


def served_usd(store: Store, model: str) -> float:
    """USD of what the scripted server served ``model``'s trials, at the suite's prices ($3/M in, $15/M out)."""
    total = 0
    for row in store.trials("capped", "model = ?", [model]):
        for call in served_calls(row):
            uncached, cached, write, output, reasoning = call[3]
            total += (uncached + cached + write) * 3 + (output + reasoning) * 15
    return total / 1e6


def status(db: Path) -> dict:
    return json.loads(agentmeter("status", "--db", str(db), "--json", check=True).stdout)


def held_on_cap(db: Path) -> dict:
    """The status once the schedule is held on a cap with nothing running."""
    return wait_for(lambda: (s := status(db))["progress"].get("running") == 0 and
                    any("cap" in why for why in s["progress"].get("held", [])) and s, "the schedule held on a cap")


def runner_pids(db: Path) -> list[int]:
    if not db.exists():
        return []
    store = Store(db)
    try:
        return [row["pid"] for row in store.db.query("select pid from runs") if row["pid"]]
    finally:
        store.close()


def stop_runners(db: Path) -> None:
    """Stop every runner of ``db`` that still runs: ``agentmeter stop``, and when that does not
    end it, SIGKILL to it and its children and to whatever of its trials is left."""
    alive = [pid for pid in runner_pids(db) if pid_running(pid)]
    if not alive:
        return
    agentmeter("stop", "--db", str(db))
    try:
        wait_for(lambda: not any(pid_running(pid) for pid in alive), "the runner to stop")
    except AssertionError:
        for pid in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                for proc in [*psutil.Process(pid).children(recursive=True), psutil.Process(pid)]:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        proc.send_signal(signal.SIGKILL)
        store = Store(db)
        try:
            for row in store.trials():
                if row["proc_token"]:
                    procs.sweep(row["proc_token"])
        finally:
            store.close()
        raise


@pytest.fixture
def detached(db: Path):
    """``detached(suite)`` starts ``agentmeter run --detach`` on ``db`` and gives its store;
    after the test, passed or failed, the runner is stopped, so nothing of it is left."""
    stores: list[Store] = []

    def start(suite: Path) -> Store:
        agentmeter("run", str(suite), "--detach", "--db", str(db), check=True)
        stores.append(Store(db))
        return stores[-1]

    try:
        yield start
    finally:
        stop_runners(db)
        for store in stores:
            store.close()
