"""Provider errors at the wire, in a real runner with the reference agent behind the proxy: an
agent that gives up on a 529 leaves an infra-invalid trial (its tokens kept, the error recorded
per call with type and retry-after) that is retried after a backoff of at least the provider's
retry-after; a provider's calls-per-minute cap makes calls wait (shown to the trial), never fail."""

from __future__ import annotations

import asyncio
import json
import textwrap
from datetime import datetime
from pathlib import Path

from agentmeter_tui.core.proxy.limits import CallRate
from agentmeter_tui.core.run.provider_errors import ProviderErrors
from agentmeter_tui.core.store import Store
from tests.conftest import agentmeter
from tests.e2e.harness import PRICES

GIVES_UP = """
[[turns]]
shell = "echo one > one.txt"
usage = { uncached_input = 500, cached_input = 1000, output = 40 }
[[turns]]
error = { status = 529, type = "overloaded_error", message = "Overloaded", retry_after = 0.5 }
"""


def write_suite(folder: Path, scenario: str, provider_extra: str = "", retries: int = 1) -> Path:
    suite = folder / "suite"
    (suite / "task" / "tests").mkdir(parents=True)
    (suite / "scenarios").mkdir()
    (suite / "suite.toml").write_text(textwrap.dedent(f"""\
        [suite]
        id = "provider-errors"
        proxy = true
        pricing = "prices.toml"
        max_retries = {retries}
        [[models]]
        id = "mock"
        [providers.scripted]
        kind = "scripted"
        {provider_extra}
        [[clis]]
        adapter = "reference"
        [budgets.default]
        wall_seconds = 120
        """))
    (suite / "prices.toml").write_text(PRICES)
    (suite / "scenarios" / "mock.toml").write_text(scenario)
    (suite / "task" / "task.toml").write_text("[verifier]\ntimeout_sec = 30\n")
    (suite / "task" / "instruction.md").write_text("Do it.\n")
    (suite / "task" / "tests" / "test.sh").write_text("#!/bin/sh\nexit 0\n")
    return suite


def test_an_agent_that_gives_up_on_529_is_infra_invalid_and_retried_after_the_backoff(tmp_path):
    db = tmp_path / "e.db"
    suite = write_suite(tmp_path, GIVES_UP, provider_extra="calls_per_minute = 600")  # capped, never reached
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=180)
    assert result.returncode == 8, result.stderr  # its one cell ended infra-invalid: no result
    store = Store(db)
    try:
        rows = store.trials("provider-errors")
        first, second = rows
        assert [r["attempt"] for r in rows] == [0, 1]
        for row in rows:
            assert row["status"] == "infra-invalid"
            assert row["reason"] == "infra: provider errors: 529 overloaded_error"
            # the tokens of the call that was served stay in the accounting
            assert (row["uncached_input"], row["cached_input"], row["output"]) == (500, 1000, 40)
            extra = json.loads(row["extra"])
            assert extra["proxy"]["errors"] == {"529": 1}
        calls = [json.loads(e[5]) for e in store.events(first["id"]) if e[3] == "proxy" and e[5]]
        [failed] = [c for c in calls if c["error"]]
        assert failed["status"] == 529 and failed["error"]["type"] == "overloaded_error"
        assert failed["error"]["retry_after"] == 0.5
        notes = [e[4] for e in store.events(first["id"]) if e[3] == "runner"]
        assert any("provider error 529 overloaded_error: rate-limited, retry after 0.5 s" in n for n in notes)
    finally:
        store.close()
    # backoff before attempt 1: max(retry-after 0.5 s, 1 s * 2**0)
    gap = datetime.fromisoformat(second["started_at"]) - datetime.fromisoformat(first["finished_at"])
    assert gap.total_seconds() >= 1.0


def test_backoff_honours_retry_after_and_grows_per_attempt():
    errors = ProviderErrors()
    assert errors.record({"status": 429, "type": "rate_limit_error", "retry_after": 30.0})
    assert errors.gave_up and errors.backoff(0) == 30.0 and errors.backoff(6) == 60.0  # capped at 60 s
    assert not errors.record({"status": 400, "type": "invalid_request_error"})  # the configuration's fault
    assert not errors.gave_up
    assert not errors.record(None) and errors.summary() == "429 rate_limit_error"


async def test_calls_per_minute_cap_waits_and_says_so():
    now = [0.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    rate = CallRate(2, clock=lambda: now[0], sleep=sleep)
    told: list[float] = []
    assert await rate.acquire(told.append) == 0 and await rate.acquire(told.append) == 0
    now[0] = 10.0
    assert await rate.acquire(told.append) == 50.0  # the first call leaves the window at 60 s
    assert told == [50.0] and slept == [50.0]
    # at 60 s the window holds the third call: one more goes at once, the next waits a full minute
    waits = await asyncio.gather(rate.acquire(), rate.acquire())
    assert waits == [0.0, 60.0]


async def test_the_proxy_holds_calls_over_the_cap_and_tells_the_trial(tmp_path):
    from agentmeter_tui.core.proxy.server import MeteringProxy
    from tests.core.test_proxy import REAL_KEY, Sink, send, session

    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds  # a minute passes at once: the test waits on nothing

    class WaitingSink(Sink):
        waits: list[float] = []

        def on_proxy_wait(self, call, seconds: float) -> None:
            self.waits.append(seconds)

    from tests.core.scripted_support import start_server

    upstream = await start_server()
    proxy = MeteringProxy(log=lambda text: None)
    await proxy.start()
    try:
        await session(upstream, tmp_path)
        sink = WaitingSink()
        route = proxy.route(str(upstream.make_url("")), REAL_KEY, sink,
                            limiter=CallRate(1, clock=lambda: now[0], sleep=sleep))
        statuses = [(await send(proxy.base_url, "chat", route.key))[0] for _ in range(2)]
    finally:
        await proxy.close()
        await upstream.close()
    assert statuses == [200, 200] and sink.waits == [60.0]
    assert [c.outcome for c in sink.calls] == ["completed", "completed"]



def test_the_rate_limited_flag_is_set_while_waiting_and_cleared_by_a_good_call():
    from types import SimpleNamespace

    from agentmeter_tui.core.proxy.calls import ProxyCall
    from agentmeter_tui.core.run.trial import TrialRun

    changed: list = []
    trial = SimpleNamespace(flags=set(), ctx=SimpleNamespace(sink=SimpleNamespace(trial_changed=changed.append)), notes=[])
    trial.note = lambda text, kind=None: trial.notes.append(text)
    trial._rate_limited = lambda waiting: TrialRun._rate_limited(trial, waiting)
    TrialRun.on_proxy_wait(trial, ProxyCall(1, "chat", "POST", "/v1/chat/completions"), 12.5)
    assert trial.flags == {"rate-limited"} and len(changed) == 1
    assert trial.notes == ["waiting 12.5 s for the provider's rate limit (calls per minute)"]
    TrialRun._rate_limited(trial, True)  # already shown: no further change
    TrialRun._rate_limited(trial, False)  # the next good call
    assert trial.flags == set() and len(changed) == 2


def test_the_providers_charge_is_the_trials_actual_cost(tmp_path):
    """A real runner, the reference agent behind the proxy, and a provider that answers with
    OpenRouter's recorded stream: the trial's actual cost is OpenRouter's `usage.cost`."""
    import http.server
    import threading

    from tests.core.test_proxy_providers import FIXTURES, RECORDINGS
    from tests.core.test_proxy_runner import write_suite as write_paid_suite

    recording = RECORDINGS["openrouter-stream-cost"]
    body = (FIXTURES / recording.file).read_bytes()

    class Replay(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", recording.content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Replay)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    db = tmp_path / "charged.db"
    try:
        result = agentmeter("run", str(write_paid_suite(tmp_path, f"http://127.0.0.1:{server.server_port}")),
                            "--headless", "--db", str(db), env={"AM_TEST_PROVIDER_KEY": "sk-or-test"}, timeout=120)
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr
    store = Store(db)
    try:
        (row,) = store.trials("planted")
    finally:
        store.close()
    assert row["cost_actual_source"] == "provider" and row["cost_actual_usd"] == float(recording.cost)
    assert (row["uncached_input"], row["output"]) == (recording.expect["uncached_input"], recording.expect["output"])
    assert json.loads(row["extra"])["proxy"]["charged_usd"] == float(recording.cost)
