"""What the fault matrix's cells share: the runaway suite made into a burner suite for any
sandbox, the checks every killed trial must pass, and waiting on the store."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import psutil

from agentmeter_tui.core.procs import processes_with_token
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TOKEN_CLASSES, TokenUsage

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "suites"
BURNER = """description = "a model call, then a tool call, forever"
[[turns]]
loop = true
shell = "sleep 0.1; echo again"
usage = { uncached_input = 1500, cached_input = 500, output = 40 }
delay_ms = 80
"""

Cell = tuple[int, int, list[str]]  # injected, survived, what went wrong


def agentmeter(*args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agentmeter_tui", *args], capture_output=True, text=True,
                          check=check, env={**os.environ, **(env or {})})


def wait_until(condition, what: str, limit: float = 600.0):
    """Poll until ``condition()`` is truthy (a fail-safe limit, not a speed target)."""
    deadline = time.monotonic() + limit
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def unique_id(prefix: str) -> str:
    """A suite id of this cell alone: containers, volumes and services are found by it."""
    return f"fm-{prefix}-{os.getpid()}-{os.urandom(3).hex()}"


def burner_suite(folder: Path, trials: int, budget: str, suite_id: str, sandbox: str = "") -> Path:
    """The runaway suite with ``trials`` burners at once, ``budget`` and ``[sandbox] sandbox``."""
    suite = folder / "suite"
    shutil.copytree(FIXTURES / "runaway", suite)
    text = (suite / "suite.toml").read_text()
    text = re.sub(r'(?ms)^\[\[models\]\]\nid = "(sleeper|thrasher)"\n\n', "", text)
    text = text.replace('id = "runaway"', f'id = "{suite_id}"')
    text = text.replace("trials = 1", f"trials = {trials}").replace("concurrency = 3", f"concurrency = {trials}")
    text = re.sub(r"(?ms)^\[budgets\.default\].*", f"[budgets.default]\n{budget}\n", text)
    if sandbox:
        text += f"\n[sandbox]\n{sandbox}\n"
    (suite / "suite.toml").write_text(text)
    (suite / "scenarios" / "burner.toml").write_text(BURNER)
    return suite


def usage_events(store: Store, trial_id: int) -> int:
    return sum(1 for e in store.events(trial_id) if e[2] == "usage")


def events_intact(store: Store, trial: dict) -> list[str]:
    """The trial's events are numbered 1..n with none missing or doubled."""
    seqs = [e[0] for e in store.events(trial["id"])]
    return [] if seqs == list(range(1, len(seqs) + 1)) else [f"event seqs broken ({len(seqs)} events)"]


def served_completed(trial: dict) -> list[TokenUsage]:
    """The calls the scripted server finished serving this trial, in order (the ground truth)."""
    served = (orjson.loads(trial["extra"] or "{}").get("scripted") or {}).get("served") or []
    return [TokenUsage(*values) for _turn, _status, done, values in served if done]


def trial_intact(store: Store, trial: dict, reason: str, status: str = "killed") -> list[str]:
    """What is wrong with a killed trial (empty: it survived): status and reason, no process
    left, usage exactly that of the calls it completed and reported, its events whole with
    one kill note."""
    problems = []
    if (trial["status"], trial["reason"]) != (status, reason):
        problems.append(f"status {trial['status']} / {trial['reason']}")
    if processes_with_token(trial["proc_token"]):
        problems.append("processes left")
    kept = sum(served_completed(trial)[:trial["turns"]], TokenUsage())
    if {c: trial[c] for c in TOKEN_CLASSES} != kept.as_dict():
        problems.append(f"usage {[trial[c] for c in TOKEN_CLASSES]} != served {kept.as_tuple()}")
    notes = [e for e in store.events(trial["id"]) if e[3] == "runner" and (e[4] or "").startswith("killing: ")]
    if len(notes) != 1:
        problems.append(f"{len(notes)} kill notes")
    return problems + events_intact(store, trial)


def agent_in_call(pid: int) -> psutil.Process | None:
    """The process of the agent started as ``pid`` (it or one under it) that holds a TCP
    connection open, None if none does: an agent that talks to its model only over a
    connection of one call (the reference agent) is then inside a model call."""
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return None
    for proc in tree:
        try:
            if _holds_established(proc.pid):
                return proc
        except OSError:  # it ended meanwhile, or is not ours to read
            continue
    return None


def _holds_established(pid: int) -> bool:
    """Whether the process holds an established TCP socket, read in its own network namespace
    (``/proc/PID/net/tcp``): a local agent has a namespace of its own, whose sockets neither
    this machine's ``/proc/net/tcp`` nor psutil's connections list."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as rows:
            next(rows)
            for row in rows:
                fields = row.split()
                if fields[3] == "01" and fields[9] in inodes:  # 01: ESTABLISHED
                    return True
    return False


def signal_agent(pid: int, fault: str) -> bool:
    """An agent killed from outside while it is inside a model call: ``SIGTERM`` to the process
    holding the call's connection, or ``SIGKILL`` to the agent's whole process group (it leads
    its own session; never the caller's group). False when it was not inside a call."""
    proc = agent_in_call(pid)
    if proc is None:
        return False
    try:
        if fault == "SIGTERM":
            proc.send_signal(signal.SIGTERM)
        elif os.getpgid(pid) == pid != os.getpgid(0):
            os.killpg(pid, signal.SIGKILL)
        else:
            raise RuntimeError(f"agent {pid} does not lead its own process group")
    except (psutil.NoSuchProcess, ProcessLookupError):
        return False
    return True


def run_status(store: Store) -> str | None:
    return store.runs.last_run_status()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def runner_pids(store: Store) -> list[int]:
    return [row["pid"] for row in store.db.query("select pid from runs") if row["pid"]]


def wait_runners_gone(store: Store) -> None:
    """The runners of this store have exited (each closes its sandbox after its last trial)."""
    pids = runner_pids(store)
    wait_until(lambda: not any(alive(pid) for pid in pids), "the runner to exit")


def judge_cell(store: Store, suite_id: str, intact, leftovers=list) -> Cell:
    """Once the run has finished and its runners have exited: each trial judged by
    ``intact(trial)`` (its problems), then what ``leftovers()`` finds in the sandbox."""
    wait_until(lambda: run_status(store) == "finished", "the run")
    wait_runners_gone(store)
    rows = store.trials(suite_id)
    lost = [f"#{t['id']}: {', '.join(p)}" for t in rows if (p := intact(t))]
    if left := leftovers():
        lost.append(f"left behind: {', '.join(left)}")
    return len(rows), max(0, len(rows) - len(lost)), lost


def slow_suite(folder: Path, prefix: str, settings: str = "", sandbox: str = "") -> tuple[Path, str]:
    """The slow fixture suite (six short trials, two at a time) under a fresh suite id, with
    more ``[suite]`` settings and a ``[sandbox]`` table."""
    suite, suite_id = folder / "slow", unique_id(prefix)
    shutil.copytree(FIXTURES / "slow", suite)
    text = (suite / "suite.toml").read_text().replace('id = "slow"', f'id = "{suite_id}"')
    text = text.replace("trials = 3", f"trials = 3\n{settings}" if settings else "trials = 3")
    (suite / "suite.toml").write_text(text + (f"\n[sandbox]\n{sandbox}\n" if sandbox else ""))
    return suite, suite_id


def total_events(store: Store, suite_id: str) -> int:
    return sum(store.event_count(t["id"]) for t in store.trials(suite_id))


def wait_mid_run(store: Store, suite_id: str, events: int) -> None:
    """The moment a fault lands: the run has written ``events`` events and a trial is running."""
    wait_until(lambda: total_events(store, suite_id) >= events and store.trials(suite_id, "status = 'running'"),
               "the run's first events with a trial running")


def one_task_suite(folder: Path, suite_id: str, cli: str, scenario: str, settings: str, budget: str) -> Path:
    """A suite of one task (its test passes), one scripted model ``mock`` and one CLI."""
    suite = folder / "suite"
    (suite / "task" / "tests").mkdir(parents=True)
    (suite / "scenarios").mkdir()
    (suite / "suite.toml").write_text(textwrap.dedent(f"""\
        [suite]
        id = "{suite_id}"
        pricing = "prices.toml"
        kill_grace = 3.0
        proxy = true
        {settings}

        [[models]]
        id = "mock"

        [[clis]]
        adapter = "{cli}"

        [budgets.default]
        {budget}
        """))
    (suite / "prices.toml").write_text('as_of = "2026-11-01"\n[models.mock]\ninput = "3"\ncached_input = "0.3"\n'
                                       'output = "15"\n')
    (suite / "scenarios" / "mock.toml").write_text(scenario)
    (suite / "task" / "task.toml").write_text("[verifier]\ntimeout_sec = 30\n")
    (suite / "task" / "instruction.md").write_text("Write hi to out.txt, then keep working.\n")
    (suite / "task" / "tests" / "test.sh").write_text("#!/bin/sh\nexit 0\n")
    return suite


def kill_each_at(store: Store, db: Path, suite_id: str, trials: int, moment, what: str,
                 delay: float = 0.0) -> None:
    """The operator's kill of each of the suite's ``trials`` running trials, at its moment:
    once ``moment(trial)`` holds (or the trial ended meanwhile), after ``delay()`` seconds of
    seeded jitter when given (``delay`` a callable; benchmarks only, never the CI subset)."""
    from agentmeter_tui.core.run.control import ControlClient

    running = wait_until(lambda: len(rows := store.trials(suite_id, "status = 'running'")) == trials
                         and rows, f"every {what} running")
    for trial in running:
        wait_until(lambda t=trial: moment(t) or store.trial(t["id"])["finished_at"],
                   f"trial {trial['id']}'s moment")
        if delay:
            time.sleep(delay())
        with ControlClient(db) as client:
            client.request("kill", trial=trial["id"])
