"""The real TUI in a real terminal (tmux): the demo end to end, and re-attaching after a crash.

Slow (the demo runs real trials through the scripted model server): ``-m slow``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal

import psutil
import pytest

from agentmeter_tui.commands.run import spawn_runner
from agentmeter_tui.core.procs import processes_with_token
from agentmeter_tui.core.run.control import ControlClient, ControlError, runner_alive
from agentmeter_tui.core.store import Store

from ..conftest import need
from ..waiting import FAILSAFE, wait_for
from .tmux import ROOT, TmuxSession, agentmeter, clean_env

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _tmux() -> None:
    need(shutil.which("tmux") is not None, "tmux is not installed")


def stop_runner(db) -> None:
    asked = False

    def stopped() -> bool:
        # A runner ending on its own meanwhile closes (or resets) the connection: ask again until
        # one stop is taken or it is gone.
        nonlocal asked
        if not asked and runner_alive(db):
            with contextlib.suppress(ControlError), ControlClient(db) as client:
                client.request("stop")
                asked = True
        return not runner_alive(db)

    wait_for(stopped, "the runner to stop")


def test_demo_kill_review_score_quit(tmp_path):
    db = tmp_path / "demo.db"
    # Only the reference agent: the real CLIs the demo would add are tested elsewhere, and this stays fast.
    session = TmuxSession(agentmeter("demo", "--db", str(db), "--clis", "reference"),
                          clean_env(tmp_path, AGENTMETER_REVIEWER="e2e-reviewer"))
    try:
        session.wait_for("agentmeter Demo")
        session.keys("l")  # the live panes
        session.wait_for("#1 count-lines · runaway × reference")  # the runaway runs longest: first pane
        session.keys("k")
        session.wait_for("Kill trial #1?")
        session.keys("y")
        screen = session.wait_for("killed")
        assert "#1 count-lines" in screen
        session.keys("r")  # the focused pane's trial is finished: review it
        screen = session.wait_for("Review #")
        reviewed = int(re.search(r"Review #(\d+)", screen).group(1))
        session.keys("2")
        session.wait_for("saved")
        session.keys("q")  # the demo's runner stops with it: while trials run, it asks first
        session.wait_for("Quit and stop the demo's run?")
        session.keys("y")
        wait_for(lambda: not session.alive(), "the demo to quit")
    finally:
        session.close()
        stop_runner(db)
    store = Store(db)
    try:
        killed = store.trial(1)
        assert (killed["status"], killed["reason"]) == ("killed", "operator")
        [score] = store.reviews.score_history(reviewed)
        assert (score.score, score.reviewer) == (2, "e2e-reviewer") and score.created_at
        token = killed["proc_token"]
    finally:
        store.close()
    assert reviewed == 1  # r on the killed pane opened that trial
    assert processes_with_token(token) == []
    assert not runner_alive(db)  # quitting the demo stops its runner


def test_sigkill_of_the_tui_leaves_the_run_going_and_attach_shows_it(tmp_path):
    db = tmp_path / "run.db"
    env = clean_env(tmp_path)
    assert spawn_runner(ROOT / "suites" / "demo", db, None)["ok"]  # the runner's hello (an int: it died)
    first = second = None
    try:
        first = TmuxSession(agentmeter("attach", "--db", str(db)), env)
        first.wait_for("● live")
        tui = psutil.Process(first.pane_pid())
        assert "attach" in " ".join(tui.cmdline())
        os.kill(tui.pid, signal.SIGKILL)
        tui.wait(FAILSAFE)
        assert runner_alive(db)
        with ControlClient(db) as client:
            status = client.request("status")
        running = [m["id"] for m in status["running"]]
        assert running, "trials go on after the TUI died"
        store = Store(db)
        tokens = {r["id"]: r["proc_token"] for r in store.trials(where="status = 'running'")}
        store.close()
        assert any(processes_with_token(t) for t in tokens.values())  # their processes too
        second = TmuxSession(agentmeter("attach", "--db", str(db)), env)
        second.wait_for("● live")
        second.keys("l")
        screen = second.wait_for(" · t")  # a pane title: "#N task · model × cli · tK"
        shown = {int(n) for n in re.findall(r"#(\d+) [a-z-]+ · ", screen)}
        with ControlClient(db) as client:
            now_running = {m["id"] for m in client.request("status")["running"]}
        assert shown & (now_running | set(running))
    finally:
        for session in (first, second):
            if session is not None:
                session.close()
        stop_runner(db)


def test_blind_review_shows_no_model_cli_or_cost(tmp_path):
    from agentmeter_tui.ui import format as fmt
    from tests.sample_data import CLIS, MODELS, build_sample_store

    db = tmp_path / "sample.db"
    store = build_sample_store(db)
    costs = {fmt.usd(r["cost_usd"]) for r in store.trials()} | {f"{r['cost_usd']:.3f}" for r in store.trials()}
    store.close()
    names = re.compile(r"(?<![\w])(" + "|".join(map(re.escape, (*MODELS, *CLIS))) + r")(?![\w])", re.IGNORECASE)

    def assert_blind(screen: str) -> None:
        assert "Blind review" in screen
        assert not names.search(screen), names.search(screen).group(0)
        assert not [c for c in costs if c in screen] and "$" not in screen

    session = TmuxSession(agentmeter("review", "--db", str(db), "--blind", "--seed", "3"),
                          clean_env(tmp_path, AGENTMETER_REVIEWER="blind-e2e"))
    try:
        assert_blind(session.wait_for("Blind review"))
        session.keys("2")
        assert_blind(session.wait_for("saved"))
        session.keys("]")
        assert_blind(session.wait_for("1 scored by you"))
        session.keys("b")
        session.wait_for("Unblind?")
        session.keys("y")
        screen = session.wait_for("Review #")  # unblinded: the sighted title names model and CLI again
        assert names.search(screen)
        session.keys("q")
    finally:
        session.close()
    store = Store(db)
    try:
        [score] = [s for s in store.reviews.score_rows() if s.reviewer == "blind-e2e"]
        assert score.blind == 1 and score.score == 2
        [audit] = store.reviews.audit_rows("unblind")
        assert audit["actor"] == "blind-e2e"
    finally:
        store.close()
