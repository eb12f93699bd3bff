"""The static site's speed: build, size, and a trial page opening in a real browser; the bootstrap.

    python benchmarks/site.py [--events 200] [--models 6 --clis 6 --tasks 90 --trials 3] [--pages 20]

The store is the paper grid's shape (6 models x 6 CLIs x 90 tasks x 3 trials = 9,720 trials, plus
the infra-invalid retries the generator adds), from deterministic trial records
(``core/reporting/synthetic.py``) with a transcript of ``--events`` events per trial (the paper
grid's agents print about 200). Printed: the site's build time (the report, the pages and the ATIF
files, in process; and the whole `agentmeter report --format html` command), the index's size,
the time a trial page takes to load in headless Chromium (median and max over ``--pages`` pages,
beside about:blank's as the floor), and the bootstrap of 24 configurations x 30 tasks x 2,000
resamples.

Targets (issue 26): build < 10 s, index < 2 MB, a trial page < 300 ms, bootstrap < 2 s.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentmeter_tui.core.reporting import report_from_store  # noqa: E402
from agentmeter_tui.core.reporting.records import import_records  # noqa: E402
from agentmeter_tui.core.reporting.site import build_site  # noqa: E402
from agentmeter_tui.core.reporting.synthetic import synthetic_records  # noqa: E402
from agentmeter_tui.core.store import Store  # noqa: E402
from tests.sample_data import _insert_events, transcript  # noqa: E402
from tests.site.cdp import Browser, file_url  # noqa: E402


def make_store(db: Path, shape: dict, events: int) -> int:
    store = Store(db)
    import_records(store, list(synthetic_records(**shape)))
    ids = [t["id"] for t in store.trials()]
    with store.db.atomic():
        for n, trial_id in enumerate(ids):
            _insert_events(store.db, trial_id, transcript(events, n + 1))
    store.close()
    return len(ids)


def bootstrap_figure() -> tuple[float, float]:
    """(first call with scipy's import, a warm call) for 24 configurations x 30 tasks x 2,000 resamples."""
    import numpy as np

    from agentmeter_tui.core.metrics.ams import TABLE1
    from agentmeter_tui.core.metrics.intervals import bootstrap, task_table
    from agentmeter_tui.core.metrics.runs import Run, select_runs
    from agentmeter_tui.core.vocab import TIERS

    rng = np.random.default_rng(1)
    configs = [(f"m{i}", f"c{j}") for i in range(6) for j in range(4)]
    tiers = {f"t{n}": TIERS[n % 3] for n in range(30)}
    runs = [Run(t, *c, trial=k, status="passed" if ok else "failed", passed=ok, quality=float(ok),
                cost=float(rng.gamma(2, 0.1)))
            for c in configs for t in tiers for k in (1, 2, 3) for ok in [bool(rng.random() < 0.5)]]
    attempts, selected = defaultdict(list), defaultdict(dict)
    for run in runs:
        attempts[run.config].append(run)
    for (config, task), run in select_runs(runs).items():
        selected[config][task] = run
    times = []
    for _ in range(2):
        started = time.perf_counter()
        bootstrap(configs, task_table(configs, attempts, selected, tiers, TABLE1), 2000, 1)
        times.append(time.perf_counter() - started)
    return times[0], times[1]


async def page_times(site: Path, pages: int) -> tuple[list[float], list[float]]:
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=6)
    parser.add_argument("--clis", type=int, default=6)
    parser.add_argument("--tasks", type=int, default=90)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--pages", type=int, default=20)
    args = parser.parse_args()
    shape = dict(models=args.models, clis=args.clis, tasks=args.tasks, trials=args.trials)
    with tempfile.TemporaryDirectory(prefix="agentmeter-site-bench-") as tmp:
        folder = Path(tmp)
        db = folder / "grid.db"
        started = time.perf_counter()
        count = make_store(db, shape, args.events)
        print(f"store: {count} trials x {args.events} events, made in {time.perf_counter() - started:.1f} s")

        store = Store(db)
        started = time.perf_counter()
        report = report_from_store(store, rubric=True, agreement=True, resamples=2000)
        made = time.perf_counter()
        summary = build_site(store, report, folder / "site")
        done = time.perf_counter()
        store.close()
        print(f"site in process: report with intervals {made - started:.2f} s + pages and ATIF files "
              f"{done - made:.2f} s = {done - started:.2f} s for {summary.pages} pages (target < 10 s)")
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "agentmeter_tui", "report", "--db", str(db), "--format", "html",
                        "--out", str(folder / "site2")], check=True, stderr=subprocess.DEVNULL)
        print(f"`agentmeter report --format html` whole command: {time.perf_counter() - started:.2f} s")
        index = (folder / "site" / "index.html").stat().st_size
        print(f"index.html: {index / 1e6:.2f} MB (target < 2 MB); site: "
              f"{sum(p.stat().st_size for p in (folder / 'site').rglob('*') if p.is_file()) / 1e6:.0f} MB")
        loads, floor = asyncio.run(page_times(folder / "site", args.pages))
        print(f"trial page load in Chromium: median {statistics.median(loads) * 1000:.0f} ms, max "
              f"{max(loads) * 1000:.0f} ms over {len(loads)} pages (target < 300 ms); about:blank floor "
              f"median {statistics.median(floor) * 1000:.0f} ms")
    cold, warm = bootstrap_figure()
    print(f"bootstrap 24 configs x 30 tasks x 2,000 resamples: {warm * 1000:.0f} ms "
          f"({cold * 1000:.0f} ms with scipy's import) (target < 2 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
