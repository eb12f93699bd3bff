"""The metering proxy against local clients that hold connections (issue 23, item 6): 300
connections that never finish their request head ("slowloris") are closed after the header
timeout while a trial's calls go through; a route's open connections are capped, a request
on one more is refused in its protocol's shape, and a place freed is taken again."""

from __future__ import annotations

import asyncio

from agentmeter_tui.core.proxy import limits
from tests.core.test_proxy import REAL_KEY, Sink, proxy, send, session, upstream  # noqa: F401 - fixtures
from tests.waiting import FAILSAFE, eventually

SLOW_HEAD = b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: amp-"


async def closed_by_server(reader: asyncio.StreamReader) -> bytes:
    return await reader.read()  # EOF: the proxy closed it


async def test_slow_header_connections_are_closed_and_calls_go_through(upstream, proxy, tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "HEADER_TIMEOUT", 0.5, raising=False)
    await session(upstream, tmp_path)
    route = proxy.route(str(upstream.make_url("")), REAL_KEY, Sink(), "trial 1")
    slow = [await asyncio.open_connection("127.0.0.1", proxy.port) for _ in range(300)]
    for _, writer in slow:
        writer.write(SLOW_HEAD)
    status, _, _ = await send(proxy.base_url, "anthropic", route.key)
    assert status == 200
    # Fail-safe only: the old proxy never closed them, and this is what turned into a failure.
    answers = await asyncio.wait_for(asyncio.gather(*(closed_by_server(r) for r, _ in slow)), FAILSAFE / 10)
    assert answers == [b""] * 300  # closed without an answer
    for _, writer in slow:
        writer.close()


async def request_status(port: int, key: str) -> tuple[int, asyncio.StreamWriter]:
    """A side call (no model call) on a new connection, kept open; its status code."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n\r\n".encode())
    line = await reader.readline()
    return int(line.split()[1]), writer


async def test_a_routes_open_connections_are_capped(upstream, proxy, tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "MAX_ROUTE_CONNECTIONS", 4, raising=False)
    route = proxy.route(str(upstream.make_url("")), REAL_KEY, Sink(), "trial 1")
    held = [await request_status(proxy.port, route.key) for _ in range(4)]
    assert all(status != 429 for status, _ in held), held
    status, extra = await request_status(proxy.port, route.key)
    assert status == 429
    extra.close()
    held[0][1].close()
    await held[0][1].wait_closed()

    async def admitted() -> bool:
        status, writer = await request_status(proxy.port, route.key)
        writer.close()
        return status != 429

    # The freed place is taken again once the proxy has seen the connection go.
    await eventually(admitted, "a freed connection's place to be taken again")
    for _, writer in held[1:]:
        writer.close()
