"""The metering proxy in front of the scripted model server: per-call usage equal to what was
served in every protocol, streamed bytes passed on unchanged, the key swapped on the way up,
refusals in the protocol's own error shape with nothing sent upstream, cut streams, upstream
errors and failures, and no key in any record or log line."""

from __future__ import annotations

import asyncio
import re
from types import SimpleNamespace

import aiohttp
import pytest
from multidict import CIMultiDict

from agentmeter_tui.core.proxy.calls import ProxyCall
from agentmeter_tui.core.proxy.server import MeteringProxy
from agentmeter_tui.core.usage import TokenUsage
from agentmeter_tui.core.wire import MERGED, fold
from tests.core.scripted_support import (
    SHELL_SCHEMA,
    TWO_TURNS,
    chat_body,
    get_json,
    register,
    start_server,
    write_scenario,
)
from tests.waiting import eventually

REAL_KEY = "sk-real-PLANTED-4e1b2c"
TURNS = [TokenUsage(1200, 4000, 300, 30, 20), TokenUsage(1300, 4500, 0, 80, 25)]  # TWO_TURNS' usage
GEMINI = "/v1beta/models/gemini-2.5-pro"


def call_for(protocol: str, stream: bool) -> tuple[str, dict]:
    if protocol == "chat":
        return "/v1/chat/completions", chat_body(stream)
    if protocol == "anthropic":
        return "/v1/messages?beta=true", {"model": "claude-sonnet-4-6", "stream": stream, "max_tokens": 100,
                                          "messages": [{"role": "user", "content": "hi"}],
                                          "tools": [{"name": "Bash", "input_schema": SHELL_SCHEMA}]}
    if protocol == "responses":
        return "/v1/responses", {"model": "gpt-5.5", "stream": stream, "input": "hi",
                                 "tools": [{"type": "function", "name": "shell", "parameters": SHELL_SCHEMA}]}
    path = f"{GEMINI}:streamGenerateContent?alt=sse" if stream else f"{GEMINI}:generateContent"
    return path, {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                  "tools": [{"functionDeclarations": [{"name": "run_shell_command",
                                                       "parametersJsonSchema": SHELL_SCHEMA}]}]}


def key_headers(protocol: str, key: str) -> dict[str, str]:
    return {"anthropic": {"x-api-key": key}, "gemini": {"x-goog-api-key": key}}.get(
        protocol, {"Authorization": f"Bearer {key}"})


class Sink:
    """A trial stand-in: records what the proxy tells it, refuses when told to."""

    def __init__(self) -> None:
        self.calls: list[ProxyCall] = []
        self.usage = TokenUsage()
        self.refusal: str | None = None
        self.fail = False

    def admit_call(self) -> str | None:
        return self.refusal

    def on_proxy_usage(self, call: ProxyCall, delta: TokenUsage) -> None:
        if self.fail:
            raise RuntimeError("sink bug")
        self.usage = self.usage + delta

    def on_proxy_call(self, call: ProxyCall) -> None:
        self.calls.append(call)


@pytest.fixture
async def upstream(tmp_path):
    server = await start_server()
    yield server
    await server.close()


@pytest.fixture
async def proxy():
    logged: list[str] = []
    proxy = MeteringProxy(log=logged.append)
    await proxy.start()
    proxy.logged = logged
    yield proxy
    await proxy.close()


async def session(upstream, tmp_path, key: str = REAL_KEY, text: str = TWO_TURNS, label: str = "t") -> None:
    # the same label gives the same message ids
    status, _ = await register(upstream, key, write_scenario(tmp_path, text, f"{label}.toml"), label)
    assert status == 200


async def served(upstream, key: str = REAL_KEY) -> dict:
    return (await get_json(upstream, f"/_scripted/sessions/{key}"))[1]


async def send(base: str, protocol: str, key: str, stream: bool = True) -> tuple[int, CIMultiDict, bytes]:
    path, body = call_for(protocol, stream)
    async with aiohttp.ClientSession() as client, \
            client.post(base + path, json=body, headers=key_headers(protocol, key)) as response:
        return response.status, response.headers.copy(), await response.read()


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("protocol", ["chat", "anthropic", "responses", "gemini"])
async def test_calls_are_metered_exactly_and_the_key_is_swapped(upstream, proxy, tmp_path, protocol, stream):
    await session(upstream, tmp_path)
    sink = Sink()
    route = proxy.route(str(upstream.make_url("")), REAL_KEY, sink, "trial 1")
    for _ in TURNS:
        status, _, _ = await send(proxy.base_url, protocol, route.key, stream)
        assert status == 200
    info = await served(upstream)
    assert info["calls"] == 2 and all(c["completed"] for c in info["served"])  # the real key reached it
    expected = [fold(u, MERGED[protocol]) for u in TURNS]
    assert [c.usage for c in sink.calls] == expected
    assert sink.usage == route.usage == fold(TokenUsage.from_dict(info["usage"]), MERGED[protocol])
    first = sink.calls[0]
    assert (first.protocol, first.status, first.outcome) == (protocol, 200, "completed")
    assert first.model == {"chat": "m", "anthropic": "claude-sonnet-4-6", "responses": "gpt-5.5",
                           "gemini": "gemini-2.5-pro"}[protocol]
    assert first.ttfb_ms is not None and first.total_ms >= first.ttfb_ms and first.bytes_out > 0
    assert route.summary()["calls"] == 2 and route.inflight == 0


@pytest.mark.parametrize("protocol", ["chat", "anthropic", "responses", "gemini"])
async def test_streams_pass_through_byte_for_byte(upstream, proxy, tmp_path, protocol):
    direct_key, proxied_key = "direct-key", REAL_KEY
    await session(upstream, tmp_path, direct_key, label="same")
    await session(upstream, tmp_path, proxied_key, label="same")
    route = proxy.route(str(upstream.make_url("")), proxied_key, Sink())
    _, direct_headers, direct = await send(str(upstream.make_url("")).rstrip("/"), protocol, direct_key)
    _, proxied_headers, proxied = await send(proxy.base_url, protocol, route.key)
    # Only the second-resolution timestamps may differ between the two answers.
    stamp = re.compile(rb'"created(_at)?":\d+')
    assert stamp.sub(b"", proxied) == stamp.sub(b"", direct)
    assert proxied_headers["Content-Type"] == direct_headers["Content-Type"]
    if protocol == "anthropic":
        assert proxied_headers["request-id"] == direct_headers["request-id"]


@pytest.mark.parametrize("protocol", ["chat", "anthropic", "responses", "gemini"])
async def test_refused_calls_never_reach_the_provider(upstream, proxy, tmp_path, protocol):
    await session(upstream, tmp_path)
    sink = Sink()
    route = proxy.route(str(upstream.make_url("")), REAL_KEY, sink)
    assert (await send(proxy.base_url, protocol, route.key))[0] == 200
    sink.refusal = "the trial is over its budget: budget:tokens (5550 >= 5000)"
    status, _, body = await send(proxy.base_url, protocol, route.key)
    assert status == 400
    import orjson

    error = orjson.loads(body)
    message = error["error"]["message"]
    assert "over its budget" in message and "no further model calls" in message
    if protocol == "anthropic":
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    elif protocol == "gemini":
        assert error["error"]["code"] == 400 and error["error"]["status"] == "INVALID_ARGUMENT"
    else:
        assert error["error"]["type"] == "invalid_request_error"
    assert (await served(upstream))["calls"] == 1  # the refused call was never passed on
    assert [c.outcome for c in sink.calls] == ["completed", "refused"]
    assert route.summary() == {"calls": 1, "refused": 1, "usage": sink.usage.as_dict(), "cache_write_1h": 0,
                               "errors": {}, "charged_usd": None}


async def test_unknown_key_is_401_in_the_protocols_shape(proxy):
    status, _, body = await send(proxy.base_url, "anthropic", "amp-nobody")
    assert status == 401 and b'"authentication_error"' in body


async def test_upstream_errors_pass_through_with_their_headers(upstream, proxy, tmp_path):
    await session(upstream, tmp_path, text='[[turns]]\nerror = { status = 429, message = "slow", retry_after = 0 }\n')
    sink = Sink()
    route = proxy.route(str(upstream.make_url("")), REAL_KEY, sink)
    status, headers, body = await send(proxy.base_url, "chat", route.key)
    assert status == 429 and headers["retry-after"] == "0" and b"rate_limit_error" in body
    assert sink.calls[0].status == 429 and not sink.calls[0].usage


async def test_side_endpoints_are_passed_on_and_recorded_with_no_usage(upstream, proxy, tmp_path):
    await session(upstream, tmp_path)
    sink = Sink()
    route = proxy.route(str(upstream.make_url("")), REAL_KEY, sink)
    async with aiohttp.ClientSession() as client:
        async with client.post(proxy.base_url + "/v1/messages/count_tokens", json={"messages": []},
                               headers={"x-api-key": route.key}) as response:
            assert response.status == 200 and "input_tokens" in await response.json()
        async with client.get(proxy.base_url + "/v1beta/models", params={"key": route.key}) as response:
            assert response.status == 200
    assert [(c.protocol, c.side, c.status, c.usage) for c in sink.calls] == [
        ("anthropic", True, 200, TokenUsage()), ("gemini", True, 200, TokenUsage())]
    assert route.requests == 2 and route.calls == 0
    assert (await served(upstream))["calls"] == 0


async def test_a_cut_stream_is_not_counted_by_either_side(upstream, proxy, tmp_path):
    stall = ('[[turns]]\ntext = "never finishes"\nstall_ms = 600000\n'
             'usage = { uncached_input = 1100, output = 10 }\n')
    await session(upstream, tmp_path, text=stall)
    sink = Sink()
    route = proxy.route(str(upstream.make_url("")), REAL_KEY, sink)
    path, body = call_for("anthropic", True)
    async with aiohttp.ClientSession() as client:
        response = await client.post(proxy.base_url + path, json=body, headers=key_headers("anthropic", route.key))
        assert b"message_start" in await response.content.readany()
        response.close()  # the CLI is killed mid-stream
    await proxy.release(route)
    assert route.inflight == 0 and route.key not in proxy.routes
    (call,) = sink.calls
    assert call.outcome == "client disconnected" and not call.usage
    assert call.partial == TokenUsage(1100, 0, 0, 1, 0)  # message_start's input, never metered
    async def hung_up():  # the provider notices the proxy hanging up
        info = await served(upstream)
        return info if info["served"] and info["requests"] and not info["served"][0]["completed"] else None

    info = await eventually(hung_up, "the provider to see the call cut")
    assert info["usage"] == TokenUsage().as_dict() and sink.usage == TokenUsage()


async def test_a_call_whose_cli_hangs_up_before_the_answer_begins_is_metered(upstream, proxy, tmp_path, monkeypatch):
    """The agent is killed while its model still thinks (no byte of the answer yet): aiohttp
    cancels the proxy's handler, but the request is at the provider, which finishes and bills
    the answer. The proxy reads it for its figures and records the call with them: what the
    server served (found by the caps under the fault matrix's kills, issue 25). The model
    thinks until the test has seen the CLI go (a gate, not a think time a slow machine could
    outlast), and the drain's bound is raised so the gate never races it."""
    import agentmeter_tui.core.scripted.app as scripted
    import agentmeter_tui.core.proxy.server as server_module

    monkeypatch.setattr(server_module, "ANSWER_DRAIN", 60.0)
    gate = asyncio.Event()

    async def held(seconds: float) -> None:
        await gate.wait()

    monkeypatch.setattr(scripted, "asyncio", SimpleNamespace(sleep=held, CancelledError=asyncio.CancelledError))
    think = '[[turns]]\ntext = "thought long"\ndelay_ms = 2000\nusage = { uncached_input = 1100, output = 10 }\n'
    await session(upstream, tmp_path, text=think)
    sink = Sink()
    route = proxy.route(str(upstream.make_url("")), REAL_KEY, sink)
    path, body = call_for("chat", True)
    async with aiohttp.ClientSession() as client:
        posting = asyncio.create_task(client.post(proxy.base_url + path, json=body,
                                                  headers=key_headers("chat", route.key)))
        await eventually(_taken(upstream), "the provider to take the call")
        assert not posting.done()  # no answer yet: the provider thinks
        posting.cancel()  # the CLI is killed: its connection closes
        with pytest.raises(asyncio.CancelledError):
            await posting
    await eventually(lambda: all(c.transport is None or c.transport.is_closing() for c in route.connections),
                     "the proxy to see the CLI's connection go")
    gate.set()  # the model's answer comes now
    await eventually(lambda: sink.calls, "the call to be recorded")
    info = await served(upstream)
    assert info["served"][0]["completed"]
    (call,) = sink.calls
    assert (call.status, call.outcome) == (200, "client disconnected")
    assert call.usage == sink.usage == fold(TokenUsage.from_dict(info["usage"]), MERGED["chat"]) != TokenUsage()


def _taken(upstream):
    async def probe():
        return (await served(upstream))["served"]
    return probe


async def test_unreachable_provider_is_a_502_and_no_key_is_logged(proxy):
    sink = Sink()
    route = proxy.route("http://127.0.0.1:9", REAL_KEY, sink, "trial 7")  # the discard port: refused
    async with aiohttp.ClientSession() as client:
        path, body = call_for("gemini", True)
        async with client.post(proxy.base_url + path, params={"key": route.key}, json=body) as response:
            assert response.status == 502
            assert (await response.json())["error"]["code"] == 502
    assert sink.calls[0].outcome.startswith("upstream error")
    assert proxy.logged and all(REAL_KEY not in line and route.key not in line for line in proxy.logged)
    assert REAL_KEY not in repr(route) and route.key not in repr(route)
    assert REAL_KEY not in str(sink.calls[0].as_dict()) and route.key not in sink.calls[0].summary()


async def test_a_failing_sink_does_not_break_the_call(upstream, proxy, tmp_path):
    await session(upstream, tmp_path)
    sink = Sink()
    sink.fail = True
    route = proxy.route(str(upstream.make_url("")), REAL_KEY, sink)
    assert (await send(proxy.base_url, "responses", route.key))[0] == 200
    assert any("metering failed" in line for line in proxy.logged)


async def test_a_provider_that_drops_mid_stream_cuts_the_clis_stream_too(proxy):
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    async def dropping(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"choices": [{"delta": {"content": "half"}}]}\n\n')
        request.transport.close()  # the provider's connection breaks
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", dropping)
    provider = TestServer(app)
    await provider.start_server()
    try:
        sink = Sink()
        route = proxy.route(str(provider.make_url("")), REAL_KEY, sink)
        path, body = call_for("chat", True)
        async with aiohttp.ClientSession() as client, \
                client.post(proxy.base_url + path, json=body, headers=key_headers("chat", route.key)) as response:
            assert response.status == 200
            with pytest.raises(aiohttp.ClientPayloadError):
                await response.read()
        await proxy.release(route)
        (call,) = sink.calls
        assert call.outcome.startswith("upstream error") and not call.usage
    finally:
        await provider.close()


async def test_an_answer_received_whole_before_the_cli_went_away_is_metered(upstream, proxy, tmp_path):
    """The CLI is killed while the proxy passes on the end of an answer the provider finished:
    the end is in the proxy's buffer, not yet passed on. The provider bills that call, so its
    final figures are read from what was received and metered; the CLI's write fails, not the
    metering. Expected figures: what the scripted server served, read from the server."""
    from aiohttp import StreamReader
    from aiohttp.base_protocol import BaseProtocol

    from agentmeter_tui.core.proxy.scan import UsageScanner

    await session(upstream, tmp_path)
    status, _, body = await send(str(upstream.make_url("")).rstrip("/"), "anthropic", REAL_KEY)
    assert status == 200
    info = await served(upstream)
    assert info["calls"] == 1 and info["served"][0]["completed"]
    billed = fold(TokenUsage.from_dict(info["usage"]), MERGED["anthropic"])  # Anthropic: reasoning in output
    first = body.index(b"\n\n") + 2  # message_start: what was passed on before the CLI went away
    sink = Sink()
    route = proxy.route(str(upstream.make_url("")), REAL_KEY, sink)
    call = ProxyCall(1, "anthropic", "POST", "/v1/messages")
    scanner = UsageScanner("anthropic", "text/event-stream", "")
    assert not scanner.feed(body[:first]) or scanner.final is None
    loop = asyncio.get_running_loop()
    connection = BaseProtocol(loop)
    connection.connection_made(asyncio.Transport())  # the provider's connection, still open
    received = StreamReader(connection, 2 ** 16, loop=loop)
    rest = asyncio.create_task(proxy._meter_rest(route, call, scanner, received))

    def arrives() -> None:  # after the task's first step: the end comes in while it waits for it
        received.feed_data(body[first:])
        received.feed_eof()

    loop.call_soon(arrives)
    await rest
    assert call.usage == billed and sink.usage == billed and route.usage == billed
    await proxy._meter_rest(route, call, scanner, received)  # a second look finds nothing more to count
    assert sink.usage == billed
