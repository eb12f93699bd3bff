"""The AgentMeter paper's grid at full size through the whole engine, headless, then the report.

6 models x 6 CLI columns x 90 tasks (30 easy, 30 medium, 30 hard) x 3 trials = 9,720 trials.
Every trial is a real agent process (the ``command`` adapter: ``sh`` printing a pre-made stream
of ~200 events in the reference agent's format, usage on every call, and writing its answer),
verified by the task's own ``tests/test.sh``. Budgets per tier follow seed 000's Table 1 (USD)
with token caps; one model loops on hard tasks until its token budget kills it. (A task with
no verifier at all, once our side's fault retried once, is now refused when the suite loads.)
Then ``agentmeter report``.

    python benchmarks/paper_grid.py [--tasks 90] [--trials 3] [--concurrency 32] [--keep DIR] [--tui]
    python benchmarks/paper_grid.py --tui-only DIR/paper.db     # the TUI open alone, on a kept store

Prints wall time, trials/s, events/s, the runner's peak RSS, store size and report time, then
checks the store: every planned trial final exactly once (retries as later attempts), every
finished trial holding exactly the events its agent printed. Targets (this 2-core machine):
run < 5 min at concurrency 32, runner RSS < 500 MB, report < 3 s, the TUI attached at the end
opens in < 1 s (``--tui``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODELS = {  # id -> (USD per 1M input, cached input, output), turns scale, share of tasks solved
    "qwen3.6-plus": (0.4, 0.08, 2.4, 1.0, 0.55),
    "deepseek-v4": (0.27, 0.07, 1.1, 1.2, 0.50),
    "glm-5": (0.6, 0.11, 2.2, 1.1, 0.45),
    "minimax-m2.5": (0.3, 0.03, 1.2, 1.3, 0.40),
    "sonnet-4.6": (3.0, 0.3, 15.0, 0.8, 0.65),
    "gpt-5.5": (1.25, 0.125, 10.0, 0.9, 0.60),
}
RUNAWAY_MODEL = "minimax-m2.5"  # loops on a few hard tasks until the token budget kills it
CLIS = ("claude-code", "codex", "qwen-code", "gemini-cli", "kimi-cli", "opencode")  # column names only
CLI_TURNS = {"claude-code": 1.2, "codex": 0.7, "qwen-code": 1.0, "gemini-cli": 1.1, "kimi-cli": 0.9,
             "opencode": 1.0}
TIERS = ("easy", "medium", "hard")
TIER_TURNS = {"easy": 0.5, "medium": 1.0, "hard": 1.6}
# Seed 000 Table 1: the largest budget-grid point per tier, and a token cap well above a normal run.
TIER_BUDGET = {"easy": (0.26, 1_500_000), "medium": (0.82, 3_000_000), "hard": (3.47, 6_000_000)}
BASE_TURNS = 50  # 4 events a turn: ~200 events a trial

SUITE_HEAD = """[suite]
id = "paper-grid"
trials = {trials}
concurrency = {concurrency}
max_retries = 1
kill_grace = 0.5
pricing = "prices.toml"
tasks = {tasks}

[providers.offline]
kind = "none"

# The agents read their pre-made streams from the suite folder, which the walled local sandbox
# hides: this measures the engine; what the walls cost a trial is benchmarks/containment.py's.
[sandbox]
kind = "local"
isolation = "none"

[budgets.default]
wall_seconds = 600

[budgets.easy]
usd = {easy_usd}
tokens = {easy_tokens}

[budgets.medium]
usd = {medium_usd}
tokens = {medium_tokens}

[budgets.hard]
usd = {hard_usd}
tokens = {hard_tokens}
"""

# The agent: print this (cli, model)'s stream for the task's tier; answer right if this model
# solves the task (a line of the task's solvers file), else wrong. The runaway model loops on
# the tasks listed in loops.txt. First line of the instruction = the task id.
AGENT = r"""set -e
SUITE=$1 CLI=$2
task=$(printf '%s\n' "$AGENTMETER_INSTRUCTION" | head -n 1)
tier=$(cat "$SUITE/tiers/$task")
if grep -qx "$AGENTMETER_MODEL $task" "$SUITE/loops.txt"; then
  while :; do cat "$SUITE/streams/loop.jsonl"; done
fi
cat "$SUITE/streams/$CLI/$AGENTMETER_MODEL-$tier.jsonl"
if grep -qx "$AGENTMETER_MODEL" "$SUITE/solvers/$task"; then echo right > answer.txt; else echo wrong > answer.txt; fi
"""


def stream(turns: int, model_index: int) -> list[str]:
    """A realistic trial: init, then per turn an assistant message, a tool call, its result and
    the call's usage (input growing with the context, most of it cached), then the result."""
    lines = [json.dumps({"type": "init", "model": "fake"})]
    context = 3000 + 500 * model_index
    for turn in range(1, turns + 1):
        lines.append(json.dumps({"type": "assistant", "text": f"Step {turn}: looking at the failing test and "
                                 "deciding what to change in the parser next."}))
        lines.append(json.dumps({"type": "tool_call", "id": f"c{turn}", "name": "shell",
                                 "arguments": {"command": f"sed -n {turn},{turn + 40}p src/parser.py"}}))
        lines.append(json.dumps({"type": "tool_result", "id": f"c{turn}", "exit_code": 0,
                                 "output": "def parse(line):\n    return line.split(',')\n" * 3}))
        context += 350
        lines.append(json.dumps({"type": "usage", "call": turn, "usage": {
            "prompt_tokens": context, "completion_tokens": 120 + 10 * model_index,
            "prompt_tokens_details": {"cached_tokens": context - 400},
            "completion_tokens_details": {"reasoning_tokens": 40}}}))
    lines.append(json.dumps({"type": "result", "status": "success"}))
    return lines


def write_suite(folder: Path, *, tasks: int, trials: int, concurrency: int) -> tuple[Path, dict]:
    """The suite folder; returns it and the expected events per (cli, model, tier)."""
    suite = folder / "suite"
    suite.mkdir(parents=True)
    task_ids = [f"t{index:03d}" for index in range(tasks)]
    tiers = {task: TIERS[index * 3 // tasks] for index, task in enumerate(task_ids)}
    broken = None  # a task without a verifier no longer loads (issue 38): none is planted
    budgets = {f"{tier}_{kind}": value for tier, (usd, tokens) in TIER_BUDGET.items()
               for kind, value in (("usd", usd), ("tokens", tokens))}
    text = SUITE_HEAD.format(trials=trials, concurrency=concurrency, tasks=json.dumps(task_ids), **budgets)
    for model in MODELS:
        text += f'\n[[models]]\nid = "{model}"\nprovider = "offline"\nprice_key = "bench/{model}"\n'
    agent = suite / "agent.sh"
    agent.write_text(AGENT)
    for cli in CLIS:
        text += (f'\n[[clis]]\nadapter = "command"\nname = "command:{cli}"\n'
                 f'args = ["/bin/sh", "{{suite}}/agent.sh", "{{suite}}", "{cli}"]\n')
    (suite / "suite.toml").write_text(text)
    prices = 'as_of = "2026-06-04"\ncurrency = "USD"\ngenerated_by = "manual"\n'
    for model, (p_in, p_hit, p_out, _turns, _share) in MODELS.items():
        prices += (f'\n[models."bench/{model}"]\naliases = ["{model}"]\ninput = "{p_in}"\n'
                   f'cached_input = "{p_hit}"\ncache_write = "{p_in * 1.25:.4f}"\noutput = "{p_out}"\n')
    (suite / "prices.toml").write_text(prices)
    expected: dict[tuple[str, str, str], int] = {}
    for cli in CLIS:
        (suite / "streams" / cli).mkdir(parents=True)
        for index, (model, (_i, _c, _o, scale, _share)) in enumerate(MODELS.items()):
            for tier in TIERS:
                turns = max(3, round(BASE_TURNS * scale * CLI_TURNS[cli] * TIER_TURNS[tier]))
                lines = stream(turns, index)
                (suite / "streams" / cli / f"{model}-{tier}.jsonl").write_text("\n".join(lines) + "\n")
                expected[(cli, model, tier)] = len(lines)
    (suite / "streams" / "loop.jsonl").write_text("\n".join(stream(25, 0)[1:-1]) + "\n")
    for folder_name in ("tiers", "solvers"):
        (suite / folder_name).mkdir()
    loops = []
    for index, task in enumerate(task_ids):
        (suite / "tiers" / task).write_text(tiers[task] + "\n")
        solvers = [model for m_index, (model, spec) in enumerate(MODELS.items())
                   if (index * 7 + m_index * 13) % 100 < spec[4] * 100 * (1.3 - 0.3 * TIERS.index(tiers[task]))]
        (suite / "solvers" / task).write_text("".join(f"{model}\n" for model in solvers))
        if tiers[task] == "hard" and index % 10 == 0:
            loops.append(f"{RUNAWAY_MODEL} {task}")
        folder_task = suite / task
        (folder_task / "tests").mkdir(parents=True)
        (folder_task / "instruction.md").write_text(f"{task}\nFix the parser so that the tests pass.\n")
        (folder_task / "task.toml").write_text(f'[task]\ntier = "{tiers[task]}"\n')
        (folder_task / "tests" / "test.sh").write_text('grep -qx right answer.txt\n')
    (suite / "loops.txt").write_text("".join(f"{line}\n" for line in loops))
    return suite, {"expected": expected, "tiers": tiers, "broken": broken, "loops": loops}


def watch_rss(pid_file: Path, stop: threading.Event, peak: list[int]) -> None:
    """Peak RSS of the runner process (found by its command line) until ``stop``."""
    runner = None
    while not stop.wait(0.2):
        if runner is None:
            for proc in psutil.process_iter(["cmdline"]):
                cmdline = proc.info["cmdline"] or []
                if any("core.run.runner" in part for part in cmdline) and str(pid_file) in " ".join(cmdline):
                    runner = proc
                    break
            continue
        try:
            peak[0] = max(peak[0], runner.memory_info().rss)
        except psutil.Error:
            return


def check_store(db: Path, plan: dict, *, tasks: int, trials: int) -> list[str]:
    problems = []
    conn = sqlite3.connect(db)
    cells = len(MODELS) * len(CLIS) * tasks * trials
    # The agent's own events only: the runner's notes (its containment line, kills, flags) are
    # the harness speaking, and a new one must not read as a lost or extra agent event.
    rows = conn.execute("select task_id, model, cli, trial_index, attempt, status, reason, "
                        "(select count(*) from events e where e.trial_id = t.id and e.stream != 'runner') from trials t").fetchall()
    final = {}
    for task, model, cli, index, attempt, status, reason, events in rows:
        final.setdefault((task, model, cli, index), []).append((attempt, status, reason, events))
    if len(final) != cells:
        problems.append(f"{len(final)} cells in the store, {cells} planned")
    for (task, model, cli, _index), attempts in final.items():
        attempts.sort()
        last = attempts[-1]
        if any(status in ("queued", "starting", "running", "verifying") for _a, status, _r, _e in attempts):
            problems.append(f"{task} {model} {cli}: not final: {attempts}")
        if any(status != "infra-invalid" for _a, status, _r, _e in attempts[:-1]):
            problems.append(f"{task} {model} {cli}: repeated after a final status: {attempts}")
        if task == plan["broken"]:
            continue
        if f"{model} {task}" in plan["loops"]:
            if last[1] != "killed" or not str(last[2]).startswith("budget:"):
                problems.append(f"{task} {model} {cli}: runaway not killed by budget: {last}")
            continue
        want = plan["expected"][(cli.partition(":")[2], model, plan["tiers"][task])]
        if last[1] not in ("passed", "failed") or last[3] != want:
            problems.append(f"{task} {model} {cli}: {last[1]} with {last[3]} events, expected {want}")
    conn.close()
    return problems


def tui_open(db: Path) -> tuple[float, float]:
    """Seconds from a new process starting the app on the store to its first frame of the grid
    (imports, the store's first queries, the first render), and to every worker done (the grid's
    AMS column, a report of the whole store, fills in after the first frame)."""
    probe = (
        "import asyncio, sys, time\n"
        "t0 = time.perf_counter()\n"
        "from agentmeter_tui.ui.app import AgentMeterApp\n"
        "from agentmeter_tui.ui.session import UiSession\n"
        "async def probe():\n"
        "    app = AgentMeterApp(UiSession(sys.argv[1], reviewer='bench', live=False), screen='grid', connect=False)\n"
        "    frames = []\n"
        "    display = app._display\n"
        "    def shown(screen, renderable):\n"
        "        display(screen, renderable)\n"
        "        if renderable is not None and type(screen).__name__ == 'GridScreen':\n"
        "            renderable.render_segments(app.console)\n"
        "            frames.append(time.perf_counter())\n"
        "    app._display = shown\n"
        "    async with app.run_test(size=(160, 48)) as pilot:\n"
        "        while not frames:\n"
        "            await asyncio.sleep(0.001)\n"
        "        await pilot.app.workers.wait_for_complete()\n"
        "        await pilot.pause()\n"
        "        print(frames[0] - t0, time.perf_counter() - t0)\n"
        "asyncio.run(probe())\n")
    done = subprocess.run([sys.executable, "-c", probe, str(db)], check=True, capture_output=True, text=True,
                          cwd=ROOT)
    first, settled = map(float, done.stdout.strip().splitlines()[-1].split())
    return first, settled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=90)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--keep", type=Path, help="keep the suite and store in this folder")
    parser.add_argument("--tui", action="store_true", help="also time the TUI opening on the finished store")
    parser.add_argument("--tui-only", type=Path, metavar="DB",
                        help="only time the TUI opening on this existing store (one kept with --keep), 5 times")
    args = parser.parse_args()
    if args.tui_only:
        runs = [tui_open(args.tui_only) for _ in range(5)]
        firsts, settled = sorted(r[0] for r in runs), sorted(r[1] for r in runs)
        print(f"TUI open on {args.tui_only.name}: grid's first frame median {firsts[2]:.2f} s (runs "
              f"{', '.join(f'{t:.2f}' for t in firsts)}; target < 1 s), AMS column filled in median "
              f"{settled[2]:.2f} s (load average {os.getloadavg()[0]:.1f})")
        return
    folder = args.keep or Path(tempfile.mkdtemp(prefix="paper-grid-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        suite, plan = write_suite(folder, tasks=args.tasks, trials=args.trials, concurrency=args.concurrency)
        db = folder / "paper.db"
        cells = len(MODELS) * len(CLIS) * args.tasks * args.trials
        print(f"grid: {len(MODELS)} models x {len(CLIS)} CLIs x {args.tasks} tasks x {args.trials} trials = "
              f"{cells} trials, concurrency {args.concurrency}, {os.cpu_count()} cores")
        stop, peak = threading.Event(), [0]
        watcher = threading.Thread(target=watch_rss, args=(db, stop, peak), daemon=True)
        watcher.start()
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "agentmeter_tui", "run", str(suite), "--headless", "--db", str(db)],
                       check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - started
        stop.set()
        watcher.join()
        conn = sqlite3.connect(db)
        attempts, events = conn.execute("select count(*), (select count(*) from events) from trials").fetchone()
        by_status = dict(conn.execute("select status, count(*) from trials group by status"))
        conn.close()
        size = sum(path.stat().st_size for path in folder.glob("paper.db*"))
        print(f"run: {wall:.1f} s (target < 300 s), {attempts} attempts, {cells / wall:.1f} trials/s, "
              f"{events:,} events, {events / wall:,.0f} events/s")
        print(f"statuses: {by_status}")
        print(f"runner peak RSS: {peak[0] / 2**20:.0f} MB (target < 500 MB); store {size / 2**20:.0f} MB")
        started = time.perf_counter()
        report = subprocess.run([sys.executable, "-m", "agentmeter_tui", "report", "--suite", "paper-grid", "--db", str(db),
                                 "--format", "json"], check=True, capture_output=True, text=True)
        report_time = time.perf_counter() - started
        rows = json.loads(report.stdout)["configurations"]
        ams = sorted(((row["ams"] or 0, row["model"], row["cli"]) for row in rows), reverse=True)
        print(f"report: {report_time:.2f} s (target < 3 s), {len(ams)} configurations; best AMS "
              f"{ams[0][0]:.3f} ({ams[0][1]} / {ams[0][2]})" if ams else f"report: {report_time:.2f} s")
        if args.tui:
            first, settled = tui_open(db)
            print(f"TUI open on the finished store: grid's first frame {first:.2f} s (target < 1 s), "
                  f"AMS column filled in {settled:.2f} s")
        problems = check_store(db, plan, tasks=args.tasks, trials=args.trials)
        print("store check: " + ("every trial final once, every event count right" if not problems
                                 else f"{len(problems)} problems, first: {problems[:5]}"))
        sys.exit(1 if problems else 0)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
