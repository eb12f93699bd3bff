"""A trial's budget (:class:`Budget`): the limits that kill it with reason ``budget:<name>``.

Its own module, apart from the task folders it can be read from (``[budgets]`` of a task.toml,
``suite.toml``'s ``[budgets.*]``): the run engine checks, raises and shows it while a trial
runs, and the operator's raises arrive over the control socket.
"""

from __future__ import annotations

from pydantic import Field

from ..vocab import MAX_BUDGET_TOKENS, MAX_BUDGET_USD, MAX_BUDGET_WALL
from .strict import Strict


class Budget(Strict):
    """Per-trial limits; crossing one kills the trial with reason ``budget:<name>``."""

    wall_seconds: float | None = Field(None, gt=0, le=MAX_BUDGET_WALL, allow_inf_nan=False)
    tokens: int | None = Field(None, gt=0, le=MAX_BUDGET_TOKENS)
    usd: float | None = Field(None, gt=0, le=MAX_BUDGET_USD, allow_inf_nan=False)

    def merged(self, override: Budget | None) -> Budget:
        if override is None:
            return self
        return Budget(**{**self.model_dump(), **override.model_dump(exclude_none=True)})
