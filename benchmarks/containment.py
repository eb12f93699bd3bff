"""What a trial's process containment costs: one local-sandbox trial of ``/bin/true`` (open,
start, wait, cleanup, the sweep that ends its leftovers), before and after, alternated round
by round. "after" is this checkout (a cgroup per trial where the machine has one: mkdir, the
join by a shell, cgroup.kill, rmdir); "before" is another checkout given with ``--before``
(e.g. the main branch's, without groups), or this one with ``AGENTMETER_CONTAINMENT=none``.

    python benchmarks/containment.py [--before CHECKOUT] [--trials 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ONE_SIDE = r"""
import asyncio, shutil, sys, tempfile, time
from types import SimpleNamespace
from agentmeter_tui.core import procs
from agentmeter_tui.core.sandboxes.base import LaunchSpec
from agentmeter_tui.core.sandboxes.local import LocalSandbox

async def main(n):
    root = tempfile.mkdtemp(prefix="containment-bench-")
    sandbox = LocalSandbox(None, {"root": root})
    task = SimpleNamespace(workspace_seed=None)
    started = time.perf_counter()
    for i in range(n):
        session = await sandbox.open(task, i, f"bench{i:06d}")
        agent = await session.start(LaunchSpec(["/bin/true"], {}), lambda stream, lines: None)
        await agent.wait()
        await session.cleanup()
    await procs.BACKGROUND.drain()
    await asyncio.to_thread(procs.SWEEPER.final)
    print((time.perf_counter() - started) / n * 1000)
    shutil.rmtree(root)
    try:
        from agentmeter_tui.core import cgroups
        cgroups.remove_owner_folder()
    except ImportError:  # a checkout from before the groups
        pass

asyncio.run(main(int(sys.argv[1])))
"""


def side(checkout: Path, trials: int, env: dict[str, str]) -> float:
    out = subprocess.run([sys.executable, "-c", ONE_SIDE, str(trials)], cwd=checkout, check=True, text=True,
                         capture_output=True, env={**os.environ, **env, "PYTHONPATH": str(checkout)})
    return float(out.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="checkout to compare with (default: this one, no groups)")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    before = (args.before or ROOT, {} if args.before else {"AGENTMETER_CONTAINMENT": "none"})
    after = (ROOT, {})
    figures: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(args.rounds):  # alternated: drift on a shared machine hits both sides alike
        figures["before"].append(side(before[0], args.trials, before[1]))
        figures["after"].append(side(after[0], args.trials, after[1]))
    for name, values in figures.items():
        print(f"{name:6} median {statistics.median(values):6.2f} ms/trial  "
              f"(rounds: {', '.join(f'{v:.2f}' for v in values)})")
    print(f"cost of containment: {statistics.median(figures['after']) - statistics.median(figures['before']):+.2f} "
          f"ms/trial")


if __name__ == "__main__":
    main()
