"""AgentMeter metrics as pure functions over plain lists of runs (no store, no I/O).

- :mod:`.runs`: the :class:`Run` outcome and the trial-selection rules (latest, median);
- :mod:`.ams`: Pass, Tok/Pass, USD/Pass, SR, CBQ, CostAUBQC, EFR, TierScore, AMS, delta-best;
- :mod:`.rubric`: 0-3 rubric cell medians, winrates with ties, the honesty gate;
- :mod:`.calibration`: task-effort tiers (Eq. 1), budget grids and tau from a pool of trials;
- :mod:`.validation`: rank agreement between a full task set and a subset.

Definitions and the choices where the seeds are silent: ``docs/metrics.md``.
"""

from ..vocab import TIERS
from .ams import (
                  DEFAULT_ALPHA,
                  TABLE1,
                  ConfigScore,
                  TierBudget,
                  TierStats,
                  agentmeter_score,
                  cbq,
                  cost_aubqc,
                  delta_best,
                  efr,
                  per_pass,
                  score_configuration,
                  success_rate,
                  tier_score,
                  tier_stats,
)
from .runs import SELECTIONS, Config, Run, group_cells, select_run, select_runs

__all__ = [
    "DEFAULT_ALPHA", "SELECTIONS", "TABLE1", "TIERS", "Config", "ConfigScore", "Run", "TierBudget", "TierStats",
    "agentmeter_score", "cbq", "cost_aubqc", "delta_best", "efr", "group_cells", "per_pass", "score_configuration",
    "select_run", "select_runs", "success_rate", "tier_score", "tier_stats",
]
