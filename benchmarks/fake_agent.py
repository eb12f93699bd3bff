"""A fake agent for load tests: prints N events in the reference agent's JSONL format as fast
as it can (assistant text, tool calls, tool results, usage), then a result line.

    python benchmarks/fake_agent.py N
"""

import json
import sys

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
TEXT = "The quick brown fox inspects the repository and decides what to change next. " * 2
lines = [
    json.dumps({"type": "assistant", "text": TEXT}),
    json.dumps({"type": "tool_call", "id": "c1", "name": "shell", "arguments": {"command": "ls -la src/"}}),
    json.dumps({"type": "tool_result", "id": "c1", "exit_code": 0, "output": "total 8\n" + "-rw-r--r-- file\n" * 8}),
    json.dumps({"type": "usage", "call": 1, "usage": {"prompt_tokens": 1200, "completion_tokens": 40,
                                                       "prompt_tokens_details": {"cached_tokens": 800}}}),
]
block = ("\n".join(lines) + "\n").encode()
out = sys.stdout.buffer
out.write(b'{"type": "init", "model": "fake"}\n')
for _ in range(N // len(lines)):
    out.write(block)
out.write(b'{"type": "result", "status": "success"}\n')
out.flush()
