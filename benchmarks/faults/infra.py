"""Faults of our own infrastructure and of the provider, injected into real runs.

- ``server:dies``: the scripted model server is SIGKILLed while trials talk to it (a seeded
  moment: the run's next k events with a trial running). The trials that used it end
  ``infra-invalid`` with the reason ``infra: the scripted model server died (exit code -9)``,
  the runner log says so, a new server starts and the retries finish every cell exactly once
  (passed, usage exactly what the new server served); no process left, events whole.
- ``proxy:upstream-reset``: behind the metering proxy, the scripted server resets the
  connection after the first chunk of a seeded call (a ``reset`` turn). The reference agent
  ends on it: every attempt is ``infra-invalid`` with ``infra: provider errors: 502 upstream
  reset`` (and retried once); Claude Code retries the call itself and passes. Either way the
  usage is exactly that of the completed calls, the cut call's record has outcome ``upstream
  error: ...`` and no usage, and on the Anthropic protocol its ``partial`` is the input the
  server sent in ``message_start`` (docs/proxy.md).
- ``store:disk-full``: the store sits on a 16 MB tmpfs that a file fills up at a seeded
  moment (the run's next k events). The runner holds the schedule and says why (the control
  socket's ``progress.held``; the runner log once it can write again): while held, no queued
  trial starts even once the running agents have ended. The file is removed: every cell is
  final once (passed), every event written before the fill is still there and none is
  missing after it, usage exactly what was served, the store's integrity check passes.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
from contextlib import contextmanager
from pathlib import Path

import orjson
import psutil

from agentmeter_tui.core.harnesses import get_adapter
from agentmeter_tui.core.paths import default_clis_root, runner_log_path
from agentmeter_tui.core.procs import processes_with_token
from agentmeter_tui.core.run.control import ControlClient
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TOKEN_CLASSES, TokenUsage
from agentmeter_tui.core.wire import MERGED, fold

from .common import (
    Cell,
    agentmeter,
    events_intact,
    one_task_suite,
    run_status,
    served_completed,
    slow_suite,
    unique_id,
    wait_mid_run,
    wait_runners_gone,
    wait_until,
)


def cells_final_once(trials: list[dict], expected: int) -> list[str]:
    countable = [(t["task_id"], t["config_id"], t["trial_index"]) for t in trials if t["status"] != "infra-invalid"]
    problems = [] if len(countable) == len(set(countable)) else ["a cell finished twice"]
    if len(set(countable)) != expected:
        problems.append(f"{len(set(countable))} of {expected} cells final")
    return problems


def usage_of(trial: dict) -> TokenUsage:
    return TokenUsage(*(int(trial[c] or 0) for c in TOKEN_CLASSES))


def model_server(runner_pid: int) -> psutil.Process | None:
    for child in psutil.Process(runner_pid).children():
        if "agentmeter_tui.core.scripted" in " ".join(child.cmdline()):
            return child
    return None


def server_death_cell(folder: Path, rng: random.Random) -> Cell:
    suite, suite_id = slow_suite(folder, "server-dies", "max_retries = 3")
    db = folder / "death.db"
    agentmeter("run", str(suite), "--detach", "--db", str(db))
    store = Store(db)
    try:
        pid = next(store.db.query("select pid from runs order by id desc limit 1"))["pid"]
        wait_mid_run(store, suite_id, rng.randint(3, 12))
        server = model_server(pid)
        if server is None:
            return 1, 0, ["no scripted model server under the runner"]
        server.send_signal(signal.SIGKILL)
        wait_until(lambda: run_status(store) == "finished", "the run")
        wait_runners_gone(store)
        trials = store.trials(suite_id)
        reason = "infra: the scripted model server died (exit code -9)"
        lost = [t for t in trials if t["status"] == "infra-invalid"]
        problems = [] if lost else ["no trial was talking to the server when it died"]
        problems += [f"#{t['id']}: {t['reason']}" for t in lost if t["reason"] != reason]
        problems += cells_final_once(trials, 6)
        problems += [f"#{t['id']}: {t['status']}" for t in trials if t["status"] not in ("passed", "infra-invalid")]
        for trial in trials:
            if trial["status"] == "passed" and usage_of(trial) != sum(served_completed(trial), TokenUsage()):
                problems.append(f"#{trial['id']}: usage differs from what was served")
            if processes_with_token(trial["proc_token"]):
                problems.append(f"#{trial['id']}: processes left")
            problems += events_intact(store, trial)
        log = runner_log_path(db).read_text()
        if "the scripted model server died (exit code -9)" not in log or "a new scripted model server" not in log:
            problems.append("the runner log does not say the server died and was replaced")
        return 1, 0 if problems else 1, problems
    finally:
        store.close()


RESET_SCENARIO = """description = "a shell call, then {before} good calls, then a stream the server resets"
[[turns]]
shell = "echo hi > out.txt"
usage = {{ uncached_input = 1000, cached_input = 200, output = 20 }}
[[turns]]
text = "Still working."
shell = "echo more >> out.txt"
repeat = {before}
usage = {{ uncached_input = 900, cached_input = 300, output = 15 }}
[[turns]]
text = "This answer is cut by a reset of the connection."
reset = true
usage = {{ uncached_input = 1100, output = 30 }}
[[turns]]
text = "Done."
usage = {{ uncached_input = 1200, output = 10 }}
"""


def reset_problems(store: Store, trial: dict, cli: str) -> list[str]:
    extra = orjson.loads(trial["extra"] or "{}")
    served = (extra.get("scripted") or {}).get("served") or []
    protocol = get_adapter(cli).protocol
    problems = []
    if cli == "reference" and (trial["status"], trial["reason"]) != ("infra-invalid",
                                                                     "infra: provider errors: 502 upstream reset"):
        problems.append(f"status {trial['status']} / {trial['reason']}")
    if cli != "reference" and trial["status"] != "passed":
        problems.append(f"status {trial['status']} / {trial['reason']}")
    completed = sum((TokenUsage(*u) for _t, _s, done, u in served if done), TokenUsage())
    if usage_of(trial) != fold(completed, MERGED[protocol]) or trial["usage_source"] != "proxy":
        problems.append(f"usage {usage_of(trial).as_tuple()} != completed {completed.as_tuple()}")
    cut = [u for _t, _s, done, u in served if not done]
    records = [orjson.loads(e[5]) for e in store.events(trial["id"]) if e[3] == "proxy" and e[5]]
    failed = [r for r in records if str(r.get("outcome", "")).startswith("upstream error")]
    if len(cut) != 1 or len(failed) != 1:
        problems.append(f"{len(cut)} calls cut by the server, {len(failed)} upstream errors recorded")
    elif any(failed[0]["usage"].values()):
        problems.append("the cut call was metered")
    elif protocol == "anthropic" and (failed[0].get("partial") or {}).get("uncached_input") != cut[0][0]:
        problems.append(f"partial {failed[0].get('partial')} is not the served input {cut[0][0]}")
    if processes_with_token(trial["proc_token"]):
        problems.append("processes left")
    return problems + events_intact(store, trial)


def upstream_reset_cell(cli: str, rng: random.Random, folder: Path) -> Cell:
    if not get_adapter(cli).is_installed(default_clis_root()):
        raise RuntimeError(f"{cli} is not installed: run agentmeter install-clis")
    suite_id = unique_id(f"reset-{cli}")
    db = folder / "reset.db"
    suite = one_task_suite(folder, suite_id, cli, RESET_SCENARIO.format(before=rng.randint(1, 3)), "max_retries = 1",
                           "wall_seconds = 600")
    agentmeter("run", str(suite), "--detach", "--db", str(db))
    store = Store(db)
    try:
        wait_until(lambda: run_status(store) == "finished", "the run")
        wait_runners_gone(store)
        trials = store.trials(suite_id)
        lost = [f"#{t['id']}: {', '.join(p)}" for t in trials if (p := reset_problems(store, t, cli))]
        if cli == "reference" and len(trials) != 2:
            lost.append(f"{len(trials)} attempts (one and its retry expected)")
        return len(trials), max(0, len(trials) - len(lost)), lost
    finally:
        store.close()


def fill(folder: Path) -> Path:
    """Write a file into ``folder`` until its filesystem has no room left."""
    filler = folder / "filler"
    chunk = b"\0" * (1 << 16)
    with filler.open("wb", buffering=0) as handle:
        try:
            while True:
                handle.write(chunk)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    return filler


def status(db: Path) -> dict:
    with ControlClient(db) as client:
        return client.request("status")


@contextmanager
def small_tmpfs(folder: Path, size: str = "16m"):
    if os.geteuid() != 0:
        raise RuntimeError("the disk-full cell mounts a tmpfs: run it as root")
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def disk_full_cell(folder: Path, rng: random.Random) -> Cell:
    suite, suite_id = slow_suite(folder, "disk-full")
    with small_tmpfs(folder / "store") as mount:
        db = mount / "full.db"
        agentmeter("run", str(suite), "--detach", "--db", str(db))
        store = Store(db)
        try:
            wait_mid_run(store, suite_id, rng.randint(3, 15))
            before = {t["id"]: store.event_count(t["id"]) for t in store.trials(suite_id)}
            filler = fill(mount)
            problems: list[str] = []
            held = wait_until(lambda: run_status(store) != "running" or
                              (p := status(db)["progress"]).get("held") and p, "the runner to hold the schedule")
            if held is True:
                problems.append("the run ended without noticing the full disk")
            else:
                if not any("disk is full" in why for why in held["held"]):
                    problems.append(f"held for {held['held']}")
                tokens = [t["proc_token"] for t in store.trials(suite_id)]
                wait_until(lambda: not any(processes_with_token(t) for t in tokens), "the running agents to end")
                now = status(db)["progress"]
                if now["queued"] != held["queued"] or now["running"] > held["running"] or not now.get("held"):
                    problems.append(f"the schedule moved while held: {held} -> {now}")
            filler.unlink()
            wait_until(lambda: run_status(store) == "finished", "the run")
            wait_runners_gone(store)
            trials = store.trials(suite_id)
            problems += cells_final_once(trials, 6)
            problems += [f"#{t['id']}: {t['status']} {t['reason']}" for t in trials if t["status"] != "passed"]
            for trial in trials:
                if usage_of(trial) != sum(served_completed(trial), TokenUsage()):
                    problems.append(f"#{trial['id']}: usage differs from what was served")
                if store.event_count(trial["id"]) < before.get(trial["id"], 0):
                    problems.append(f"#{trial['id']}: events lost")
                problems += events_intact(store, trial)
            if next(store.db.query("pragma integrity_check"))["integrity_check"] != "ok":
                problems.append("the store is damaged")
            log = runner_log_path(db).read_text()
            if "disk is full" not in log or "has room again" not in log:
                problems.append("the runner log does not say the disk was full and had room again")
            return 1, 0 if problems else 1, problems
        finally:
            store.close()
