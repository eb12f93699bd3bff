"""Attack: change the schedule while no trial moves, and see whether an attached client hears.

The feed sent the progress only with trial news (events, meters, finished trials). A runner
held from its start (the store's bill already past the run cap), with nothing running, then
paused for one model, told its subscribers nothing: the TUI kept showing the state of its
snapshot (no pause; after a rerun started on such a store, not even the hold). The feed must
send a tick when the schedule's state changes on its own."""

from __future__ import annotations

import asyncio

import orjson

from agentmeter_tui.core.run.control import encode, open_async
from agentmeter_tui.core.store import Store
from tests.conftest import agentmeter
from tests.core.caps_support import capped_suite, held_on_cap
from tests.core.runpaths_support import wait_run_ended
from tests.waiting import FAILSAFE, eventually


async def test_a_pause_with_no_trial_running_reaches_a_subscriber(tmp_path, db):
    suite = capped_suite(tmp_path, "\n[budgets.run]\ntokens = 12000\n", proxy=True)
    agentmeter("run", str(suite), "--detach", "--db", str(db), check=True)
    store = Store(db)
    try:
        await asyncio.to_thread(held_on_cap, db)  # held on the cap, nothing running: no trial news from now on
        reader, writer = await open_async(db)
        try:
            writer.write(encode({"op": "subscribe"}))
            await writer.drain()
            snapshot = orjson.loads(await reader.readline())
            assert snapshot["type"] == "snapshot" and snapshot["progress"]["paused_models"] == []
            await asyncio.to_thread(agentmeter, "pause", "--model", "m1", "--db", str(db), check=True)
            heard: list[dict] = []

            async def told() -> bool:
                line = await asyncio.wait_for(reader.readline(), FAILSAFE)  # a hang becomes a failure
                heard.append(orjson.loads(line))
                return heard[-1].get("progress", {}).get("paused_models") == ["m1"]

            await eventually(told, "a message saying m1 is paused")
        finally:
            writer.close()
    finally:
        agentmeter("stop", "--db", str(db))
        wait_run_ended(store)
        store.close()
