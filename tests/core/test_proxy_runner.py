"""The metering proxy inside a real runner, with the reference agent: the proxy's figures drive
the meter and the store while the agent's own are kept beside them; a token budget stops a
runaway at the wire; a real provider's key reaches the provider but never the agent, the
store or a log; a divergence between the two meters is flagged."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from types import SimpleNamespace

from agentmeter_tui.core.scripted.client import session_info, start_server_process
from agentmeter_tui.core.paths import runner_log_path
from agentmeter_tui.core.run.context import RunContext
from agentmeter_tui.core.run.trial import TrialRun
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.suites.load import load_suite
from agentmeter_tui.core.usage import TokenUsage
from tests.conftest import agentmeter
from tests.e2e.harness import run_scenario
from tests.e2e.test_reference_e2e import CHECK_FILE, WRITE_FILE

LOOP = """
[[turns]]
loop = true
shell = "echo again {call} >> loop.txt"
usage = { uncached_input = 400, cached_input = 2000, output = 100 }
"""
PLANTED = "sk-planted-3f9a0c7e5d1b"


def usage_rows(result, source: str) -> TokenUsage:
    total = TokenUsage()
    for row in result.store.db.query("select * from usage where trial_id = ? and source = ?",
                                      [result.row["id"], source]):
        total = total + TokenUsage.from_dict(row)
    return total


def test_proxy_meters_the_trial_and_keeps_the_agents_figures(tmp_path):
    result = run_scenario(tmp_path, "reference", WRITE_FILE, test_sh=CHECK_FILE, suite_extra="proxy = true")
    row = result.row
    assert row["status"] == "passed" and row["usage_source"] == "proxy"
    assert result.usage == result.served
    assert usage_rows(result, "proxy") == usage_rows(result, "stdout") == result.served
    assert result.extra["proxy"] == {"calls": 2, "refused": 0, "usage": result.served.as_dict(), "cache_write_1h": 0,
                                     "errors": {}, "charged_usd": None}
    assert TokenUsage.from_dict(result.extra["reported_usage"]) == result.served
    assert "usage-divergence" not in (row["flags"] or "")
    calls = [json.loads(e[5]) for e in result.events("usage") if e[3] == "proxy"]
    assert [(c["status"], c["outcome"], c["model"]) for c in calls] == [(200, "completed", "mock")] * 2
    assert all(c["ttfb_ms"] is not None and c["total_ms"] >= c["ttfb_ms"] for c in calls)


def test_token_budget_stops_a_runaway_at_the_wire(tmp_path):
    result = run_scenario(tmp_path, "reference", LOOP, suite_extra="proxy = true",
                          budget="wall_seconds = 120\ntokens = 6000")
    row = result.row
    assert row["status"] == "killed" and row["reason"] == "budget:tokens"
    served = result.extra["scripted"]["served"]
    raw = [sum(call[3]) for call in served]
    # Calls of 2,500 tokens: the third crosses 6,000, and no call was served after it.
    assert raw == [2500, 2500, 2500]
    assert result.usage == result.served == TokenUsage(1200, 6000, 0, 300, 0)
    assert result.extra["proxy"]["calls"] == 3


def write_suite(folder: Path, upstream: str) -> Path:
    suite = folder / "suite"
    (suite / "task" / "tests").mkdir(parents=True)
    (suite / "suite.toml").write_text(textwrap.dedent(f"""\
        [suite]
        id = "planted"
        proxy = true
        [[models]]
        id = "real-model"
        provider = "paid"
        [providers.paid]
        kind = "openai-chat"
        base_url = "{upstream}"
        api_key_env = "AM_TEST_PROVIDER_KEY"
        [[clis]]
        adapter = "reference"
        """))
    (suite / "task" / "task.toml").write_text("[verifier]\ntimeout_sec = 30\n")
    (suite / "task" / "instruction.md").write_text("Write out.txt.\n")
    (suite / "task" / "tests" / "test.sh").write_text(CHECK_FILE)
    return suite


def test_a_real_key_goes_only_to_the_provider(tmp_path):
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(WRITE_FILE)
    with start_server_process(scenario, log_dir=tmp_path / "provider-log") as provider:
        db = tmp_path / "planted.db"
        result = agentmeter("run", str(write_suite(tmp_path, provider.base_url)), "--headless", "--db", str(db),
                            env={"AM_TEST_PROVIDER_KEY": PLANTED}, timeout=120)
        assert result.returncode == 0, result.stderr
        # The provider saw the real key (its session is keyed by it): the proxy swapped it in.
        assert session_info(provider.base_url, PLANTED, control=provider.control_key)["calls"] == 2
    store = Store(db)  # held open: closing the last connection would delete the WAL mid-scan
    (row,) = store.trials("planted")
    assert row["status"] == "passed" and row["usage_source"] == "proxy"
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".toml"]
    assert runner_log_path(db) in written and db in written
    for path in written:
        assert PLANTED.encode() not in path.read_bytes(), path
    assert PLANTED not in result.stdout + result.stderr
    # The agent never had it either: its transcript and the key it was given are the proxy's.
    assert not any(PLANTED in (e[4] or "") for e in store.events(row["id"]))


def test_divergence_beyond_two_percent_is_flagged(tmp_path):
    suite_dir = tmp_path / "s"
    (suite_dir / "t").mkdir(parents=True)
    (suite_dir / "suite.toml").write_text('[suite]\nid = "d"\nproxy = true\n[[models]]\nid = "m"\n'
                                          '[[clis]]\nadapter = "reference"\n')
    (suite_dir / "t" / "task.toml").write_text("[verifier]\ncommand = \"true\"\n")
    (suite_dir / "t" / "instruction.md").write_text("x\n")
    (suite_dir / "scenarios").mkdir()
    (suite_dir / "scenarios" / "m.toml").write_text(WRITE_FILE)
    ctx = RunContext(load_suite(suite_dir), None, None, run_id=None, clis_root=tmp_path)
    suite = ctx.suite
    config = suite.configurations()[0]

    def trial(metered: TokenUsage, reported: TokenUsage) -> SimpleNamespace:
        return SimpleNamespace(ctx=ctx, plan=SimpleNamespace(config=config), cost=None, flags=set(), usage=metered,
                               parser=SimpleNamespace(reported_cost_usd=None, usage=reported),
                               adapter=SimpleNamespace(reports_cost_for=frozenset(), name="reference"),
                               proxy_route=SimpleNamespace(charged_calls=0, charged=0))

    fields = TrialRun.cost_fields(trial(TokenUsage(10000), TokenUsage(10150)))
    assert fields["usage_source"] == "proxy" and fields["flags"] is None
    fields = TrialRun.cost_fields(trial(TokenUsage(10000), TokenUsage(9000)))
    assert json.loads(fields["flags"]) == ["usage-divergence"]
