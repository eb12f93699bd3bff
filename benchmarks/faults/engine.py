"""``docker/reference/engine:restart``: dockerd restarted while trials run in its containers.

It restarts the engine that ``DOCKER_HOST`` (or the local socket) names: ``systemctl restart
docker`` under systemd, else SIGTERM to that dockerd and the same command line again, in its
own session, its output to where the old one's went (as ``.ci/services.sh`` starts it). Every
container of the engine stops with it, other people's too: run this cell only when nothing
else uses the engine. It is never in ``--ci`` nor in the test suite.

``DOCKER_HOST`` points the cell at another engine (a dockerd of its own, say), and
``FAULT_MATRIX_DOCKER_SANDBOX`` adds keys to its ``[sandbox]`` table (``network = "host"``
for an engine started without a bridge).

The moment is seeded (the run's next k events, with a trial running). After the run: the
trials that were running end ``infra-invalid`` with a reason naming the docker engine and are
retried once it answers again; every cell is final exactly once (passed); nothing labelled
with the cell's suite is left on the engine, no process of a trial on this machine; events
whole.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
from pathlib import Path

import psutil

from agentmeter_tui.core.procs import processes_with_token
from agentmeter_tui.core.store import Store

from .common import (
    Cell,
    agentmeter,
    events_intact,
    run_status,
    slow_suite,
    wait_mid_run,
    wait_runners_gone,
    wait_until,
)
from .infra import cells_final_once
from .kills import engine_leftovers


def engine_socket() -> str:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    return host.removeprefix("unix://")


def dockerd_process() -> psutil.Process:
    """The dockerd that serves :func:`engine_socket` (one started without ``-H`` serves the default)."""
    socket, found = engine_socket(), []
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info["name"] != "dockerd":
            continue
        hosts = [a.split("=", 1)[1] if "=" in a else b for a, b in zip(proc.info["cmdline"], proc.info["cmdline"][1:]
                 + [""]) if a in ("-H", "--host") or a.startswith("--host=")]
        if any(h.removeprefix("unix://") == socket for h in hosts) or \
                (not hosts and socket == "/var/run/docker.sock"):
            found.append(proc)
    if len(found) != 1:
        raise RuntimeError(f"{len(found)} dockerd processes serve {socket}; restart it by hand")
    return found[0]


def engine_answers() -> bool:
    from agentmeter_tui.core.sandboxes.docker.engine import connect

    try:
        client = connect(timeout=5)
    except Exception:  # noqa: BLE001 - any failure: not answering yet
        return False
    try:
        return bool(client.ping())
    except Exception:  # noqa: BLE001
        return False
    finally:
        client.close()


def restart_dockerd() -> None:
    if shutil.which("systemctl") and subprocess.run(["systemctl", "is-active", "--quiet", "docker"],
                                                    stderr=subprocess.DEVNULL, check=False).returncode == 0:
        subprocess.run(["systemctl", "restart", "docker"], check=True)
    else:
        proc = dockerd_process()
        argv, cwd = proc.cmdline(), proc.cwd()
        out = os.readlink(f"/proc/{proc.pid}/fd/1")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=300)
        log = open(out if out.startswith("/") and os.path.isfile(out) else os.devnull, "ab")  # noqa: SIM115
        with log:
            subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    wait_until(engine_answers, "dockerd to answer again")


def engine_restart_cell(folder: Path, rng: random.Random) -> Cell:
    engine = f'\nengine = "{os.environ["DOCKER_HOST"]}"' if os.environ.get("DOCKER_HOST") else ""
    engine += "\n" + os.environ.get("FAULT_MATRIX_DOCKER_SANDBOX", "")  # more [sandbox] keys, e.g. a network
    suite, suite_id = slow_suite(folder, "engine-restart", "max_retries = 3", f'kind = "docker"{engine}')
    db = folder / "engine.db"
    agentmeter("run", str(suite), "--detach", "--db", str(db))
    store = Store(db)
    try:
        wait_mid_run(store, suite_id, rng.randint(3, 12))
        restart_dockerd()
        wait_until(lambda: run_status(store) == "finished", "the run")
        wait_runners_gone(store)
        trials = store.trials(suite_id)
        lost = [t for t in trials if t["status"] == "infra-invalid"]
        problems = [] if lost else ["no trial was running in a container when dockerd restarted"]
        problems += [f"#{t['id']}: {t['reason']}" for t in lost if "docker engine" not in (t["reason"] or "")]
        problems += cells_final_once(trials, 6)
        problems += [f"#{t['id']}: {t['status']} {t['reason']}" for t in trials
                     if t["status"] not in ("passed", "infra-invalid")]
        for trial in trials:
            if processes_with_token(trial["proc_token"]):
                problems.append(f"#{trial['id']}: processes left")
            problems += events_intact(store, trial)
        if left := engine_leftovers(suite_id):
            problems.append(f"left on the engine: {', '.join(left)}")
        return 1, 0 if problems else 1, problems
    finally:
        store.close()
