"""The fake runner ``ui_load.py`` streams from: the real control protocol on a store's socket.

A subprocess serves a snapshot of ``trials`` running trials and then a tick every 100 ms with
each trial's new events and (every ``METER_EVERY`` seconds per trial) meters, as
``core/run/feed.py`` sends them. On SIGUSR1 it stops streaming but keeps the connection open,
so the app can be measured with nothing changing (the idle floor) without seeing the run end.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from pathlib import Path

import orjson

from agentmeter_tui.core.run.control import LIVE_TEXT, encode
from agentmeter_tui.core.run.feed import METER_EVERY
from agentmeter_tui.core.store import Store

MODELS = ("opus", "sonnet", "gpt-5", "gemini-pro", "qwen-max", "kimi-k2")
CLIS = ("claude-code", "codex", "qwen-code", "kimi-cli")
TEXTS = {
    "assistant": "I will look at the failing test first, then change the parser so that it accepts the new field.",
    "reasoning": "The stack trace points at parse_header; the header may be empty when the file is new.",
    "tool_call": "pytest -q tests/test_parser.py -k header",
    "tool_result": "F..\n=== FAILURES ===\ntest_header_empty: AssertionError: expected None, got ''",
    "usage": "in 1200 cached 8800 write 0 out 140 reasoning 60",
}
KINDS = ("assistant", "reasoning", "tool_call", "tool_result", "usage")
QUIET = signal.SIGUSR1  # the app's signal to the fake runner: stop streaming, stay connected


def meter(trial_id: int, step: int) -> dict:
    model, cli = MODELS[trial_id % len(MODELS)], CLIS[(trial_id // len(MODELS)) % len(CLIS)]
    grow = 1 + step
    return {"id": trial_id, "task": f"task-{trial_id % 30:02d}", "model": model, "cli": cli, "trial": 1,
            "status": "running", "reason": None,
            "tokens": {"uncached_input": 900 * grow, "cached_input": 7000 * grow, "cache_write": 100 * grow,
                       "output": 120 * grow, "reasoning": 50 * grow},
            "cost_usd": 0.004 * grow, "reported_cost_usd": None, "turns": grow, "tool_calls": grow,
            "flags": ["thrash"] if trial_id % 17 == 0 else [], "elapsed": 0.1 * step,
            "budget": {"wall_seconds": 1800.0, "tokens": 5_000_000, "usd": 20.0}, "events": 0}


def corpus(hostile: bool) -> list[tuple[str, str, str]]:
    """The ``(kind, stream, text)`` events the fake trials print, texts cut as the feed cuts them."""
    if not hostile:
        return [(kind, "stdout", TEXTS[kind]) for kind in KINDS]
    from benchmarks.hostile_corpus import hostile_events

    return [(kind, stream, text[:LIVE_TEXT]) for kind, stream, text in hostile_events()]


async def serve(path: str, trials: int, rate: int, seconds: float, hostile: bool = False) -> None:
    """Stream for at most ``seconds`` (or until SIGUSR1), then stay connected and silent."""
    per_tick = max(1, rate // 10)
    printed = corpus(hostile)
    quiet = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(QUIET, quiet.set)

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        if orjson.loads(line).get("op") != "subscribe":
            writer.write(encode({"ok": True}))
            await writer.drain()
            writer.close()
            return
        ids = list(range(1, trials + 1))
        seqs = dict.fromkeys(ids, 0)
        progress = {"done": 0, "total": trials * 4, "running": trials, "queued": trials * 3, "paused": False,
                    "stopping": False}
        writer.write(encode({"ok": True, "type": "snapshot", "run_id": 1, "suite": "load", "pid": os.getpid(),
                             "progress": progress, "running": [meter(i, 0) for i in ids]}))
        await writer.drain()
        rng = random.Random(1)
        start = time.monotonic()
        step = 0
        while time.monotonic() - start < seconds and not quiet.is_set():
            step += 1
            events: dict[int, list] = {}
            now = time.time()
            for n in range(per_tick):
                trial = ids[n % trials]
                seqs[trial] += 1
                kind, stream, text = printed[rng.randrange(len(printed))]
                events.setdefault(trial, []).append([seqs[trial], now, kind, stream, text])
            # As the feed sends them: a trial that only printed gets a meter every METER_EVERY
            # seconds, the trials taking turns.
            every = max(1, round(METER_EVERY / 0.1))
            writer.write(encode({"type": "tick", "ts": now, "events": events,
                                 "meters": [meter(i, step) for i in ids if (step + i) % every == 0], "finished": [],
                                 "progress": progress}))
            await writer.drain()
            await asyncio.sleep(max(0.0, start + step * 0.1 - time.monotonic()))
        await asyncio.Event().wait()  # silent, still connected: the run has not ended

    server = await asyncio.start_unix_server(client, path)
    async with server:
        print("ready", flush=True)
        await asyncio.Event().wait()


def grid_store(path: Path, trials: int) -> None:
    """A store whose suite has the 6 x 4 grid the fake runner's trials belong to."""
    store = Store(path)
    with store.db.atomic():
        store.db["suites"].insert({"id": "load", "seed_hash": "0" * 64, "name": "Load", "version": "1",
                                   "created_at": "2026-01-01T00:00:00+00:00"})
        for n in range(30):
            store.db["tasks"].insert({"suite_id": "load", "task_id": f"task-{n:02d}", "tier": "easy",
                                      "instruction_hash": "0", "verifier": "command", "position": n})
    for model in MODELS:
        for cli in CLIS:
            store.ensure_configuration("load", model, cli)
    store.close()
