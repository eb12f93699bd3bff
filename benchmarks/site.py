"""The static site's speed: build, size, and a trial page opening in a real browser; the bootstrap.

    python benchmarks/site.py [--events 200] [--models 6 --clis 6 --tasks 90 --trials 3] [--pages 40]
                              [--db STORE] [--code CHECKOUT] [--skip-browser] [--build-only] [--command-only]

The store is the paper grid's shape (6 models x 6 CLIs x 90 tasks x 3 trials = 9,720 trials, plus
the infra-invalid retries the generator adds), from deterministic trial records
(``core/reporting/synthetic.py``) with a transcript of ``--events`` events per trial (the paper
grid's agents print about 200). ``--db``: keep the store there (made when missing, reused after),
so that before/after pairs read the same store; ``--code``: measure another checkout's code on it
(the other side of a pair); ``--command-only``: only the whole command, as a user runs it.

Printed, with the machine's load average (the figures are noisy on a shared machine):
- the build: the report with intervals, then the pages and ATIF files, in process, in wall and
  CPU seconds (the workers' CPU included); and the whole ``agentmeter report --format html``
  (process start included), in wall and CPU seconds;
- its floors: a raw read of every event of the store (one SQLite query, rows only), and a raw write
  of as many files and bytes as the site has (no fsync, like the site);
- the index's and the site's size;
- a trial page's load in headless Chromium (median, p95, max over ``--pages`` pages) beside
  about:blank's;
- the bootstrap of 24 configurations x 30 tasks x 2,000 resamples.

Targets (issue 26): build < 10 s, index < 2 MB, a trial page < 300 ms, bootstrap < 2 s.

Deleting a site before writing one costs seconds of system time on an ext4 without a journal
(this machine's): its inode allocator reads and skips, one by one, every inode freed in the last
60 s, or 300 s while the inode table's block is not yet written back (the kernel's
``recently_deleted``, RECENTCY_MIN and RECENTCY_DIRTY), and a site frees twenty thousand. A new
folder does not help (the skip is per block group, not per folder). So the whole command runs
before the write floor deletes its files, and a figure is only comparable with another taken
as long after the disk's last large deletion (say how long).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu() -> float:
    """CPU seconds of this process and its finished children (the page workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def make_store(db: Path, shape: dict, events: int) -> int:
    from agentmeter_tui.core.reporting.records import import_records
    from agentmeter_tui.core.reporting.synthetic import synthetic_records
    from agentmeter_tui.core.store import Store
    from tests.sample_data import _insert_events, transcript

    store = Store(db)
    import_records(store, list(synthetic_records(**shape)))
    ids = [t["id"] for t in store.trials()]
    with store.db.atomic():
        for n, trial_id in enumerate(ids):
            _insert_events(store.db, trial_id, transcript(events, n + 1))
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # as a store is once its writers are done
    store.close()
    return len(ids)


def read_floor(db: Path) -> tuple[float, float, int]:
    """(wall, CPU, rows) of reading every event row once, in trial and seq order."""
    started, used = time.perf_counter(), cpu()
    conn = sqlite3.connect(db)
    rows = 0
    for _row in conn.execute("select trial_id, seq, ts, kind, stream, text, data from events "
                             "order by trial_id, seq"):
        rows += 1
    conn.close()
    return time.perf_counter() - started, cpu() - used, rows


def write_floor(site: Path, scratch: Path) -> tuple[float, float]:
    """(wall, CPU) of writing as many files of the same sizes as ``site`` has, into one folder."""
    sizes = [p.stat().st_size for p in site.rglob("*") if p.is_file()]
    blob = b"x" * max(sizes)
    scratch.mkdir()
    started, used = time.perf_counter(), cpu()
    for n, size in enumerate(sizes):
        with open(scratch / f"{n}.html", "wb") as out:
            out.write(blob[:size])
    figures = time.perf_counter() - started, cpu() - used
    shutil.rmtree(scratch)
    return figures


def bootstrap_figure() -> tuple[float, float]:
    """(first call with numpy's import, a warm call) for 24 configurations x 30 tasks x 2,000 resamples."""
    import numpy as np

    from agentmeter_tui.core.metrics.ams import TABLE1
    from agentmeter_tui.core.metrics.intervals import bootstrap, task_table
    from agentmeter_tui.core.metrics.attempts import Attempt
    from agentmeter_tui.core.vocab import TIERS

    rng = np.random.default_rng(1)
    configs = [(f"m{i}", f"c{j}") for i in range(6) for j in range(4)]
    tiers = {f"t{n}": TIERS[n % 3] for n in range(30)}
    runs = [Attempt(t, *c, trial=k, status="passed" if ok else "failed", passed=ok, quality=float(ok),
                cost=float(rng.gamma(2, 0.1)))
            for c in configs for t in tiers for k in (1, 2, 3) for ok in [bool(rng.random() < 0.5)]]
    attempts = defaultdict(list)
    for run in runs:
        attempts[run.config].append(run)
    times = []
    for _ in range(2):
        started = time.perf_counter()
        bootstrap(configs, task_table(configs, attempts, tiers, TABLE1), 2000, 1)
        times.append(time.perf_counter() - started)
    return times[0], times[1]


async def page_times(site: Path, pages: int) -> tuple[list[float], list[float]]:
    from tests.site.cdp import Browser, file_url

    browser = Browser()
    try:
        await browser.start()
        trials = sorted((site / "trial").glob("*.html"), key=lambda p: int(p.stem))
        step = max(1, len(trials) // pages)
        chosen = trials[::step][:pages]
        await browser.open(file_url(chosen[0]))  # the first load pays for the browser's own warm-up
        floor = [await browser.open("about:blank") for _ in range(pages)]
        loads = [await browser.open(file_url(page)) for page in chosen]
        if browser.errors():
            print("console errors:", browser.errors()[:3])
        return loads, floor
    finally:
        await browser.close()


def whole_command(code: Path, db: Path, out: Path) -> None:
    """``agentmeter report --format html`` as a user runs it, in a new process: wall and CPU."""
    before = load()
    started, used = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "PYTHONPATH": str(code)}
    subprocess.run([sys.executable, "-m", "agentmeter_tui", "report", "--db", str(db), "--format", "html",
                    "--out", str(out)], check=True, stderr=subprocess.DEVNULL, env=env)
    wall, done = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
    user, system = done.ru_utime - used.ru_utime, done.ru_stime - used.ru_stime
    print(f"`agentmeter report --format html` whole command: {wall:.2f} s wall, {user + system:.2f} s CPU "
          f"({user:.2f} user, {system:.2f} system) (target < 10 s) ({before} before, {load()} after)")


def spread(times: list[float]) -> str:
    ms = sorted(t * 1000 for t in times)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return f"median {statistics.median(ms):.0f} ms, p95 {p95:.0f}, max {ms[-1]:.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=6)
    parser.add_argument("--clis", type=int, default=6)
    parser.add_argument("--tasks", type=int, default=90)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--db", type=Path, help="the store to use (made there when missing, and kept)")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose code is measured")
    parser.add_argument("--skip-browser", action="store_true", help="no page loads, no bootstrap")
    parser.add_argument("--build-only", action="store_true",
                        help="the build and its floors only (for before/after pairs)")
    parser.add_argument("--command-only", action="store_true",
                        help="the whole command only (for before/after pairs; needs --db)")
    args = parser.parse_args()
    code = args.code.resolve()
    sys.path.insert(0, str(code))
    from agentmeter_tui.core.reporting import report_from_store
    from agentmeter_tui.core.reporting.site import build_site
    from agentmeter_tui.core.store import Store

    shape = dict(models=args.models, clis=args.clis, tasks=args.tasks, trials=args.trials)
    print(f"code: {code.name}")
    with tempfile.TemporaryDirectory(prefix="agentmeter-site-bench-") as tmp:
        folder = Path(tmp)
        db = args.db or folder / "grid.db"
        if not db.exists():
            started = time.perf_counter()
            count = make_store(db, shape, args.events)
            print(f"store: {count} trials x {args.events} events, made in {time.perf_counter() - started:.1f} s")
        if args.command_only:
            whole_command(code, db, folder / "site2")
            return 0
        wall, used, rows = read_floor(db)
        print(f"floor, read every event ({rows:,} rows): {wall:.2f} s wall, {used:.2f} s CPU ({load()})")

        store = Store(db)
        trials = len(store.trials())
        started, used = time.perf_counter(), cpu()
        report = report_from_store(store, rubric=True, agreement=True, resamples=2000)
        made, made_cpu = time.perf_counter(), cpu()
        summary = build_site(store, report, folder / "site")
        done, done_cpu = time.perf_counter(), cpu()
        store.close()
        print(f"site of {trials} trials in process: report with intervals {made - started:.2f} s "
              f"({made_cpu - used:.2f} s CPU) + pages and ATIF files {done - made:.2f} s ({done_cpu - made_cpu:.2f} s "
              f"CPU) = {done - started:.2f} s wall, {done_cpu - used:.2f} s CPU for {summary.pages} pages "
              f"(target < 10 s) ({load()})")
        if not args.build_only:
            whole_command(code, db, folder / "site2")  # before the write floor deletes its files (see above)
        wall, used = write_floor(folder / "site", folder / "scratch")
        files = sum(1 for p in (folder / "site").rglob("*") if p.is_file())
        size = sum(p.stat().st_size for p in (folder / "site").rglob("*") if p.is_file())
        print(f"floor, write {files} files of the site's sizes ({size / 1e6:.0f} MB): {wall:.2f} s wall, "
              f"{used:.2f} s CPU ({load()})")
        index = (folder / "site" / "index.html").stat().st_size
        print(f"index.html: {index / 1e6:.2f} MB (target < 2 MB); site: {size / 1e6:.0f} MB in {files} files")
        if args.build_only:
            return 0
        if args.skip_browser:
            return 0
        loads, floor = asyncio.run(page_times(folder / "site", args.pages))
        print(f"trial page load in Chromium: {spread(loads)} over {len(loads)} pages (target < 300 ms); "
              f"about:blank floor {spread(floor)} ({load()})")
    cold, warm = bootstrap_figure()
    print(f"bootstrap 24 configs x 30 tasks x 2,000 resamples: {warm * 1000:.0f} ms "
          f"({cold * 1000:.0f} ms with scipy's import) (target < 2 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
