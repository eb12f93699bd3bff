"""Rank validation between two task sets (seed 000 section 5.4, Table 4).

The same configurations are scored on the full task set and on a subset (Core30 inside
Benchmark90, say); the subset is trustworthy when the two rankings agree: Spearman and
Kendall tau-b over the AMS values, their mean absolute difference, and whether the top
configuration and the top-three set survive.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from .attempts import Config


@dataclass(frozen=True)
class RankRow:
    config: Config
    subset_rank: int
    subset_ams: float
    full_rank: int
    full_ams: float

    @property
    def delta(self) -> float:
        """Full minus subset AMS (Table 4's Delta AMS)."""
        return self.full_ams - self.subset_ams


@dataclass(frozen=True)
class RankValidation:
    n: int
    spearman: float | None
    kendall: float | None
    mae: float | None
    top1_preserved: bool
    top3_preserved: bool
    rows: tuple[RankRow, ...]  # in full-set rank order


def ranking(values: Mapping[Config, float]) -> list[Config]:
    """Best first; equal AMS ordered by model and CLI so the ranking is deterministic."""
    return sorted(values, key=lambda c: (-values[c], c))


def _finite(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def rank_validation(full: Mapping[Config, float | None], subset: Mapping[Config, float | None]) -> RankValidation:
    """Compare over the configurations with an AMS in both sets."""
    from scipy.stats import kendalltau, spearmanr

    f = {c: float(v) for c, v in full.items() if v is not None and subset.get(c) is not None}
    s = {c: float(v) for c, v in subset.items() if v is not None and c in f}
    common = sorted(f)
    full_order, subset_order = ranking(f), ranking(s)
    full_rank = {c: i + 1 for i, c in enumerate(full_order)}
    subset_rank = {c: i + 1 for i, c in enumerate(subset_order)}
    rows = tuple(RankRow(c, subset_rank[c], s[c], full_rank[c], f[c]) for c in full_order)
    spearman = kendall = mae = None
    if len(common) >= 2:
        xs, ys = [f[c] for c in common], [s[c] for c in common]
        # Constant inputs make the correlations undefined (scipy warns and returns nan): report None.
        if len(set(xs)) > 1 and len(set(ys)) > 1:
            spearman = _finite(spearmanr(xs, ys).statistic)
            kendall = _finite(kendalltau(xs, ys, variant="b").statistic)
    if common:
        mae = sum(abs(f[c] - s[c]) for c in common) / len(common)
    return RankValidation(
        n=len(common), spearman=spearman, kendall=kendall, mae=mae,
        top1_preserved=bool(common) and full_order[0] == subset_order[0],
        top3_preserved=bool(common) and set(full_order[:3]) == set(subset_order[:3]),
        rows=rows,
    )
