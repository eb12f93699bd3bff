"""Calls per minute per provider: a suite's cap on how fast its trials may call one provider
(``[providers.X] calls_per_minute``), shared by every trial of that provider.

The cap is a sliding window over the last 60 seconds of admitted calls; a call over it waits
in the proxy (never refused: the CLI just sees a slower provider) and its trial is told how
long, so the live pane can show the wait.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable

WINDOW = 60.0


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
