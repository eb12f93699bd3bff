"""`agentmeter regrade` (issue 35): a task whose test is fixed after the run. A real run (the
reference agent against the scripted model server, a real runner) writes ``answer.txt`` = 42;
the task's first test wants 41, so the trial fails. The test is fixed (it wants 42) and the trial
regraded on its kept final workspace, on docker and on the walled local sandbox: the new verdict
is appended with its time and the verifier's hash, the trial's own verdict stays, and the report
counts the regrade and says so. Bad arguments: one line each, an exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentmeter_tui.core.store import Store
from tests.conftest import agentmeter
from tests.core.sandbox_support import docker_engine_fixture, leftovers, unique_id  # noqa: F401 - the fixture

WANTS = '#!/bin/sh\nset -e\n[ "$(cat "$AGENTMETER_WORKSPACE/answer.txt")" = "{answer}" ]\necho "answer {answer}"\n'


def fixable_suite(tmp_path: Path, sandbox: str, shell: str = "echo 42 > answer.txt") -> tuple[Path, str]:
    suite_id = unique_id("regrade")
    suite = tmp_path / "regrade-suite"
    task = suite / "answer"
    (task / "tests").mkdir(parents=True)
    (task / "workspace").mkdir()
    (task / "workspace" / "README").write_text("write the answer to answer.txt\n")
    (task / "instruction.md").write_text("Write the answer to answer.txt.\n")
    (task / "task.toml").write_text('[task]\ntier = "easy"\n')
    (task / "tests" / "test.sh").write_text(WANTS.format(answer=41))  # the bug: the answer is 42
    (suite / "suite.toml").write_text(
        f'[suite]\nid = "{suite_id}"\ntrials = 1\n\n[[models]]\nid = "writer"\n\n[[clis]]\nadapter = "reference"\n\n'
        f"[budgets.default]\nwall_seconds = 120\n\n[sandbox]\n{sandbox}\n")
    (suite / "scenarios").mkdir()
    (suite / "scenarios" / "writer.toml").write_text(
        f"[[turns]]\nshell = {json.dumps(shell)}\nusage = {{ uncached_input = 100, output = 10 }}\n"
        '[[turns]]\ntext = "Done."\nusage = { uncached_input = 120, output = 5 }\n')
    return suite, suite_id


def run_then_regrade(tmp_path: Path, db: Path, sandbox: str) -> str:
    suite, suite_id = fixable_suite(tmp_path, sandbox)
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    store = Store(db)
    (trial,) = store.trials(suite_id)
    store.close()
    assert trial["status"] == "failed" and trial["kept"], trial  # kept by default, for the verifier to see again
    assert (db.parent / f"{db.name}.kept" / trial["kept"] / "answer.txt").read_text() == "42\n"
    before = agentmeter("report", "--suite", suite_id, "--db", str(db))
    assert "regraded" not in before.stdout

    (suite / "answer" / "tests" / "test.sh").write_text(WANTS.format(answer=42))  # the test, fixed
    result = agentmeter("regrade", "--task", "answer", "--db", str(db), timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    assert f"trial {trial['id']}: failed -> passed" in result.stdout

    store = Store(db)
    (row,) = store.trials(suite_id)
    assert (row["status"], row["passed"]) == ("failed", 0)  # the original verdict stays
    (regrade,) = store.regrades.regrades_of([trial["id"]])[trial["id"]]
    assert (regrade.status, regrade.passed, regrade.quality) == ("passed", True, 1.0)
    assert "answer 42" in regrade.verifier_output and regrade.created_at
    store.close()
    # The hash is of the verifier as it is now: change the test again and it changes.
    (suite / "answer" / "tests" / "test.sh").write_text(WANTS.format(answer=42) + "# same test, new bytes\n")
    again = agentmeter("regrade", "--db", str(db), timeout=600)
    assert again.returncode == 0, again.stderr
    store = Store(db)
    first, second = store.regrades.regrades_of([trial["id"]])[trial["id"]]
    assert first.verifier_hash != second.verifier_hash
    store.close()

    records = tmp_path / "records.jsonl"
    assert agentmeter("export-trials", "--suite", suite_id, "--out", str(records), "--db", str(db)).returncode == 0
    (record,) = [json.loads(line) for line in records.read_text().splitlines()]
    assert (record["status"], record["passed"]) == ("passed", True)  # the counted verdict, the original beside it
    assert record["regrade"]["original"]["status"] == "failed"
    report = agentmeter("report", "--suite", suite_id, "--format", "json", "--db", str(db))
    assert report.returncode == 0, report.stderr
    assert "regraded: 1 trial verdict(s)" in report.stdout and "failed -> passed" in report.stdout
    data = json.loads(report.stdout)
    assert 'passed' in json.dumps(data) and before.stdout != agentmeter("report", "--suite", suite_id,
                                                                        "--db", str(db)).stdout
    return suite_id


def test_a_fixed_test_regrades_a_local_trial(tmp_path, db):
    suite_id = run_then_regrade(tmp_path, db, 'kind = "local"')
    bad_arguments(db, suite_id)


@pytest.mark.docker
def test_a_fixed_test_regrades_a_docker_trial(tmp_path, db, docker_engine):
    suite_id = run_then_regrade(tmp_path, db, 'kind = "docker"')
    assert leftovers(docker_engine, suite_id) == {}


def bad_arguments(db: Path, suite_id: str) -> None:
    result = agentmeter("regrade", "--task", "no-such-task", "--db", str(db))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"agentmeter regrade: no trial of suite {suite_id} matches --task no-such-task --status passed,failed"]
    result = agentmeter("regrade", "--status", "nonsense", "--db", str(db))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    cleaned = agentmeter("regrade", "--clean", "--db", str(db))
    assert cleaned.returncode == 0 and "1 trial(s) removed" in cleaned.stdout
    result = agentmeter("regrade", "--db", str(db))
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and "its final workspace was not kept" in lines[0], lines
    assert "Traceback" not in result.stderr
    missing = agentmeter("regrade", "--db", str(db.with_name("none.db")))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1


@pytest.mark.docker
def test_a_harbor_task_regrades_in_its_container(tmp_path, db, docker_engine):
    """Harbor's contract: the kept /app goes back into a fresh container of the task's image and
    tests/test.sh writes /logs/verifier/reward.txt again. The "wrong" model's greeting is made
    right by a test that now accepts it; the solver's stays passed."""
    from tests.core.harbor_support import harbor_suite, run

    suite, suite_id = harbor_suite(tmp_path, "agents")
    toml = suite / "suite.toml"
    toml.write_text(toml.read_text().replace('exclude = ["no-*"]', 'exclude = ["no-*", "probe", "count"]'))
    trials = run(suite, db)
    wrong = trials[("greet", "wrong")]
    assert wrong["status"] == "failed" and wrong["kept"], wrong
    test = suite.parent / "tasks" / "greet" / "tests" / "test.sh"
    test.write_text(test.read_text().replace('= "hello, harbor" ]', '= "hello, harbor" ] || [ "$(cat /app/greeting.txt)" = goodbye ]'))
    result = agentmeter("regrade", "--suite", suite_id, "--task", "greet", "--db", str(db), timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    assert f"trial {wrong['id']}: failed -> passed" in result.stdout
    assert f"trial {trials[('greet', 'solver')]['id']}: passed -> passed" in result.stdout
    store = Store(db)
    (regrade,) = store.regrades.regrades_of([wrong["id"]])[wrong["id"]]
    store.close()
    assert regrade.quality == 1.0 and "reward.txt: reward = 1" in regrade.verifier_output
    assert leftovers(docker_engine, suite_id) == {}
