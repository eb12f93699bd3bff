"""Several reviewers in the TUI: blind review (a pilot of 20 trials by two reviewers, checked
against scikit-learn), unblinding recorded, adjudication, and the compare screen."""

from __future__ import annotations

import json
import random
import re
from contextlib import closing

from sklearn.metrics import cohen_kappa_score

from agentmeter_tui.cli import main
from agentmeter_tui.core.store import Store
from agentmeter_tui.ui.app import AgentMeterApp
from agentmeter_tui.ui.screens.compare import CompareScreen
from agentmeter_tui.ui.screens.dialogs import ConfirmDialog
from agentmeter_tui.ui.screens.review import ReviewScreen
from agentmeter_tui.ui.session import UiSession
from agentmeter_tui.ui.settings import UiSettings
from agentmeter_tui.ui.widgets.compare_view import CompareView
from agentmeter_tui.ui.widgets.transcript_view import TranscriptView
from tests.sample_data import CLIS, MODELS

from .conftest import SIZE, make_app, settle, text_of

PILOT_TRIALS = 20


def blind_app(db, reviewer: str, seed: int | None = None) -> AgentMeterApp:
    session = UiSession(db, reviewer=reviewer, live=False, blind=True, blind_seed=seed)
    return AgentMeterApp(session, screen="review", settings=UiSettings(theme="agentmeter-dark"), connect=False)


def planned_score(reviewer: str, trial_id: int) -> int:
    """What each pilot reviewer gives: bo mostly agrees with ana, off by one now and then."""
    base = random.Random(trial_id).randint(0, 3)
    if reviewer == "bo" and trial_id % 3 == 0:
        return max(0, min(3, base + (1 if base < 2 else -1)))
    return base


def screen_text(screen: ReviewScreen) -> str:
    parts = [str(screen.query_one("#review-title").render())]
    parts += [text_of(w) for w in screen.query(".panel") if w.display]
    parts.append(text_of(screen.query_one(TranscriptView)))
    return "\n".join(parts)


def _pilot_store(db) -> None:
    with closing(Store(db)) as store:
        # Twenty finished trials: the rest of the sample is set running, outside every queue.
        store.db.execute("update trials set status = 'running' where id > ?", [PILOT_TRIALS])
        store.db.conn.commit()
        store.reviews.set_review_plan("sample", 2, 2, "test")


async def test_pilot_two_blind_reviewers_score_twenty_trials(sample_db, capsys):
    _pilot_store(sample_db)
    with closing(Store(sample_db)) as store:
        store.db.execute("delete from scores")  # the sample's own scores are not the pilot's
        store.db.conn.commit()
    seen: dict[str, list[int]] = {}
    for reviewer in ("ana", "bo"):
        app = blind_app(sample_db, reviewer)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            screen = pilot.app.screen
            assert isinstance(screen, ReviewScreen)
            order = []
            for _ in range(PILOT_TRIALS):
                trial_id = screen.trial_id
                assert trial_id is not None and trial_id not in order
                order.append(trial_id)
                text = screen_text(screen)
                assert "Blind review" in text and f"#{trial_id}" not in text
                for name in (*MODELS, *CLIS):
                    assert not re.search(rf"(?<!\w){name}(?!\w)", text, re.IGNORECASE), (name, trial_id)
                await pilot.press(str(planned_score(reviewer, trial_id)))
                await settle(pilot)
                assert "saved" in str(screen.query_one("#score-panel").render())
                await pilot.press("right_square_bracket")
                await settle(pilot)
            seen[reviewer] = order
    assert sorted(seen["ana"]) == sorted(seen["bo"]) == list(range(1, PILOT_TRIALS + 1))
    assert seen["ana"] != seen["bo"]  # each reviewer's own shuffled order
    with closing(Store(sample_db)) as store:
        rows = store.reviews.score_rows("sample")
    assert len(rows) == 2 * PILOT_TRIALS and all(r.blind == 1 for r in rows)
    assert main(["report", "--db", str(sample_db), "--agreement", "--format", "json"]) == 0
    [pair] = json.loads(capsys.readouterr().out)["agreement"]["pairs"]
    trials = range(1, PILOT_TRIALS + 1)
    expected = cohen_kappa_score([planned_score("ana", t) for t in trials], [planned_score("bo", t) for t in trials],
                                 weights="quadratic", labels=[0, 1, 2, 3])
    assert (pair["a"], pair["b"], pair["n"]) == ("ana", "bo", PILOT_TRIALS)
    assert abs(pair["kappa_quadratic"] - expected) < 1e-12


async def test_blind_order_is_seeded_and_unblinding_is_recorded(sample_db):
    _pilot_store(sample_db)
    firsts = []
    for _ in range(2):
        async with blind_app(sample_db, "cy", seed=11).run_test(size=SIZE) as pilot:
            await settle(pilot)
            firsts.append(pilot.app.screen.trial_id)
    assert firsts[0] == firsts[1]
    async with blind_app(sample_db, "cy", seed=11).run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = pilot.app.screen
        await pilot.press("g")  # other screens would show models: refused while blind
        await settle(pilot)
        assert pilot.app.screen is screen
        await pilot.press("b")
        await settle(pilot)
        assert isinstance(pilot.app.screen, ConfirmDialog)
        await pilot.press("y")
        await settle(pilot)
        assert not pilot.app.session.blind
        title = str(screen.query_one("#review-title").render())
        assert screen.detail.row["model"] in title and screen.detail.row["cli"] in title
    with closing(Store(sample_db)) as store:
        [audit] = store.reviews.audit_rows("unblind")
    assert audit["actor"] == "cy" and audit["trial_id"] == firsts[0]


async def test_adjudication_sets_the_final_score(sample_db):
    with closing(Store(sample_db)) as store:
        store.reviews.add_score(5, 0, "ana", "refused to run the tests")
        store.reviews.add_score(5, 3, "bo", "clean")
        store.reviews.add_score(6, 2, "ana")
        store.reviews.add_score(6, 3, "bo")
    app = make_app(sample_db, screen="adjudicate")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = pilot.app.screen
        assert screen.adjudicating and screen.trial_id == 5 and [i for i, _ in screen.queue] == [5]
        panel = text_of(screen.query_one("#reviews-panel"))
        assert "ana" in panel and "bo" in panel and "refused to run the tests" in panel and "apart by 3" in panel
        await pilot.press("1")
        await settle(pilot)
        assert "saved" in str(screen.query_one("#score-panel").render())
    with closing(Store(sample_db)) as store:
        assert store.reviews.adjudications("sample")[5].score == 1 and store.reviews.adjudications("sample")[5].reviewer == "alice"
        from agentmeter_tui.core.reporting import report_from_store
        from agentmeter_tui.core.review.reviewing import agreed_scores

        assert agreed_scores(store, "sample")[5] == 1.0
        report = report_from_store(store, "sample", rubric=True)
        row = store.trial(5)
        config = (row["model"], row["cli"])
        # The cell holds trials 5 (adjudicated 1) and its second trial (unscored): median 1.
        assert report.rubric.medians[(config, row["task_id"])] == 1.0


async def test_compare_from_review(sample_db):
    app = make_app(sample_db, screen="review")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
        screen = pilot.app.screen
        assert isinstance(screen, CompareScreen)
        await settle(pilot, screen)
        comparison = screen.comparison
        assert comparison is not None and comparison.left.trial["id"] == 4
        right = comparison.right.trial
        assert right["task_id"] == comparison.left.trial["task_id"] and right["id"] != 4
        view = screen.query_one(CompareView)
        assert "step" in str(screen.query_one("#compare-title").render())
        assert text_of(view).strip()
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(pilot.app.screen, ReviewScreen)


async def test_report_screen_shows_agreement(sample_db):
    with closing(Store(sample_db)) as store:
        for trial in (1, 2, 3, 9, 10):
            store.reviews.add_score(trial, 3 if trial != 3 else 1, "bo")
    app = make_app(sample_db, screen="report")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await settle(pilot)
        text = str(pilot.app.screen.query_one("#agreement").render())
        assert "Agreement" in text and "bo × sample-reviewer" in text and "n 5" in text


async def test_blind_search_refuses_hidden_names(sample_db):
    async with blind_app(sample_db, "cy", seed=2).run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = pilot.app.screen
        view = screen.query_one(TranscriptView)
        await pilot.press("slash", *"claude", "enter")
        await settle(pilot)
        assert view.needle is None  # refused: a match would show where the CLI's name stands
        search = screen.query_one("#search")
        search.value = ""
        await pilot.press(*"median", "enter")
        await settle(pilot)
        assert view.needle == "median"
