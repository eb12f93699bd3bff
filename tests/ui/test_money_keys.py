"""The money keys (issue 25) against the real runner with the scripted model server: `$`
raises a reached run cap and the schedule resumes; `R` on a grid cell reruns its killed
trials, and on a finished trial of a finished store starts a runner for it; `M` pauses one
model while the other runs. Each test checks what the runner and the store did, not only
what the screen says. Spend and statuses come from the scripted server's suite
(``tests.core.caps_support.capped_suite``)."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentmeter_tui.core.run.control import runner_alive
from agentmeter_tui.core.store import Store
from agentmeter_tui.ui.app import AgentMeterApp
from agentmeter_tui.ui.screens.cell import CellScreen
from agentmeter_tui.ui.screens.dialogs import BudgetDialog, ConfirmDialog
from agentmeter_tui.ui.screens.grid import GridScreen
from agentmeter_tui.ui.screens.money import RerunDialog
from agentmeter_tui.ui.session import UiSession
from agentmeter_tui.ui.settings import UiSettings
from agentmeter_tui.ui.widgets.grid_table import GridTable
from agentmeter_tui.ui.widgets.money import HoldBanner
from agentmeter_tui.ui.widgets.trial_table import TrialTable
from tests.conftest import agentmeter
from tests.core.caps_support import capped_suite, held_on_cap
from tests.core.runpaths_support import run_status
from tests.waiting import eventually

from .conftest import SIZE, make_app, notifications_of, settle

RUN_CAP = "\n[budgets.run]\ntokens = 12000\n"  # 12 calls: the first trials spend it, the rest are held


@pytest.fixture(autouse=True)
def _stop_runner(db):
    """A test that failed half-way leaves no runner behind on the shared machine."""
    yield
    if runner_alive(db):
        agentmeter("stop", "--db", str(db))


def attached_app(db) -> AgentMeterApp:
    """The TUI as `agentmeter attach` opens it: following the runner's feed (whose worker never
    completes: these tests wait on what the screens show, not on ``settle``)."""
    return AgentMeterApp(UiSession(db, reviewer="alice", live=True), settings=UiSettings(theme="agentmeter-dark"))


async def status(db) -> dict:
    out = await asyncio.to_thread(agentmeter, "status", "--db", str(db), "--json", check=True)
    return json.loads(out.stdout)


def rows(db, where: str = "1", params: tuple = ()) -> list[dict]:
    store = Store(db, readonly=True)
    try:
        return store.trials("capped", where, list(params))
    finally:
        store.close()


def run_bar(app) -> str:
    return str(app.screen.query_one("#run-bar").render())


async def ended(db) -> str:
    store = Store(db, readonly=True)
    try:
        return await eventually(lambda: (s := run_status(store)) in ("finished", "stopped") and s, "the run to end")
    finally:
        store.close()


async def test_a_reached_cap_shows_on_every_screen_R_reruns_a_cells_killed_trials_and_dollar_resumes(tmp_path, db):
    suite = capped_suite(tmp_path, RUN_CAP, proxy=True)
    agentmeter("run", str(suite), "--detach", "--db", str(db), check=True)
    before = held_on_cap(db)["progress"]
    killed = rows(db, "status = 'killed' and model = 'm1'")
    assert killed, "the cap killed none of m1's trials"
    app = attached_app(db)
    async with app.run_test(size=SIZE) as pilot:
        await eventually(lambda: "HELD" in run_bar(app) and "forecast" in run_bar(app), "the run bar to say the hold")
        assert "cap reached: run" in run_bar(app) and "▲ over" in run_bar(app)  # the forecast passes the cap
        # the cell, review and report screens have no run bar: each says the hold on a line of its own
        for key, where in (("enter", "cell"), ("r", "review"), ("t", "report")):
            await pilot.press(key)
            await pilot.pause()
            banner = app.screen.query_one(HoldBanner)
            await eventually(lambda: banner.display and "cap reached: run" in str(banner.render()),
                             f"the {where} screen to say the hold")
        await pilot.press("g")
        await pilot.pause()
        assert isinstance(app.screen, GridScreen) and app.screen.query_one(GridTable).current_config == ("m1", "reference")
        await pilot.press("R")
        dialog = await eventually(lambda: isinstance(app.screen, RerunDialog) and app.screen, "the rerun dialog")
        assert f"{len(killed)} trial(s) will get a new attempt" in str(dialog.query_one("#rerun-count").render())
        await pilot.click("#apply")
        await eventually(lambda: _total_grew(db, before["total"] + len(killed)), "the rerun to join the queue")
        await pilot.press("dollar_sign")
        await eventually(lambda: isinstance(app.screen, BudgetDialog), "the cap dialog")
        assert app.focused.id == "budget-usd"  # issue 38: `$` then 20 is twenty dollars, not 20 tokens
        told = notifications_of(app)
        await pilot.press("2", "0", "enter")
        await eventually(lambda: [(c["usd"], c["tokens"]) for c in _caps(app)] == [(20, 12000)], "a $20 cap")
        assert "Run cap now $20." in told
        await pilot.press("dollar_sign")
        await eventually(lambda: isinstance(app.screen, BudgetDialog), "the cap dialog again")
        await pilot.press("ctrl+r")  # remove the cap: the schedule it held resumes
        assert await ended(db) == "finished"
        await eventually(lambda: "HELD" not in run_bar(app), "the run bar to drop the hold")
    for row in killed:  # nothing overwritten; each killed place of m1 got a later, passed attempt
        assert rows(db, "id = ?", (row["id"],))[0]["status"] == "killed"
        later = rows(db, "task_id = ? and config_id = ? and trial_index = ? and id > ?",
                     (row["task_id"], row["config_id"], row["trial_index"], row["id"]))
        assert [r["status"] for r in later] == ["passed"]
    for row in rows(db, "status = 'killed' and model = 'm2'"):  # m2's cell was not asked for
        assert not rows(db, "task_id = ? and config_id = ? and trial_index = ? and id > ?",
                        (row["task_id"], row["config_id"], row["trial_index"], row["id"]))


def _caps(app: AgentMeterApp) -> list[dict]:
    return app.session.live.progress.get("caps") or []


async def _total_grew(db, total: int) -> bool:
    return (await status(db))["progress"]["total"] == total


async def test_M_pauses_one_model_while_the_other_runs_and_the_grid_says_so(tmp_path, db):
    suite = capped_suite(tmp_path, "", proxy=False, trials=3, concurrency=1)
    agentmeter("run", str(suite), "--detach", "--db", str(db), check=True)
    agentmeter("pause", "--db", str(db), check=True)  # the whole schedule, while the model is paused
    app = attached_app(db)
    async with app.run_test(size=SIZE) as pilot:
        await eventually(lambda: "paused_models" in app.session.live.progress, "the schedule to start")
        await pilot.pause()
        assert app.screen.query_one(GridTable).current_config == ("m1", "reference")
        await pilot.press("M")
        await eventually(lambda: _progress_has(db, "paused_models", ["m1"]), "the runner to pause m1")
        table = app.screen.query_one(GridTable)
        await eventually(lambda: table.get_cell("m1", "model").plain == "⏸ m1", "the grid to mark m1's row")
        await eventually(lambda: "m1 paused" in run_bar(app), "the run bar to say it")
        await eventually(lambda: _progress_has(db, "running", 0), "m1's running trial to end")
        started = len(rows(db, "model = 'm1'"))
        await asyncio.to_thread(agentmeter, "resume", "--db", str(db), check=True)
        await eventually(lambda: len(rows(db, "model = 'm2' and status = 'passed'")) == 3, "m2's trials to pass")
        progress = (await status(db))["progress"]
        assert progress["queued"] == 3 - started and len(rows(db, "model = 'm1'")) == started
        await pilot.press("M")  # resumed: m1's trials start
        assert await ended(db) == "finished"
        await eventually(lambda: table.get_cell("m1", "model").plain == "m1", "the mark to go")
    assert len(rows(db, "model = 'm1' and status = 'passed'")) == 3


async def _progress_has(db, key: str, value) -> bool:
    return (await status(db))["progress"].get(key) == value


async def test_R_on_a_finished_trial_of_a_finished_store_starts_a_runner_for_it(tmp_path, db):
    suite = capped_suite(tmp_path, RUN_CAP, proxy=True)
    agentmeter("run", str(suite), "--detach", "--db", str(db), check=True)
    held_on_cap(db)
    agentmeter("stop", "--db", str(db), check=True)
    await ended(db)
    toml = suite / "suite.toml"  # the operator raised the cap in the suite before rerunning
    toml.write_text(toml.read_text().replace("tokens = 12000", "tokens = 1000000"))
    target = rows(db, "status = 'killed' and model = 'm1'")[0]
    app = make_app(db)  # the store only: no runner
    told = notifications_of(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, CellScreen)
        table = app.screen.query_one(TrialTable)
        table.move_cursor(row=table.get_row_index(str(target["id"])))
        await pilot.press("R")
        dialog = await eventually(lambda: isinstance(app.screen, ConfirmDialog) and app.screen, "the question")
        assert "nothing is overwritten" in str(dialog.query_one(".dialog-detail").render())
        await pilot.press("y")
        await eventually(lambda: any("runner started for the rerun" in t for t in told), "the runner to start")
        assert app.session.live_mode  # the TUI follows the runner it started
        assert await ended(db) == "finished"
    assert rows(db, "id = ?", (target["id"],))[0]["status"] == "killed"
    later = rows(db, "task_id = ? and config_id = ? and trial_index = ? and id > ?",
                 (target["task_id"], target["config_id"], target["trial_index"], target["id"]))
    assert [r["status"] for r in later] == ["passed"]


async def test_money_keys_without_a_runner_say_so_and_send_nothing(sample_db, fake_runner):
    app = make_app(sample_db, runner=fake_runner)
    told = notifications_of(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for key in ("dollar_sign", "b", "M", "C"):
            await pilot.press(key)
            await settle(pilot)
            assert isinstance(app.screen, GridScreen), key
        assert fake_runner.requests == []
        assert len([t for t in told if t.startswith("No runner is attached")]) == 4
