"""Opening the TUI on a store reads it with sqlite3 alone: sqlite-utils, and numpy through it,
load only when something migrates or writes a table (``core/store/lazydb.py``). Which modules
a screen loads is checked here, not how long it takes (``benchmarks/paper_grid.py
--tui-only`` times the open)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import asyncio, json, sys
from agentmeter_tui.ui.app import AgentMeterApp
from agentmeter_tui.ui.session import UiSession
from agentmeter_tui.ui.settings import UiSettings

async def main():
    trial = int(sys.argv[3]) or None
    app = AgentMeterApp(UiSession(sys.argv[1], reviewer="alice", live=False), screen=sys.argv[2], trial=trial,
                        settings=UiSettings(), connect=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        return app.export_screenshot()

svg = asyncio.run(main())
print(json.dumps({"svg": svg, "modules": sorted(sys.modules)}))
"""


@pytest.mark.parametrize(("screen", "trial", "shown"), [("grid", 0, "guzzler"), ("review", 1, "count-lines")])
def test_a_screen_opens_without_sqlite_utils_or_numpy(sample_db, screen, trial, shown):
    done = subprocess.run([sys.executable, "-c", PROBE, str(sample_db), screen, str(trial)], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert shown in found["svg"]  # the screen drew the store's data
    assert [m for m in ("sqlite_utils", "numpy") if m in found["modules"]] == []
