"""A runner killed with SIGKILL does not make the bill forget what its running trials spent.

A trial's row gets its token counters and its cost when it ends; its usage rows reach the
store as its calls come. A runner killed in the middle of trials left rows at zero tokens and
no cost, so the trials it lost cost nothing in the reports, and a run cap (issue 25), which
counts what the suite spent in the store, let the next run spend their share again.

The attack: kill the runner while its trials are inside their calls, then run the suite again
under a run cap half a call below what was spent. The lost trials must carry their calls'
tokens and price, and the run must hold on the cap without starting a trial. Every expected
figure is the scenario's: each usage event in a transcript is one call of CALL tokens (900 in,
100 out) at the suite's $3/M in and $15/M out.
"""

from __future__ import annotations

import os
import signal

import pytest

from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TOKEN_CLASSES
from tests.core.caps_support import CALL, capped_suite, detached, status  # noqa: F401
from tests.core.runpaths_support import run_status
from tests.waiting import pid_running, wait_for

CALL_USD = ((CALL - 100) * 3 + 100 * 15) / 1e6
SLOW = "".join(f'[[turns]]\nshell = "echo step {i} >> steps.txt"\nusage = {{ uncached_input = {CALL - 100}, '
               f'output = 100 }}\ndelay_ms = 300\n' for i in range(8))


def calls(store: Store, trial_id: int, proxy: bool) -> int:
    """The trial's calls in its transcript: the proxy's usage events behind it, else the agent's."""
    stream = "proxy" if proxy else "stdout"
    return sum(1 for e in store.events(trial_id) if e[2] == "usage" and e[3] == stream)


@pytest.mark.parametrize("proxy", [True, False], ids=["proxy", "no-proxy"])
def test_a_runner_killed_mid_call_leaves_its_trials_spend_counted(tmp_path, db, detached, proxy):  # noqa: F811
    suite = capped_suite(tmp_path, "", proxy=proxy, trials=2, concurrency=4, scenarios={"m1": SLOW, "m2": SLOW})
    store = detached(suite)
    runner = next(store.db.query("select pid from runs"))["pid"]
    wait_for(lambda: [r for r in store.trials("capped", "status = 'running'")
                      if calls(store, r["id"], proxy) >= 1], "a running trial with a call metered")
    os.kill(runner, signal.SIGKILL)
    wait_for(lambda: not pid_running(runner), "the killed runner to be gone")
    spent = {r["id"]: calls(store, r["id"], proxy) for r in store.trials("capped")}
    lost = [r["id"] for r in store.trials("capped", "finished_at is null")]
    assert lost and any(spent[i] for i in lost)
    before = len(spent)

    cap = sum(spent.values()) * CALL_USD - CALL_USD / 2  # what was spent is past it
    (suite / "suite.toml").write_text((suite / "suite.toml").read_text() + f"[budgets.run]\nusd = {cap!r}\n")
    detached(suite)
    progress = wait_for(lambda: run_status(store) in ("finished", "stopped") and {"ended": True} or (
        (p := status(db).get("progress") or {}).get("running") == 0 and
        any("cap" in why for why in p.get("held", [])) and p), "the run held on its cap or ended")
    assert len(store.trials("capped")) == before, f"trials started past the cap ({progress})"
    assert any("cap" in why for why in progress.get("held", [])), progress
    for trial_id in lost:
        row = store.trial(trial_id)
        assert row["status"] == "infra-invalid" and "runner lost" in row["reason"]
        assert sum(int(row[c] or 0) for c in TOKEN_CLASSES) == spent[trial_id] * CALL, row
        assert (row["cost_usd"] or 0) == pytest.approx(spent[trial_id] * CALL_USD), row  # None: no call
        if spent[trial_id]:
            assert row["usage_source"] == ("proxy" if proxy else "stdout")
