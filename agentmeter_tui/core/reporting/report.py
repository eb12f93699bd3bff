"""The report object: everything a published table says, and its fixed JSON form.

The JSON keys are a contract (issue 4): top level ``suite``, ``seed_prompt_hash``,
``selection``, ``alpha``, ``budgets`` and ``configurations``; each configuration has
``model``, ``cli``, ``passes``, ``n_tasks``, ``passes_by_tier``, ``tokens_per_pass``,
``usd_per_pass``, ``tier_scores``, ``ams``, ``delta_best`` and, where scored,
``rubric_winrate``; ``trials`` holds the every-trial tables (pass@k, pass^k, SE, per-trial cost
and tokens, per configuration and per cell). Optional sections appear only when asked for or needed: ``rubric``
(--rubric), ``agreement`` (--agreement: ``pairs`` of reviewers with ``a``, ``b``, ``n``,
``kappa_quadratic``, ``exact``; ``alpha_ordinal``; ``n_trials``; per task under ``tasks``), ``validation`` (--validate), ``notes`` (caveats such as unpriced runs) and,
per configuration, ``detail`` (--detail: the terms of Eq. 7 per tier).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ... import __version__
from ..metrics.agreement import Agreement
from ..metrics.ams import ConfigScore, TierBudget
from ..metrics.intervals import Intervals
from ..metrics.rubric import GateResult, Standing
from ..metrics.attempts import SELECTIONS, Config
from ..metrics.validation import RankValidation
from ..vocab import TIERS
from .every_trial import TrialTable


def config_name(config: Config) -> str:
    return f"{config[0]}/{config[1]}"


@dataclass
class RubricTable:
    """Cell medians per (configuration, task), winners per task, standings, the gate."""

    tasks: list[str]
    configs: list[Config]
    medians: dict[tuple[Config, str], float]
    winners: dict[str, list[Config]]
    standings: dict[Config, Standing]
    trials_scored: int
    gate: GateResult | None = None
    ignored_scores: int = 0  # scores on infra-invalid trials: not attributable, left out

    def to_dict(self) -> dict[str, Any]:
        return {
            "trials_scored": self.trials_scored,
            "tasks": [
                {"task": task,
                 "medians": {config_name(c): self.medians[(c, task)] for c in self.configs if (c, task) in self.medians},
                 "winners": [config_name(c) for c in self.winners.get(task, [])]}
                for task in self.tasks if task in self.winners
            ],
            "standings": [
                {"model": c[0], "cli": c[1], "wins": s.wins, "losses": s.losses, "unscored": s.unscored,
                 "tasks": s.tasks, "winrate": s.winrate}
                for c in self.configs if (s := self.standings.get(c)) is not None
            ],
            "honesty_gate": None if self.gate is None else {"passed": self.gate.passed, "message": self.gate.message},
        }


@dataclass
class Report:
    suite: str
    seed_prompt_hash: str | None
    selection: str
    alpha: float
    budgets: dict[str, TierBudget]
    budgets_source: str
    tier_sizes: dict[str, int]  # tier -> task count; key "none" for uncalibrated tasks
    configurations: list[ConfigScore]
    own: str | None = None
    rubric: RubricTable | None = None
    agreement: Agreement | None = None
    validation: RankValidation | None = None
    validation_source: str | None = None
    notes: list[str] = field(default_factory=list)
    funnel: list[dict[str, Any]] | None = None  # the differential funnel per configuration, where tasks have one
    intervals: Intervals | None = None  # bootstrap intervals over tasks, when asked for
    trials: TrialTable | None = None  # every trial counted: pass@k, pass^k, SE, per-trial spreads
    tool_version: str = __version__  # which agentmeter-tui computed it: part of the methodology
    # The bootstrap, when its computation was deferred (see :meth:`settle`).
    pending: Callable[[], Intervals] | None = field(default=None, repr=False, compare=False)

    def settle(self) -> Report:
        """Compute the intervals if they were deferred: a site's parent does it (scipy's import is
        most of a second) while its workers already write the trial pages, which show none."""
        if self.pending is not None:
            self.intervals, self.pending = self.pending(), None
        return self

    @property
    def n_tasks(self) -> int:
        return sum(self.tier_sizes.values())

    @property
    def selection_text(self) -> str:
        return SELECTIONS[self.selection]

    def configuration(self, model: str, cli: str) -> ConfigScore:
        for row in self.configurations:
            if row.config == (model, cli):
                return row
        raise KeyError(f"{model}/{cli}")

    def to_dict(self, detail: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "suite": self.suite,
            "tool_version": self.tool_version,
            "seed_prompt_hash": self.seed_prompt_hash,
            "selection": self.selection,
            "alpha": self.alpha,
            "budgets": {t: {"grid": list(b.grid), "tau": b.tau} for t, b in self.budgets.items()},
            "configurations": [_config_dict(row, detail) for row in self.configurations],
        }
        if self.rubric is not None:
            out["rubric"] = self.rubric.to_dict()
        if self.agreement is not None:
            out["agreement"] = self.agreement.to_dict()
        if self.validation is not None:
            out["validation"] = _validation_dict(self.validation, self.validation_source)
        if self.funnel:
            out["differential_funnel"] = self.funnel
        if self.intervals is not None:
            out["intervals"] = self.intervals.to_dict()
        if self.trials is not None:
            out["trials"] = self.trials.to_dict()
        if self.notes:
            out["notes"] = list(self.notes)
        return out


def _config_dict(row: ConfigScore, detail: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "model": row.model, "cli": row.cli, "passes": row.passes, "n_tasks": row.n_tasks,
        "passes_by_tier": {t: row.passes_by_tier[t] for t in TIERS},
        "tokens_per_pass": row.tokens_per_pass, "usd_per_pass": row.usd_per_pass,
        "tier_scores": row.tier_scores, "ams": row.ams, "delta_best": row.delta_best,
    }
    if row.rubric_winrate is not None:
        out["rubric_winrate"] = row.rubric_winrate
    if detail:
        out["detail"] = {
            "attempts": row.attempts, "invalid_attempts": row.invalid_attempts,
            "unpriced_attempts": row.unpriced_attempts, "missing_tasks": row.missing_tasks,
            "tiers": {t: (None if s is None else {"n_tasks": s.n_tasks, "passes": s.passes, "sr": s.sr,
                                                  "cbq": list(s.cbq), "cost_aubqc": s.aubqc, "efr": s.efr,
                                                  "score": s.score})
                      for t, s in row.tiers.items()},
        }
    return out


def _validation_dict(v: RankValidation, source: str | None) -> dict[str, Any]:
    return {
        "subset": source, "configurations": v.n, "spearman": v.spearman, "kendall_tau_b": v.kendall,
        "ams_mae": v.mae, "top1_preserved": v.top1_preserved, "top3_preserved": v.top3_preserved,
        "rows": [{"model": r.config[0], "cli": r.config[1], "subset_rank": r.subset_rank,
                  "subset_ams": r.subset_ams, "full_rank": r.full_rank, "full_ams": r.full_ams,
                  "delta_ams": r.delta} for r in v.rows],
    }
