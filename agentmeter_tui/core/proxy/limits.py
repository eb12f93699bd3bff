"""What the proxy admits.

Calls per minute per provider: a suite's cap on how fast its trials may call one provider
(``[providers.X] calls_per_minute``), shared by every trial of that provider. The cap is a
sliding window over the last 60 seconds of admitted calls; a call over it waits in the proxy
(never refused: the CLI just sees a slower provider) and its trial is told how long, so the
live pane can show the wait.

Connections (issue 23, item 6): any local process can connect to the proxy's port, and the
proxy lives in the runner's event loop. A connection must send a whole request head within
``HEADER_TIMEOUT`` seconds of connecting (a CLI sends it at once; a slow-header client,
"slowloris", would hold a socket and a handler forever); at most ``MAX_PENDING`` connections
may be that early at once, the oldest closed first; and a route (one trial's key) may hold
``MAX_ROUTE_CONNECTIONS`` open connections, a request on one more is refused with a 429 in
its protocol's shape and its connection closed. Between requests aiohttp's keep-alive timeout
(``KEEPALIVE``) closes an idle connection.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

WINDOW = 60.0
HEADER_TIMEOUT = 10.0  # seconds from connect to a whole first request head
MAX_PENDING = 256  # connections still sending their first request head
MAX_ROUTE_CONNECTIONS = 64  # open connections per trial's route (a CLI uses a handful)
KEEPALIVE = 75.0  # seconds an idle connection stays open between requests


class CallRate:
    """At most ``per_minute`` calls admitted in any 60-second window."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep):
        self.per_minute = per_minute
        self._clock, self._sleep = clock, sleep
        self._admitted: deque[float] = deque()
        self._lock = asyncio.Lock()  # calls wait their turn in arrival order

    async def acquire(self, on_wait: Callable[[float], None] | None = None) -> float:
        """Wait until a call may go; return the seconds waited."""
        waited = 0.0
        async with self._lock:
            while True:
                now = self._clock()
                while self._admitted and now - self._admitted[0] >= WINDOW:
                    self._admitted.popleft()
                if len(self._admitted) < self.per_minute:
                    self._admitted.append(now)
                    return waited
                delay = WINDOW - (now - self._admitted[0])
                if on_wait is not None and not waited:
                    on_wait(delay)
                waited += delay
                await self._sleep(delay)


class ConnectionGuard:
    """Closes connections that do not send a request head in time (``watch`` each new one,
    ``arrived`` once its first request reached the handler)."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._pending: dict[Any, asyncio.TimerHandle] = {}  # in arrival order: the oldest first
        self.closed = 0  # connections closed for sending no request head in time

    def watch(self, handler: Any) -> None:
        """A new connection's aiohttp ``RequestHandler``, before it is connected."""
        if len(self._pending) >= MAX_PENDING:
            self._close(next(iter(self._pending)))
        self._pending[handler] = self._loop.call_later(HEADER_TIMEOUT, self._close, handler)

    def arrived(self, handler: Any) -> None:
        timer = self._pending.pop(handler, None)
        if timer is not None:
            timer.cancel()

    def _close(self, handler: Any) -> None:
        timer = self._pending.pop(handler, None)
        if timer is not None:
            timer.cancel()
        if handler.transport is not None:  # not gone on its own meanwhile
            self.closed += 1
        handler.force_close()  # aiohttp's: the transport closed, the handler's loop ended

    def close_all(self) -> None:
        for timer in self._pending.values():
            timer.cancel()
        self._pending.clear()


def admit_connection(connections: set[Any], handler: Any) -> bool:
    """Whether a request on ``handler``'s connection may use a route whose open connections
    are ``connections`` (closed ones are forgotten here)."""
    if handler in connections:
        return True
    connections.difference_update([c for c in connections if c.transport is None or c.transport.is_closing()])
    if len(connections) >= MAX_ROUTE_CONNECTIONS:
        return False
    connections.add(handler)
    return True
