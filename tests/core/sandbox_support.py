"""Helpers for the docker, ssh and swarm sandbox tests: suites made from the smoke and runaway
suites with another ``[sandbox]``, the engine check, and what a run left on the engine."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from agentmeter_tui.core.usage import TOKEN_CLASSES
from tests.conftest import FIXTURES, ROOT, need
from tests.waiting import pid_running, wait_for

SMOKE = ROOT / "suites" / "smoke"
RUNAWAY = FIXTURES / "suites" / "runaway"


def suite_copy(source: Path, dest: Path, sandbox: str, *, suite_id: str | None = None,
               replace: dict[str, str] | None = None) -> Path:
    """``source`` copied to ``dest`` with a ``[sandbox]`` table (and a fresh suite id)."""
    shutil.copytree(source, dest)
    text = (dest / "suite.toml").read_text()
    if suite_id:
        text = re.sub(r'(?m)^id = "[^"]*"', f'id = "{suite_id}"', text, count=1)
    for old, new in (replace or {}).items():
        text = text.replace(old, new)
    (dest / "suite.toml").write_text(text + f"\n[sandbox]\n{sandbox}\n")
    return dest


def single_trial(suite: Path, model: str = "solver", task: str = "count-lines") -> Path:
    """Trim a suite copied from the smoke suite to one model, one task, one trial."""
    text = (suite / "suite.toml").read_text()
    text = re.sub(r"(?m)^trials = \d+", "trials = 1", text, count=1)
    text = text.replace("[suite]\n", f'[suite]\ntasks = ["{task}"]\n', 1)
    blocks = text.split("[[models]]\n")
    kept = [b for b in blocks[1:] if b.startswith(f'id = "{model}"')]
    tail = blocks[-1][blocks[-1].index("[[clis]]"):]
    kept = [b[:b.index("[[clis]]")] if "[[clis]]" in b else b for b in kept]
    (suite / "suite.toml").write_text(blocks[0] + "".join("[[models]]\n" + b for b in kept) + tail)
    return suite


def assert_smoke_verdicts(trials: list[dict], sandbox: str) -> None:
    """The smoke suite's verdicts, checked by its tests inside the sandbox: the solver passes,
    the fumbler fails, and its off-by-one count earns the partial reward its tests wrote."""
    for trial in trials:
        assert trial["sandbox"] == sandbox, trial
        assert trial["status"] == ("passed" if trial["model"] == "solver" else "failed"), trial
    for trial in trials:
        if trial["model"] == "solver" and trial["task_id"] == "count-lines":
            assert "count is right: 7" in trial["verifier_output"]
        if trial["model"] == "fumbler" and trial["task_id"] == "count-lines":
            assert trial["quality"] == 0.5, trial


def assert_runaways_killed(store, suite_id: str) -> dict[str, dict]:
    """The runaway suite's verdicts; the burner was stopped on the usage event that crossed its
    budget (the runner's kill note names the running total at that event). How soon its final
    row followed is a speed figure (benchmarks/kill_latency.py), not asserted here."""
    trials = {t["model"]: t for t in store.trials(suite_id)}
    burner = trials["burner"]
    assert burner["status"] == "killed" and burner["reason"] == "budget:tokens", burner
    assert sum(burner[c] for c in TOKEN_CLASSES) >= 20000  # every completed call's usage is kept
    assert trials["sleeper"]["status"] == "killed" and trials["sleeper"]["reason"] == "budget:time"
    assert trials["thrasher"]["status"] == "killed"
    total, at_crossing, notes = 0, None, []
    query = "select * from usage where trial_id = ? and seq = ?"
    for seq, _ts, kind, stream, text, _data in store.events(burner["id"]):
        if kind == "usage" and at_crossing is None:
            total += sum(next(store.db.query(query, [burner["id"], seq]))[c] for c in TOKEN_CLASSES)
            at_crossing = total if total >= 20000 else None
        if stream == "runner" and text.startswith("killing: "):
            notes.append(text)
    assert at_crossing is not None
    assert notes == [f"killing: budget:tokens ({at_crossing} >= 20000)"], notes
    return trials


def docker_client():
    """A client of the local engine, or skip (fail under CI=true) when none answers."""
    try:
        from agentmeter_tui.core.sandboxes.docker.engine import connect

        return connect()
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine here"
        need(False, f"no docker engine answers ({exc})")


def swarm_client():
    client = docker_client()
    state = (client.info().get("Swarm") or {}).get("LocalNodeState")
    need(state == "active", f"the docker engine is not a swarm manager (state {state!r}); "
                            "run: docker swarm init --advertise-addr 127.0.0.1")
    return client


def leftovers(client, suite_id: str, db: Path | None = None) -> dict[str, list[str]]:
    """Containers, volumes, services and configs a run of ``suite_id`` left on the engine,
    once the runner of ``db`` (if given) has exited: it closes its sandbox after its last trial."""
    if db is not None:
        wait_runner_exit(db)
    api = client.api
    selector = {"label": f"agentmeter.suite={suite_id}"}
    found = {
        "containers": [c["Names"][0] for c in api.containers(all=True, filters=selector)],
        "volumes": [v["Name"] for v in (api.volumes(filters=selector).get("Volumes") or [])],
    }
    if (client.info().get("Swarm") or {}).get("ControlAvailable"):
        found["services"] = [s["Spec"]["Name"] for s in api.services(filters=selector)]
        found["configs"] = [c["Spec"]["Name"] for c in api.configs(filters=selector)]
    return {k: v for k, v in found.items() if v}


def wait_runner_exit(db: Path) -> None:
    from agentmeter_tui.core.store import Store

    store = Store(db)
    try:
        pids = [row["pid"] for row in store.db.query("select pid from runs") if row["pid"]]
    finally:
        store.close()
    wait_for(lambda: not any(pid_running(pid) for pid in pids), "the runner to exit")


@pytest.fixture(name="docker_engine")
def docker_engine_fixture():
    """The local engine's client (import ``docker_engine_fixture`` to use ``docker_engine``)."""
    client = docker_client()
    yield client
    client.close()


docker_engine = docker_engine_fixture  # the name other test modules import it by


@pytest.fixture(name="swarm")
def swarm_fixture():
    """The local engine's client when it is a swarm manager (import ``swarm_fixture`` to use ``swarm``)."""
    client = swarm_client()
    yield client
    client.close()


def unique_id(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{os.urandom(3).hex()}"
