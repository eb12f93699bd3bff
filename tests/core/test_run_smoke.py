"""The smoke suite end to end: a real runner process, the real reference agent against the
scripted model server, real verifiers; token classes and costs equal what the scenarios served."""

from __future__ import annotations

import tomllib
from decimal import Decimal

from agentmeter_tui.core.pricing import PriceSnapshot
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TOKEN_CLASSES, TokenUsage
from tests.conftest import ROOT, agentmeter

SMOKE = ROOT / "suites" / "smoke"


def served(model: str, task: str) -> TokenUsage:
    scenario = tomllib.loads((SMOKE / "scenarios" / model / f"{task}.toml").read_text())
    total = TokenUsage()
    for turn in scenario["turns"]:
        total = total + TokenUsage.from_dict(turn.get("usage"))
    return total


def test_smoke_suite_runs_headless(db):
    result = agentmeter("run", str(SMOKE), "--headless", "--db", str(db), timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    store = Store(db)
    trials = store.trials("smoke")
    assert len(trials) == 2 * 2 * 2  # models x tasks x trials
    prices = PriceSnapshot.load(SMOKE / "prices.toml")
    for trial in trials:
        expected = served(trial["model"], trial["task_id"])
        assert {c: trial[c] for c in TOKEN_CLASSES} == expected.as_dict(), trial
        cost = prices.cost_usd(f"scripted/{trial['model']}", expected)
        assert abs(Decimal(str(trial["cost_usd"])) - cost) < Decimal("1e-12")
        assert trial["cost_source"] == "snapshot"
        assert trial["status"] == ("passed" if trial["model"] == "solver" else "failed")
        assert trial["passed"] == (trial["model"] == "solver")
        assert trial["finished_at"] and trial["started_at"]
        assert store.event_count(trial["id"]) >= 5
    # The fumbler's off-by-one count earns the task's partial reward, and the verifier said why.
    partial = [t for t in trials if t["model"] == "fumbler" and t["task_id"] == "count-lines"]
    assert all(t["quality"] == 0.5 and "expected 7" in t["verifier_output"] for t in partial)
    run = next(store.db.query("select * from runs"))
    assert run["status"] == "finished"
    # Progress lines name every trial.
    assert result.stdout.count("reference") >= 8


def test_rerun_of_a_finished_suite_runs_nothing(db):
    agentmeter("run", str(SMOKE), "--headless", "--db", str(db), check=True)
    agentmeter("run", str(SMOKE), "--headless", "--db", str(db), check=True)
    assert len(Store(db).trials("smoke")) == 8
