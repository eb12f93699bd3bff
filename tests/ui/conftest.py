"""Fixtures for the TUI tests: a fixed sample store, an app factory, a fake runner.

Screens are driven from fixed store data (``tests.sample_data``) and fake feed messages, never from
a live runner or the clock, so pilot and snapshot tests are the same on every run. Control
requests (kill, pause, budget) go to :class:`FakeRunner`, which records them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentmeter_tui.ui.app import AgentMeterApp
from agentmeter_tui.ui.session import UiSession
from agentmeter_tui.ui.settings import UiSettings
from tests.sample_data import T0, build_sample_store, sample_feed

SIZE = (160, 48)


class FakeRunner:
    """Stands in for the runner's control socket: records requests, answers like the runner."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, op: str, **fields: Any) -> dict[str, Any]:
        self.requests.append((op, fields))
        if op in ("pause", "resume"):
            return {"ok": True, "paused": op == "pause"}
        if op == "budget":
            budget = {"wall_seconds": 600.0, "tokens": 200_000, "usd": 2.0}
            budget.update({k: v for k, v in fields.items() if k in budget})
            return {"ok": True, "trial": fields.get("trial"), "budget": budget}
        return {"ok": True, "trial": fields.get("trial")}


@pytest.fixture(scope="session")
def sample_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sample") / "sample.db"
    build_sample_store(path).close()
    return path


@pytest.fixture
def sample_db(sample_template: Path, tmp_path: Path) -> Path:
    """A private copy of the sample store (tests write scores into it)."""
    import sqlite3

    target = tmp_path / "sample.db"
    source = sqlite3.connect(sample_template)
    with sqlite3.connect(target) as copy:
        source.backup(copy)
    source.close()
    return target


@pytest.fixture
def fake_runner() -> FakeRunner:
    return FakeRunner()


@pytest.fixture(autouse=True)
def _quiet_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Tests never read the user's ui.toml or theme folder.
    monkeypatch.setenv("AGENTMETER_UI_CONFIG", str(tmp_path / "no-ui.toml"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("AGENTMETER_REVIEWER", raising=False)


def make_app(db: Path, *, screen: str = "grid", live: bool = False, runner: FakeRunner | None = None,
             trial: int | None = None, theme: str = "agentmeter-dark") -> AgentMeterApp:
    """An app over ``db`` that never connects anywhere; ``live`` makes it act attached."""
    session = UiSession(db, reviewer="alice", live=live)
    session.live.clock = lambda: T0 + 32  # elapsed times and burn rates do not follow the wall clock
    if runner is not None:
        session.request = runner  # type: ignore[method-assign]
    return AgentMeterApp(session, screen=screen, trial=trial, settings=UiSettings(theme=theme), connect=False)


async def feed(app: AgentMeterApp, messages: list[dict] | None = None, **kwargs: Any) -> None:
    """Apply fake feed messages (default: ``sample_feed``) as the feed client would."""
    for message in messages if messages is not None else sample_feed(**kwargs):
        app._feed_message(message)


async def settle(pilot, screen=None) -> None:
    """Wait for workers and let the current screen draw now instead of on its timer."""
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    target = screen or pilot.app.screen
    if hasattr(target, "flush"):
        target.flush()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def notifications_of(app) -> list[str]:
    """Every message ``app`` notifies from now on. Read this rather than the app's list of
    notifications: a notification leaves that list when its timeout runs out, however slowly
    a loaded machine got to the assertion."""
    told: list[str] = []
    notify = app.notify

    def recording(message, *args, **kwargs):
        told.append(str(message))
        return notify(message, *args, **kwargs)

    app.notify = recording
    return told


def text_of(widget) -> str:
    """What a widget shows, as plain text (for renderables that are not markup)."""
    return "\n".join(strip.text for strip in widget.render_lines(widget.region.reset_offset))


def screen_text(app) -> str:
    """What the terminal shows now, as plain text, a line per row (modal screens over their
    background included): read it to assert what an operator sees at a given size."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(segment.text for segment in strip) for strip in strips)
