"""Regenerate ``screenshots/`` from the app itself, on the demo's data.

Runs the demo (``suites/demo`` over the reference agent and every installed agent CLI, as
``agentmeter demo`` does) headless into a temporary store (offline; 40 s with the reference
agent alone, a few minutes with all six real CLIs), scores a few of
its trials as a reviewer would, then opens the app headless at 160x48 on each screen in
each shipped theme and saves an SVG and a PNG of it, and again at 80x24 (the smallest terminal
every screen is laid out for) in the dark theme, as ``NAME-dark-80x24``. The live screen is fed the demo's own
transcripts and meters as feed messages, cut partway through, so it shows trials mid-run.

    .venv/bin/python scripts/screenshots.py [--db EXISTING_DEMO_STORE] [--out screenshots] [--site-only]

The static site is shot too (headless Chromium, 390x844 and 1400x1000: the index and the longest
trial page).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentmeter_tui.core.run.control import ControlClient, runner_alive
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TOKEN_CLASSES
from agentmeter_tui.ui.app import AgentMeterApp
from agentmeter_tui.ui.session import UiSession
from agentmeter_tui.ui.settings import UiSettings

SIZE = (160, 48)
SMALL = (80, 24)
THEMES = ("agentmeter-dark", "agentmeter-light")
LIVE_TRIALS = 8  # the demo runs 8 at once
CUT = 0.6  # how far through its transcript each live trial is shown
# The PNGs are drawn by cairosvg, which has no web fonts: point the SVG at an installed monospace.
PNG_FONT = "DejaVu Sans Mono"


def run_demo(db: Path) -> None:
    """The demo as ``agentmeter demo`` runs it: the reference agent plus every installed agent CLI."""
    from agentmeter_tui.commands.run import spawn_runner
    from agentmeter_tui.commands.ui import demo_clis, demo_suite
    from agentmeter_tui.core.paths import default_clis_root

    clis = demo_clis(default_clis_root())
    print(f"CLIs: {', '.join(clis)}", flush=True)
    if isinstance(spawn_runner(demo_suite(db.parent, clis), db, None), int):  # an exit code: it died
        raise SystemExit("the demo runner did not start")
    with ControlClient(db) as client:
        for message in client.subscribe():
            if message.get("type") == "finished":
                break
    while runner_alive(db):
        time.sleep(0.1)


def score_some(db: Path) -> None:
    """Two reviewers' pass over the first round, so the rubric table, winrates, agreement and the
    adjudication queue have data. The second reviewer scored blind and is harsher on some trials."""
    store = Store(db)
    scores = {"passed": 3, "failed": 1, "errored": 0, "killed": 0}
    rows = list(store.db.query("select id, model, status from trials where trial_index = 1 order by id"))
    for n, row in enumerate(rows):
        score = scores.get(row["status"], 0)
        if row["model"] == "guzzler" and row["status"] == "passed":
            score = 2  # passed, with one loss: it took the long way
        store.reviews.add_score(row["id"], score, "demo-reviewer")
        second = score if n % 3 else max(0, score - 1)
        if n % 7 == 3:
            second = 3 - score if abs(3 - 2 * score) >= 2 else score  # a real disagreement, for adjudication
        store.reviews.add_score(row["id"], second, "second-reviewer", blind=True)
    store.close()


def live_feed(db: Path) -> tuple[list[dict], float]:
    """Feed messages for the demo's first trials, each cut at ``CUT`` of its transcript."""
    store = Store(db)
    every = list(store.db.query("select * from trials order by id"))
    models = list(dict.fromkeys(t["model"] for t in every))
    clis = list(dict.fromkeys(t["cli"] for t in every))
    # Every model, each on another CLI: a varied wall of panes, not eight copies of the first cell.
    trials = []
    for n in range(LIVE_TRIALS):
        model, cli = models[n % len(models)], clis[(n * 3 + n // len(models)) % len(clis)]
        match = next((t for t in every if t["model"] == model and t["cli"] == cli and t not in trials), None)
        if match:
            trials.append(match)
    trials.sort(key=lambda t: t["id"])
    started = min(float(next(store.events(t["id"], 0, 1))[1]) for t in trials)
    meters, earlier, events = [], [], {}
    now = 0.0
    for row in trials:
        rows = list(store.events(row["id"]))
        cut = max(1, int(len(rows) * CUT))
        shown = rows[:cut]
        usage = list(store.db.query("select * from usage where trial_id = ? and seq <= ? order by seq",
                                    [row["id"], shown[-1][0]]))
        tokens = {c: sum(u[c] or 0 for u in usage) for c in TOKEN_CLASSES}
        half = {c: sum(u[c] or 0 for u in usage[: len(usage) // 2]) for c in TOKEN_CLASSES}
        cost = sum(u["cost_usd"] or 0 for u in usage)
        first_ts, last_ts = float(rows[0][1]), float(shown[-1][1])
        now = max(now, last_ts)
        meter = {"id": row["id"], "task": row["task_id"], "model": row["model"], "cli": row["cli"],
                 "trial": row["trial_index"], "status": "running", "reason": None, "tokens": tokens,
                 "cost_usd": cost, "reported_cost_usd": None, "turns": len(usage), "tool_calls": row["tool_calls"],
                 "flags": ["thrash"] if row["model"] == "parrot" and len(usage) > 6 else [],
                 "elapsed": last_ts - first_ts, "events": cut,
                 "budget": {"wall_seconds": 45.0, "tokens": 250000, "usd": 1.5}}
        meters.append(meter)
        earlier.append({**meter, "tokens": half, "cost_usd": cost / 2, "elapsed": (last_ts - first_ts) / 2})
        events[row["id"]] = [[seq, ts, kind, stream, (text or "")[:2000]] for seq, ts, kind, stream, text, _ in shown]
    store.close()
    done = int(len(every) * 0.4)
    progress = {"done": done, "total": len(every), "running": len(meters), "queued": len(every) - done - len(meters),
                "paused": False, "stopping": False}
    start = started + (now - started) / 2
    return [{"type": "snapshot", "run_id": 1, "suite": "demo", "pid": 0, "progress": progress, "running": earlier},
            {"type": "tick", "ts": start, "meters": earlier, "events": {}, "finished": [], "progress": progress},
            {"type": "tick", "ts": now, "meters": meters, "events": events, "finished": [], "progress": progress}], now


FLEET = ("node-1", "node-2", "node-3")


def on_nodes(feed: list[dict]) -> list[dict]:
    """The demo's live feed as a three-node swarm run would send it: each trial on a node
    (round-robin), the third node drained, as ``Feed`` reports ``nodes``."""
    placed = copy.deepcopy(feed)
    for message in placed:
        for meter in message.get("running", []) + message.get("meters", []):
            meter["node"] = FLEET[meter["id"] % len(FLEET)]
    meters = placed[-1]["meters"]
    seen = placed[-1]["ts"]
    placed[0]["nodes"] = [{"name": name, "state": "drain" if name == FLEET[2] else "ready", "slots": 4, "seen": seen,
                           "running": sum(1 for m in meters if m["node"] == name)} for name in FLEET]
    return placed


async def shoot(db: Path, out: Path, screen: str, theme: str, feed: list[dict] | None = None,
                clock: float | None = None, keys: tuple[str, ...] = (), name: str | None = None,
                trial: int | None = None, blind: bool = False, compare: tuple[int, int] | None = None,
                reviewer: str = "demo-reviewer", size: tuple[int, int] = SIZE) -> Path:
    session = UiSession(db, reviewer=reviewer, live=feed is not None, blind=blind, blind_seed=1 if blind else None)
    if clock is not None:
        session.live.clock = lambda: clock + 1
    app = AgentMeterApp(session, screen=screen, trial=trial, settings=UiSettings(theme=theme), connect=False,
                        compare=compare)
    async with app.run_test(size=size) as pilot:
        await _settle(pilot)
        for message in feed or ():
            app._feed_message(message)
        await _settle(pilot)
        await _settle(pilot)
        for key in keys:
            await pilot.press(key)
            await _settle(pilot)
        svg = app.export_screenshot(title=f"agentmeter · {screen}")
    session.close()
    stem = out / (f"{name or screen}-{theme.removeprefix('agentmeter-')}"
                  + ("" if size == SIZE else f"-{size[0]}x{size[1]}"))
    stem.with_suffix(".svg").write_text(svg, encoding="utf-8")
    import cairosvg

    png_svg = svg.replace("Fira Code, monospace", PNG_FONT).replace('"Fira Code"', f'"{PNG_FONT}"')
    cairosvg.svg2png(bytestring=png_svg.encode(), write_to=str(stem.with_suffix(".png")),
                     output_width=1600 if size == SIZE else 1000)
    return stem


async def _settle(pilot) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    if hasattr(pilot.app.screen, "flush"):
        pilot.app.screen.flush()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def mid_run(db: Path, feed: list[dict]) -> Path:
    """A copy of the store in which the feed's live trials are still running. The screens trust
    the store over the feed for a trial the store has as final (after a run ends, on attach), so
    the live and grid shots need a store that agrees with the feed they are shown."""
    import sqlite3

    copy = Path(tempfile.mkdtemp(prefix="agentmeter-shots-live-")) / "demo.db"
    with sqlite3.connect(db) as source, sqlite3.connect(copy) as target:
        source.backup(target)
        running = [meter["id"] for meter in feed[-1]["meters"]]
        target.execute(f"update trials set status = 'running', reason = null, finished_at = null "
                       f"where id in ({', '.join('?' * len(running))})", running)
    return copy


async def main_async(db: Path, out: Path) -> list[Path]:
    feed, clock = live_feed(db)
    live_db = mid_run(db, feed)
    store = Store(db)
    review_trial = next(store.db.query("select id from trials where model = 'parrot' and trial_index = 1 "
                                       "order by id limit 1"))["id"]
    pair = compare_pair(store)
    # Two reviewers have scored the first round; a third review is wanted, so the blind queue has trials.
    suite = store.suite_row()
    if suite is not None:
        store.reviews.set_review_plan(suite["id"], 3, None, "screenshots")
    store.close()
    made = []
    for theme in THEMES:
        made.append(await shoot(live_db, out, "grid", theme, feed=feed, clock=clock))
        made.append(await shoot(live_db, out, "live", theme, feed=feed, clock=clock))
        made.append(await shoot(db, out, "review", theme, trial=review_trial, name="review"))
        made.append(await shoot(db, out, "report", theme))
    made.append(await shoot(live_db, out, "grid", THEMES[0], feed=feed, clock=clock, keys=("down", "right", "enter"),
                            name="cell"))
    made.append(await shoot(live_db, out, "live", THEMES[0], feed=feed, clock=clock, keys=("k",), name="kill"))
    made.append(await shoot(db, out, "grid", THEMES[0], keys=("question_mark",), name="help"))
    placed = on_nodes(feed)
    made.append(await shoot(mid_run(db, placed), out, "grid", THEMES[0], feed=placed, clock=clock, keys=("f",),
                            name="fleet"))
    made.append(await shoot(db, out, "review", THEMES[0], blind=True, reviewer="third-reviewer", name="review-blind"))
    made.append(await shoot(db, out, "adjudicate", THEMES[0], name="adjudicate"))
    made.append(await shoot(live_db, out, "grid", THEMES[0], feed=feed, clock=clock, keys=("dollar_sign",),
                            name="cap"))
    if pair is not None:
        for theme in THEMES:
            made.append(await shoot(db, out, "compare", theme, compare=pair, name="compare"))
    made += await small_shots(db, live_db, out, feed, clock, review_trial, pair)
    return made


async def small_shots(db: Path, live_db: Path, out: Path, feed: list[dict], clock: float, review_trial: int,
                      pair: tuple[int, int] | None) -> list[Path]:
    """Every screen at 80x24 (dark): what an operator on a small terminal sees."""
    theme, made = THEMES[0], []
    for screen, keys, name in (("grid", (), "grid"), ("live", (), "live"), ("grid", ("down", "right", "enter"), "cell"),
                               ("live", ("k",), "kill"), ("grid", ("dollar_sign",), "cap"),
                               ("grid", ("question_mark",), "help")):
        made.append(await shoot(live_db, out, screen, theme, feed=feed, clock=clock, keys=keys, name=name, size=SMALL))
    made.append(await shoot(db, out, "review", theme, trial=review_trial, name="review", size=SMALL))
    made.append(await shoot(db, out, "review", theme, blind=True, reviewer="third-reviewer", name="review-blind",
                            size=SMALL))
    made.append(await shoot(db, out, "adjudicate", theme, name="adjudicate", size=SMALL))
    made.append(await shoot(db, out, "report", theme, size=SMALL))
    if pair is not None:
        made.append(await shoot(db, out, "compare", theme, compare=pair, name="compare", size=SMALL))
    return made


def compare_pair(store: Store) -> tuple[int, int] | None:
    """One model under two CLIs on one task, the pair furthest apart in tokens: the compare screen's
    case. Prefers a passing trial beside a failing one."""
    rows = list(store.db.query(
        "select id, task_id, model, cli, status, coalesce(uncached_input, 0) + coalesce(cached_input, 0) "
        "+ coalesce(cache_write, 0) + coalesce(output, 0) + coalesce(reasoning, 0) as raw from trials "
        "where status in ('passed', 'failed') and trial_index = 1 order by id"))
    best, best_key = None, None
    for a in rows:
        for b in rows:
            if a["id"] < b["id"] and (a["task_id"], a["model"]) == (b["task_id"], b["model"]) and a["cli"] != b["cli"]:
                key = (a["status"] != b["status"], abs(a["raw"] - b["raw"]))
                if best_key is None or key > best_key:
                    best, best_key = (a["id"], b["id"]), key
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="an existing demo store (default: run the demo now)")
    parser.add_argument("--out", default=str(ROOT / "screenshots"))
    parser.add_argument("--site-only", action="store_true", help="only the static site's Chromium screenshots")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.db:
        db = Path(args.db)
    else:
        db = Path(tempfile.mkdtemp(prefix="agentmeter-shots-")) / "demo.db"
        print(f"running the demo into {db} …", flush=True)
        run_demo(db)
    store = Store(db)
    scored = store.db.execute("select count(*) from scores").fetchone()[0]
    store.close()
    if not scored:
        score_some(db)
    for stem in [] if args.site_only else asyncio.run(main_async(db, out)):
        print(f"wrote {stem.relative_to(ROOT) if stem.is_relative_to(ROOT) else stem}.svg/.png")
    for path in site_shots(db, out):
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


SITE_SIZES = ((390, 844), (1400, 1000))  # a phone and a desktop


def site_shots(db: Path, out: Path) -> list[Path]:
    """The static site of the same store (``report --format html``): its index and its longest
    trial page, as headless Chromium draws them from file:// at a phone's and a desktop's size.
    Skipped, with a line, where chromium is missing."""
    import shutil

    from agentmeter_tui.core.reporting import report_from_store
    from agentmeter_tui.core.reporting.site import build_site

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("no chromium: site screenshots not made (apt-get install chromium)")
        return []
    folder = Path(tempfile.mkdtemp(prefix="agentmeter-site-shots-"))
    store = Store(db)
    report = report_from_store(store, rubric=True, agreement=True, resamples=2000)
    build_site(store, report, folder / "site")
    longest = max(store.trials(report.suite), key=lambda t: (sum(1 for _ in store.events(t["id"])), -t["id"]))
    store.close()
    trial = folder / "site" / "trial" / f"{longest['id']}.html"
    written = []
    for width, height in SITE_SIZES:
        # No shot at a search's match: --screenshot draws a scrolled page's top blank (the viewer's
        # scroll-to-match is checked in tests/site instead, in a DevTools-driven Chromium).
        for name, url in (("site-index", (folder / "site" / "index.html").as_uri()), ("site-trial", trial.as_uri())):
            target = out / f"{name}-{width}x{height}.png"
            chromium_shot(browser, url, target, (width, height), folder / "profile")
            written.append(target)
    shutil.rmtree(folder, ignore_errors=True)
    return written


def chromium_shot(browser: str, url: str, target: Path, size: tuple[int, int], profile: Path) -> None:
    """One viewport of ``url`` as headless Chromium draws it (the flags this machine kind needs)."""
    import subprocess

    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--no-first-run", "--hide-scrollbars", f"--user-data-dir={profile}",
                    f"--window-size={size[0]},{size[1]}", f"--screenshot={target}", url],
                   check=True, capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
