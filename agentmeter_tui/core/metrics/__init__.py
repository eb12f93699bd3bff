"""AgentMeter metrics as pure functions over plain lists of attempts (no store, no I/O).

- :mod:`.attempts`: the :class:`Attempt` outcome and the trial-selection rules (latest, median);
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
from .attempts import SELECTIONS, Config, Attempt, group_cells, select_attempt, select_attempts

__all__ = [
    "DEFAULT_ALPHA", "SELECTIONS", "TABLE1", "TIERS", "Config", "ConfigScore", "Attempt", "TierBudget", "TierStats",
    "agentmeter_score", "cbq", "cost_aubqc", "delta_best", "efr", "group_cells", "per_pass", "score_configuration",
    "select_attempt", "select_attempts", "success_rate", "tier_score", "tier_stats",
]
