"""The control socket's door: what one local client may cost the runner (issue 23, item 6).

The door knows who knocks (issue 37, attack 2): every accepted connection's peer is read
from the kernel (``SO_PEERCRED``) before anything else, and only the runner's own uid and root
are served; anyone else gets one error line and a close, before a byte of theirs is read.
No peer credentials at all (not a Unix socket of this kernel) is refused the same way. The
socket file's 0600 is the first wall; this one holds should the mode ever be widened, or a
process of another uid be handed a connected descriptor.

A process of the runner's user can connect, and the runner's one event loop also meters
every running agent; a client must never be able to starve it. So:

- a request line is at most ``MAX_REQUEST`` bytes; a longer one gets an error line and a close;
- a connection may send ``RATE`` requests a second (``BURST`` at once); past that it gets an
  error line and a close (blank lines count: a flood of newlines is a flood of requests);
- after each request the handler yields to the loop, so one connection with megabytes
  buffered cannot keep the others (or the trials) waiting;
- replies are written without waiting for the client; one that does not read its replies is
  dropped once ``MAX_UNREAD`` bytes of them are waiting (the feed drops slow subscribers the
  same way, ``feed.MAX_BACKLOG``);
- at most ``MAX_CLIENTS`` connections are open: a new one takes the place of the connection
  that has waited longest for its next request (a script sends its request as soon as it is
  connected, so that is one that sends nothing). Subscribers are never evicted, and at most
  ``MAX_SUBSCRIBERS`` may follow the feed, so there is always a place to take.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from .control import Refused, Reply, encode

MAX_REQUEST = 64 << 10  # requests are a few dozen bytes; the reader's buffer stays this small
RATE, BURST = 20.0, 40  # requests a second per connection; a script asks once per connection
MAX_UNREAD = 1 << 20  # reply bytes a client may leave unread before it is dropped
MAX_CLIENTS = 64
MAX_SUBSCRIBERS = 32  # fewer than MAX_CLIENTS: a new connection always finds a place to take
Handler = Callable[[Any, dict[str, Any]], Reply | Awaitable[Reply]]  # awaited: ops on the sandbox
Subscribe = Callable[[asyncio.StreamReader, asyncio.StreamWriter, dict[str, Any]], Awaitable[None]]


class _Connection:
    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer
        self.tokens = float(BURST)
        self.stamp = self.idle_since = time.monotonic()
        self.subscribed = False

    def take(self) -> bool:
        """One request from the bucket (refilled at ``RATE`` a second), or False when empty."""
        now = time.monotonic()
        self.tokens = min(float(BURST), self.tokens + (now - self.stamp) * RATE)
        self.stamp = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


def peer_uid(writer: asyncio.StreamWriter) -> int | None:
    """The uid of the process at the other end of a Unix connection, from the kernel; None
    when there is none to read."""
    sock = writer.get_extra_info("socket")
    try:
        _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                              struct.calcsize("3i")))
    except (AttributeError, OSError):
        return None
    return uid


def refuse(writer: asyncio.StreamWriter, error: str) -> None:
    """One error line, then the connection closed (the line is lost if the client never reads)."""
    if not writer.is_closing():
        writer.write(encode({"ok": False, "error": error}))
        writer.close()


class ControlDoor:
    """Serves the control socket's connections for the runner within the limits above."""

    def __init__(self, handle: Handler, subscribe: Subscribe,
                 peer: Callable[[asyncio.StreamWriter], int | None] = peer_uid):
        self.handle, self.subscribe = handle, subscribe
        self.peer = peer  # how a connection's uid is read (tests fake it)
        self.open: list[_Connection] = []
        self.refused = 0  # connections and requests turned away (benchmarks/socket_flood.py)
        self.strangers = 0  # connections refused for their peer's uid

    def _welcome(self, writer: asyncio.StreamWriter) -> bool:
        uid = self.peer(writer)
        if uid is not None and uid in (os.getuid(), 0):
            return True
        self.strangers += 1
        who = "a process whose user could not be read" if uid is None else f"uid {uid}"
        refuse(writer, f"this runner serves its own user (uid {os.getuid()}) and root only, not {who}")
        return False

    def _admit(self, writer: asyncio.StreamWriter) -> _Connection:
        if len(self.open) >= MAX_CLIENTS:
            # Waiting for a request first (idle_since is 0 while one is handled), the longest first.
            oldest = min((c for c in self.open if not c.subscribed), key=lambda c: (not c.idle_since, c.idle_since))
            self.open.remove(oldest)
            self.refused += 1
            refuse(oldest.writer, "closed: it sent no request while the runner needed the connection")
        connection = _Connection(writer)
        self.open.append(connection)
        return connection

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._welcome(writer):  # before a byte of its is read, and before it takes a place
            return
        connection = self._admit(writer)
        try:
            await self._requests(reader, writer, connection)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            if connection in self.open:
                self.open.remove(connection)
            writer.close()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        connection: _Connection) -> None:
        while not writer.is_closing():
            connection.idle_since = time.monotonic()
            try:
                line = await reader.readline()
            except ValueError:  # asyncio's "chunk exceed the limit": no newline within MAX_REQUEST bytes
                self.refused += 1
                return refuse(writer, f"a request line is longer than {MAX_REQUEST} bytes: closing")
            connection.idle_since = 0.0
            if not line:
                return
            if not connection.take():
                self.refused += 1
                return refuse(writer, f"more than {RATE:g} requests a second on one connection: closing")
            if line.strip():
                try:
                    request = orjson.loads(line)
                    op = request.get("op")
                except (orjson.JSONDecodeError, AttributeError):
                    request, op = None, None
                if op == "subscribe":
                    if sum(c.subscribed for c in self.open) >= MAX_SUBSCRIBERS:
                        self.refused += 1
                        return refuse(writer, f"{MAX_SUBSCRIBERS} clients follow the feed already")
                    connection.subscribed = True
                    return await self.subscribe(reader, writer, request)
                not_json: Refused = {"ok": False, "error": "requests are JSON objects, one per line"}
                reply = self.handle(op, request) if request is not None else not_json
                if inspect.isawaitable(reply):  # an op that waits on the sandbox (``node``)
                    reply = await reply
                writer.write(encode(reply))
                if writer.transport.get_write_buffer_size() > MAX_UNREAD:
                    self.refused += 1
                    writer.transport.abort()  # it does not read: no error line could reach it anyway
                    return
            await asyncio.sleep(0)  # fairness: the other connections and the trials come first
