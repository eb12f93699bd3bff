"""Bad command-line grids (issue 34): an agent CLI nobody knows, a model id without its
provider, a task glob that matches nothing, a number out of range: one line naming the option,
exit code 2, no traceback, and no suite written."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES
from tests.journeys.support import SMOKE, command

TASKS = FIXTURES / "harbor" / "tasks"


@pytest.mark.parametrize(("extra", "option", "says"), [
    (["-m", "scripted/solver", "-a", "no-such-cli"], "-a/--agent", "unknown agent CLI 'no-such-cli'"),
    (["-m", "claude-sonnet-4-5", "-a", "reference"], "-m/--model", "'claude-sonnet-4-5' has no provider"),
    (["-m", "nowhere/model", "-a", "reference"], "-m/--model", "unknown provider 'nowhere'"),
    (["-m", "scripted/solver", "-a", "reference", "-t", "zz-*"], "-t/--task", "'zz-*' matches no task folder"),
    (["-m", "scripted/solver", "-a", "reference", "-k", "0"], "-k/--attempts", "0 is not in 1..10000"),
    (["-m", "scripted/solver", "-a", "reference", "-n", "9999"], "-n/--concurrency", "9999 is not in 1..512"),
    (["-m", "scripted/solver", "-a", "reference", "--budget-usd", "-1"], "--budget-usd", "is not above 0"),
    (["-a", "reference"], "-m/--model", "give at least one model"),
    (["-m", "scripted/solver"], "-a/--agent", "give at least one agent CLI"),
])
def test_a_bad_grid_option_is_one_line_naming_it(tmp_path, extra, option, says):
    db = tmp_path / "x.db"
    done = command("run", str(TASKS), *extra, "--headless", "--db", str(db))
    assert done.returncode == 2, done.stderr + done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"agentmeter run: {option}: ") and says in lines[0], lines[0]
    assert not (tmp_path / "x.db.suites").exists()  # nothing half-made


def test_options_override_a_suite_files_grid_and_suite_show_prints_it(tmp_path):
    db = tmp_path / "smoke.db"
    done = command("run", str(SMOKE), "-m", "scripted/solver", "-t", "count-*", "-k", "1", "--headless",
                   "--db", str(db))
    assert done.returncode == 0, done.stderr + done.stdout
    assert "1/1" in next(line for line in done.stdout.splitlines() if line.strip().startswith("solver")), done.stdout
    shown = command("suite", "show", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    for line in ('include = [\n    "count-*",\n]', "trials = 1", 'id = "solver"', 'adapter = "reference"'):
        assert line in shown.stdout.replace("[ ", "["), shown.stdout
    assert "fumbler" not in shown.stdout  # -m replaced the suite's models
    again = command("suite", "show", "--db", str(tmp_path / "none.db"))
    assert again.returncode == 2 and "no store" in again.stderr, again.stderr
