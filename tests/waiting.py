"""Waiting on events in tests: poll a condition until it holds.

Tests never assert how fast something happened (speed figures live in ``benchmarks/``) and
never sleep a fixed time hoping something is done: they wait for the state that says it is
done. The deadline below is only a fail-safe that turns a hang into a failure with a message;
it is minutes, far beyond the slowest shared machine, so it is never the thing that decides.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

FAILSAFE = float(os.environ.get("AGENTMETER_TEST_FAILSAFE", "300"))


def wait_for(condition: Callable[[], T], what: str = "the condition", interval: float = 0.05) -> T:
    """``condition()``'s first truthy value; fails naming ``what`` if it never comes."""
    deadline = time.monotonic() + FAILSAFE
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def pid_running(pid: int) -> bool:
    """The process exists and is not a zombie (a zombie has exited, only its parent has not reaped it)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def eventually(probe: Callable[[], Awaitable[T] | T], what: str = "the condition", interval: float = 0.02) -> T:
    """``probe()``'s first truthy value (awaited when it is awaitable), for tests inside an
    event loop: the loop runs between tries."""
    deadline = time.monotonic() + FAILSAFE
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(interval)


async def settle(turns: int = 20) -> None:
    """Let every ready task of this event loop run until it blocks (no clock involved)."""
    for _ in range(turns):
        await asyncio.sleep(0)
