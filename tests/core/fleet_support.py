"""A 3-node Swarm fleet on this machine for the fleet tests and benchmarks/fleet.py: brought up
by scripts/fleet.sh in its own network namespaces (never the machine's own dockerd), and
suites that run on it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT, need

SCRIPT = ROOT / "scripts" / "fleet.sh"


@dataclass
class Fleet:
    docker_host: str
    registry: str
    env: dict[str, str]
    name: str = "amf"  # FLEET_NAME: node i is "<name>-n<i>"

    def node(self, index: int) -> str:
        return f"{self.name}-n{index}"

    def run(self, *args: str) -> str:
        result = subprocess.run(["sh", str(SCRIPT), *args], capture_output=True, text=True, env=self.env)
        assert result.returncode == 0, f"fleet.sh {' '.join(args)}: {result.stderr}"
        return result.stdout

    @property
    def bridge_address(self) -> str:
        return self.registry.rpartition(":")[0]

    def sandbox(self, **extra: object) -> str:
        """The ``[sandbox]`` table of a suite run on this fleet. The model server is on this
        machine's loopback; the nodes reach it through a relay on the fleet's bridge."""
        fields = {"kind": "swarm", "engine": self.docker_host, "registry": self.registry,
                  "relay_address": self.bridge_address, "cpus": 0.25, "memory": "256m", **extra}
        return "\n".join(f"{k} = {v!r}".replace("'", '"') for k, v in fields.items())

    def node_engines(self) -> str:
        """``node_engines`` of a ``[sandbox]`` table (a TOML inline table): each node's own engine
        socket, as scripts/fleet.sh runs them, so Harbor trials run on every node."""
        base = Path(self.docker_host.removeprefix("unix://")).parent.parent
        pairs = [f'"{self.name}-{node.name}" = "unix://{node}/docker.sock"' for node in sorted(base.glob("n*"))]
        return "{ " + ", ".join(pairs) + " }"

    def client(self):
        from agentmeter_tui.core.sandboxes.docker.engine import connect

        return connect(self.docker_host)


def fleet_up(nodes: int = 3, **env: str) -> Fleet:
    need(os.geteuid() == 0, "the fleet needs root (network namespaces, engines)")
    need(SCRIPT.is_file(), "scripts/fleet.sh is missing")
    full = {**os.environ, **env}
    result = subprocess.run(["sh", str(SCRIPT), "up", str(nodes)], capture_output=True, text=True, env=full)
    need(result.returncode == 0, f"scripts/fleet.sh up {nodes} failed: {result.stderr[-2000:]}")
    values = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    return Fleet(values["DOCKER_HOST"], values["REGISTRY"], full, full.get("FLEET_NAME", "amf"))


def fleet_harbor_suite(folder: Path, fleet: Fleet, grid: dict[str, str]) -> tuple[Path, str]:
    """The Harbor fixture's oracle suite (tests/fixtures/harbor) on ``fleet``, its trials on
    every node (``node_engines``), with ``grid``'s replacements in its suite.toml."""
    from tests.core.harbor_support import harbor_suite

    suite, suite_id = harbor_suite(folder, "oracle")
    toml = suite / "suite.toml"
    text = toml.read_text().replace('kind = "docker"', f"{fleet.sandbox()}\nnode_engines = {fleet.node_engines()}")
    for old, new in grid.items():
        text = text.replace(old, new)
    toml.write_text(text)
    return suite, suite_id


def slow_solutions(suite: Path, tasks: set[str], seconds: int) -> None:
    """The oracle's solve.sh of ``tasks`` sleeps ``seconds`` first (a kill lands mid-trial)."""
    for task in tasks:
        solve = suite.parent / "tasks" / task / "solution" / "solve.sh"
        solve.write_text(solve.read_text().replace("#!/bin/bash\n", f"#!/bin/bash\nsleep {seconds}\n", 1))


def fleet_down(fleet: Fleet) -> None:
    fleet.run("down")


def fleet_leftovers(fleet: Fleet, suite_id: str) -> dict[str, list[str]]:
    """Services and configs of the suite on the manager, and its containers on every node."""
    selector = {"label": f"agentmeter.suite={suite_id}"}
    found: dict[str, list[str]] = {}
    client = fleet.client()
    try:
        found["services"] = [s["Spec"]["Name"] for s in client.api.services(filters=selector)]
        found["configs"] = [c["Spec"]["Name"] for c in client.api.configs(filters=selector)]
    finally:
        client.close()
    base = Path(fleet.docker_host.removeprefix("unix://")).parent.parent
    for node in sorted(base.glob("n*")):
        from agentmeter_tui.core.sandboxes.docker.engine import connect

        engine = connect(f"unix://{node}/docker.sock")
        try:
            found[f"containers on {node.name}"] = [c["Names"][0] for c in
                                                   engine.api.containers(all=True, filters=selector)]
        finally:
            engine.close()
    return {k: v for k, v in found.items() if v}


FINAL = {"passed", "failed", "killed", "infra-invalid", "error"}


def lose_a_worker(fleet: Fleet, db: Path, suite: Path, suite_id: str, loss: str,
                  ready: Callable[..., bool] = lambda store, trial: True) -> tuple[str, list[dict], list[dict]]:
    """Run the suite headless and, once a running trial on a worker is ``ready(store, trial)``,
    lose that worker (``kill`` or ``cut``); after the run: the victim's name, every trial, and
    the victim's infra-invalid attempts, each checked to say "lost". Whichever worker it is:
    a node an earlier loss left refusing jobs (a stale network) is shunned by this run."""
    from agentmeter_tui.core.store import Store
    from tests.core.sandbox_support import wait_runner_exit
    from tests.waiting import wait_for

    runner = subprocess.Popen([sys.executable, "-m", "agentmeter_tui", "run", str(suite), "--headless",
                               "--db", str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    workers = {fleet.node(i): str(i) for i in (2, 3)}
    try:
        def running_on_a_worker() -> str:
            if not db.exists():
                return ""
            store = Store(db)
            try:
                return next((t["node"] for t in store.trials(suite_id) if t["status"] == "running"
                             and t["node"] in workers and ready(store, t)), "")
            finally:
                store.close()

        victim = wait_for(running_on_a_worker, "a trial running on a worker")
        fleet.run(loss, workers[victim])
        out, err = runner.communicate(timeout=900)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 0, err + out
    wait_runner_exit(db)
    trials = Store(db).trials(suite_id)
    assert all(t["status"] in FINAL for t in trials), trials
    lost = [t for t in trials if t["node"] == victim and t["status"] == "infra-invalid"]
    assert lost and all("lost" in (t["reason"] or "") for t in lost), [(t["attempt"], t["reason"]) for t in lost]
    return victim, trials, lost
