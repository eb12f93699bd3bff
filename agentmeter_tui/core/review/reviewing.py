"""The reviewer workflow over a store: agreed scores, agreement, the adjudication queue, how
many reviews a trial asks for, and blind review (a seeded order, masked identities).

Everything here reads through named store methods (``core/store/reviews.py``) and computes with
the pure functions of ``metrics/agreement.py``; the report, the CLI and the TUI share it.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..metrics.agreement import DEFAULT_DISAGREEMENT, Agreement, agreed_score, agreement, disagreements

MASK = "[hidden]"


@dataclass(frozen=True)
class ReviewPlan:
    reviews: int = 1  # independent reviews each trial asks for
    disagreement: int = DEFAULT_DISAGREEMENT  # spread (points) that sends a trial to adjudication
    source: str = "defaults"


def review_plan(store: Any, suite_id: str) -> ReviewPlan:
    """The store's plan (``agentmeter review --reviews N``) over the suite's ``[review]`` section."""
    from_toml: dict[str, Any] = {}
    row = store.suite_row(suite_id)
    folder = row.get("path") if row else None
    if folder and (Path(folder) / "suite.toml").is_file():
        from ..suites.suitefile import ReviewSection
        from ..tomlerrors import load_toml, validate

        path = Path(folder) / "suite.toml"
        data, text = load_toml(path)
        if "review" in data:
            from_toml = validate(ReviewSection, data["review"], path, text, prefix=("review",)).model_dump()
    stored = store.reviews.review_plan(suite_id) or {}
    chosen = {**{k: v for k, v in from_toml.items() if v is not None},
              **{k: v for k, v in stored.items() if v is not None}}
    source = "the store (agentmeter review --reviews)" if stored else "suite.toml [review]" if from_toml else "defaults"
    return ReviewPlan(int(chosen.get("reviews", 1)), int(chosen.get("disagreement", DEFAULT_DISAGREEMENT)), source)


def reviews_by_trial(store: Any, suite_id: str | None) -> dict[int, dict[str, int]]:
    return {t: {r: row.score for r, row in by.items()} for t, by in store.reviews.reviewer_scores(suite_id).items()}


def agreed_scores(store: Any, suite_id: str | None) -> dict[int, float]:
    """trial id -> its score: adjudicated, else the median of its reviewers' latest scores."""
    reviews = reviews_by_trial(store, suite_id)
    final = {t: row.score for t, row in store.reviews.adjudications(suite_id).items()}
    out = {}
    for trial in set(reviews) | set(final):
        value = agreed_score(reviews.get(trial, {}), final.get(trial))
        if value is not None:
            out[trial] = value
    return out


def agreement_from_store(store: Any, suite_id: str | None) -> Agreement:
    return agreement(reviews_by_trial(store, suite_id), store.reviews.trial_tasks(suite_id))


def adjudication_queue(store: Any, suite_id: str | None, threshold: int | None = None) -> list[int]:
    """Trials whose reviewers disagree by ``threshold`` or more (default: the plan's) and are not adjudicated."""
    if threshold is None:
        threshold = review_plan(store, suite_id).disagreement if suite_id else DEFAULT_DISAGREEMENT
    return disagreements(reviews_by_trial(store, suite_id), store.reviews.adjudications(suite_id), threshold)


# -- blind review -------------------------------------------------------------------------------


def blind_seed(suite_id: str | None, reviewer: str) -> int:
    """The default seed: stable per suite and reviewer, so a reviewer's order survives a restart."""
    return int.from_bytes(hashlib.sha256(f"{suite_id}\0{reviewer}".encode()).digest()[:8], "big")


def blind_order(trial_ids: Sequence[int], seed: int) -> list[int]:
    """``trial_ids`` shuffled by ``seed``: reproducible, and stable as the set shrinks (each trial's
    place is a keyed hash of seed and id, so a trial scored by someone else drops out without
    reshuffling the rest of this reviewer's queue)."""
    def place(trial_id: int) -> bytes:
        return hashlib.blake2b(f"{trial_id}".encode(), key=seed.to_bytes(16, "big", signed=True)[:16],
                               digest_size=8).digest()

    return sorted(set(trial_ids), key=place)


def blind_queue(store: Any, suite_id: str | None, reviewer: str, seed: int | None = None,
                reviews: int | None = None) -> list[int]:
    """Finished trials this reviewer has not scored that still want a review, in a seeded order."""
    if reviews is None:
        reviews = review_plan(store, suite_id).reviews if suite_id else 1
    by_trial = store.reviews.reviewer_scores(suite_id)
    final = store.reviews.adjudications(suite_id)
    wanted = [t for t in store.reviews.finished_trial_ids(suite_id)
              if t not in final and reviewer not in by_trial.get(t, {}) and len(by_trial.get(t, {})) < reviews]
    return blind_order(wanted, blind_seed(suite_id, reviewer) if seed is None else seed)


SECOND_REVIEWER = ("set reviews per trial to 2 to ask a second reviewer (`agentmeter review --reviews 2`, "
                   "or `[review] reviews = 2` in suite.toml)")


def empty_queue_reason(store: Any, suite_id: str | None, reviewer: str, adjudicating: bool = False) -> str:
    """Why this reviewer's blind queue (or the adjudication queue) is empty, in a sentence the
    screen shows: a second reviewer with one review per trial otherwise sees nothing and no why."""
    plan = review_plan(store, suite_id) if suite_id else ReviewPlan()
    by_trial = store.reviews.reviewer_scores(suite_id)
    reviewable = store.reviews.finished_trial_ids(suite_id)
    if adjudicating:
        several = [t for t in reviewable if len(by_trial.get(t, {})) >= 2]
        if not several:
            return (f"no trial has two reviews yet (reviews per trial: {plan.reviews})"
                    + (f"; {SECOND_REVIEWER}" if plan.reviews < 2 else ""))
        return (f"none of the {len(several)} trial(s) with two or more reviews has reviewers "
                f"{plan.disagreement} or more points apart")
    if not reviewable:
        return "no trial has finished with a result yet (infra-invalid ones are not reviewed)"
    mine = sum(reviewer in by_trial.get(t, {}) for t in reviewable)
    full = sum(reviewer not in by_trial.get(t, {}) and len(by_trial.get(t, {})) >= plan.reviews for t in reviewable)
    if full and plan.reviews == 1:
        return (f"every trial has its one review ({full} by other reviewers, {mine} by you); {SECOND_REVIEWER}")
    if full:
        return f"you scored {mine}; the other {full} have their {plan.reviews} reviews"
    return f"you scored all {mine} trial(s) that want a review"


class Masker:
    """Replaces the names a blind reviewer must not see (models, providers, CLIs and their
    spellings, CLI versions, version strings) with ``[hidden]`` in any text."""

    VERSION = r"v?\d+\.\d+\.\d+(?:[-+.][0-9A-Za-z.]+)?"

    def __init__(self, terms: Iterable[str]):
        variants: set[str] = set()
        for term in terms:
            term = term.strip()
            if len(term) < 2:
                continue
            variants.add(term)
            for part in {term, *re.split(r"[/:]", term)}:  # "anthropic/claude-x" -> "claude-x" too
                if len(part) >= 3:
                    variants.add(part)
                head = part.split("-", 1)[0]  # "claude-code" -> "claude" (its other spellings: below)
                if "-" in part and len(head) >= 4:
                    variants.add(head)
        # Inside identifiers, variable and file names too (``ZORBLAX_7_HOME``,
        # ``blinkyagent_session.jsonl``): a name ends at any character that is not a letter or
        # a digit, and its own separators may be written as any of ``-``, ``_``, ``.``, a space
        # or nothing ("zorblax-7" matches ZORBLAX_7, zorblax.7, zorblax7).
        pieces = {r"[-_. ]?".join(re.escape(p) for p in re.split(r"[-_. ]+", v) if p) for v in variants}
        names = "|".join(sorted((p for p in pieces if p), key=len, reverse=True))
        pattern = rf"(?<![A-Za-z0-9])(?:{names})(?![A-Za-z0-9])|{self.VERSION}" if names else self.VERSION
        self.pattern = re.compile(pattern, re.IGNORECASE)

    def __call__(self, text: str | None) -> str:
        return self.pattern.sub(MASK, text) if text else (text or "")


def masker_for(store: Any, suite_id: str) -> Masker:
    return Masker(store.reviews.identity_terms(suite_id))


def default_reviewer() -> str:
    """Who is scoring: ``$AGENTMETER_REVIEWER``, else the login name."""
    name = os.environ.get("AGENTMETER_REVIEWER", "").strip()
    if name:
        return name
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name in a bare container
        return "unknown"
