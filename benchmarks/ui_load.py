"""The TUI under load: keypress latency while 72 trials stream, and opening a 50,000-event review.

Part 1. A fake runner (a subprocess serving the real control protocol on the store's socket)
streams 72 concurrent trials at >= 5,000 events/s: a tick every 100 ms with each trial's new
events and (every ``METER_EVERY`` seconds per trial) meters, as ``core/run/feed.py`` sends them. The app runs headless at 160x48 with its
real feed client; every frame is rendered to terminal bytes as a real terminal would get
them. Keys are pressed every 200 ms (move between panes on the live screen, between cells on
the grid) and the time from the key event to the first frame that shows its effect is
recorded. Then the same screen is watched as long with no keys (the trials still streaming),
and at the end, the fake runner silent but connected, each screen is watched again: the idle
floor, the app's cost when nothing changes. The app's CPU share in each window is its process
CPU time over wall time (the fake runner, ``ui_feed.py``, runs in its own process and is not
counted).

Part 2. A store with one trial of 50,000 events (``--events``; a million for issue #17): the
time from asking the review screen to open it to the first frame that shows it, beside the
time to read the trial's events from the store alone (the floor), and the memory the open
took; then, on the open transcript, a search whose only match is the last event, ``end``, and
the jump back to the last error (each from the key to the frame that shows the cursor there).

``--hostile``: the trials print the hostile output the tests use instead (escape sequences
for the title, clipboard, hyperlinks and cursor, markup look-alikes, NUL, C1 and bidi
controls, invalid UTF-8, a 10 MiB line; ``benchmarks/hostile_corpus.py`` runs the tests' fake
agents and parses their output as the runner does), at the same rate.

CPU under a shared machine's load: the app's share of a core is its CPU time over wall time,
and a starved app also gets fewer events to process; ``cpu per 10k events/s`` scales the CPU
it spent to the target rate, which load does not distort as much.

    .venv/bin/python benchmarks/ui_load.py [--seconds 12] [--trials 72] [--rate 5000] [--part live|review]
    .venv/bin/python benchmarks/ui_load.py --part live --hostile
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentmeter_tui.core.paths import socket_path
from agentmeter_tui.core.store import Store
from benchmarks.ui_feed import QUIET, grid_store, serve


# -- the app side -------------------------------------------------------------------------------------


class FrameClock:
    """Wraps ``App._display`` to time every frame and turn it into terminal bytes, as a terminal would."""

    def __init__(self, app) -> None:
        self.frames: list[float] = []
        self.app = app
        original = app._display

        def display(screen, renderable):
            original(screen, renderable)
            if renderable is not None:
                renderable.render_segments(app.console)  # the bytes a real terminal would be sent
                self.frames.append(time.perf_counter())

        app._display = display

    async def next_frame_after(self, t: float, timeout: float = 5.0) -> float:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            for frame in reversed(self.frames):
                if frame > t:
                    return frame
                break
            await asyncio.sleep(0.001)
        raise TimeoutError("no frame")


async def press_and_time(app, frames: FrameClock, key: str, changed) -> float:
    """Send one key; return seconds until the first frame after its effect was applied."""
    from textual import events

    t0 = time.perf_counter()
    app.post_message(events.Key(key, None))
    deadline = t0 + 5
    while not changed():
        if time.perf_counter() > deadline:  # not a latency: the key did nothing (a bad setup)
            raise TimeoutError(f"key {key!r} had no visible effect within 5 s")
        await asyncio.sleep(0.001)
    applied = time.perf_counter()
    frame = await frames.next_frame_after(applied)
    return frame - t0


class Window:
    """One measuring window: the app's process CPU, frames and events from ``start`` to ``stop``."""

    def __init__(self, app, session, frames: FrameClock) -> None:
        self.session, self.frames, self.process = session, frames, psutil.Process()
        self.cpu0, self.wall0 = sum(self.process.cpu_times()[:2]), time.perf_counter()
        self.events0, self.frames0 = session.live.events_seen, len(frames.frames)
        self.load = os.getloadavg()[0]

    def stop(self, latencies: list[float] | None = None) -> dict:
        wall = time.perf_counter() - self.wall0
        cpu = sum(self.process.cpu_times()[:2]) - self.cpu0
        events = self.session.live.events_seen - self.events0
        out = {"cpu_share": cpu / wall, "frames_per_s": (len(self.frames.frames) - self.frames0) / wall,
               "events_per_s": events / wall, "cpu_per_10k": cpu / max(1, events) * 10_000, "load": self.load}
        if latencies:
            out.update(presses=len(latencies), median_ms=statistics.median(latencies) * 1000,
                       p95_ms=statistics.quantiles(latencies, n=20)[18] * 1000)
        return out


async def live_load(seconds: float, trials: int, rate: int, screens: tuple[str, ...] = ("live", "grid"),
                    hostile: bool = False) -> dict:
    """Per screen three windows of ``seconds / len(screens)`` each: keys pressed while trials
    stream, watching (streaming, no keys), and idle (the runner silent, no keys)."""
    from agentmeter_tui.ui.app import AgentMeterApp
    from agentmeter_tui.ui.session import UiSession
    from agentmeter_tui.ui.widgets.grid_table import GridTable

    folder = Path(tempfile.mkdtemp(prefix="agentmeter-uiload-"))
    db = folder / "load.db"
    grid_store(db, trials)
    window = seconds / len(screens)
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(socket_path(db)), "--trials", str(trials),
                               "--rate", str(rate), "--seconds", str(3 * seconds + 30),
                               *(["--hostile"] if hostile else [])], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None and server.stdout.readline().strip() == "ready"
    session = UiSession(db, reviewer="bench", live=True)
    app = AgentMeterApp(session, screen="live", tune_gc=True)  # as run_app builds it
    results: dict = {name: {} for name in screens}
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            frames = FrameClock(app)
            while len(session.live.trials) < trials:
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)  # panes mounted, steady state

            async def show(screen_name: str) -> None:
                if screen_name == "grid":
                    await pilot.press("g")
                    await asyncio.sleep(1.0)
                else:
                    if app.screen.id != "live-screen":
                        await pilot.press("l")
                        await asyncio.sleep(1.0)
                    app.screen.select(next(iter(app.screen.panes)))  # right then left: the selection moves
                    await asyncio.sleep(0.2)

            for screen_name in screens:
                await show(screen_name)
                latencies = []
                measure = Window(app, session, frames)
                step = 0
                while time.perf_counter() - measure.wall0 < window:
                    key = "right" if step % 2 == 0 else "left"
                    step += 1
                    if screen_name == "live":
                        before = app.screen.selected
                        changed = lambda b=before: app.screen.selected != b
                    else:
                        table = app.screen.query_one(GridTable)
                        before = table.cursor_coordinate
                        changed = lambda b=before, t=table: t.cursor_coordinate != b
                    latencies.append(await press_and_time(app, frames, key, changed))
                    await asyncio.sleep(0.2)
                results[screen_name]["keys"] = measure.stop(latencies)
                results[screen_name]["panes"] = len(getattr(app.screen, "panes", {}))
                await asyncio.sleep(0.5)  # the last key's redraws settle
                measure = Window(app, session, frames)
                await asyncio.sleep(window)
                results[screen_name]["watch"] = measure.stop()
            server.send_signal(QUIET)
            await asyncio.sleep(1.0)
            for screen_name in reversed(screens):  # the screen shown last first: no switch needed
                await show(screen_name)
                measure = Window(app, session, frames)
                await asyncio.sleep(window)
                results[screen_name]["idle"] = measure.stop()
    finally:
        server.kill()
        server.wait()
        session.close()
        shutil.rmtree(folder, ignore_errors=True)
    return results


NEEDLE = "zebra-needle-only-at-the-end"


async def open_in_review(app, frames: FrameClock, trial: int) -> tuple[float, float]:
    """Seconds from asking the open review screen for ``trial`` to the first frame that shows
    it, and the memory (MB) the open took."""
    screen, process = app.screen, psutil.Process()
    gc.collect()
    rss0 = process.memory_info().rss
    t0 = time.perf_counter()
    screen.open(trial)
    while screen.trial_id != trial:
        await asyncio.sleep(0.001)
    frame = await frames.next_frame_after(time.perf_counter())
    return frame - t0, (process.memory_info().rss - rss0) / 2**20


async def review_open(events: int) -> dict:
    from agentmeter_tui.ui.app import AgentMeterApp
    from agentmeter_tui.ui.screens.review import ReviewScreen
    from agentmeter_tui.ui.session import UiSession
    from agentmeter_tui.ui.widgets.transcript_view import TranscriptView
    from tests.sample_data import T0, build_sample_store

    db = Path(tempfile.mkdtemp(prefix="agentmeter-review-")) / "review.db"
    store = build_sample_store(db, events_per_trial=5, big_trial_events=events, scores=False)
    trial = store.db.execute("select max(id) from trials").fetchone()[0]
    # The last error and the only match of the search are the last two events.
    store.db["events"].insert_all([
        {"trial_id": trial, "seq": events + 1, "ts": T0 + 1e6, "kind": "error", "stream": "stderr",
         "text": "fatal: the last error of the run"},
        {"trial_id": trial, "seq": events + 2, "ts": T0 + 1e6, "kind": "assistant", "stream": "stdout",
         "text": f"Done. {NEEDLE}"}])
    # The runner's writer indexes events for search as ingest slows down; this store was written
    # directly, so build the index the way an old store's is built: chunk after chunk.
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = db.stat().st_size
    t0 = time.perf_counter()
    while store.search.index_events():
        pass
    index_s = time.perf_counter() - t0
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    index_mb = (db.stat().st_size - size) / 2**20
    store.close()
    total = events + 2
    floors, opens, memory, searches, ends, jumps = [], [], [], [], [], []
    process = psutil.Process()
    for _ in range(3):
        store = Store(db)
        t0 = time.perf_counter()
        rows = list(store.events(trial))
        floors.append(time.perf_counter() - t0)
        assert len(rows) == total
        del rows
        store.close()
        session = UiSession(db, reviewer="bench", live=False)
        app = AgentMeterApp(session, screen="review", trial=1, connect=False)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.app.workers.wait_for_complete()
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, ReviewScreen)
            frames = FrameClock(app)
            view = screen.query_one(TranscriptView)
            rss0 = process.memory_info().rss
            opened, took = await open_in_review(app, frames, trial)
            opens.append(opened)
            memory.append(took)
            doc = view.doc
            assert len(doc) >= total - 1 if doc.windowed else len(doc) > 0

            def at(seq: int, view=view):
                return lambda: view.doc.index.seqs[view.cursor] == seq

            await pilot.press("slash")
            await pilot.press(*NEEDLE)
            searches.append(await press_and_time(app, frames, "enter", at(total)))
            await pilot.press("escape")
            await pilot.press("home")
            await pilot.app.workers.wait_for_complete()
            ends.append(await press_and_time(app, frames, "end", at(total)))
            jumps.append(await press_and_time(app, frames, "E", at(total - 1)))
            memory[-1] = max(memory[-1], (process.memory_info().rss - rss0) / 2**20)
        session.close()

    shutil.rmtree(db.parent, ignore_errors=True)

    def ms(values: list[float]) -> float:
        return statistics.median(values) * 1000

    return {"events": total, "floor_ms": ms(floors), "open_ms": ms(opens),
            "open_runs_ms": [round(o * 1000) for o in opens], "memory_mb": max(memory),
            "search_ms": ms(searches), "end_ms": ms(ends), "jump_ms": ms(jumps),
            "index_s": index_s, "index_mb": index_mb, "store_mb": size / 2**20}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=12.0,
                        help="keypress time, split over live and grid; the watching and idle windows are as long")
    parser.add_argument("--trials", type=int, default=72)
    parser.add_argument("--rate", type=int, default=5000, help="events per second, all trials together")
    parser.add_argument("--events", type=int, default=50_000, help="events of the reviewed trial")
    parser.add_argument("--part", choices=("all", "live", "review"), default="all")
    parser.add_argument("--hostile", action="store_true", help="the trials print the tests' hostile output")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(serve(args.serve, args.trials, args.rate, args.seconds, args.hostile))
        return 0
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    live = asyncio.run(live_load(args.seconds, args.trials, args.rate, hostile=args.hostile)) \
        if args.part != "review" else {}
    if args.hostile:
        print("the trials print the tests' hostile output (benchmarks/hostile_corpus.py)")
    for name, r in live.items():
        keys, watch, idle = r["keys"], r["watch"], r["idle"]
        panes = f", {r['panes']} panes + list" if name == "live" else ""
        print(f"{name:>4} screen: {keys['events_per_s']:,.0f} events/s from {args.trials} trials{panes}; "
              f"keypress -> screen median {keys['median_ms']:.1f} ms, p95 {keys['p95_ms']:.1f} ms "
              f"({keys['presses']} presses; target p95 < 100 ms)")
        for label, m in (("keys pressed", keys), ("watching", watch), ("idle floor", idle)):
            per_10k = f"; {m['cpu_per_10k'] * 100:.0f}% at 10k events/s" if m["events_per_s"] else ""
            print(f"     {label:>12}: app CPU {m['cpu_share'] * 100:4.1f}% of a core, "
                  f"{m['frames_per_s']:4.1f} frames/s, "
                  f"{m['events_per_s']:,.0f} events/s (load average {m['load']:.1f}{per_10k})")
    if args.part == "live":
        print(f"load average after: {os.getloadavg()[0]:.1f}")
        return 0
    review = asyncio.run(review_open(args.events))
    print(f"review: open a {review['events']:,}-event transcript {review['open_ms']:.0f} ms to first frame "
          f"(runs {review['open_runs_ms']}; target < 500 ms) vs reading its events from the store "
          f"{review['floor_ms']:.0f} ms (floor); memory +{review['memory_mb']:.0f} MB (target < 100 MB)")
    print(f"review: search hit in the last event {review['search_ms']:.0f} ms, end {review['end_ms']:.0f} ms, "
          f"back to the last error {review['jump_ms']:.0f} ms (key to frame; target < 200 ms)")
    print(f"review: search index of the store's {review['events']:,}+ events built in {review['index_s']:.1f} s, "
          f"+{review['index_mb']:.0f} MB on a {review['store_mb']:.0f} MB store")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
