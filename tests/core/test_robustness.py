"""Bad agent output is kept verbatim and never stops the run; a runner killed with -9 resumes
without repeating finished trials; a client that dies leaves the runner running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from agentmeter_tui.core.lines import MAX_LINE, TRUNCATION_MARKER
from agentmeter_tui.core.store import Store
from tests.conftest import FIXTURES, agentmeter
from tests.waiting import wait_for


def test_malformed_agent_output_is_kept_as_raw_events(db):
    result = agentmeter("run", str(FIXTURES / "suites" / "noisy"), "--headless", "--db", str(db))
    assert result.returncode == 0, result.stderr
    store = Store(db)
    (trial,) = store.trials("noisy")
    assert trial["status"] == "passed"
    events = list(store.events(trial["id"]))
    raw = [(text, data) for _, _, kind, stream, text, data in events if kind == "raw"]
    datas = [bytes(d) for _, d in raw if d is not None]
    assert b"plain text that is not JSON" in datas
    assert b"invalid utf-8: \xff\xfe\xfa end" in datas  # byte for byte, not "repaired"
    assert b"binary \x00\x01\x02\x03\x1b[31m bytes" in datas
    assert b"trailing line without newline" in datas
    flood = [d for d in datas if d.startswith(b"xxxx")]
    assert len(flood) == 1 and flood[0].startswith(b"x" * MAX_LINE)
    assert flood[0].endswith(TRUNCATION_MARKER % (10 * 1024 * 1024 - MAX_LINE))
    stderr = [bytes(d) for _, _, kind, stream, _, d in events if stream == "stderr"]
    assert stderr == [b"stderr \xc3\x28 noise"]
    kinds = [kind for _, _, kind, *_ in events]
    assert "assistant" in kinds and "usage" in kinds  # the valid lines after the flood still parse
    assert trial["uncached_input"] == 10 and trial["output"] == 5


def run_ids(store: Store) -> list[int]:
    return [r["id"] for r in store.db.query("select id from runs order by id")]


def test_runner_killed_with_sigkill_resumes_without_repeating(db):
    suite = FIXTURES / "suites" / "slow"
    agentmeter("run", str(suite), "--detach", "--db", str(db), check=True)
    store = Store(db)
    runner_pid = next(store.db.query("select pid from runs"))["pid"]
    # Kill the runner once some trials are finished and others are running.
    wait_for(lambda: store.trials("slow", "status = 'passed'") and store.trials("slow", "status = 'running'"),
             "a passed and a running trial")
    before = {t["id"]: (t["status"], store.event_count(t["id"])) for t in store.trials("slow")}
    os.kill(runner_pid, signal.SIGKILL)
    wait_for(lambda: not _alive(runner_pid), "the killed runner to be gone")
    finished_before = {i: s for i, s in before.items() if s[0] == "passed"}
    assert finished_before

    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=90)
    assert result.returncode == 0, result.stderr
    trials = store.trials("slow")
    countable = [t for t in trials if t["status"] != "infra-invalid"]
    cells = [(t["task_id"], t["model"], t["trial_index"]) for t in countable]
    assert len(cells) == len(set(cells)) == 2 * 3, "every cell done exactly once"
    assert all(t["status"] == "passed" for t in countable)
    lost = [t for t in trials if t["status"] == "infra-invalid"]
    assert lost and all("runner lost" in t["reason"] for t in lost)
    for trial_id, (status, count) in finished_before.items():  # nothing finished was touched
        assert store.trial(trial_id)["status"] == status
        assert store.event_count(trial_id) == count
        assert store.trial(trial_id)["run_id"] == run_ids(store)[0]


def test_client_killed_mid_stream_leaves_the_runner_running(db):
    suite = FIXTURES / "suites" / "slow"
    client = subprocess.Popen([sys.executable, "-m", "agentmeter_tui", "run", str(suite), "--headless", "--db",
                               str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    store = Store(db) if db.exists() else None
    wait_for(lambda: db.exists() and Store(db).trials("slow", "status = 'running'"), "a running trial")
    store = Store(db)
    client.send_signal(signal.SIGKILL)
    client.wait()
    runner_pid = next(store.db.query("select pid from runs"))["pid"]
    assert _alive(runner_pid)
    wait_for(lambda: next(store.db.query("select status from runs"))["status"] == "finished", "the run to finish")
    assert len(store.trials("slow", "status = 'passed'")) == 6


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
