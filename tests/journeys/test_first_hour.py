"""A new user's first hour, and every script's (issue 38): runs with no terminal, a run cap met
by a script, a task that could never be judged. Each is the real command line in a subprocess,
its exit code and its output checked as a person (or cron) sees them."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys

import pytest

from agentmeter_tui.core.store import Store
from tests.core.caps_support import capped_suite, detached, stop_runners  # noqa: F401
from tests.waiting import wait_for

from .support import ROOT, command

pytestmark = [pytest.mark.slow]

ESC = "\x1b"
HANG = 900  # a fail-safe against a hang (the bug this file pins), never a speed limit


def no_terminal(*args: str, out, cwd=ROOT) -> subprocess.CompletedProcess:
    """`agentmeter ARGS > out < /dev/null` in a new session: no controlling terminal, as cron
    or `nohup` run it."""
    with open(out, "w") as sink:
        return subprocess.run([sys.executable, "-m", "agentmeter_tui", *args], stdin=subprocess.DEVNULL,
                              stdout=sink, stderr=subprocess.PIPE, text=True, cwd=cwd, start_new_session=True,
                              timeout=HANG)


def test_a_run_without_a_terminal_prints_progress_and_returns_the_runs_code(tmp_path):
    db, out = tmp_path / "smoke.db", tmp_path / "out.txt"
    done = no_terminal("run", "smoke", "--db", str(db), out=out)
    text = out.read_text()
    assert done.returncode == 0, (done.stderr, text)
    assert "no terminal: following the run headless" in done.stderr
    assert ESC not in text  # progress lines, not a TUI drawn into the file
    assert "8/8 done" in text and text.count(" passed ") == 4 and text.count(" failed ") == 4
    # ... and its exit code is the run's: a grid whose cells ended infra-invalid is not a success
    suite = tmp_path / "s"
    shutil.copytree(ROOT / "suites" / "smoke", suite)
    toml = suite / "suite.toml"
    toml.write_text(toml.read_text().replace('adapter = "reference"', 'adapter = "codex"')
                    .replace("trials = 2", "trials = 1"))
    (tmp_path / "no-clis").mkdir()
    done = no_terminal("run", str(suite), "--db", str(tmp_path / "infra.db"), "--clis-root",
                       str(tmp_path / "no-clis"), out=out)
    assert done.returncode == 8, (done.stderr, out.read_text())
    assert "4 cell(s) ended infra-invalid: no result" in done.stderr
    assert out.read_text().count("codex is not installed") == 4  # once a cell: a retry would find it missing too
    assert "agentmeter rerun --status infra-invalid" in done.stderr


def _held_suite(tmp_path):
    """Two scripted models, two trials each, under a 6,000-token trial budget and a 12,000-token
    run cap, no proxy: two trials fit, the third's committed budget would pass the cap (10,000
    spent + 6,000 > 12,000), so the schedule is held with nothing running, short of 90 %."""
    return capped_suite(tmp_path, "\n[budgets.run]\ntokens = 12000\n", proxy=False, budget_tokens=6000,
                        trials=2, concurrency=4)


def _statuses(db) -> list[str]:
    store = Store(db, readonly=True)
    try:
        return [row["status"] for row in store.trials("capped")]
    finally:
        store.close()


def test_a_capped_headless_run_says_what_holds_it_and_returns(tmp_path, db):
    suite = _held_suite(tmp_path)
    try:
        held = command("run", str(suite), "--headless", "--db", str(db))
        assert held.returncode == 7, held
        assert "held: run: committed tokens" in held.stderr and "nothing is running and 2 trial(s) wait" in held.stderr
        raise_it = re.search(r"agentmeter budget [^\n]*--db \S+", held.stderr)
        assert raise_it and "--run-tokens 24000" in raise_it.group(0), held.stderr
        assert sorted(_statuses(db)) == ["passed", "passed"]  # nothing else was started, nothing paid for
        # The exact command printed raises the cap, and `agentmeter run` follows the same runner to the end.
        raised = command(*shlex.split(raise_it.group(0))[1:])
        assert raised.returncode == 0 and "run cap now 24,000 tokens" in raised.stdout, raised
        resumed = command("run", str(suite), "--headless", "--db", str(db))
        assert resumed.returncode == 0, resumed
        # the raised runner may finish before this `run` asks: it follows it (or finds it just ended,
        # and prints its table all the same), or says the suite is complete
        followed = "4/4 done" in resumed.stdout or "results of suite capped" in resumed.stdout
        assert ("attaching to the running runner" in resumed.stderr and followed) or \
            "every cell has its result" in resumed.stdout, resumed
        assert _statuses(db) == ["passed"] * 4
    finally:
        stop_runners(db)


def test_a_scripted_wait_cap_returns_at_a_held_schedule(tmp_path, db, detached):  # noqa: F811
    store = detached(_held_suite(tmp_path))
    wait_for(lambda: len([r for r in store.trials("capped") if r["status"] == "passed"]) == 2, "two trials passed")
    waited = command("status", "--wait-cap", "--db", str(db))  # 10,000 of 12,000: 83 %, under --near's 90 %
    assert waited.returncode == 4, waited
    assert waited.stdout.startswith("cap hit: the schedule is held: run: committed tokens"), waited.stdout


def test_a_task_without_tests_is_refused_before_anything_is_paid_for(tmp_path):
    suite = tmp_path / "s"
    shutil.copytree(ROOT / "suites" / "smoke", suite)
    shutil.rmtree(suite / "count-lines" / "tests")
    db = tmp_path / "s.db"
    done = command("run", str(suite), "--headless", "--db", str(db))
    assert done.returncode == 2, done
    line = done.stderr.strip()
    assert line.count("\n") == 0 and "Traceback" not in line
    assert f"{suite / 'count-lines' / 'task.toml'}" in line and "verifier.command" in line
    assert "task 'count-lines' has no tests/test.sh and no verifier command" in line
    assert not db.exists() or not Store(db, readonly=True).trials()
