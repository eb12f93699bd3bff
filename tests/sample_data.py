"""Provides fixed sample data: a store with finished trials and feed messages of running ones.

Snapshot tests, the UI load benchmark and the screenshot script's fallback need screens
driven by data that is the same on every run (no clock, no runner). Everything here is
deterministic: seeded, with fixed timestamps.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson

from agentmeter_tui.core.store import Store

T0 = 1_780_000_000.0  # a fixed wall time for sample events
MODELS = ("ace", "guzzler", "dud", "parrot")
CLIS = ("reference", "claude-code")
TASKS = (("count-lines", "easy"), ("fix-median", "medium"), ("write-greeting", "easy"))
PRICES = {"ace": (3.0, 15.0), "guzzler": (5.0, 25.0), "dud": (1.0, 5.0), "parrot": (0.5, 2.0)}
COMMANDS = ("ls -la", "cat data.txt", "wc -l < data.txt", "python -m pytest -q", "grep -n median stats.py",
            "sed -n 1,40p stats.py", "printf 'hello world\\n' > hello.txt")
SAYINGS = ("Let me look at the workspace first.", "The tests fail on an even-length input; the median must "
           "average the two middle values.", "I will fix the function and run the tests again.",
           "All tests pass now.", "count.txt holds the line count.")


def transcript(n: int, seed: int = 1, *, fail_every: int = 9) -> list[tuple]:
    """``n`` events ``(seq, ts, kind, stream, text, data)`` shaped like a reference-agent run."""
    rng = random.Random(seed)
    rows: list[tuple] = [(1, T0, "system", "stdout", "init: model sample", None)]
    seq = 1
    turn = 0
    while seq < n:
        turn += 1
        ts = T0 + turn * 1.5
        batch: list[tuple[str, str, Any]] = []
        if turn % 3 == 1:
            batch.append(("reasoning", f"Turn {turn}: " + rng.choice(SAYINGS), None))
        batch.append(("assistant", rng.choice(SAYINGS) + (" " + rng.choice(SAYINGS) if turn % 4 == 0 else ""), None))
        batch.append(("usage", f"in {rng.randint(100, 2000)} cached {rng.randint(0, 9000)} out {rng.randint(10, 300)}",
                      None))
        command = rng.choice(COMMANDS)
        batch.append(("tool_call", command, orjson.dumps({"type": "tool_call", "name": "shell",
                                                           "arguments": {"command": command}}).decode()))
        failed = turn % fail_every == 0
        output = "\n".join(f"line {i}: {rng.choice(SAYINGS)}" for i in range(rng.randint(1, 12)))
        if failed:
            output = "Traceback (most recent call last):\n  File \"stats.py\", line 7\nAssertionError: 2 != 2.5"
        batch.append(("tool_result", output, orjson.dumps({"type": "tool_result", "exit_code": 1 if failed else 0,
                                                            "output": output}).decode()))
        for kind, text, data in batch:
            seq += 1
            if seq > n:
                break
            rows.append((seq, ts, kind, "stdout", text, data))
    return rows


def _trial_row(suite: str, run_id: int, config_id: int, model: str, cli: str, task: str, tier: str, index: int,
               status: str, rng: random.Random) -> dict[str, Any]:
    uncached, cached = rng.randint(800, 4000), rng.randint(0, 20000)
    write, output, reasoning = rng.randint(0, 1500), rng.randint(50, 900), rng.randint(0, 400)
    if model == "guzzler":
        uncached, cached, output = uncached * 12, cached * 6, output * 8
    price_in, price_out = PRICES[model]
    cost = (uncached * price_in + cached * price_in / 10 + write * price_in * 1.25 + (output + reasoning) * price_out) / 1e6
    reasons = {"killed": "operator", "errored": "HTTP 500: scripted error", "infra-invalid": "infra: sandbox failed"}
    return {"run_id": run_id, "suite_id": suite, "task_id": task, "tier": tier, "config_id": config_id,
            "model": model, "cli": cli, "trial_index": index, "attempt": 0, "status": status,
            "reason": reasons.get(status), "passed": int(status == "passed"), "quality": 1.0 if status == "passed" else 0.0,
            "uncached_input": uncached, "cached_input": cached, "cache_write": write, "output": output,
            "reasoning": reasoning, "turns": rng.randint(2, 9), "tool_calls": rng.randint(1, 8), "cost_usd": cost,
            "cost_source": "snapshot", "flags": orjson.dumps(["thrash"]).decode() if model == "parrot" else None,
            "verifier_exit": 0 if status == "passed" else 1,
            "verifier_output": "count is right: 7" if status == "passed" else "expected 7, found '6'",
            "started_at": "2026-06-04T10:00:00.000+00:00", "finished_at": "2026-06-04T10:00:09.000+00:00",
            "proc_token": f"sample{config_id}{index}"}


def _status(model: str, task: str, index: int) -> str:
    table = {"ace": "passed", "guzzler": "passed" if index == 1 else "failed", "dud": "failed", "parrot": "killed"}
    if model == "dud" and task == "fix-median":
        return "errored"
    return table[model]


def build_sample_store(path: str | Path, *, events_per_trial: int = 40, big_trial_events: int = 0,
                       scores: bool = True) -> Store:
    """A finished suite ``sample``: every model x CLI x task, 2 trials, with events and some scores.

    ``big_trial_events`` adds one more trial with that many events (the review benchmark).
    """
    rng = random.Random(7)
    store = Store(path)
    db = store.db
    suite = "sample"
    with db.atomic():
        db["suites"].insert({"id": suite, "seed_hash": "0" * 64, "name": "Sample", "version": "1", "path": None,
                             "own": None, "created_at": "2026-06-04T10:00:00.000+00:00"})
        for position, (task, tier) in enumerate(TASKS):
            db["tasks"].insert({"suite_id": suite, "task_id": task, "tier": tier, "instruction_hash": "0" * 64,
                                "verifier": "command", "position": position})
        run_id = db["runs"].insert({"suite_id": suite, "seed_hash": "0" * 64, "status": "finished",
                                    "started_at": "2026-06-04T10:00:00.000+00:00"}).last_pk
        configs = {}
        for model in MODELS:
            for cli in CLIS:
                configs[(model, cli)] = store.ensure_configuration(suite, model, cli)
        seed = 0
        for index in (1, 2):
            for task, tier in TASKS:
                for (model, cli), config_id in configs.items():
                    status = _status(model, task, index)
                    trial_id = db["trials"].insert(_trial_row(suite, run_id, config_id, model, cli, task, tier, index,
                                                              status, rng)).last_pk
                    seed += 1
                    _insert_events(db, trial_id, transcript(events_per_trial, seed, fail_every=3))
        if big_trial_events:
            trial_id = db["trials"].insert(_trial_row(suite, run_id, configs[("ace", "reference")], "ace", "reference",
                                                      "fix-median", "medium", 3, "passed", rng)).last_pk
            _insert_events(db, trial_id, transcript(big_trial_events, 99))
        db["trials"].update(17, {"extra": orjson.dumps({"verifier": sample_funnel()}).decode()})
    if scores:
        for trial_id, score in ((1, 3), (2, 2), (3, 0), (9, 3), (10, 1)):
            store.reviews.add_score(trial_id, score, "sample-reviewer", note="sample score" if score == 0 else None)
        with db.atomic():  # fixed times, so screens that show them are the same on every run
            db.execute("update scores set created_at = '2026-06-04T10:30:00.000+00:00'")
            db.execute("update audit set ts = '2026-06-04T10:30:00.000+00:00'")
    return store


def sample_funnel() -> dict[str, Any]:
    """A differential verifier's details (built with the real funnel code, so the shape is current)."""
    from agentmeter_tui.core.difftest.executor import BuildResult, CaseRun
    from agentmeter_tui.core.difftest.funnel import FunnelReport, class_scores, judge_case

    def run(code: int, out: str) -> CaseRun:
        return CaseRun(exit_code=code, stdout=out, duration=0.004)

    cases = [("set-get", "c1", ["set", "a", "1"], run(0, "OK\n"), run(0, "OK\n")),
             ("set-get", "c2", ["get", "a"], run(0, "1\n"), run(0, "1\n")),
             ("list", "c3", ["list"], run(0, "a=1\nb=2\n"), run(0, "a = 1, b = 2\n")),
             ("list", "c4", ["list", "--json"], run(0, '{"a": 1, "b": 2}\n'), run(2, "unknown flag --json\n")),
             ("errors", "c5", ["get", "missing"], run(1, ""), run(0, "None\n"))]
    verdicts = [judge_case(cls, cid, argv, None, oracle, candidate) for cls, cid, argv, oracle, candidate in cases]
    report = FunnelReport("fuzzy", BuildResult(True, 0), BuildResult(True, 0), verdicts,
                          class_scores(verdicts, ["set-get", "list", "errors"]))
    return report.as_dict()


def _insert_events(db, trial_id: int, rows: list[tuple]) -> None:
    db.conn.executemany("insert into events (trial_id, seq, ts, kind, stream, text, data) values (?, ?, ?, ?, ?, ?, ?)",
                        [(trial_id, *row) for row in rows])
    # Each usage line also becomes a usage row, as the runner writes them (compare reads tokens per step).
    usage = []
    for seq, _ts, kind, _stream, text, _data in rows:
        if kind == "usage":
            numbers = dict(zip(text.split()[::2], map(int, text.split()[1::2])))
            usage.append((trial_id, seq, "cli", numbers.get("in", 0), numbers.get("cached", 0), numbers.get("out", 0)))
    db.conn.executemany("insert into usage (trial_id, seq, source, uncached_input, cached_input, cache_write, output, "
                        "reasoning) values (?, ?, ?, ?, ?, 0, ?, 0)", usage)


# -- feed messages ---------------------------------------------------------------------------------


def sample_meter(trial_id: int, model: str, cli: str, task: str, trial: int, *, fraction: float = 0.5,
                 flags: tuple[str, ...] = (), status: str = "running") -> dict[str, Any]:
    """A meter as ``TrialRun.meter()`` sends it, ``fraction`` of the way through its budgets."""
    raw_budget = 200_000
    tokens = {"uncached_input": int(raw_budget * fraction * 0.3), "cached_input": int(raw_budget * fraction * 0.55),
              "cache_write": int(raw_budget * fraction * 0.05), "output": int(raw_budget * fraction * 0.07),
              "reasoning": int(raw_budget * fraction * 0.03)}
    return {"id": trial_id, "task": task, "model": model, "cli": cli, "trial": trial, "status": status,
            "reason": None, "tokens": tokens, "cost_usd": round(2.0 * fraction * 0.4, 6),
            "reported_cost_usd": round(2.0 * fraction * 0.41, 6) if cli == "claude-code" else None,
            "turns": int(20 * fraction), "tool_calls": int(15 * fraction), "flags": sorted(flags),
            "elapsed": 300 * fraction, "budget": {"wall_seconds": 600.0, "tokens": raw_budget, "usd": 2.0},
            "events": int(200 * fraction)}


def sample_feed(first_id: int = 1000, count: int = 6, events: int = 30) -> list[dict[str, Any]]:
    """A snapshot and two ticks 30 s apart: ``count`` running trials with ``events`` transcript rows.

    The first tick gives 90 % of the final meters, so burn rates have two samples to measure.
    """
    meters = []
    for i in range(count):
        model, cli = MODELS[i % len(MODELS)], CLIS[(i // len(MODELS)) % len(CLIS)]
        task = TASKS[i % len(TASKS)][0]
        flags = ("thrash",) if model == "parrot" else ()
        meters.append(sample_meter(first_id + i, model, cli, task, 1 + i // 8, fraction=0.2 + 0.13 * (i % 6),
                                   flags=flags))
    earlier = [sample_meter(m["id"], m["model"], m["cli"], m["task"], m["trial"],
                            fraction=(m["elapsed"] / 300) * 0.9, flags=tuple(m["flags"])) for m in meters]
    progress = {"done": 48, "total": 60, "running": count, "queued": max(0, 60 - 48 - count), "paused": False,
                "stopping": False}
    snapshot = {"type": "snapshot", "run_id": 1, "suite": "sample", "pid": 0, "started": T0, "progress": progress,
                "running": earlier}
    first = {"type": "tick", "ts": T0, "meters": earlier, "finished": [], "progress": progress, "events": {}}
    second = {"type": "tick", "ts": T0 + 30, "meters": meters, "finished": [], "progress": progress,
              "events": {m["id"]: [[seq, ts, kind, stream, text[:2000]]
                                   for seq, ts, kind, stream, text, _ in transcript(events, m["id"], fail_every=4)]
                         for m in meters}}
    return [snapshot, first, second]
