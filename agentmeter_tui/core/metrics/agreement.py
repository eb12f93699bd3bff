"""Agreement between reviewers on the 0-3 rubric, and how several reviews make one trial score.

The statistics come from maintained libraries, not hand code: Cohen's weighted kappa
(quadratic weights, the usual choice for an ordinal scale) from scikit-learn for each pair of
reviewers, Krippendorff's alpha (ordinal) from the ``krippendorff`` package across all
reviewers, plus the share of exact agreement. Every figure carries the number of trials
behind it. A figure the data cannot define (no shared trials, both reviewers constant) is
``None``, never a made-up number.

A trial's agreed score: the adjudicated score when there is one, else the median of its
reviewers' latest scores (a half point when two reviewers differ by one).
"""

from __future__ import annotations

import itertools
import math
import statistics
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SCALE = (0, 1, 2, 3)
DEFAULT_DISAGREEMENT = 2

Reviews = Mapping[int, Mapping[str, int]]  # trial id -> reviewer -> that reviewer's latest score


@dataclass(frozen=True)
class PairAgreement:
    a: str
    b: str
    n: int  # trials both scored
    kappa_quadratic: float | None
    exact: float | None  # share of those trials with equal scores

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "n": self.n, "kappa_quadratic": self.kappa_quadratic, "exact": self.exact}


@dataclass
class Agreement:
    pairs: list[PairAgreement]
    alpha_ordinal: float | None
    n_trials: int  # trials with two or more reviewers' scores
    reviewers: list[str] = field(default_factory=list)
    tasks: dict[str, Agreement] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pairs": [p.to_dict() for p in self.pairs], "alpha_ordinal": self.alpha_ordinal,
                               "n_trials": self.n_trials, "reviewers": list(self.reviewers)}
        if self.tasks:
            out["tasks"] = {task: {k: v for k, v in a.to_dict().items() if k != "reviewers"}
                            for task, a in self.tasks.items()}
        return out


def _defined(value: float) -> float | None:
    return None if math.isnan(value) else float(value)  # NaN: undefined


def pair_kappa(first: list[int], second: list[int]) -> float | None:
    """Quadratic-weighted Cohen's kappa of two aligned score lists (None when undefined)."""
    from sklearn.metrics import cohen_kappa_score

    if not first:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # undefined kappa: we report None instead of the warning
        return _defined(cohen_kappa_score(first, second, weights="quadratic", labels=list(SCALE)))


def ordinal_alpha(reviews: Reviews, reviewers: list[str]) -> float | None:
    """Krippendorff's alpha (ordinal) over the trials with two or more scores."""
    import krippendorff
    import numpy as np

    units = [t for t, by in reviews.items() if len(by) >= 2]
    if not units:
        return None
    data = np.full((len(reviewers), len(units)), np.nan)
    for column, trial in enumerate(units):
        for row, reviewer in enumerate(reviewers):
            if reviewer in reviews[trial]:
                data[row, column] = reviews[trial][reviewer]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # all values equal: alpha is 0/0, reported as None
        return _defined(krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal",
                                           value_domain=list(SCALE)))


def _agreement(reviews: Reviews) -> Agreement:
    reviewers = sorted({r for by in reviews.values() for r in by})
    pairs = []
    for a, b in itertools.combinations(reviewers, 2):
        shared = [t for t, by in reviews.items() if a in by and b in by]
        first = [reviews[t][a] for t in shared]
        second = [reviews[t][b] for t in shared]
        exact = sum(x == y for x, y in zip(first, second)) / len(shared) if shared else None
        pairs.append(PairAgreement(a, b, len(shared), pair_kappa(first, second), exact))
    n_trials = sum(1 for by in reviews.values() if len(by) >= 2)
    return Agreement(pairs, ordinal_alpha(reviews, reviewers), n_trials, reviewers)


def agreement(reviews: Reviews, tasks: Mapping[int, str] | None = None) -> Agreement:
    """Agreement over all trials of ``reviews`` and, given ``tasks`` (trial -> task), per task."""
    result = _agreement(reviews)
    if tasks:
        by_task: dict[str, dict[int, Mapping[str, int]]] = {}
        for trial, by in reviews.items():
            if trial in tasks:
                by_task.setdefault(tasks[trial], {})[trial] = by
        result.tasks = {task: _agreement(part) for task, part in sorted(by_task.items())}
    return result


def agreed_score(by_reviewer: Mapping[str, int], adjudicated: int | None = None) -> float | None:
    """A trial's score: the adjudicated one, else the median of its reviewers' latest scores."""
    if adjudicated is not None:
        return float(adjudicated)
    if not by_reviewer:
        return None
    return float(statistics.median(by_reviewer.values()))


def spread(by_reviewer: Mapping[str, int]) -> int:
    """How far a trial's reviewers are apart (highest minus lowest score)."""
    return max(by_reviewer.values()) - min(by_reviewer.values()) if len(by_reviewer) >= 2 else 0


def disagreements(reviews: Reviews, adjudicated: Mapping[int, Any], threshold: int = DEFAULT_DISAGREEMENT) -> list[int]:
    """Trials whose reviewers differ by ``threshold`` points or more and that have no adjudication yet."""
    return sorted(t for t, by in reviews.items() if spread(by) >= threshold and t not in adjudicated)
