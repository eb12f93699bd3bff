"""App-level wiring: screen keys, pause, help, themes, keymap, palette, quit, the feed client."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
from textual.widgets import DataTable

from agentmeter_tui.core.paths import socket_path
from agentmeter_tui.ui.app import AgentMeterApp
from agentmeter_tui.ui.screens.grid import GridScreen
from agentmeter_tui.ui.screens.help import HelpScreen
from agentmeter_tui.ui.screens.live import LiveScreen
from agentmeter_tui.ui.screens.report import ReportScreen
from agentmeter_tui.ui.screens.review import ReviewScreen
from agentmeter_tui.ui.session import FeedClient, UiSession
from agentmeter_tui.ui.settings import UiSettings
from tests.sample_data import sample_feed

from .conftest import SIZE, make_app, notifications_of, settle


async def test_screen_keys_switch_screens(sample_db):
    app = make_app(sample_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for key, screen in (("l", LiveScreen), ("r", ReviewScreen), ("t", ReportScreen), ("g", GridScreen)):
            await pilot.press(key)
            await settle(pilot)
            assert isinstance(app.screen, screen), key


async def test_p_pauses_and_resumes_the_schedule(sample_db, fake_runner):
    app = make_app(sample_db, live=True, runner=fake_runner)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for message in sample_feed(count=1):
            app._feed_message(message)
        await pilot.press("p")
        await settle(pilot)
        assert app.session.live.progress["paused"] is True
        assert "PAUSED" in str(app.screen.query_one("#run-bar").render())
        await pilot.press("p")
        await settle(pilot)
        assert [op for op, _ in fake_runner.requests] == ["pause", "resume"]
        assert app.session.live.progress["paused"] is False


async def test_a_held_schedule_says_why_in_the_run_bar(sample_db, fake_runner):
    app = make_app(sample_db, live=True, runner=fake_runner)
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(pilot)
        snapshot, first, _ = sample_feed(count=1)
        why = "the store's disk is full (/data/agentmeter.db: database or disk is full)"
        for message in (snapshot, {**first, "progress": {**first["progress"], "held": [why]}}):
            app._feed_message(message)
        await settle(pilot)
        bar = str(app.screen.query_one("#run-bar").render())
        assert "HELD" in bar and "disk is full" in bar


async def test_p_without_a_runner_says_so(sample_db, fake_runner):
    app = make_app(sample_db, live=False, runner=fake_runner)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("p")
        assert fake_runner.requests == []


async def test_help_lists_every_binding_with_its_id(sample_db):
    app = make_app(sample_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        table = app.screen.query_one(DataTable)
        ids = {str(table.get_row_at(i)[3]) for i in range(table.row_count)}
        assert {"kill", "budget", "maximize", "score-2", "note", "next-unscored", "previous", "search",
                "next-failure", "fold", "fold-all", "selection", "pause", "grid", "live", "review", "report",
                "open-cell"} <= ids
        await pilot.press("escape")
        assert isinstance(app.screen, GridScreen)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("q")  # closes the help, does not quit
        assert isinstance(app.screen, GridScreen) and app.is_running


async def test_keymap_remaps_a_binding_by_id(sample_db):
    session = UiSession(sample_db, reviewer="alice", live=False)
    app = AgentMeterApp(session, settings=UiSettings(keymap={"review": "v"}), connect=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("v")
        await settle(pilot)
        assert isinstance(app.screen, ReviewScreen)


async def test_themes_load_from_files_and_ctrl_t_toggles(sample_db):
    app = make_app(sample_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.theme == "agentmeter-dark"
        assert app.theme_variables["status-killed"] == "#b88cf0"  # from themes/agentmeter-dark.toml
        await pilot.press("ctrl+t")
        assert app.theme == "agentmeter-light"
        assert app.theme_variables["status-killed"] == "#7a3fc0"
        await pilot.press("ctrl+t")
        assert app.theme == "agentmeter-dark"


async def test_an_unknown_theme_falls_back_and_says_so(sample_db):
    app = make_app(sample_db, theme="no-such-theme")
    told = notifications_of(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.theme == "agentmeter-dark"
        assert any("no-such-theme" in message for message in told)


async def test_the_palette_offers_the_screens_actions(sample_db):
    app = make_app(sample_db, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Grid", "Live panes", "Review", "Report", "Score 2", "Add a note", "Next unscored trial",
                      "Search the transcript", "Help: all keys", "Toggle light / dark theme"):
            assert title in titles
        await pilot.press("t")
        await settle(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Switch latest / median selection" in titles and "Score 2" not in titles


async def test_q_quits(sample_db):
    app = make_app(sample_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


# -- the feed client against a fake runner socket -------------------------------------------------


async def fake_runner_socket(db: Path, messages: list[dict], *, hold: asyncio.Event | None = None):
    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = orjson.loads(await reader.readline())
        assert request == {"op": "subscribe"}
        for message in messages:
            writer.write(orjson.dumps(message, option=orjson.OPT_NON_STR_KEYS) + b"\n")
        await writer.drain()
        if hold is not None:
            await hold.wait()
        writer.close()

    return await asyncio.start_unix_server(client, str(socket_path(db)))


async def test_feed_client_forwards_messages_until_finished(tmp_path):
    db = tmp_path / "x.db"
    messages = [*sample_feed(count=2), {"type": "finished", "status": "finished", "progress": {}}]
    server = await fake_runner_socket(db, messages)
    seen, ended = [], []
    async with server:
        await FeedClient(db, seen.append, lambda status, error: ended.append(status)).run()
    assert [m["type"] for m in seen] == ["snapshot", "tick", "tick", "finished"]
    assert ended == ["finished"]


async def test_feed_client_reports_a_missing_runner(tmp_path, monkeypatch):
    monkeypatch.setattr(asyncio, "sleep", _no_sleep)
    ended = []
    await FeedClient(tmp_path / "none.db", lambda m: None, lambda status, error: ended.append((status, error))).run()
    assert ended and ended[0][0] == "lost" and "no runner" in ended[0][1]


_real_sleep = asyncio.sleep


async def _no_sleep(delay: float, result=None):
    await _real_sleep(0)
    return result


@pytest.mark.parametrize("status", ["finished", "lost"])
async def test_the_app_shows_the_end_of_the_feed(sample_db, status):
    app = make_app(sample_db, screen="live", live=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for message in sample_feed(count=1):
            app._feed_message(message)
        app._feed_ended(status, "gone" if status == "lost" else None)
        await settle(pilot)
        bar = str(app.screen.query_one("#run-bar").render())
        assert ("runner lost" if status == "lost" else "finished") in bar


async def test_a_broken_theme_file_is_reported_and_the_app_falls_back(sample_db, tmp_path):
    folder = tmp_path / "config" / "agentmeter" / "themes"  # the user's theme folder (XDG_CONFIG_HOME)
    folder.mkdir(parents=True)
    (folder / "mine.toml").write_text('name = "mine"\nprimary = "bogus"\n')
    app = make_app(sample_db, theme="mine")
    messages = notifications_of(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.theme == "agentmeter-dark"
        assert any("mine.toml:2" in m and "primary" in m for m in messages)
