"""``suites/grid-dry-run``: 3 scripted models x all six real agent CLIs x 2 tasks, headless
against the scripted model server. Every cell must fill with the verdict its model earns
(solver and reasoner pass, fumbler fails), and every trial's token classes must equal what
the server served it, folded where its CLI cannot tell classes apart. 36 real CLI runs: about
two and a half minutes at the suite's concurrency of 3 on two cores."""

from __future__ import annotations

import json

import pytest

from agentmeter_tui.core.harnesses import ADAPTERS
from agentmeter_tui.core.paths import default_clis_root
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.suites.load import load_suite
from agentmeter_tui.core.usage import TOKEN_CLASSES, TokenUsage
from agentmeter_tui.core.wire import fold
from tests.conftest import ROOT, agentmeter, need

SUITE = ROOT / "suites" / "grid-dry-run"
pytestmark = [pytest.mark.clis, pytest.mark.slow]


def test_every_cell_fills_with_the_tokens_served(tmp_path):
    suite = load_suite(SUITE)
    clis = [c.adapter for c in suite.spec.clis]
    bundled = {n for n in ADAPTERS.names() if ADAPTERS.get(n).install.registry == "bundled"}  # ours, not CLIs
    assert set(clis) == set(ADAPTERS.names()) - bundled  # all six real CLIs
    for name in clis:
        need(ADAPTERS.get(name)().is_installed(default_clis_root()), f"{name} is not installed (agentmeter install-clis)")
    db = tmp_path / "grid.db"
    result = agentmeter("run", str(SUITE), "--headless", "--db", str(db), timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    trials = Store(db).trials("grid-dry-run")
    cells = {(t["model"], t["cli"], t["task_id"]): t for t in trials}  # by id: a retry's row wins
    assert len(cells) == 3 * 6 * 2
    expected = {"solver": "passed", "reasoner": "passed", "fumbler": "failed"}
    wrong = {key: (t["status"], t["reason"]) for key, t in cells.items() if t["status"] != expected[key[0]]}
    assert not wrong, wrong
    for (model, cli, task), trial in cells.items():
        usage = TokenUsage(*(trial[c] for c in TOKEN_CLASSES))
        served = TokenUsage.from_dict(json.loads(trial["extra"])["scripted"]["usage"])
        merged = ADAPTERS.get(cli).merged_classes
        assert served.raw > 0 and fold(usage, merged) == fold(served, merged), (model, cli, task, usage, served)
        assert trial["cost_usd"] and trial["tool_calls"] >= 1
