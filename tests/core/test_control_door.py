"""The control socket's door (core/run/clients.py): each limit refuses with a clear error line
or a close, and a well-behaved client is served meanwhile."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import orjson
import pytest

from agentmeter_tui.core.run import clients
from agentmeter_tui.core.run.clients import ControlDoor
from agentmeter_tui.core.run.control import encode
from tests.waiting import eventually


@pytest.fixture
async def door(tmp_path):
    async def subscribe(reader, writer, request):
        writer.write(encode({"ok": True, "type": "snapshot"}))
        while await reader.read(4096):
            pass

    door = ControlDoor(lambda op, request: {"ok": True, "op": op, "pad": "x" * request.get("pad", 0)}, subscribe)
    path = str(tmp_path / "s")
    server = await asyncio.start_unix_server(door.serve, path, limit=clients.MAX_REQUEST)
    door.path = path
    yield door
    server.close()


async def ask(door, *lines: bytes) -> list[dict]:
    """Send the lines on one connection; every reply until the door closes it (or the last one)."""
    reader, writer = await asyncio.open_unix_connection(door.path)
    writer.write(b"".join(lines))
    replies = []
    try:
        while line := await reader.readline():
            replies.append(orjson.loads(line))
            if len(replies) == sum(1 for x in lines if x.strip()) and not replies[-1].get("error"):
                break
    except ConnectionError:
        pass
    writer.close()
    return replies


async def test_a_request_is_served(door):
    assert await ask(door, encode({"op": "status"})) == [{"ok": True, "op": "status", "pad": ""}]


async def test_a_line_too_long_is_refused_and_closed(door):
    replies = await ask(door, b"x" * (clients.MAX_REQUEST + 10) + b"\n")
    assert replies[-1] == {"ok": False, "error": f"a request line is longer than {clients.MAX_REQUEST} bytes: closing"}


async def test_a_burst_past_the_rate_is_refused_and_closed(door, monkeypatch):
    # A still clock: the bucket refills at RATE a second, and a slow machine's 0.3 s over the
    # burst refilled it enough that nothing was refused.
    monkeypatch.setattr(clients, "time", SimpleNamespace(monotonic=lambda: 1000.0))
    replies = await ask(door, b"\n" * (clients.BURST + 5) + encode({"op": "status"}))
    assert replies == [{"ok": False, "error": f"more than {clients.RATE:g} requests a second on one connection: "
                                              "closing"}]


async def test_a_client_that_never_reads_is_dropped(door, monkeypatch):
    monkeypatch.setattr(clients, "MAX_UNREAD", 64 << 10)
    reader, writer = await asyncio.open_unix_connection(door.path)
    writer.write(encode({"op": "status", "pad": 50_000}) * 30)  # ~1.5 MB of replies, none read
    await eventually(lambda: door.refused == 1 and not door.open, "the door to drop the client")
    writer.close()


async def test_idle_connections_give_way_and_subscribers_are_capped(door, monkeypatch):
    monkeypatch.setattr(clients, "MAX_CLIENTS", 4)
    monkeypatch.setattr(clients, "MAX_SUBSCRIBERS", 2)
    idle = [await asyncio.open_unix_connection(door.path) for _ in range(4)]
    assert await ask(door, encode({"op": "status"})) == [{"ok": True, "op": "status", "pad": ""}]
    first = await idle[0][0].readline()  # the oldest idle connection gave its place up
    assert orjson.loads(first)["error"].startswith("closed: it sent no request")
    subscribers = [await asyncio.open_unix_connection(door.path) for _ in range(2)]
    for reader, writer in subscribers:
        writer.write(encode({"op": "subscribe"}))
        assert orjson.loads(await reader.readline())["type"] == "snapshot"
    assert await ask(door, encode({"op": "subscribe"})) == [{"ok": False, "error": "2 clients follow the feed already"}]
    for _, writer in idle + subscribers:
        writer.close()


async def test_an_op_that_waits_on_the_sandbox_is_answered_when_done_and_others_are_served_meanwhile(tmp_path):
    """The ``node`` op's reply comes from the sandbox's engine call: the door awaits it, and
    another connection is answered while it waits."""
    release = asyncio.Event()

    async def engine_call() -> dict:
        await release.wait()
        return {"ok": True, "op": "node"}

    door = ControlDoor(lambda op, request: engine_call() if op == "node" else {"ok": True, "op": op},
                       lambda reader, writer, request: asyncio.sleep(0))
    door.path = str(tmp_path / "s")
    server = await asyncio.start_unix_server(door.serve, door.path, limit=clients.MAX_REQUEST)
    try:
        waiting = asyncio.ensure_future(ask(door, encode({"op": "node"})))
        assert await ask(door, encode({"op": "status"})) == [{"ok": True, "op": "status"}]
        assert not waiting.done()
        release.set()
        assert await waiting == [{"ok": True, "op": "node"}]
    finally:
        server.close()
