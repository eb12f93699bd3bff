"""The base of every table a suite or task file holds (:class:`Strict`), in a module of its own:
the task folders' models and the budget (``budget.py``, which they hold) both derive from it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    # A typo is an error; numbers are finite: an `inf` grace or budget would wait for ever, a
    # `nan` compares false.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
