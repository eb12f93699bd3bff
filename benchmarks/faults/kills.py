"""Kill cells: burners (the reference agent: a model call, then a tool call, forever) stopped
by the operator, a token budget, a USD budget or the wall clock, in the local, docker, ssh
and swarm sandboxes.

The operator's moment is seeded and waits on an event (the trial's k-th usage event, k
seeded), so a fixed seed kills at the same point of every trial's script; a budget's moment
is its seeded size. After each: status ``killed`` with that reason; no process of the trial
on this machine (a container's processes are this machine's too; the ssh "host" is a sshd of
this machine); no container, volume, service or config of the run on the engine; usage
exactly that of the calls the server served and the agent reported; events whole, with
one kill note.
"""

from __future__ import annotations

import random
import time
from contextlib import contextmanager
from pathlib import Path

from agentmeter_tui.core.run.control import ControlClient
from agentmeter_tui.core.store import Store

from .common import (
    Cell,
    agentmeter,
    burner_suite,
    judge_cell,
    trial_intact,
    unique_id,
    usage_events,
    wait_until,
)

REASONS = ("operator", "budget:tokens", "budget:usd", "budget:time")
SANDBOXES = ("local", "docker", "ssh", "swarm")
# A swarm job's clock starts when it is submitted; a half-core container's start counts.
SWARM = 'kind = "swarm"\ncpus = 0.5\nmemory = "256m"'


@contextmanager
def sandbox_table(kind: str, folder: Path, slots: int, suite_id: str):
    """The ``[sandbox]`` table of ``kind`` (ssh: a throwaway sshd on 127.0.0.1, stopped after)
    and what finds what a run of ``suite_id`` left behind there."""
    if kind == "ssh":
        from tests.core.sshd_support import SshdInstance, sshd_available

        if not sshd_available():
            raise RuntimeError("the ssh cells need sshd and ssh-keygen, as root")
        sshd = SshdInstance(folder / "sshd").start()
        try:
            yield sshd.sandbox_toml(slots=slots), lambda: [f"folder {p.name}" for p in sshd.work_root.iterdir()]
        finally:
            sshd.stop()
    else:
        table = {"local": "", "docker": 'kind = "docker"', "swarm": SWARM}[kind]
        yield table, (lambda: engine_leftovers(suite_id)) if kind != "local" else list


def engine_leftovers(suite_id: str) -> list[str]:
    """Containers, volumes, services and configs labelled with this cell's suite."""
    from agentmeter_tui.core.sandboxes.docker.engine import connect

    client = connect()
    try:
        api, selector = client.api, {"label": f"agentmeter.suite={suite_id}"}
        found = [f"container {c['Names'][0]}" for c in api.containers(all=True, filters=selector)]
        found += [f"volume {v['Name']}" for v in api.volumes(filters=selector).get("Volumes") or []]
        if (client.info().get("Swarm") or {}).get("ControlAvailable"):
            found += [f"service {s['Spec']['Name']}" for s in api.services(filters=selector)]
            found += [f"config {c['Spec']['Name']}" for c in api.configs(filters=selector)]
        return found
    finally:
        client.close()


def budget_for(reason: str, rng: random.Random, kind: str) -> str:
    # The operator and budget cells keep a wall clock far away; swarm's time budget leaves room
    # for the job to be scheduled, so the kill lands while the burner runs.
    low, high = (20.0, 30.0) if kind == "swarm" else (1.0, 4.0)
    return {"operator": "wall_seconds = 3600",
            "budget:tokens": f"wall_seconds = 3600\ntokens = {rng.randint(4_000, 30_000)}",
            "budget:usd": f"wall_seconds = 3600\nusd = {rng.uniform(0.004, 0.03):.4f}",
            "budget:time": f"wall_seconds = {rng.uniform(low, high):.2f}"}[reason]


def kill_by_operator(db: Path, store: Store, suite_id: str, trials: int, rng: random.Random, jitter: bool) -> None:
    running = wait_until(lambda: len(rows := store.trials(suite_id, "status = 'running'")) == trials and rows,
                         "every burner running")
    for trial in running:
        calls = rng.randint(1, 4)  # the moment: after the trial's k-th reported call
        wait_until(lambda t=trial["id"], k=calls: usage_events(store, t) >= k or store.trial(t)["finished_at"],
                   f"trial {trial['id']}'s call {calls}")
        if jitter:  # the benchmark's longer runs also land at random points inside a call or a tool
            time.sleep(rng.uniform(0.0, 0.2))
        with ControlClient(db) as client:
            client.request("kill", trial=trial["id"])


def kill_cell(kind: str, reason: str, trials: int, rng: random.Random, folder: Path, jitter: bool) -> Cell:
    suite_id = unique_id(f"{kind}-{reason.replace(':', '-')}")
    db = folder / "kill.db"
    with sandbox_table(kind, folder, trials, suite_id) as (sandbox, leftovers):
        suite = burner_suite(folder, trials, budget_for(reason, rng, kind), suite_id, sandbox)
        agentmeter("run", str(suite), "--detach", "--db", str(db))
        store = Store(db)
        try:
            if reason == "operator":
                kill_by_operator(db, store, suite_id, trials, rng, jitter)
            return judge_cell(store, suite_id, lambda t: trial_intact(store, t, reason), leftovers)
        finally:
            store.close()
