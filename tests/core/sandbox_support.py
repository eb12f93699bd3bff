"""Helpers for the docker, ssh and swarm sandbox tests: suites made from the smoke and runaway
suites with another ``[sandbox]``, the engine check, and what a run left on the engine."""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import FIXTURES, ROOT, need

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


def docker_client():
    """A client of the local engine, or skip (fail under CI=true) when none answers."""
    try:
        from agentmeter_tui.core.sandboxes.engine import connect

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


def wait_runner_exit(db: Path, timeout: float = 30) -> None:
    from agentmeter_tui.core.store import Store

    store = Store(db)
    try:
        pids = [row["pid"] for row in store.db.query("select pid from runs") if row["pid"]]
    finally:
        store.close()
    deadline = time.monotonic() + timeout
    while any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids):
        assert time.monotonic() < deadline, "the runner did not exit"
        time.sleep(0.05)


@pytest.fixture
def docker_engine():
    client = docker_client()
    yield client
    client.close()


def unique_id(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{os.urandom(3).hex()}"
