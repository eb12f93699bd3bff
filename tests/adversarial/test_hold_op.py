"""Attacks on the control socket's ``hold`` op (issue 24 item 6): a hold is at most 30 s, on a
running trial named by an integer id; anything else is refused with a message and holds nothing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agentmeter_tui.core.run.budget_hold import HOLD_MAX
from agentmeter_tui.core.run.requests import RequestError, parse_request
from agentmeter_tui.core.suites.budget import Budget
from tests.core.test_budget_hold import running_trial


@pytest.mark.parametrize("seconds", [31, -1, float("nan"), float("inf"), "10", True, None])
def test_the_socket_refuses_holds_that_are_not_0_to_30_seconds(seconds):
    with pytest.raises(RequestError, match="hold: seconds"):
        parse_request({"op": "hold", "trial": 21, "seconds": seconds})


def test_a_hold_request_without_seconds_holds_the_most():
    assert parse_request({"op": "hold", "trial": 21}).seconds == HOLD_MAX
    assert parse_request({"op": "hold", "trial": 21, "seconds": 0}).seconds == 0


async def test_the_runner_answers_hold_for_its_running_trial_only():
    from agentmeter_tui.core.run.runner import Runner

    trial = running_trial(Budget(tokens=1000))
    runner = Runner.__new__(Runner)  # only the socket's dispatch is under test
    runner.suite = runner.caps = None  # a hold names neither a cap nor a model
    runner.scheduler = SimpleNamespace(trial=lambda trial_id: trial if trial_id == 21 else None)
    reply = runner.handle("hold", {"op": "hold", "trial": 21, "seconds": 20})
    assert reply["ok"] and reply["trial"] == 21 and 0 < reply["held"] <= 20 and trial.hold.active
    assert runner.handle("hold", {"op": "hold", "trial": 21, "seconds": 0}) == {"ok": True, "trial": 21, "held": None}
    for bad in ({"trial": 22}, {"trial": "21"}, {"trial": 21, "seconds": 300}, {"trial": 21, "seconds": "x"}):
        reply = runner.handle("hold", {"op": "hold", **bad})
        assert not reply["ok"] and reply["error"], bad
    assert not trial.hold.active
