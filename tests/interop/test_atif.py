"""ATIF export and import over real CLI output: every recorded stream of the six CLIs (their
own stdout against the scripted server, tests/fixtures/streams/) stored as the runner stores
it, written as ATIF, checked by Harbor's own trajectory model, and read back."""

from __future__ import annotations

import json

import pytest

from agentmeter_tui.core.interop.atif import (
    events_from_trajectory,
    load_trajectory,
    parse_trajectory,
    trajectory_from_events,
    trajectory_json,
    trajectory_totals,
    write_trajectory,
)
from agentmeter_tui.core.interop.atif_schema import AtifError
from agentmeter_tui.core.usage import TokenUsage
from agentmeter_tui.core.vocab import EventKind
from tests.interop.support import CLIS, SCENARIOS, STREAMS, harbor_validate, stream_rows

CASES = [(cli, s) for cli in CLIS for s in SCENARIOS if (STREAMS / cli / f"{s}.stdout.jsonl").exists()]


def trial_row(cli: str, usage: dict[int, dict]) -> dict:
    total = sum((TokenUsage.from_dict(u) for u in usage.values()), TokenUsage())
    return {"id": 7, "suite_id": "s", "task_id": "t", "model": "mock", "cli": cli, "cli_version": "1",
            "status": "passed", "cost_usd": 0.01, "cost_source": "snapshot", **total.as_dict()}


def test_every_recorded_stream_exports_as_atif_that_harbor_accepts(tmp_path):
    paths = []
    for cli, scenario in CASES:
        rows, usage = stream_rows(cli, scenario)
        trajectory = trajectory_from_events(rows, trial=trial_row(cli, usage), usage_rows=usage)
        paths.append(write_trajectory(trajectory, tmp_path / cli / scenario / "trajectory.json"))
    assert len(paths) == 30  # 6 CLIs x 5 scenarios
    errors = harbor_validate(paths)
    assert {p: e for p, e in errors.items() if e} == {}


def test_the_files_written_without_the_models_are_the_models_bytes():
    """A site writes its ATIF files straight from dicts; read back through the pydantic models and
    dumped again they are the same bytes (field order, no nulls, floats for money)."""
    for cli, scenario in CASES:
        rows, usage = stream_rows(cli, scenario)
        written = trajectory_json(rows, trial=trial_row(cli, usage), usage_rows=usage)
        assert parse_trajectory(written).to_json() == written, (cli, scenario)
        assert trajectory_from_events(rows, trial=trial_row(cli, usage), usage_rows=usage).to_json() == written


@pytest.mark.parametrize(("cli", "scenario"), CASES)
def test_round_trip_keeps_every_event_in_order_and_the_five_classes(cli, scenario, tmp_path):
    rows, usage = stream_rows(cli, scenario)
    trial = trial_row(cli, usage)
    path = write_trajectory(trajectory_from_events(rows, trial=trial, usage_rows=usage), tmp_path / "t.json")
    back = events_from_trajectory(load_trajectory(path))
    assert [(e.kind, e.text) for e in back] == [(r[2], r[4]) for r in rows]
    stored = [TokenUsage.from_dict(usage[r[0]]) for r in rows if r[0] in usage]
    assert [e.usage for e in back if e.usage is not None] == stored
    tokens, cost, source = trajectory_totals(load_trajectory(path))
    assert tokens == TokenUsage.from_dict(trial) and cost == 0.01 and source == "atif:final_metrics"


def test_tool_names_and_arguments_come_from_the_cli_output():
    # Claude Code's recorded write-file run calls its Bash tool with {"command": "echo hi > out.txt", ...}.
    raw = [json.loads(line) for line in (STREAMS / "claude-code" / "write-file.stdout.jsonl").read_text().splitlines()]
    uses = [b for o in raw if o.get("type") == "assistant" for b in o["message"]["content"] if b["type"] == "tool_use"]
    rows, usage = stream_rows("claude-code", "write-file")
    trajectory = trajectory_from_events(rows, trial=trial_row("claude-code", usage), usage_rows=usage)
    calls = [c for s in trajectory.steps for c in s.tool_calls or []]
    assert [(c.function_name, c.arguments) for c in calls] == [(u["name"], u["input"]) for u in uses]
    results = [r for s in trajectory.steps if s.observation for r in s.observation.results]
    assert [r.source_call_id for r in results] == [c.tool_call_id for c in calls]


def test_figures_come_from_the_usage_text_without_usage_rows():
    rows, usage = stream_rows("codex", "cache-heavy")
    with_rows = trajectory_from_events(rows, trial=trial_row("codex", usage), usage_rows=usage)
    without = trajectory_from_events(rows, session_id="trial-7-x", agent_name="codex", agent_version="1",
                                     model_name="mock", usage=TokenUsage.from_dict(trial_row("codex", usage)))
    assert [s.metrics for s in without.steps] == [s.metrics for s in with_rows.steps]
    assert without.session_id == "trial-7-x" and without.extra is None


def test_a_trial_without_events_is_one_system_step():
    trajectory = trajectory_from_events([], session_id="x", agent_name="oracle", agent_version="0", model_name=None)
    assert [s.source for s in trajectory.steps] == ["system"]


def test_unknown_fields_are_kept_and_a_wrong_schema_is_named():
    doc = {"schema_version": "ATIF-v1.9", "session_id": "s", "agent": {"name": "x", "version": "1", "new": 1},
           "steps": [{"step_id": 1, "source": "user", "message": "hi", "future_field": [1]}]}
    trajectory = parse_trajectory(doc)
    assert trajectory.agent.unknown() == {"new": 1} and trajectory.steps[0].unknown() == {"future_field": [1]}
    (event,) = events_from_trajectory(trajectory)
    assert (event.kind, event.text, event.meta) == (EventKind.SYSTEM, "user: hi", {"atif_step": {"future_field": [1]}})
    with pytest.raises(AtifError, match="f.json: field 'schema_version'"):
        parse_trajectory({**doc, "schema_version": "2.0"}, "f.json")
    with pytest.raises(AtifError, match="field 'steps.0.source'"):
        parse_trajectory({**doc, "steps": [{"step_id": 1, "source": "robot", "message": ""}]})


def version_documents() -> dict[str, dict]:
    """One document per ATIF version, each using what its version added (RFC 0001's version
    history); Harbor's own model accepts every one of them (checked below)."""
    base = {"session_id": "s-1", "agent": {"name": "some-agent", "version": "1.0", "model_name": "m"},
            "steps": [{"step_id": 1, "source": "user", "message": "Do the task."},
                      {"step_id": 2, "source": "agent", "message": "Done.", "reasoning_content": "easy",
                       "tool_calls": [{"tool_call_id": "c1", "function_name": "bash", "arguments": {"cmd": "ls"}}],
                       "observation": {"results": [{"source_call_id": "c1", "content": "a.txt"}]},
                       "metrics": {"prompt_tokens": 120, "completion_tokens": 30, "cached_tokens": 100}}],
            "final_metrics": {"total_prompt_tokens": 120, "total_completion_tokens": 30, "total_cached_tokens": 100}}
    added = {
        1: {"extra": {"run": "r"}},
        2: {"steps": [{"step_id": 3, "source": "system", "message": "reset",
                       "observation": {"results": [{"content": "environment reset"}]}}]},
        3: {"metrics": {"completion_token_ids": [1, 2]}},
        4: {"metrics": {"prompt_token_ids": [3, 4]}},
        5: {"agent": {"tool_definitions": [{"type": "function", "function": {"name": "bash"}}]},
            "steps": [{"step_id": 3, "source": "user", "message": "again", "is_copied_context": True}]},
        6: {"steps": [{"step_id": 3, "source": "user", "message": [{"type": "text", "text": "look"}, {
            "type": "image", "source": {"media_type": "image/png", "path": "https://example.org/a.png"}}]}]},
        7: {"trajectory_id": "t-1", "steps": [{"step_id": 3, "source": "agent", "message": "dispatch",
                                              "llm_call_count": 0}]},
        8: {"steps": [{"step_id": 3, "source": "user", "message": [{"type": "audio", "source": {
            "media_type": "audio/wav", "path": "https://example.org/a.wav"}}]}]},
    }
    docs = {}
    for minor in range(9):
        doc = json.loads(json.dumps(base))
        doc["schema_version"] = f"ATIF-v1.{minor}"
        for version in range(1, minor + 1):
            change = added[version]
            doc.update({k: v for k, v in change.items() if k not in ("steps", "agent", "metrics")})
            doc["agent"].update(change.get("agent", {}))
            doc["steps"][1]["metrics"].update(change.get("metrics", {}))
        if minor in added and "steps" in added[minor]:
            doc["steps"] = doc["steps"][:2] + added[minor]["steps"]
        docs[doc["schema_version"]] = doc
    return docs


def test_every_version_from_1_0_reads(tmp_path):
    docs = version_documents()
    paths = []
    for version, doc in docs.items():
        paths.append(tmp_path / f"{version}.json")
        paths[-1].write_text(json.dumps(doc))
    assert {p: e for p, e in harbor_validate(paths).items() if e} == {}  # valid ATIF of their version
    for version, doc in docs.items():
        trajectory = parse_trajectory(doc)
        events = events_from_trajectory(trajectory)
        assert [(e.kind, e.text) for e in events[:5]] == [
            (EventKind.SYSTEM, "user: Do the task."), (EventKind.REASONING, "easy"), (EventKind.ASSISTANT, "Done."),
            (EventKind.USAGE, "in 20 cached 100 write 0 out 30 reasoning 0"), (EventKind.TOOL_CALL, "ls")]  # the shell command shows
        assert trajectory_totals(trajectory)[0] == TokenUsage(uncached_input=20, cached_input=100, output=30), version


def test_step_times_are_datetimes_own_text():
    """Step timestamps are formatted once per second and rounded by hand: the same text as
    datetime's isoformat, at the rounding edges too."""
    import random
    from datetime import UTC, datetime

    from agentmeter_tui.core.interop.atif import _iso

    rng = random.Random(5)
    values = [0.0, 0.0005, 0.9995, 0.9999995, 1e9 + 0.9999995, 1e9 + 0.0000005, 1_779_999_999.9999996, -0.5,
              -1.0000005, *(rng.uniform(0, 2e9) for _ in range(20_000)),
              *(round(rng.uniform(1e9, 2e9), digits) for digits in (3, 6) for _ in range(10_000))]
    for value in values:
        assert _iso(value) == datetime.fromtimestamp(value, UTC).isoformat(timespec="milliseconds")[:-6] + "Z", value
