"""A line every microsecond for a minute (issue 16 part 3), through the real runner, with the
TUI attached.

A microsecond apart is faster than any pipe, so the agent (``tests/fixtures/agents/hostile.py
--flood-for SECONDS``, the ``command`` adapter, a real process) writes numbered lines as fast
as the pipe takes them, then says how many it wrote, then prints the tests' hostile lines. A
second column's agent prints the hostile lines and waits until the flood is over, so the live
screen has two panes and the grid two cells to move between. ``agentmeter run --detach``
starts the runner; the TUI attaches in this process (headless, 160x48, every frame turned
into terminal bytes) and a key is pressed every 200 ms, on the live screen for the first half
of the flood and on the grid for the second, timing key to the frame that shows it
(``ui_load.py``'s clock). The runner's RSS is sampled every 100 ms. Afterwards: every numbered
line must be in the store, in order, once (the script fails otherwise), and the flood trial is
opened in review (time to its first frame).

    python benchmarks/flood.py [--seconds 60]

Targets: the store keeps every line (or says how many it dropped); runner memory flat; key p95
< 100 ms; review open < 500 ms. Lines/s is whatever the machine sustains (the target of 1e6/s
is above what one thread inserts into SQLite: the agent is held back, never dropped).
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentmeter_tui.core.run.control import ControlClient, runner_alive
from agentmeter_tui.core.store import Store
from benchmarks.hostile_corpus import HOSTILE_AGENT
from benchmarks.ui_load import FrameClock, open_in_review, press_and_time

SUITE = ROOT / "tests" / "fixtures" / "suites" / "hostile"


def write_suite(folder: Path, seconds: float, gate: Path) -> Path:
    """The tests' hostile suite with two columns: the flood, and an agent that waits for ``gate``."""
    suite = folder / "flood"
    shutil.copytree(SUITE, suite)
    text = (suite / "suite.toml").read_text()
    head = text[:text.index("[[clis]]")]
    tail = text[text.index("args = [", text.index("[[clis]]")):].split("\n", 1)[1]
    columns = (f'[[clis]]\nadapter = "command"\nname = "command:flood"\n'
               f'args = ["{{python}}", "{HOSTILE_AGENT}", "--flood-for", "{seconds:g}"]\n\n'
               f'[[clis]]\nadapter = "command"\nname = "command:watch"\n'
               f'args = ["{{python}}", "{HOSTILE_AGENT}", "--hold", "{gate}"]\n')
    # The watcher waits on a gate in this script's folder, which the walled local sandbox hides
    # from it: this measures ingest and the screen; what the walls cost is containment.py's.
    unwalled = '\n[sandbox]\nkind = "local"\nisolation = "none"\n'
    (suite / "suite.toml").write_text(head + columns + tail + unwalled)
    return suite


class RssSampler(threading.Thread):
    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.process = psutil.Process(pid)
        self.samples: list[tuple[float, int]] = []
        self.cpu: list[tuple[float, float]] = []  # (monotonic, the runner's user + system seconds)
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.1):
            try:
                rss = self.process.memory_info().rss
                self.cpu.append((time.monotonic(), sum(self.process.cpu_times()[:2])))
            except psutil.Error:
                return
            if rss:  # 0 once it exited (a zombie until reaped)
                self.samples.append((time.monotonic(), rss))


async def watch(db: Path, seconds: float, gate: Path) -> dict:
    """Attach the TUI to the running flood; press keys until the flood is over; then let the
    run end."""
    from agentmeter_tui.ui.app import AgentMeterApp
    from agentmeter_tui.ui.session import UiSession
    from agentmeter_tui.ui.widgets.grid_table import GridTable

    session = UiSession(db, reviewer="bench", live=True)
    app = AgentMeterApp(session, screen="live", tune_gc=True)  # as run_app builds it
    latencies: dict[str, list[float]] = {"live": [], "grid": []}
    frames_per_s: dict[str, float] = {}
    cpu_share: dict[str, float] = {}
    process = psutil.Process()
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            frames = FrameClock(app)
            while len(session.live.running()) < 2 or not getattr(app.screen, "panes", None):
                await asyncio.sleep(0.05)  # both trials running and their panes on the screen
            app.screen.select(next(iter(app.screen.panes)))  # the first pane: "right" moves from it
            await asyncio.sleep(0.2)
            started = time.perf_counter()
            for name in ("live", "grid"):
                if name == "grid":
                    await pilot.press("g")
                    await asyncio.sleep(0.5)
                frames0, wall0, step = len(frames.frames), time.perf_counter(), 0
                cpu0 = sum(process.cpu_times()[:2])
                # Two presses at least, however slow the machine: a median and a p95 need two.
                while step < 2 or time.perf_counter() - started < seconds * (0.5 if name == "live" else 1.0):
                    key = "right" if step % 2 == 0 else "left"
                    step += 1
                    if name == "live":
                        changed = lambda b=app.screen.selected: app.screen.selected != b
                    else:
                        table = app.screen.query_one(GridTable)
                        changed = lambda b=table.cursor_coordinate, t=table: t.cursor_coordinate != b
                    # A key that takes over a second: every thread's stack to stderr, to see the stall.
                    faulthandler.dump_traceback_later(1.0, file=sys.__stderr__)
                    latencies[name].append(await press_and_time(app, frames, key, changed))
                    faulthandler.cancel_dump_traceback_later()
                    await asyncio.sleep(0.2)
                wall = time.perf_counter() - wall0
                frames_per_s[name] = (len(frames.frames) - frames0) / wall
                cpu_share[name] = (sum(process.cpu_times()[:2]) - cpu0) / wall
            gate.touch()
            while session.live.ended is None:
                await asyncio.sleep(0.1)
    finally:
        gate.touch()
        session.close()
    return {name: {"presses": len(values), "median_ms": statistics.median(values) * 1000,
                   "p95_ms": statistics.quantiles(values, n=20)[18] * 1000, "frames_per_s": frames_per_s[name],
                   "cpu_share": cpu_share[name]}
            for name, values in latencies.items()}


def account(db: Path) -> dict:
    """Every numbered line of the flood, in order, once; the agent's own count beside it."""
    store = Store(db)
    try:
        (trial,) = store.trials("hostile", "cli = 'command:flood'")
        said, expected, out_of_order, first_ts, last_ts = None, 0, 0, None, None
        for _, ts, _, stream, text, data in store.events(trial["id"]):
            if stream == "stderr" and text.startswith("flood: "):
                said = int(text.split()[1])
            elif stream == "stdout" and data is not None and bytes(data[:6]) == b"flood ":
                if bytes(data) != b"flood %d" % expected:
                    out_of_order += 1
                expected += 1
                first_ts = first_ts or ts
                last_ts = ts
        return {"trial": trial["id"], "status": trial["status"], "events": store.event_count(trial["id"]),
                "said": said, "stored": expected, "out_of_order": out_of_order, "span": (last_ts or 0) - (first_ts or 0)}
    finally:
        store.close()


async def review(db: Path, trial: int, other: int) -> tuple[float, float]:
    from agentmeter_tui.ui.app import AgentMeterApp
    from agentmeter_tui.ui.session import UiSession

    session = UiSession(db, reviewer="bench", live=False)
    app = AgentMeterApp(session, screen="review", trial=other, connect=False)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.app.workers.wait_for_complete()
            await pilot.pause()
            return await open_in_review(app, FrameClock(app), trial)
    finally:
        session.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the agent floods")
    parser.add_argument("--keep", action="store_true", help="keep the store (its folder is printed)")
    args = parser.parse_args(argv)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    folder = Path(tempfile.mkdtemp(prefix="agentmeter-flood-"))
    db, gate = folder / "flood.db", folder / "gate"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    try:
        suite = write_suite(folder, args.seconds, gate)
        subprocess.run([sys.executable, "-m", "agentmeter_tui", "run", str(suite), "--detach", "--db", str(db)],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        with ControlClient(db) as client:
            pid = client.request("hello")["pid"]
        sampler = RssSampler(pid)
        sampler.start()
        keys = asyncio.run(watch(db, args.seconds, gate))
        while runner_alive(db):
            time.sleep(0.1)
        sampler.stop.set()
        sampler.join()
        counts = account(db)
        store = Store(db)
        other = next(t["id"] for t in store.trials("hostile") if t["id"] != counts["trial"])
        store.close()
        opened, memory = asyncio.run(review(db, counts["trial"], other))
        rss = [r for _, r in sampler.samples]
        quarters = [rss[min(len(rss) - 1, len(rss) * q // 4)] / 2**20 for q in (1, 2, 3, 4)]
        print(f"flood: the agent wrote {counts['said']:,} lines in {args.seconds:g} s "
              f"({counts['said'] / args.seconds:,.0f} lines/s, held back by the runner; target 1e6/s); "
              f"stored {counts['stored']:,} of them in order ({counts['out_of_order']} out of order, "
              f"{counts['said'] - counts['stored']:,} missing), {counts['events']:,} events in the trial "
              f"({counts['stored'] / max(counts['span'], 1e-9):,.0f} lines/s from first to last stored); "
              f"trial {counts['status']}")
        (t0, c0) = sampler.cpu[0]  # the runner's CPU while the agent flooded (its first `seconds`)
        (t1, c1) = next((t, c) for t, c in sampler.cpu if t >= t0 + args.seconds) if \
            sampler.cpu[-1][0] >= t0 + args.seconds else sampler.cpu[-1]
        print(f"runner RSS: peak {max(rss) / 2**20:.0f} MB; at 1/4, 1/2, 3/4 and the end of the run "
              + ", ".join(f"{q:.0f}" for q in quarters) + f" MB; runner CPU during the flood {(c1 - c0) / (t1 - t0) * 100:.0f}% of a core")
        for name, r in keys.items():
            print(f"{name:>4} screen attached: keypress -> screen median {r['median_ms']:.1f} ms, "
                  f"p95 {r['p95_ms']:.1f} ms ({r['presses']} presses; target p95 < 100 ms), {r['frames_per_s']:.0f} frames/s, "
                  f"TUI CPU {r['cpu_share'] * 100:.0f}% of a core")
        print(f"review: the flood trial ({counts['events']:,} events) open to first frame {opened * 1000:.0f} ms "
              f"(target < 500 ms), memory +{memory:.0f} MB")
        print(f"load average after: {os.getloadavg()[0]:.1f}")
        lost = counts["said"] != counts["stored"] or counts["out_of_order"]
        return 1 if lost else 0
    finally:
        gate.touch()
        if runner_alive(db):  # the benchmark failed half way: end the run before removing its store
            with ControlClient(db) as client:
                client.request("stop")
            while runner_alive(db):
                time.sleep(0.1)
        if args.keep:
            print(f"store kept: {db}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
