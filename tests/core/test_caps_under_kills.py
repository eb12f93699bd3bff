"""Issue 25's caps under the fault matrix's kills, at concurrency 32, on the real runner with
the scripted model server: a run cap and a provider cap, behind the metering proxy and
without it, while trials are killed by the operator (op kill), by their own token budget,
by SIGTERM to the agent inside a model call and by SIGKILL to the agent's process group inside
a call, and while the provider resets a stream mid-answer (a third model's second call).

Every figure asserted is what the scripted server served (its record of each call, with
whether it finished sending it), never our meter's:

- with the proxy, the capped scope's served spend is at the cap or over it by one call at most;
- without it, nothing stops a trial between two of its agent's turns, so the guarantee is the
  scheduler's: it starts no trial whose committed spend (spent, plus what the running trials
  may still spend under their budgets, plus its own budget) would pass the cap. What the
  scope is served can then pass the cap only by what the trials spent past their own budgets
  (the call that crossed one) and by calls an agent killed inside never reported: the bound
  asserted, exactly. When the meter's spend reached the cap, the served spend is also within
  the cap plus the budgets of the trials running at that moment. Whether it reaches the cap
  at all depends on those crossings, so the run must end held on the cap, either way;
- every trial ends exactly once, a trial killed by the cap says ``budget:run`` or
  ``budget:provider`` (behind the proxy the cap is always reached), the trials' own budgets
  kill some, and no trial's usage is lost: behind the proxy a trial keeps
  exactly the calls the server finished (the proxy reads an answer to its end after the agent
  is gone; a stream the provider cut is not finished, not billed, not counted); without it,
  exactly the calls its agent reported, which are the first ones the server finished, with at
  most one finished call unreported (the agent died before printing it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmeter_tui.core.run.control import ControlClient, ControlError
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TOKEN_CLASSES
from benchmarks.faults.common import events_intact, served_completed, signal_agent, usage_events
from tests.core.caps_support import CALL, capped_suite, detached  # noqa: F401
from tests.core.runpaths_support import run_status
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

BUDGET = 2_500  # each trial's token budget: its third call of CALL crosses it (3,000), a budget kill
LOOP = f"""[[turns]]
loop = true
shell = "echo again >> steps.txt"
usage = {{ uncached_input = {CALL - 100}, output = 100 }}
delay_ms = 20
stall_ms = 400
"""
# The provider resets the second call's stream after its first chunk (the fault matrix's proxy:upstream-reset).
RESET = f"""[[turns]]
shell = "echo hi > out.txt"
usage = {{ uncached_input = {CALL - 100}, output = 100 }}
[[turns]]
text = "This answer is cut by a reset of the connection."
reset = true
usage = {{ uncached_input = {CALL - 100}, output = 100 }}
"""
MODELS = {"m1": "p1", "m2": "p2", "m3": "p2"}  # m1 alone under the provider cap; m3 meets the reset
FAULTS = ("operator", "SIGTERM", "SIGKILL")  # each landed on two of m1's trials
TRIALS = 24  # per model: 72 trials, 32 at a time
CAPS = {  # (scope, proxy) -> the cap in tokens; without the proxy a cap is counted in budgets
    # Behind the proxy a cap must be reached, so the run asks for far more than it: about 160,000
    # tokens (m1's 66,000 with its faults). With 16 trials a model it asked for ~90,000 and CI once
    # ended every trial at 78,000 of an 80,000 cap. The caps still leave the faults time to land
    # on m1's first trials before they are reached.
    ("run", True): 80_000, ("provider", True): 24_000,
    ("run", False): 20 * BUDGET, ("provider", False): 8 * BUDGET,  # 20 (8) running trials' budgets
}


def inject_faults(db: Path, store: Store, model: str, per: int = 2) -> dict[int, str]:
    """Each fault on ``per`` running trials of ``model``, once a trial has reported its first
    call: the operator's kill then, the signals once its agent is inside its next call. A trial
    that ends first (its budget, the cap) passes its fault on to another. Returns {trial id:
    fault} of those that landed, once every fault has, or once nothing of the run can run."""
    todo = [fault for fault in FAULTS for _ in range(per)]
    aimed: dict[int, str] = {}
    landed: dict[int, str] = {}

    def step() -> bool:
        for row in store.trials("capped", "model = ? and status = 'running'", [model]):
            if todo and row["id"] not in aimed and row["id"] not in landed:
                aimed[row["id"]] = todo.pop(0)
        for trial_id, fault in list(aimed.items()):
            row = store.trial(trial_id)
            if row["finished_at"]:
                todo.append(aimed.pop(trial_id))
            elif usage_events(store, trial_id) >= 1 and _land(db, row, fault):
                landed[trial_id] = aimed.pop(trial_id)
        return not (todo or aimed) or bool(settled(db, store))

    wait_for(step, "the faults to land")
    return landed


def _land(db: Path, row: dict, fault: str) -> bool:
    if fault != "operator":
        return signal_agent(row["pid"], fault)
    try:
        with ControlClient(db) as client:
            client.request("kill", trial=row["id"])
        return True
    except (ControlError, OSError):  # it ended meanwhile
        return False


def settled(db: Path, store: Store) -> dict | bool:
    """Nothing of the run runs or will: every trial final, and the run ended or held on a cap."""
    if store.trials("capped", "finished_at is null"):
        return False
    if run_status(store) in ("finished", "stopped"):
        return True
    try:
        with ControlClient(db) as client:
            progress = client.request("status")["progress"]
    except (ControlError, OSError):  # the runner is between two answers or ending
        return False
    return progress.get("running") == 0 and any("cap" in why for why in progress.get("held", [])) and progress


def stored(row: dict) -> int:
    return sum(int(row[c] or 0) for c in TOKEN_CLASSES)


def finished(row: dict) -> int:
    """Tokens of the calls the server finished serving the trial."""
    return sum(u.raw for u in served_completed(row))


def trial_problems(store: Store, row: dict, proxy: bool) -> list[str]:
    """What is wrong with one trial: not final once, its events broken, its usage lost."""
    problems = [] if row["finished_at"] and row["status"] not in ("queued", "starting", "running") else ["not final"]
    notes = [e[4] or "" for e in store.events(row["id"]) if e[3] == "runner"]
    kills = [n for n in notes if n.startswith("killing: ")]
    if len(kills) != (row["status"] == "killed"):  # the runner's one kill note, on a trial it killed
        problems.append(f"{len(kills)} kill notes")
    if sum(n == f"{row['status']}: {row['reason']}" for n in notes) > 1:
        problems.append("ended twice")
    completed = served_completed(row)
    if proxy:
        if stored(row) != sum(u.raw for u in completed) or row["usage_source"] != "proxy":
            problems.append(f"usage {stored(row)} ({row['usage_source']}) != finished {finished(row)}")
    elif stored(row) != sum(u.raw for u in completed[:row["turns"]]) or len(completed) - row["turns"] > 1:
        problems.append(f"usage {stored(row)} over {row['turns']} turns, {len(completed)} calls finished")
    return problems + events_intact(store, row)


def running_at_cap(store: Store, rows: list[dict], cap: int) -> list[dict]:
    """The trials running when the scope's stored spend reached ``cap`` (the usage events in
    time order): each between its first and its last event then."""
    usage, spans = [], {}
    for row in rows:
        seqs = store.usage_by_seq(row["id"])
        events = list(store.events(row["id"]))
        spans[row["id"]] = (events[0][1], events[-1][1])
        usage += [(e[1], sum(int(seqs[e[0]].get(c) or 0) for c in TOKEN_CLASSES)) for e in events if e[0] in seqs]
    spent = 0
    for ts, tokens in sorted(usage):
        spent += tokens
        if spent >= cap:
            return [row for row in rows if spans[row["id"]][0] <= ts <= spans[row["id"]][1]]
    return []


@pytest.mark.parametrize("proxy", [True, False], ids=["proxy", "no-proxy"])
@pytest.mark.parametrize("scope", ["run", "provider"])
def test_a_cap_holds_under_the_fault_matrix_kills_at_concurrency_32(tmp_path, db, detached, scope, proxy):  # noqa: F811
    cap = CAPS[(scope, proxy)]
    table = "[budgets.run]" if scope == "run" else "[budgets.providers.p1]"
    suite = capped_suite(tmp_path, f"\n{table}\ntokens = {cap}\n", proxy=proxy, budget_tokens=BUDGET, trials=TRIALS,
                         concurrency=32, models=MODELS, scenarios={"m1": LOOP, "m2": LOOP, "m3": RESET})
    store = detached(suite)
    landed = inject_faults(db, store, "m1")
    progress = wait_for(lambda: settled(db, store), "every trial ended, the run held on the cap or ended")
    assert set(landed.values()) == set(FAULTS), landed

    rows = store.trials("capped")
    assert len({(r["task_id"], r["config_id"], r["trial_index"]) for r in rows}) == len(rows)  # once a cell
    lost = {r["id"]: p for r in rows if (p := trial_problems(store, r, proxy))}
    assert not lost, lost
    assert all(store.trial(i)["status"] != "passed" for i in landed)
    killed = [r for r in rows if r["status"] == "killed"]
    assert {r["reason"] for r in killed} <= {"operator", "budget:tokens", f"budget:{scope}"}
    assert any(r["reason"] == "budget:tokens" for r in killed)  # the trials' own budgets killed too
    mine = [r for r in rows if scope == "run" or r["model"] == "m1"]
    reached = sum(stored(r) for r in mine) >= cap
    if proxy:  # the cap was reached and killed what ran under it
        assert reached and f"budget:{scope}" in {r["reason"] for r in killed}, (
            sum(stored(r) for r in mine), cap, sorted((r["status"], r["reason"] or "") for r in rows))
    else:  # the scheduler held the rest back: the cap reached, or committed spend that would pass it
        assert isinstance(progress, dict) and any("cap" in why for why in progress["held"]), progress

    served = sum(finished(r) for r in mine)
    if proxy:
        assert cap <= served <= cap + CALL, served  # at the wire: one call past the cap at most
    else:
        past_budgets = sum(max(0, stored(r) - BUDGET) for r in mine)  # the calls that crossed a budget
        unreported = sum(finished(r) - stored(r) for r in mine)  # finished calls killed agents never printed
        assert served <= cap + past_budgets + unreported, (served, past_budgets, unreported)
        if reached:
            # Each trial running then may still spend its budget, plus the call that crosses it and a
            # finished call its killed agent never printed: the same two terms as the bound above.
            running = running_at_cap(store, mine, cap)
            over = sum(max(0, stored(r) - BUDGET) + finished(r) - stored(r) for r in running)
            assert served <= cap + BUDGET * len(running) + over, (served, len(running), over)
