"""The commands that open the TUI: review over any store (imported trials too), attach, demo's suite."""

from __future__ import annotations

import tomllib

from agentmeter_tui.commands.ui import demo_clis, demo_suite
from agentmeter_tui.core.reporting.records import import_records, parse_record
from agentmeter_tui.core.store import Store
from agentmeter_tui.ui.screens.review import ReviewScreen
from agentmeter_tui.ui.widgets.transcript_view import TranscriptView

from ..conftest import agentmeter
from .conftest import SIZE, make_app, settle


def test_review_and_attach_say_what_is_missing(tmp_path):
    result = agentmeter("review", "--db", str(tmp_path / "none.db"))
    assert result.returncode == 2 and "no store at" in result.stderr
    Store(tmp_path / "empty.db").close()
    result = agentmeter("attach", "--db", str(tmp_path / "empty.db"))
    assert result.returncode == 1 and "no runner is running" in result.stderr and "agentmeter review" in result.stderr


def test_review_and_compare_without_a_terminal_end_with_one_line(tmp_path):
    """From cron or CI (output captured, no terminal) a screen would draw into the pipe and
    wait for keys forever: review and compare say so and end with code 2; a review plan,
    the part a script may ask for, is still set."""
    db = tmp_path / "store.db"
    store = Store(db)
    import_records(store, [parse_record({"suite": "s", "task": "t1", "tier": "easy", "model": "m", "cli": "c",
                                         "trial": n, "status": "failed", "passed": False, "quality": 0.0,
                                         "tokens": {"output": 10}, "turns": 1, "tool_calls": 0,
                                         "started_at": "2026-01-01T00:00:00+00:00",
                                         "finished_at": "2026-01-01T00:01:00+00:00"}) for n in (1, 2)])
    ids = [str(t["id"]) for t in store.trials("s")]
    store.close()
    for args in (["review"], ["compare", *ids]):
        result = agentmeter(*args, "--db", str(db))
        assert result.returncode == 2, result
        assert result.stderr.count("\n") == 1 and "needs a terminal" in result.stderr, result.stderr
        assert result.stdout == ""
    result = agentmeter("review", "--db", str(db), "--suite", "s", "--reviews", "2")
    assert result.returncode == 0, result.stderr
    store = Store(db, readonly=True)
    assert store.reviews.review_plan(store.suite_row("s")["id"])["reviews"] == 2
    store.close()


async def test_review_opens_imported_trials_without_a_runner(tmp_path):
    db = tmp_path / "imported.db"
    store = Store(db)
    records = [parse_record({"suite": "elsewhere", "task": "t1", "tier": "easy", "model": "m", "cli": "c",
                             "trial": n, "status": "passed" if n == 1 else "failed", "passed": n == 1,
                             "quality": 1.0 if n == 1 else 0.0,
                             "tokens": {"uncached_input": 100 * n, "output": 10}, "cost_usd": 0.01 * n,
                             "cost_source": "snapshot", "turns": 2, "tool_calls": 1,
                             "started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:01:00+00:00"})
               for n in (1, 2)]
    import_records(store, records)
    store.close()
    app = make_app(db, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ReviewScreen) and screen.trial_id == 1
        assert len(screen.query_one(TranscriptView).doc) == 0  # no transcript came with the records
        assert "imported" in str(screen.query_one("#usage-panel").render())
        await pilot.press("3")
        await settle(pilot)
    store = Store(db)
    assert store.reviews.score_history(1)[0].score == 3
    store.close()


def test_the_demo_suite_lists_reference_and_installed_clis(tmp_path):
    clis = demo_clis(tmp_path / "no-clis-here")
    assert clis == ["reference"]
    assert demo_suite(tmp_path, ["reference"]).name == "demo"  # unchanged: the suite in suites/demo
    copy = demo_suite(tmp_path, ["reference", "codex"])
    spec = tomllib.loads((copy / "suite.toml").read_text())
    assert [c["adapter"] for c in spec["clis"]] == ["reference", "codex"] and spec["suite"]["trials"] == 1
    assert (copy / "scenarios" / "runaway.toml").is_file()


def test_headless_lines_into_a_pipe_are_plain_and_whole(capsys):
    """Into a pipe or a file: one plain, unwrapped line per trial (a log keeps a trial a line),
    the agent's text in a reason inert."""
    from agentmeter_tui.commands.headless import Printer, trial_line

    printer = Printer()
    assert not printer.terminal  # pytest captures stdout
    reason = "killed: " + "x" * 150 + "\x1b]52;c;cHduZWQ=\x07"
    printer.line(trial_line({"id": 7, "task": "t", "model": "m", "cli": "c", "trial": 1, "status": "killed",
                             "tokens": {"input": 1200, "output": 34}, "cost_usd": 0.5, "reason": reason}))
    with printer.following(trial_line({"id": 8})):
        printer.update(trial_line({"id": 9}))  # a pipe gets no live summary
    out = capsys.readouterr().out
    [line] = out.splitlines()
    assert line.startswith("#7 t · m × c · t1  killed") and "1,234 tok" in line and "$0.5000" in line
    assert "x" * 150 in line and "\x1b" not in line and "\u241b]52" in line  # ␛, visible
