"""An agent that prints lines as fast as it can (issue 16 part 3, "a line every microsecond"):
every line reaches the store, in order, none dropped; the store writer holds the agents'
output back while it is behind instead of buffering without bound. The minute-long version
with the TUI attached, runner memory and keypress latency is benchmarks/flood.py."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from agentmeter_tui.core.store import Store
from agentmeter_tui.core.store import writer as writer_module
from agentmeter_tui.core.store.writer import StoreWriter
from tests.conftest import agentmeter
from tests.waiting import eventually

from .test_hostile_output import AGENT, HOSTILE, printed_by_agent


def flood_suite(folder, seconds: float):
    suite = folder / "hostile"
    shutil.copytree(HOSTILE, suite)
    (suite / "suite.toml").write_text((suite / "suite.toml").read_text().replace(
        '"{suite}/../../agents/hostile.py"', f'"{AGENT}", "--flood-for", "{seconds:g}"'))
    return suite


def flood_accounting(store: Store, trial_id: int) -> tuple[int, list[bytes], list[bytes]]:
    """(the count the agent said it wrote, the flood lines stored in seq order, every other
    stdout line stored)."""
    said, flood, other = None, [], []
    for _, _, _, stream, text, data in store.events(trial_id):
        if stream == "stderr" and text.startswith("flood: "):
            said = int(text.split()[1])
        elif stream == "stdout" and data is not None:
            (flood if bytes(data).startswith(b"flood ") else other).append(bytes(data))
    assert said is not None, "the agent's own count is missing"
    return said, flood, other


@pytest.mark.slow
def test_every_line_of_a_flood_is_stored_in_order(tmp_path):
    db = tmp_path / "flood.db"
    result = agentmeter("run", str(flood_suite(tmp_path, 3)), "--headless", "--db", str(db), timeout=600)
    assert result.returncode == 0, result.stderr
    store = Store(db)
    try:
        (trial,) = store.trials("hostile")
        said, flood, other = flood_accounting(store, trial["id"])
    finally:
        store.close()
    assert said >= 4096  # the agent wrote at least one block
    # Every numbered line, once, in the order printed: none dropped, none repeated.
    assert flood == [b"flood %d" % n for n in range(said)]
    assert other == [line for line in printed_by_agent() if line]  # the attack lines after it, verbatim


def test_writer_holds_output_back_while_behind_and_loses_none(tmp_path, monkeypatch):
    monkeypatch.setattr(writer_module, "MAX_BACKLOG", 100)
    store = Store(tmp_path / "w.db")
    store.close()
    writer = StoreWriter(tmp_path / "w.db")

    async def produce() -> tuple[int, int]:
        seq, holds, waited = 0, 0, 0
        for _ in range(50):
            rows = [(1, (seq := seq + 1), 0.0, "raw", "stdout", "x", b"x") for _ in range(30)]
            writer.add_events(rows)
            room = writer.room()
            if room is not None:  # a sandbox stops reading here until the writer took the batch
                holds += 1
                assert len(writer._events) >= 100
                await room
                waited += 1
        return holds, waited

    try:
        holds, waited = asyncio.run(produce())
    finally:
        writer.close()
    assert holds > 0 and waited == holds  # it held output back, and every hold was released
    store = Store(tmp_path / "w.db")
    try:
        assert [seq for seq, *_ in store.events(1)] == list(range(1, 1501))
    finally:
        store.close()


def test_on_a_full_disk_output_stays_held(tmp_path, monkeypatch):
    """While the store's disk is full every try puts the batch back in memory, so the agents
    stay held (their output waits in their pipes, not in the runner) until a write succeeds.
    The full disk is SQLite's own error, raised by a trigger while ``full`` is set."""
    monkeypatch.setattr(writer_module, "MAX_BACKLOG", 10)
    Store(tmp_path / "w.db").close()
    writer = StoreWriter(tmp_path / "w.db")
    full, tries = [1], [0]

    def disk(store):
        def check() -> int:
            tries[0] += 1
            return full[0]
        store.db.conn.create_function("disk_is_full", 0, check)
        store.db.conn.execute("create temp trigger fill before insert on events when disk_is_full() "
                              "begin select raise(abort, 'database or disk is full'); end")

    def rows(first: int, count: int) -> list[tuple]:
        return [(1, n, 0.0, "raw", "stdout", "x", b"x") for n in range(first, first + count)]

    async def scenario() -> bool:
        await asyncio.wrap_future(writer.call(disk))
        writer.add_events(rows(1, 5))
        await eventually(lambda: writer.full is not None, "the writer to meet the full disk")
        writer.add_events(rows(6, 20))
        room = writer.room()
        assert room is not None
        before = tries[0]
        await eventually(lambda: tries[0] > before + 1, "a whole failed try after the hold began")
        held = not room.done()
        full[0] = 0  # room on the disk again
        await room
        return held

    try:
        held = asyncio.run(scenario())
        assert held
        assert writer.call(lambda store: store.event_count(1)).result(timeout=600) == 25  # fail-safe timeout
    finally:
        writer.close()


def test_a_docker_or_swarm_reader_thread_waits_for_held_output():
    """ThreadOutput: a reading thread has at most ``slots`` batches on their way and waits while
    the trial holds output back."""
    import threading

    from agentmeter_tui.core.sandboxes.common import ThreadOutput

    async def scenario() -> list[int]:
        loop = asyncio.get_running_loop()
        gate = loop.create_future()
        delivered: list[int] = []

        def on_output(stream, lines):
            delivered.append(len(lines))
            return gate if len(delivered) == 1 else None  # the first batch: the store is behind

        output = ThreadOutput(on_output, loop, slots=1)
        reader = threading.Thread(target=lambda: [output.emit("stdout", [b"x"] * n) for n in (1, 2, 3)])
        reader.start()
        while not delivered:
            await asyncio.sleep(0)
        for _ in range(100):  # the reader may not deliver more while the first batch is held
            await asyncio.sleep(0)
        held = list(delivered)
        gate.set_result(None)
        await asyncio.to_thread(reader.join)
        while len(delivered) < 3:
            await asyncio.sleep(0)
        return [held, delivered]

    held, delivered = asyncio.run(scenario())
    assert held == [1] and delivered == [1, 2, 3]
