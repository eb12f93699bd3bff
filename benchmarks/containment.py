"""What a trial's containment costs: one local-sandbox trial of ``/bin/true`` (open, start,
wait, cleanup, the sweep that ends its leftovers), before and after, alternated round by round,
beside the floor (the spawn and wait of ``/bin/true`` itself, measured the same way).

"after" is this checkout as a suite runs it: a cgroup per trial where the machine has one, and
the trial under bwrap (namespaces, a filesystem view of its own, as root a uid of its own from
the pool: its folders given to it, its passwd written). "before" is another checkout given
with ``--before`` (e.g. the main branch's), or this one with ``isolation = "none"``;
``--walls-only`` compares this checkout with and without bwrap, both with cgroups (the figure
issue 37 asks: the overhead of the walls within 5x the floor).

    python benchmarks/containment.py [--before CHECKOUT | --walls-only] [--checkout CHECKOUT] [--cpu]
                                     [--trials 200] [--rounds 5]

Figures (--walls-only --trials 60 --rounds 3, this machine kind: 2 cores shared with other
work, load average about 4; old and new checkouts run one after another, twice, each beside
its own floor):

    walls of issue 37 as first built   +5.23, +4.66 ms/trial  (6.9x, 6.3x the floor, 0.76, 0.74 ms)
    fewer mounts, unshare -G -S        +4.03, +4.15 ms/trial  (5.3x, 5.2x the floor, 0.76, 0.79 ms)

The network namespace per trial (issue 37's network wall), on a machine at load 7 to 11 (other
work): ``--cpu`` (CPU time of the side and of the children it waited for) and wall clock, main
and this branch one after another, twice each:

    --cpu  main    +1.96, +2.01 ms/trial  (2.2x, 2.3x the CPU floor, 0.88, 0.87 ms)
    --cpu  netns   +2.82, +2.59 ms/trial  (3.2x, 3.0x the CPU floor, 0.87, 0.86 ms)
    wall   main    8.4x, 8.8x the floor (2.59, 4.08 ms: the load, not the walls)
    wall   netns   9.9x, 8.5x the floor (2.00, 2.58 ms)

and later on a quiet machine (load average 1), wall clock, --walls-only --trials 60 --rounds 3:

    main           +4.05, +3.92 ms/trial  (5.0x, 4.7x the floor, 0.81, 0.84 ms)
    netns          +4.83, +5.37 ms/trial  (5.5x, 6.6x the floor, 0.87, 0.82 ms)

The join to the trial's cgroup through bwrap's info and block pipes (sandboxes/joining.py) instead
of an ``sh`` exec before bwrap, --walls-only --trials 60 --rounds 3, main and this branch one after
another, nine pairs (three sets of three) at load 2.4 to 14 (a CI run on the machine):

    --cpu  main     +1.63 to +1.94 ms/trial, median +1.78  (2.0x to 2.6x the CPU floor, 0.69-0.88 ms)
    --cpu  joining  +1.11 to +1.67 ms/trial, median +1.26  (1.5x to 2.1x)
    wall   main     +7.6 to +22.4 ms/trial, median +17.1
    wall   joining  +5.5 to +19.1 ms/trial, median +12.4   (at that load the wall clock measures the
                                                            other work: pairs cross each other)

bwrap becoming the trial's uid itself in the runner's user namespace (sandboxes/userns.py)
instead of an exec of ``unshare -G -S`` in the sandbox, --walls-only --trials 100 --rounds 5,
the tree before and this one one after another, eight pairs at load 0.7 to 2.2:

    wall   before   +3.83 to +4.56 ms/trial, median +4.40  (4.5x to 5.6x the floor, 0.82-0.85 ms)
    wall   userns   +3.29 to +3.63 ms/trial, median +3.50  (3.8x to 4.4x, 0.82-0.86 ms)
    --cpu  before   +1.35, +1.36, +1.18 ms/trial           (the exec was a wait, not work:
    --cpu  userns   +1.37, +1.45, +1.48 ms/trial            the CPU is the same)

Its trials' root is made 0711 here, as the default sandbox folder is: under a folder the
trial's uid cannot pass (mkdtemp's 0700), bwrap could not look the root up as that uid, and
the trial would take the exec drop.

The namespace's making (about 1.2 ms of the kernel's CPU alone) is on a thread that makes them
ahead, and its removal in the kernel's workers; on the trial's path it is two setns, about
6 us. On two cores both still take a core from the trial's own processes: +0.6 to +1.1 ms a
trial of wall clock (kept open instead of closed, a namespace's removal accounted for about
0.3 ms of it; made on the trial's path instead of ahead, 0.3 ms more).

Where it goes (perf, strace): bwrap rereads the mount table after each bind (about 0.1 ms a
bind: /usr, /etc, /opt, the trial's root, its passwd and group, and the ones bwrap makes for
--proc and --dev), the exec of the uid drop (about 0.6 ms: dynamic linking, the locale), bwrap's
own start and its two forks; the Python side (the uid's lock, passwd and group written, the
folders given to the uid, the options) about 0.3 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ONE_SIDE = r"""
import asyncio, os, resource, shutil, sys, tempfile, time
from types import SimpleNamespace
from agentmeter_tui.core import procs
from agentmeter_tui.core.sandboxes.base import LaunchSpec
from agentmeter_tui.core.sandboxes.local import LocalSandbox

def clock():
    # Wall clock, or with --cpu the CPU time of this process and the children it waited for
    # (bwrap, and those it waited for): on a shared machine the wall clock mostly measures the others.
    if not os.environ.get("CONTAINMENT_CPU"):
        return time.perf_counter()
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

async def main(n, settings):
    root = tempfile.mkdtemp(prefix="containment-bench-")
    os.chmod(root, 0o711)  # as the default sandbox folder is: a trial's uid may pass it (sandboxes/userns.py)
    sandbox = LocalSandbox(None, {"root": root, **settings})
    task = SimpleNamespace(workspace_seed=None)
    started = clock()
    for i in range(n):
        session = await sandbox.open(task, i, f"bench{i:06d}")
        agent = await session.start(LaunchSpec(["/bin/true"], {}), lambda stream, lines: None)
        await agent.wait()
        await session.cleanup()
    await procs.BACKGROUND.drain()
    await asyncio.to_thread(procs.SWEEPER.final)
    print((clock() - started) / n * 1000)
    shutil.rmtree(root)
    try:
        from agentmeter_tui.core import cgroups
        cgroups.remove_owner_folder()
    except ImportError:  # a checkout from before the groups
        pass

def floor(n):
    import subprocess
    started = clock()
    for _ in range(n):
        subprocess.Popen(["/bin/true"]).wait()
    print((clock() - started) / n * 1000)

if sys.argv[2] == "floor":
    floor(int(sys.argv[1]))
else:
    asyncio.run(main(int(sys.argv[1]), json.loads(sys.argv[2])))
"""


def side(checkout: Path, trials: int, env: dict[str, str], cpu: bool = False) -> float:
    settings = env.pop("settings", "{}")
    out = subprocess.run([sys.executable, "-c", "import json\n" + ONE_SIDE, str(trials), settings], cwd=checkout,
                         check=True, text=True, capture_output=True,
                         env={**os.environ, **env, "PYTHONPATH": str(checkout), "CONTAINMENT_CPU": "1" if cpu else ""})
    return float(out.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="checkout to compare with (default: this one, no walls)")
    parser.add_argument("--walls-only", action="store_true", help="before: this checkout with cgroups, no bwrap")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="measure this checkout (default: this one)")
    parser.add_argument("--cpu", action="store_true", help="CPU time (this process and its children), not wall clock")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    unwalled = json.dumps({"isolation": "none"})
    if args.before:
        before = (args.before, {})
    elif args.walls_only:
        before = (args.checkout, {"settings": unwalled})
    else:
        before = (args.checkout, {"AGENTMETER_CONTAINMENT": "none", "settings": unwalled})
    after = (args.checkout, {})
    figures: dict[str, list[float]] = {"floor": [], "before": [], "after": []}
    for _ in range(args.rounds):  # alternated: drift on a shared machine hits every side alike
        figures["floor"].append(side(args.checkout, args.trials, {"settings": "floor"}, args.cpu))
        figures["before"].append(side(before[0], args.trials, dict(before[1]), args.cpu))
        figures["after"].append(side(after[0], args.trials, dict(after[1]), args.cpu))
    for name, values in figures.items():
        print(f"{name:6} median {statistics.median(values):6.2f} ms/trial  "
              f"(rounds: {', '.join(f'{v:.2f}' for v in values)})")
    cost = statistics.median(figures["after"]) - statistics.median(figures["before"])
    floor = statistics.median(figures["floor"])
    print(f"cost of containment: {cost:+.2f} ms/trial, {cost / floor:.1f}x the spawn floor ({floor:.2f} ms); "
          f"load average {os.getloadavg()[0]:.2f}" + (" (CPU time)" if args.cpu else
                                                       " (figures are wall clock: take them on a quiet machine)"))


if __name__ == "__main__":
    main()
