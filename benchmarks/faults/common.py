"""What the fault matrix's cells share: the runaway suite made into a burner suite for any
sandbox, the checks every killed trial must pass, and waiting on the store."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import orjson

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
    return [] if seqs == list(range(1, len(seqs) + 1)) and seqs else [f"event seqs broken ({len(seqs)} events)"]


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


def run_status(store: Store) -> str | None:
    return store.last_run_status()


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
