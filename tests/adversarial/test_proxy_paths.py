"""Model calls that dodge the metering proxy by the way they spell their path (issue 37, attack 1).

An agent behind the proxy sent its calls to ``/v1/chat/./completions``: the proxy matched the
path as sent, decided it was no model call and forwarded it unmetered, and the HTTP client
normalised it to ``/v1/chat/completions`` on the way out (the provider served 4 calls, the
trial was metered for 1). Each target below is sent byte for byte (a raw socket: an HTTP
client would normalise it first); each must be metered exactly like the canonical call or
refused, and the calls the scripted upstream served must equal the calls metered.
"""

from __future__ import annotations

import asyncio
import json

import orjson
import pytest

from tests.core.scripted_support import chat_body
from tests.core.test_proxy import REAL_KEY, Sink, proxy, served, session, upstream  # noqa: F401 - fixtures

CANONICAL = "/v1/chat/completions"
TARGETS = [
    CANONICAL,
    "/v1/chat/./completions",
    "/v1/chat//completions",
    "/v1/chat/%2e/completions",
    "/v1/chat/%2E%2E/chat/completions",
    "/v1//chat/completions",
    "/V1/chat/completions",
    "/v1/chat/completions/..;/x",
    "/v1/chat/completions/",
    "/v1/models/../chat/completions",
    "/v1/chat/completions/../../chat/completions",
    "/v1/chat%2Fcompletions",
    "/v1/%63hat/completions",
    "/v1/chat/completions?stream=false&x=../y",
    "/v1/chat/completions#frag",
    "/v1/chat\\completions",
    "/v1/files/../../v1/chat/completions",
    "http://127.0.0.1/v1/chat/completions",
    "http://example.invalid/v1/chat/./completions",
]


async def raw_call(port: int, target: str, key: str, method: str = "POST",
                   body: dict | None = None) -> tuple[int, bytes]:
    """One request with ``target`` exactly as given; (status, body)."""
    payload = orjson.dumps(chat_body(stream=False) if body is None else body)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\nConnection: close\r\n\r\n")
    writer.write(head.encode() + payload)
    answer = await reader.read()
    writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


@pytest.mark.parametrize("target", TARGETS)
async def test_every_spelling_is_metered_or_refused(upstream, proxy, tmp_path, target):
    await session(upstream, tmp_path)
    sink = Sink()
    route = proxy.route(str(upstream.make_url("")), REAL_KEY, sink, "trial 1")
    status, body = await raw_call(proxy.port, target, route.key)
    info = await served(upstream)
    metered = [c for c in sink.calls if c.usage]
    assert info["calls"] == len(metered), f"{target}: {info['calls']} served, {len(metered)} metered"
    assert route.usage == sum((c.usage for c in metered), route.usage.__class__())
    if status == 200:
        assert len(metered) == 1 and metered[0].path == CANONICAL
    else:
        assert status in (400, 404) and info["calls"] == 0
        if sink.calls:  # a target the server parsed: refused by the proxy, in the protocol's shape
            [call] = sink.calls
            assert call.outcome == "refused" and "not a model endpoint" in call.note
            assert json.loads(body)["error"]["type"] == "not_found_error"


async def test_what_goes_upstream_is_the_canonical_path(upstream, proxy, tmp_path):
    await session(upstream, tmp_path)
    sink = Sink()
    route = proxy.route(str(upstream.make_url("")), REAL_KEY, sink, "trial 1")
    for target in ("/v1/chat/./completions", "/v1/models/../chat/completions", "/v1/%63hat/completions"):
        assert (await raw_call(proxy.port, target, route.key))[0] == 200
    info = await served(upstream)
    assert info["calls"] == 3 == len([c for c in sink.calls if c.usage])
    assert {c.path for c in sink.calls} == {CANONICAL}


async def test_a_route_calls_its_own_protocols_endpoints_only(upstream, proxy, tmp_path):
    """A trial whose CLI speaks Anthropic cannot use its key on another protocol's endpoint,
    nor on a route that is no endpoint at all (OpenAI's stored-completions listing)."""
    await session(upstream, tmp_path)
    sink = Sink()
    route = proxy.route(str(upstream.make_url("")), REAL_KEY, sink, "trial 1", protocols=("anthropic",))
    status, body = await raw_call(proxy.port, CANONICAL, route.key)
    assert status == 404 and json.loads(body)["type"] == "error"  # Anthropic's error shape
    status, _ = await raw_call(proxy.port, "/v1/messages/batches", route.key)
    assert status == 404
    chat = proxy.route(str(upstream.make_url("")), REAL_KEY, Sink(), "trial 2", protocols=("chat",))
    status, _ = await raw_call(proxy.port, CANONICAL, chat.key, method="GET")
    assert status == 404
    assert (await served(upstream))["calls"] == 0
    assert [c.outcome for c in sink.calls] == ["refused", "refused"] and route.refused == 2


async def test_a_key_derived_from_what_a_trial_sees_opens_no_route(upstream, proxy, tmp_path):
    """Each trial's key is drawn from ``secrets`` (>= 128 bits), not derived from its token:
    keys made from another trial's token, or one character off a real key, are refused."""
    await session(upstream, tmp_path)
    tokens = ["t1-3f9a0c", "t2-77be01"]
    routes = [proxy.route(str(upstream.make_url("")), REAL_KEY, Sink(), f"trial {n}") for n in (1, 2)]
    assert routes[0].key != routes[1].key and all(len(r.key) - len("amp-") >= 32 for r in routes)
    guesses = [f"{prefix}{token}" for token in tokens for prefix in ("amp-", "am-", "")]
    guesses += [routes[1].key[:-1] + ("A" if routes[1].key[-1] != "A" else "B"), routes[1].key.upper()]
    for guess in guesses:
        status, body = await raw_call(proxy.port, CANONICAL, guess)
        assert status == 401 and b"unknown or expired key" in body, guess
    assert (await served(upstream))["calls"] == 0
    assert (await raw_call(proxy.port, CANONICAL, routes[1].key))[0] == 200
