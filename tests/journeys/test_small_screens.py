"""Issue 38's journeys in a real terminal (tmux), at 160 x 48 and at 80 x 24: the cap dialog
(`$`, type 20, Enter: a $20 cap; then remove it and the held run resumes and finishes, passing
through every screen on the way), and a second blind reviewer with one review per trial (the
screen says why the queue is empty and how to ask for a second review; asked, the queue fills)."""

from __future__ import annotations

import json
import shutil

import pytest

from agentmeter_tui.core.store import Store
from tests.core.caps_support import capped_suite, held_on_cap, stop_runners
from tests.core.runpaths_support import wait_run_ended
from tests.waiting import wait_for

from .support import SMOKE, TmuxSession, agentmeter, clean_env, command, typed

pytestmark = [pytest.mark.slow]
SIZES = [(160, 48), (80, 24)]


@pytest.fixture(autouse=True)
def _tmux() -> None:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (.ci/run installs it)")


def flat(session: TmuxSession) -> str:
    """The screen with its lines run together: a sentence wrapped at 80 columns reads whole."""
    return " ".join(session.screen().split())


def wait_flat(session: TmuxSession, text: str) -> str:
    def shown() -> str | None:
        screen = flat(session)
        return screen if text in screen else None

    try:
        return wait_for(shown, repr(text), interval=0.1)
    except AssertionError:
        raise AssertionError(f"{text!r} never showed; the screen was:\n{session.screen()}") from None


def caps(db) -> list[dict]:
    status = command("status", "--json", "--db", str(db))
    return json.loads(status.stdout).get("progress", {}).get("caps", []) if status.returncode == 0 else []


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_cap_dialog_sets_twenty_dollars_and_remove_resumes_the_run(tmp_path, size):
    db = tmp_path / "capped.db"
    suite = capped_suite(tmp_path, "\n[budgets.run]\ntokens = 12000\n", proxy=True)
    assert command("run", str(suite), "--detach", "--db", str(db)).returncode == 0
    tui = TmuxSession(agentmeter("attach", "--db", str(db)), clean_env(tmp_path), size=size)
    store = Store(db)
    try:
        held_on_cap(db)
        wait_flat(tui, "HELD")
        assert " tok · $" in tui.screen().splitlines()[0]  # the spend and cost stay on the run bar
        typed(tui, "$")
        wait_flat(tui, "Remove cap (ctrl+r)")
        typed(tui, "20")  # the focus is on USD: twenty dollars
        tui.wait_for("20")
        tui.keys("Enter")
        wait_flat(tui, "Run cap now $20.")
        wait_for(lambda: [(c["usd"], c["tokens"]) for c in caps(db)] == [(20, 12000)], "a $20 cap beside the tokens")
        assert "HELD" in flat(tui)  # the tokens cap still holds the run
        for key, seen in (("l", "HELD"), ("t", "Table 2"), ("r", "Review"), ("g", "HELD")):
            tui.keys(key)  # every screen at this size says what matters
            wait_flat(tui, seen)
        typed(tui, "?")
        wait_flat(tui, "Remap a key")
        tui.keys("Escape")  # (a key typed right after an escape reads as alt+key: wait for the close)
        wait_for(lambda: "Remap a key" not in flat(tui), "the help to close")
        typed(tui, "$")
        wait_flat(tui, "Remove cap (ctrl+r)")
        tui.keys("C-r")
        wait_flat(tui, "Run cap removed")
        assert wait_run_ended(store) == "finished"
        wait_flat(tui, "finished")
        tui.keys("q")
        wait_for(lambda: not tui.alive(), "the TUI to quit")
    finally:
        tui.close()
        store.close()
        stop_runners(db)
    statuses = [r["status"] for r in Store(db, readonly=True).trials("capped")]
    assert statuses and "queued" not in statuses


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_a_second_blind_reviewer_is_told_why_the_queue_is_empty(tmp_path, size):
    db = tmp_path / "reviewed.db"
    assert command("run", str(SMOKE), "--headless", "--db", str(db)).returncode == 0
    store = Store(db)
    try:
        reviewable = [t["id"] for t in store.trials() if t["status"] != "infra-invalid"]
    finally:
        store.close()
    for trial_id in reviewable:  # ana reviewed every trial (one review per trial: the default)
        done = command("score", str(trial_id), "2", "--by", "ana", "--db", str(db))
        assert done.returncode == 0, done.stderr
    bob = TmuxSession(agentmeter("review", "--db", str(db), "--blind"), clean_env(tmp_path, AGENTMETER_REVIEWER="bob"),
                      size=size)
    try:
        wait_flat(bob, "nothing left for bob to score: every trial has its one review")
        assert "set reviews per trial to 2 to ask a second reviewer" in flat(bob)
        bob.keys("a")  # adjudication: nothing to settle, and why
        wait_flat(bob, "Adjudication: nothing to settle: no trial has two reviews yet")
        bob.keys("q")
        wait_for(lambda: not bob.alive(), "the review to quit")
    finally:
        bob.close()
    # as the screen said: two reviews per trial (kept in the store), and bob's blind queue fills
    bob = TmuxSession(agentmeter("review", "--db", str(db), "--blind", "--reviews", "2"),
                      clean_env(tmp_path, AGENTMETER_REVIEWER="bob"), size=size)
    try:
        wait_flat(bob, "not scored")
        bob.keys("1")
        wait_flat(bob, "saved by bob")
        bob.keys("q")
    finally:
        bob.close()
    store = Store(db)
    try:
        assert [(s.reviewer, s.score, s.blind) for s in store.reviews.score_rows() if s.reviewer == "bob"] == [("bob", 1, 1)]
    finally:
        store.close()
