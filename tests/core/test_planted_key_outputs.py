"""A real provider key (planted in the environment, issue 16 part 5) appears in no output at
all: not the store, its WAL or the runner's log (tests/core/test_proxy_runner.py), and not any
of what is made from the store afterwards: trial records (stdout and file), every report format
and its charts, score exports, the ATIF trajectory, nor a screenshot of the review screen."""

from __future__ import annotations

import pytest

from agentmeter_tui.core.interop.atif import trial_trajectory, write_trajectory
from agentmeter_tui.core.scripted.client import start_server_process
from agentmeter_tui.core.store import Store
from tests.conftest import agentmeter
from tests.core.test_proxy_runner import PLANTED, write_suite
from tests.e2e.test_reference_e2e import WRITE_FILE


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("planted")
    scenario = tmp / "scenario.toml"
    scenario.write_text(WRITE_FILE)
    with start_server_process(scenario, log_dir=tmp / "provider-log") as provider:
        db = tmp / "planted.db"
        result = agentmeter("run", str(write_suite(tmp, provider.base_url)), "--headless", "--db", str(db),
                            env={"AM_TEST_PROVIDER_KEY": PLANTED}, timeout=600)
        assert result.returncode == 0, result.stderr
    agentmeter("score", "1", "2", "--db", str(db), "--note", "fine", env={"AGENTMETER_REVIEWER": "alice"},
               check=True)
    return db, tmp


def outputs(db, folder) -> dict[str, bytes]:
    """Every output the command line makes from a store: what it prints and the files it writes."""
    made: dict[str, bytes] = {}
    for name, args in {
        "export-trials": ["export-trials"], "export-trials --out": ["export-trials", "--out", str(folder / "t.jsonl")],
        "report md": ["report"], "report csv": ["report", "--format", "csv"],
        "report json": ["report", "--format", "json", "--detail"],
        "report --out --charts": ["report", "--out", str(folder / "report.md"), "--charts", str(folder / "charts")],
        "scores export": ["scores", "export"], "scores export --out": ["scores", "export", "--out",
                                                                        str(folder / "scores.csv")],
    }.items():
        result = agentmeter(*args, "--db", str(db), check=True)
        made[name] = (result.stdout + result.stderr).encode()
    for path in folder.rglob("*"):
        if path.is_file():
            made[str(path.relative_to(folder))] = path.read_bytes()
    return made


def test_no_output_made_from_the_store_holds_the_key(planted_run, tmp_path):
    db, _ = planted_run
    made = outputs(db, tmp_path)
    assert {"t.jsonl", "report.md", "scores.csv"} <= set(made) and any(n.startswith("charts/") for n in made)
    for name, data in made.items():
        assert PLANTED.encode() not in data, name


def test_the_atif_trajectory_does_not_hold_the_key(planted_run, tmp_path):
    db, _ = planted_run
    store = Store(db)
    try:
        (trial,) = store.trials("planted")
        path = write_trajectory(trial_trajectory(store, trial["id"]), tmp_path / "trajectory.json")
    finally:
        store.close()
    assert PLANTED.encode() not in path.read_bytes()


async def test_a_screenshot_of_the_review_screen_does_not_hold_the_key(planted_run):
    from tests.ui.conftest import SIZE, make_app, settle

    db, _ = planted_run
    app = make_app(db, screen="review", trial=1)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        svg = app.export_screenshot()
    assert "Review" in svg and PLANTED not in svg
