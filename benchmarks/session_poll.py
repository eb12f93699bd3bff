"""What one live read of a CLI's session files costs the runner (``live_session_poll``: every
0.5 s while Claude Code, Codex, Gemini CLI or Kimi CLI runs), by session length.

    python benchmarks/session_poll.py [--calls 50,200,800] [--tool-output 20000] [--repeat 20]

Each session is built from the real Claude Code session file of the e2e write-file run
(tests/fixtures/streams/claude-code/write-file.session.jsonl): its first assistant line
repeated with fresh message ids, each followed by a user line carrying ``--tool-output`` bytes
of tool result, as a long agent session holds. Prints, per length, the file size and the
milliseconds of one read (``recover``: the parse the runner now does in a worker thread) and
the share of one core it takes at two reads a second.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentmeter_tui.core.harnesses import get_adapter

TEMPLATE = ROOT / "tests" / "fixtures" / "streams" / "claude-code" / "write-file.session.jsonl"


def session(calls: int, tool_output: int) -> bytes:
    template = next(json.loads(line) for line in TEMPLATE.read_bytes().splitlines() if b'"assistant"' in line)
    lines = []
    for index in range(calls):
        template["message"]["id"] = f"msg_bench_{index}"
        lines.append(json.dumps(template).encode())
        lines.append(json.dumps({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{index}", "content": "y" * tool_output}]}}).encode())
    return b"\n".join(lines) + b"\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", default="50,200,800")
    parser.add_argument("--tool-output", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    adapter = get_adapter("claude-code")
    print(f"{'calls':>6} {'file MB':>8} {'ms/read':>8} {'core at 2 reads/s':>18}")
    for calls in (int(n) for n in args.calls.split(",")):
        data = session(calls, args.tool_output)
        recovery = adapter.recover({"s.jsonl": data})
        assert recovery is not None and recovery.turns == calls
        start = time.perf_counter()
        for _ in range(args.repeat):
            adapter.recover({"s.jsonl": data})
        ms = (time.perf_counter() - start) / args.repeat * 1000
        print(f"{calls:>6} {len(data) / 1e6:>8.1f} {ms:>8.1f} {2 * ms / 10:>17.1f}%")


if __name__ == "__main__":
    main()
