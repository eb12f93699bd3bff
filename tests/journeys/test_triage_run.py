"""The triaging reviewer after a real run: `agentmeter run` (the reference agent against the
scripted model server, a real runner) finishes two trials, one of which refuses. Nobody runs
`agentmeter scan`: the runner scanned each trial when it became final, so its flags are in the
store already; `agentmeter review --by-flags` then opens the refusing trial first although it
ran second, and `]` after its score goes on to the unflagged one."""

from __future__ import annotations

import re
import shutil

import pytest

from agentmeter_tui.core.store import Store

from .support import TmuxSession, agentmeter, clean_env, command

pytestmark = [pytest.mark.slow]

SCENARIOS = {
    "clean": ('[[turns]]\nshell = "echo 42 > answer.txt"\nusage = { uncached_input = 100, output = 10 }\n'
              '[[turns]]\ntext = "Done: answer.txt written."\nusage = { uncached_input = 120, output = 5 }\n'),
    "refuser": '[[turns]]\ntext = "I can\'t help with that request."\nusage = { uncached_input = 80, output = 9 }\n',
}


@pytest.fixture(autouse=True)
def _tmux() -> None:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (.ci/run installs it)")


def test_a_run_is_triaged_without_a_scan_and_the_queue_opens_on_the_flagged_trial(tmp_path):
    suite = tmp_path / "triage-run"
    (suite / "answer" / "tests").mkdir(parents=True)
    (suite / "answer" / "instruction.md").write_text("Write 42 to answer.txt.\n")
    (suite / "answer" / "task.toml").write_text('[task]\ntier = "easy"\n')
    (suite / "answer" / "tests" / "test.sh").write_text(
        '#!/bin/sh\n[ "$(cat "$AGENTMETER_WORKSPACE/answer.txt" 2>/dev/null)" = 42 ]\n')
    models = "".join(f'[[models]]\nid = "{name}"\n\n' for name in SCENARIOS)  # clean runs first: concurrency 1
    (suite / "suite.toml").write_text(f'[suite]\nid = "triage-run"\ntrials = 1\nconcurrency = 1\n\n{models}'
                                      '[[clis]]\nadapter = "reference"\n\n[budgets.default]\nwall_seconds = 120\n')
    (suite / "scenarios").mkdir()
    for name, scenario in SCENARIOS.items():
        (suite / "scenarios" / f"{name}.toml").write_text(scenario)
    db = tmp_path / "triage.db"
    done = command("run", str(suite), "--headless", "--db", str(db))
    assert done.returncode == 0, done.stderr + done.stdout
    store = Store(db)
    ids = {row["model"]: row["id"] for row in store.trials("triage-run")}
    flags = store.flags.flags_of()
    store.close()
    assert ids["clean"] < ids["refuser"]
    assert [f.scanner for f in flags.get(ids["refuser"], [])] == ["refusal"]  # no `agentmeter scan` ran
    assert ids["clean"] not in flags

    env = clean_env(tmp_path, AGENTMETER_REVIEWER="ana")
    session = TmuxSession(agentmeter("review", "--by-flags", "--db", str(db)), env)
    try:
        screen = session.wait_for("Review #")
        assert int(re.search(r"Review #(\d+)", screen).group(1)) == ids["refuser"]
        session.keys("1")
        session.wait_for("saved by ana")
        session.keys("]")
        session.wait_for(f"Review #{ids['clean']}")
    finally:
        session.close()
