"""The report carries seed 001's differential funnel per configuration when trials have one."""

from __future__ import annotations

import io
import json

from agentmeter_tui.core.reporting.records import import_records, read_records
from agentmeter_tui.core.reporting import render, report_from_store
from agentmeter_tui.core.store import Store


def record(model: str, status: str, scores: dict | None) -> str:
    obj = {"suite": "tools", "task": "kv", "tier": "easy", "model": model, "cli": "reference", "trial": 1,
           "status": status, "passed": status == "passed", "quality": (scores or {}).get("fuzzy", 0.0),
           "tokens": {"uncached_input": 10}, "cost_usd": 0.01, "cost_source": "snapshot", "turns": 1,
           "tool_calls": 1, "started_at": None, "finished_at": None}
    if scores is not None:
        obj["verifier"] = {"kind": "differential", "scores": scores, "runtime": {"ratio": 1.5}}
    return json.dumps(obj) + "\n"


def test_funnel_in_markdown_csv_and_json(tmp_path):
    full = {"build": 1.0, "exec": 1.0, "side_effects": 1.0, "exact": 1.0, "fuzzy": 1.0}
    half = {"build": 1.0, "exec": 1.0, "side_effects": 0.5, "exact": 0.25, "fuzzy": 0.5}
    text = record("good", "passed", full) + record("meh", "failed", half) + record("dead", "killed", None)
    store = Store(tmp_path / "r.db")
    import_records(store, list(read_records(io.StringIO(text), "t.jsonl")))
    report = report_from_store(store, "tools")
    by_model = {row["model"]: row for row in report.funnel}
    assert by_model["good"]["exact"] == 1.0 and by_model["good"]["runtime_ratio"] == 1.5
    assert by_model["meh"]["side_effects"] == 0.5 and by_model["meh"]["exact"] == 0.25
    assert by_model["dead"]["build"] == 0.0  # killed before its tool could be judged: 0 everywhere
    markdown = render(report, "md")
    assert "## Differential funnel" in markdown and "| meh | reference | 1 | 100.0 | 100.0 | 50.0 | 25.0 |" in markdown
    assert "Runtime ratio" in render(report, "csv")
    assert json.loads(render(report, "json"))["differential_funnel"][0]["model"] == "dead"


def test_no_funnel_without_differential_trials(tmp_path):
    store = Store(tmp_path / "r.db")
    import_records(store, list(read_records(io.StringIO(record("good", "passed", None)), "t.jsonl")))
    report = report_from_store(store, "tools")
    assert report.funnel is None and "differential_funnel" not in json.loads(render(report, "json"))
