"""Session import at scale: 10,000 Claude Code sessions holding 1,000,000 events between them,
imported into an empty store with ``agentmeter import sessions`` (in this process).

    python benchmarks/import_sessions.py [--sessions 10000] [--events 100] [--prices FILE]

The sessions are copies of one real session file Claude Code wrote against the scripted model
server (tests/fixtures/streams/claude-code/write-file.session.jsonl: a call's message written
once per content block, as the CLI does), its lines repeated with fresh message ids until each
session holds ``--events`` transcript events. Target (issue 13): under 60 s and under 500 MB
(peak resident memory of the importing process). Prints the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentmeter_tui.cli import main
from agentmeter_tui.core.store import Store

TEMPLATE = ROOT / "tests" / "fixtures" / "streams" / "claude-code" / "write-file.session.jsonl"
PRICES = """as_of = "2026-11-01"
[models."claude-sonnet-4-6"]
input = "3"
cached_input = "0.3"
cache_write = "3.75"
output = "15"
"""


def session_lines(repeats: int) -> list[dict]:
    """One session's records: a user prompt, then the recorded calls ``repeats`` times (fresh
    ids). A recorded call is its message's copies (thinking, text, tool use: each with the
    call's usage), then the tool's result."""
    recorded = [orjson.loads(line) for line in TEMPLATE.read_bytes().splitlines()]
    records = [{"type": "user", "sessionId": "s", "cwd": "/home/u/project", "version": "2.1.197",
                "timestamp": "2026-11-20T10:00:00.000Z", "message": {"role": "user", "content": "Fix the bug."}}]
    for n in range(1, repeats + 1):
        for record in recorded:
            message = dict(record["message"])
            message["id"] = f"{message['id']}-{n}"
            message["model"] = "claude-sonnet-4-6"
            records.append({**record, "message": message, "cwd": "/home/u/project", "version": "2.1.197",
                            "timestamp": f"2026-11-20T10:{n // 60 % 60:02d}:{n % 60:02d}.000Z"})
        records.append({"type": "user", "timestamp": "2026-11-20T10:00:00.000Z",
                        "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                                                 "content": "ok " * 20}]}})
    return records


def session_body(events: int, folder: Path) -> tuple[bytes, int]:
    """The smallest session file with at least ``events`` transcript events, and its count
    (counted by the importer's own reader)."""
    from agentmeter_tui.core.interop.sessions.base import SessionSource
    from agentmeter_tui.core.interop.sessions.claude_code import ClaudeCodeSessions

    probe = folder / "probe.jsonl"
    repeats = 1
    while True:
        body = b"".join(orjson.dumps(r) + b"\n" for r in session_lines(repeats))
        probe.write_bytes(body)
        count = len(ClaudeCodeSessions().read(SessionSource("probe", [probe], folder)).events)
        if count >= events:
            probe.unlink()
            return body, count
        repeats += 1


def write_store(home: Path, sessions: int, events: int) -> tuple[int, int]:
    """The session store; its size in bytes and the events per session."""
    folder = home / ".claude" / "projects" / "-home-u-project"
    folder.mkdir(parents=True)
    body, per_session = session_body(events, folder)
    for i in range(sessions):
        (folder / f"{i:08d}-0000-4000-8000-000000000000.jsonl").write_bytes(body)
    return len(body) * sessions, per_session


def main_bench() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=100, help="transcript events per session")
    parser.add_argument("--prices", type=Path, help="price snapshot (default: Anthropic's list prices for the model)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="agentmeter-import-bench-"))
    try:
        size, per_session = write_store(folder / "home", args.sessions, args.events)
        db = folder / "bench.db"
        prices = args.prices or folder / "prices.toml"
        if args.prices is None:
            prices.write_text(PRICES)
        before = resource.getrusage(resource.RUSAGE_SELF)
        err = io.StringIO()
        started = time.perf_counter()
        with contextlib.redirect_stderr(err):
            code = main(["import", "sessions", "--cli", "claude-code", str(folder / "home" / ".claude" / "projects"),
                         "--prices", str(prices), "--db", str(db)])
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
        peak = after.ru_maxrss  # KiB on Linux
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        store = Store(db)
        trials = store.db.execute("select count(*) from trials").fetchone()[0]
        events = store.db.execute("select count(*) from events").fetchone()[0]
        print(err.getvalue().strip())
        print(f"sessions {trials:,} (exit {code}), events {events:,} ({per_session} a session), "
              f"files {size / 1e6:,.0f} MB")
        print(f"import wall {wall:.1f} s ({events / wall:,.0f} events/s), CPU {cpu:.1f} s, peak RSS "
              f"{peak / 1024:,.0f} MB (before the import {before.ru_maxrss / 1024:,.0f} MB), load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        ok = code == 0 and wall < 60 and peak / 1024 < 500
        print(f"target < 60 s and < 500 MB: {'met' if ok else 'NOT met'}")
        return 0 if ok else 1
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main_bench())
