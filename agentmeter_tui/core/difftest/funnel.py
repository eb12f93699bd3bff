"""The evaluation funnel of seed 001 (CLI-Tool-Bench, section 3.2), as pure functions.

Per case, with the oracle's run and the candidate's run of the same case:

- a case is **positive** when the oracle exits 0 and **negative** otherwise;
- **Exec** (positive cases): the candidate exits 0 too;
- **SideFx**: Exec holds and the side effects (hidden paths ignored) equal the oracle's; only
  such a case is valid for output comparison;
- **Exact**: valid, and both stdouts are equal once every whitespace character is removed;
- **Fuzzy**: valid, and Exact holds or the normalized Levenshtein similarity (rapidfuzz) of the
  whitespace-collapsed stdouts is at least the threshold (0.8);
- **Semantic**: valid, and the judge command says the outputs carry the same information
  (filled in by the evaluator; ``None`` when no judge is configured);
- **Reject** (negative cases, reported beside the funnel, never inside it): the candidate also
  exits non-zero and its side effects equal the oracle's.

Class pass rate = passing positive cases / positive cases of the class; a score is the macro
average over the classes that have positive cases; every score is 0 when Build failed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from rapidfuzz.distance import Levenshtein

from .executor import BuildResult, CaseRun

FUNNEL = ("exec", "side_effects", "exact", "fuzzy", "semantic")
METRIC_LABELS = {"build": "Build", "exec": "Exec", "side_effects": "SideFx", "exact": "Exact",
                 "fuzzy": "Fuzzy", "semantic": "Semantic", "reject": "Reject"}
STDOUT_KEEP = 8000  # characters of each stdout kept in the details for the review screen
STDERR_KEEP = 2000
_WHITESPACE = re.compile(r"\s+")


def exact_match(oracle: str, candidate: str) -> bool:
    return _WHITESPACE.sub("", oracle) == _WHITESPACE.sub("", candidate)


def similarity(oracle: str, candidate: str) -> float:
    """Normalized Levenshtein similarity in [0, 1] of the whitespace-collapsed outputs.

    Collapsing runs of whitespace first is what lets a re-aligned table count as a near match,
    which is the case seed 001 names for Fuzzy.
    """
    a = _WHITESPACE.sub(" ", oracle).strip()
    b = _WHITESPACE.sub(" ", candidate).strip()
    return float(Levenshtein.normalized_similarity(a, b))


@dataclass
class CaseVerdict:
    class_id: str
    case_id: str
    argv: list[str]
    stdin: str | None
    oracle: CaseRun
    candidate: CaseRun | None  # None: not run (the candidate did not build)
    positive: bool
    exec: bool = False
    side_effects: bool = False
    exact: bool = False
    fuzzy: bool = False
    similarity: float = 0.0
    semantic: bool | None = None
    judge_note: str = ""
    reject: bool | None = None  # negative cases only
    oracle_drift: bool = False  # the oracle did not do what the case file recorded

    @property
    def runtime_ratio(self) -> float | None:
        if self.candidate is None or self.candidate.timed_out or self.oracle.timed_out or self.oracle.duration <= 0:
            return None
        return self.candidate.duration / self.oracle.duration

    @property
    def valid(self) -> bool:
        return self.exec and self.side_effects

    def failed(self, metric: str) -> bool:
        if not self.positive:
            return self.reject is False
        value = getattr(self, metric)
        return value is False

    @property
    def clean(self) -> bool:
        """Passed every check it had: nothing for a reviewer to look at."""
        if not self.positive:
            return bool(self.reject)
        return all(getattr(self, name) is not False for name in FUNNEL)

    def as_dict(self, full: bool | None = None) -> dict[str, Any]:
        """JSON-able; a clean case keeps exit codes and times but not its outputs (``full`` forces them),
        which keeps a trial's record small: most cases of a good tool are clean."""
        checks: dict[str, Any]
        if self.positive:
            checks = {name: getattr(self, name) for name in FUNNEL}
        else:
            checks = {"reject": self.reject}
        full = not self.clean if full is None else full
        return {
            "class": self.class_id, "id": self.case_id, "argv": self.argv, "stdin": self.stdin,
            "kind": "positive" if self.positive else "negative", "checks": checks,
            "similarity": round(self.similarity, 4), "judge_note": self.judge_note,
            "oracle_drift": self.oracle_drift,
            "runtime_ratio": None if self.runtime_ratio is None else round(self.runtime_ratio, 4),
            "oracle": _run_dict(self.oracle, full),
            "candidate": None if self.candidate is None else _run_dict(self.candidate, full),
        }


def _run_dict(run: CaseRun, full: bool) -> dict[str, Any]:
    brief = {"exit_code": run.exit_code, "timed_out": run.timed_out, "duration": round(run.duration, 5)}
    if not full:
        return brief
    return {**brief, "stdout": run.stdout[:STDOUT_KEEP], "stdout_truncated": len(run.stdout) > STDOUT_KEEP,
            "stderr": run.stderr[:STDERR_KEEP], "side_effects": run.side_effects.as_dict()}


def judge_case(class_id: str, case_id: str, argv: list[str], stdin: str | None, oracle: CaseRun,
               candidate: CaseRun | None, fuzzy_threshold: float = 0.8,
               expected_exit: int | None = None) -> CaseVerdict:
    """Everything but Semantic, which needs the judge command."""
    positive = oracle.exit_code == 0
    verdict = CaseVerdict(class_id, case_id, list(argv), stdin, oracle, candidate, positive)
    if expected_exit is not None:
        verdict.oracle_drift = (expected_exit == 0) != positive
    if candidate is None:
        if not positive:
            verdict.reject = False
        return verdict
    same_effects = candidate.side_effects.as_dict() == oracle.side_effects.as_dict()
    if not positive:
        verdict.reject = candidate.exit_code not in (0, None) and same_effects
        return verdict
    verdict.exec = candidate.exit_code == 0
    verdict.side_effects = verdict.exec and same_effects
    if verdict.side_effects:
        verdict.exact = exact_match(oracle.stdout, candidate.stdout)
        verdict.similarity = 1.0 if verdict.exact else similarity(oracle.stdout, candidate.stdout)
        verdict.fuzzy = verdict.exact or verdict.similarity >= fuzzy_threshold
    return verdict


@dataclass
class ClassScore:
    class_id: str
    positives: int = 0
    negatives: int = 0
    passes: dict[str, int] = field(default_factory=lambda: {name: 0 for name in (*FUNNEL, "reject")})

    def rate(self, metric: str) -> float | None:
        total = self.negatives if metric == "reject" else self.positives
        return self.passes[metric] / total if total else None

    def as_dict(self, semantic_on: bool) -> dict[str, Any]:
        rates = {m: self.rate(m) for m in (*FUNNEL, "reject")}
        if not semantic_on:
            rates["semantic"] = None
        return {"class": self.class_id, "positives": self.positives, "negatives": self.negatives,
                "passes": dict(self.passes), "rates": rates}


def class_scores(verdicts: list[CaseVerdict], class_order: list[str]) -> list[ClassScore]:
    by_class = {cid: ClassScore(cid) for cid in class_order}
    for verdict in verdicts:
        score = by_class.setdefault(verdict.class_id, ClassScore(verdict.class_id))
        if verdict.positive:
            score.positives += 1
            for metric in FUNNEL:
                score.passes[metric] += bool(getattr(verdict, metric))
        else:
            score.negatives += 1
            score.passes["reject"] += bool(verdict.reject)
    return list(by_class.values())


def macro_scores(classes: list[ClassScore], built: bool, semantic_on: bool) -> dict[str, float | None]:
    """Seed 001 Eq. 4: the mean of the class pass rates, 0 for everything when Build failed."""
    scores: dict[str, float | None] = {"build": 1.0 if built else 0.0}
    for metric in (*FUNNEL, "reject"):
        rates = [r for c in classes if (r := c.rate(metric)) is not None]
        scores[metric] = (fmean(rates) if rates else None) if built else 0.0
    if not semantic_on:
        scores["semantic"] = None
    return scores


def runtime_summary(verdicts: list[CaseVerdict]) -> dict[str, float | None]:
    """Mean wall time per case on each side over the cases both finished, and their ratio (seed
    001 Table 4 reports the ratio of the means; the per-case ratios are in each case)."""
    pairs = [(v.oracle.duration, v.candidate.duration) for v in verdicts if v.runtime_ratio is not None
             and v.candidate is not None]
    if not pairs:
        return {"cases": 0, "oracle_ms": None, "candidate_ms": None, "ratio": None}
    oracle_ms = fmean(p[0] for p in pairs) * 1000
    candidate_ms = fmean(p[1] for p in pairs) * 1000
    return {"cases": len(pairs), "oracle_ms": round(oracle_ms, 3), "candidate_ms": round(candidate_ms, 3),
            "ratio": round(candidate_ms / oracle_ms, 4) if oracle_ms > 0 else None}


@dataclass
class FunnelReport:
    metric: str
    oracle_build: BuildResult
    candidate_build: BuildResult
    verdicts: list[CaseVerdict]
    classes: list[ClassScore]
    semantic_on: bool = False

    @property
    def built(self) -> bool:
        return self.candidate_build.ok

    @property
    def scores(self) -> dict[str, float | None]:
        return macro_scores(self.classes, self.built, self.semantic_on)

    @property
    def score(self) -> float:
        return self.scores.get(self.metric) or 0.0

    def as_dict(self, full: bool = False) -> dict[str, Any]:
        """The details a trial keeps; ``full`` also keeps the outputs of clean cases."""
        return {
            "kind": "differential", "metric": self.metric, "score": self.score, "scores": self.scores,
            "build": {"oracle": self.oracle_build.as_dict(), "candidate": self.candidate_build.as_dict()},
            "classes": [c.as_dict(self.semantic_on) for c in self.classes],
            "runtime": runtime_summary(self.verdicts),
            "oracle_drift": [v.case_id for v in self.verdicts if v.oracle_drift],
            "cases": [v.as_dict(True if full else None) for v in self.verdicts],
        }
