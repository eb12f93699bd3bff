"""`agentmeter meter -- COMMAND`: a tiny client script as COMMAND against the scripted model
server as upstream. Totals equal what the server says it served; a budget stops a looping
client (and its grandchild) at the first call over it, which never reaches the server; a 529
then a 200 shows in `errors` with the 200's tokens only; the real key never reaches the command."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import psutil
import pytest

from agentmeter_tui.core.store import Store
from tests.core.scripted_support import get_json, start_server, write_scenario

CLIENT = Path(__file__).parent.parent / "fixtures" / "agents" / "meter_client.py"
# One test looks for any process of this client on the machine: the module's tests share one
# xdist worker (scripts/test.sh runs --dist loadgroup), so no other test's client is about.
pytestmark = pytest.mark.xdist_group("meter-client")
REAL_KEY = "sk-real-PLANTED-93c1d7e0"
THREE_TURNS = """
[[turns]]
text = "one"
usage = { uncached_input = 1200, cached_input = 4000, cache_write = 300, output = 30, reasoning = 20 }
[[turns]]
text = "two"
usage = { uncached_input = 1300, cached_input = 4500, output = 80, reasoning = 25 }
[[turns]]
text = "three"
usage = { uncached_input = 900, cached_input = 5000, output = 40 }
"""
LOOPING = """
[[turns]]
text = "again"
usage = { uncached_input = 1000, output = 100 }
loop = true
"""
OVERLOADED_THEN_OK = """
[[turns]]
error = { status = 529, type = "overloaded_error", message = "Overloaded", retry_after = 2 }
[[turns]]
text = "fine"
usage = { uncached_input = 700, cached_input = 300, output = 50 }
"""
PRICES = """
as_of = 2026-11-01
[models.mock]
aliases = ["mock-model"]
input = "3"
cached_input = "0.3"
cache_write = "3.75"
output = "15"
"""


async def served(upstream, key: str = REAL_KEY) -> dict:
    return (await get_json(upstream, f"/_scripted/sessions/{key}"))[1]


async def meter(upstream, *args: str, env: dict | None = None) -> tuple[int, str, str]:
    environ = {**os.environ, "OPENAI_API_KEY": REAL_KEY, **(env or {})}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentmeter_tui.cli", "meter", "--upstream", f"openai={upstream.make_url('')}",
        *args, env=environ, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    return proc.returncode, out.decode(), err.decode()


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


async def test_totals_equal_what_was_served(tmp_path):
    upstream = await start_server(write_scenario(tmp_path, THREE_TURNS))
    prices = write_scenario(tmp_path, PRICES, "prices.toml")
    log = tmp_path / "calls.jsonl"
    try:
        code, out, err = await meter(upstream, "--json", "--prices", str(prices), "--log-calls", str(log),
                                     "--", sys.executable, str(CLIENT), "3")
        info = await served(upstream)
    finally:
        await upstream.close()
    assert code == 0, err
    totals = last_json(out)
    assert info["calls"] == 3 and totals["calls"] == 3
    assert {k: totals["tokens"][k] for k in info["usage"]} == info["usage"]
    # the snapshot's prices (per million) applied to what was served
    u = info["usage"]
    expected = (u["uncached_input"] * 3 + u["cached_input"] * 0.3 + u["cache_write"] * 3.75
                + (u["output"] + u["reasoning"]) * 15) / 1e6
    assert totals["cost_usd"] == pytest.approx(expected)
    assert totals["cost_actual_usd"] is None and totals["errors"] == {} and totals["exit_code"] == 0
    assert totals["killed"] is False
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["uncached_input"] for line in lines] == [c["usage"]["uncached_input"] for c in info["served"]]
    assert {line["protocol"] for line in lines} == {"chat"} and all(line["status"] == 200 for line in lines)
    assert "agentmeter: 3 calls" in err  # the live meter line


async def test_budget_stops_a_looping_client_and_its_tree(tmp_path):
    upstream = await start_server(write_scenario(tmp_path, LOOPING))
    try:
        code, out, err = await meter(upstream, "--json", "--budget-tokens", "3000", "--",
                                     sys.executable, str(CLIENT), "1", "--loop", "--child")
        info = await served(upstream)
    finally:
        await upstream.close()
    totals = last_json(out)
    assert code == 7, (totals, err[-2000:])  # EXIT_OVER_BUDGET
    # 1,100 tokens a call: the third call reaches 3,300 >= 3,000; the fourth is refused, never served
    assert info["calls"] == 3 and totals["calls"] == 3 and totals["refused"] == 1, (totals, info["usage"], info["served"][:4])
    assert totals["tokens"]["uncached_input"] == 3000 and totals["killed"] is True
    assert totals["budget"].startswith("budget:tokens")
    leftovers = [p for p in psutil.process_iter(["cmdline"])
                 if p.info["cmdline"] and str(CLIENT) in " ".join(p.info["cmdline"])
                 or (p.info["cmdline"] or [])[-1:] == ["import time; time.sleep(600)"]]
    assert leftovers == []


async def test_overloaded_then_ok_counts_the_200_only(tmp_path):
    upstream = await start_server(write_scenario(tmp_path, OVERLOADED_THEN_OK))
    log = tmp_path / "calls.jsonl"
    try:
        code, out, err = await meter(upstream, "--json", "--log-calls", str(log), "--",
                                     sys.executable, str(CLIENT), "2")
        info = await served(upstream)
    finally:
        await upstream.close()
    assert code == 0, err
    totals = last_json(out)
    assert totals["errors"] == {"529": 1} and totals["calls"] == 2
    assert {k: totals["tokens"][k] for k in info["usage"]} == info["usage"] == {
        "uncached_input": 700, "cached_input": 300, "cache_write": 0, "output": 50, "reasoning": 0}
    first = json.loads(log.read_text().splitlines()[0])
    assert first["status"] == 529 and first["error"]["type"] == "overloaded_error"
    assert first["error"]["retry_after"] == 2


async def test_the_real_key_never_reaches_the_command(tmp_path):
    upstream = await start_server(write_scenario(tmp_path, THREE_TURNS))
    env_out, db = tmp_path / "env.json", tmp_path / "meter.db"
    try:
        code, out, err = await meter(
            upstream, "--json", "--db", str(db), "--log-calls", str(tmp_path / "calls.jsonl"), "--",
            sys.executable, str(CLIENT), "1", "--env-out", str(env_out),
            env={"ANTHROPIC_API_KEY": REAL_KEY + "-anthropic", "GEMINI_API_KEY": REAL_KEY + "-gemini"})
        info = await served(upstream)
    finally:
        await upstream.close()
    assert code == 0, err
    assert info["calls"] == 1  # the server saw the real key (its session is keyed by it)
    seen = json.loads(env_out.read_text())
    assert seen["OPENAI_BASE_URL"].startswith("http://127.0.0.1:") and seen["OPENAI_BASE_URL"].endswith("/v1")
    assert seen["OPENAI_API_KEY"].startswith("amp-") and seen["ANTHROPIC_API_KEY"].startswith("amp-")
    for path in tmp_path.iterdir():
        if path.is_file() and path.suffix != ".toml":
            assert REAL_KEY.encode() not in path.read_bytes(), path.name
    assert REAL_KEY not in out and REAL_KEY not in err
    store = Store(db, readonly=True)
    try:
        [trial] = store.trials("meter")
    finally:
        store.close()
    assert trial["cli"] == Path(sys.executable).name and trial["status"] == "passed"
    assert trial["uncached_input"] == info["usage"]["uncached_input"] and trial["usage_source"] in (None, "proxy")


async def test_openrouter_charge_is_the_actual_cost(tmp_path):
    from tests.core.test_proxy_providers import RECORDINGS, replay_server

    recording = RECORDINGS["openrouter-stream-cost"]
    runner, url, seen = await replay_server(recording)
    try:
        code, out, err = await meter(_Url(url), "--json", "--", sys.executable, str(CLIENT), "1")
    finally:
        await runner.cleanup()
    assert code == 0, err
    totals = last_json(out)
    assert totals["cost_actual_usd"] == float(recording.cost) and totals["cost_actual_source"] == "provider"
    assert totals["tokens"]["uncached_input"] == recording.expect["uncached_input"] and len(seen) == 1


class _Url:
    def __init__(self, url: str) -> None:
        self.url = url

    def make_url(self, path: str) -> str:
        return self.url + path
