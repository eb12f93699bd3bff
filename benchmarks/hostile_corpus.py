"""The hostile agent output the tests use, for benchmarks to stream at a screen.

The fake agents of tests/fixtures/agents (``hostile.py``: escape sequences that set the title,
write the clipboard, plant hyperlinks, move the cursor, switch bracketed paste, Rich markup
look-alikes, NUL, C1 and bidi controls, invalid UTF-8; ``noisy.py``: binary bytes and a
10 MiB line) are run as the tests run them, and their output is split and parsed as the
runner does it (the line cap, the ``command`` adapter's parser), so a benchmark shows a
screen exactly the events a run of those agents would store.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AGENTS = ROOT / "tests" / "fixtures" / "agents"
HOSTILE_AGENT = AGENTS / "hostile.py"


def hostile_events() -> list[tuple[str, str, str]]:
    """``(kind, stream, text)`` of every event the runner makes of the hostile agents' output."""
    from agentmeter_tui.core.harnesses import get_adapter
    from agentmeter_tui.core.lines import LineSplitter

    events = []
    for agent in (HOSTILE_AGENT, AGENTS / "noisy.py"):
        printed = subprocess.run([sys.executable, str(agent)], capture_output=True, check=True)
        parser = get_adapter("command").new_parser()
        for stream, data in (("stdout", printed.stdout), ("stderr", printed.stderr)):
            splitter = LineSplitter()
            for line in splitter.feed(data) + splitter.flush():
                events.extend((str(event.kind), stream, event.text) for event in parser.feed(stream, line))
    return events
