"""Fault matrix (issue 16, parts 1-2): inject faults into real runs and check what survives.

    python benchmarks/fault_matrix.py [--seed 7] [--trials 4] [--cli-trials 2] [--storms 20] [--only REGEX]
    python benchmarks/fault_matrix.py --ci     # the fixed-seed subset tests/core/test_fault_matrix.py runs

One line per cell: what was injected, how many survived intact, how many were lost (a cell
is lost when any check fails) and the cell's wall time, then a total with the load average;
the exit code is 1 when anything was lost.

Cells (the scripted model server on 127.0.0.1 plays every model):

- ``SANDBOX/reference/kill:REASON`` for SANDBOX in local, docker, ssh (a throwaway sshd on
  127.0.0.1), swarm (the engine's one-node swarm) and REASON in operator, budget:tokens,
  budget:usd, budget:time: burners (a model call, then a tool call, forever) stopped at a
  seeded moment (the operator: after the trial's k-th call; a budget: its seeded size). After
  each: status ``killed`` with that reason; no process of the trial on this machine or in its
  container; no container, volume, service or config labelled with the cell's suite, no trial
  folder left on the ssh host; usage exactly that of the calls the server completed and the
  agent reported; events numbered without a gap, the runner's one kill note among them
  (benchmarks/faults/kills.py).
- ``local/CLI/kill:REASON`` for the six real CLIs (``.clis``) and REASON in operator,
  budget:tokens: a runaway (a shell call forever) behind the metering proxy, stopped after the
  trial's k-th metered call (k seeded) or by a seeded token budget. After each: status and
  reason, no process left, usage from the proxy exactly what the server completed (folded
  where the CLI's protocol merges classes) on the row and in ``extra.proxy``, a budget's
  crossing call the last one served, events whole with one kill note
  (benchmarks/faults/clis.py).
- ``SANDBOX/oracle/kill:REASON`` for SANDBOX in local, docker, ssh and REASON in operator,
  budget:time: the oracle (the task's solution/solve.sh as the agent) stopped during its
  solve.sh's long step (the operator: once its first line is stored; the clock: seeded).
  Token and USD budgets cannot trip at zero tokens: no such cells. After each: status and
  reason, no process left, nothing on the engine or the ssh host, zero tokens, no
  verification, events whole with one kill note (benchmarks/faults/oracle.py).
- ``SANDBOX/reference/kill:verifying`` for SANDBOX in local, docker: the operator's kill
  arrives while the task's test.sh (a long step) runs; the trial ends killed (operator) with
  no verdict, no process (test.sh's included) and nothing on the engine left, usage and
  events as above (benchmarks/faults/verifying.py).
- ``local/reference/runner:kill-9``: the runner is SIGKILLed at seeded moments (after k more
  events) during a run of short trials, ``storms`` times, restarted each time with
  ``agentmeter run``; at the end every cell is final exactly once, no trial that had finished
  was touched again (status and events unchanged), and no process of any trial is left.

- ``local/reference/server:dies``, ``local/reference/store:disk-full``,
  ``local/{reference,claude-code}/proxy:upstream-reset``: the scripted model server
  SIGKILLed mid-run, the disk under the store filled up (a tmpfs; root only), the provider
  resetting a stream behind the metering proxy (benchmarks/faults/infra.py says what each
  checks).
- ``docker/reference/engine:restart``: dockerd restarted while trials run in containers;
  they end infra-invalid and are retried, nothing is left on the engine
  (benchmarks/faults/engine.py). It restarts the machine's engine: it is never in ``--ci``
  nor in the test suite; run it with ``--only engine`` when nothing else uses the engine.

Each cell draws its moments from its own generator (seed and cell name), so ``--only`` and
``--ci`` pick cells without changing what the others do. ``--ci`` runs five kill cells (every
sandbox, every reason once but the operator twice), two real CLIs (Claude Code by a token
budget, Codex by the operator), three storms, the dying server, the full disk and the
reference agent's upstream reset, with no random delay: every moment waits on an event.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentmeter_tui.core.run.control import ControlError
from benchmarks.faults.clis import CLIS, cli_cell
from benchmarks.faults.clis import REASONS as CLI_REASONS
from benchmarks.faults.engine import engine_restart_cell
from benchmarks.faults.infra import disk_full_cell, server_death_cell, upstream_reset_cell
from benchmarks.faults.kills import REASONS, SANDBOXES, kill_cell
from benchmarks.faults.oracle import REASONS as ORACLE_REASONS
from benchmarks.faults.oracle import SANDBOXES as ORACLE_SANDBOXES
from benchmarks.faults.oracle import oracle_cell
from benchmarks.faults.storm import storm_cell
from benchmarks.faults.verifying import verifying_cell


def cells(args: argparse.Namespace) -> list[tuple[str, bool, object]]:
    """(name, in the --ci subset, run(folder, rng) -> (injected, survived, problems))."""
    ci_kills = {("local", "operator"), ("local", "budget:time"), ("docker", "budget:tokens"),
                ("ssh", "operator"), ("swarm", "budget:usd")}
    out = [(f"{kind}/reference/kill:{reason}", (kind, reason) in ci_kills,
            lambda folder, rng, k=kind, r=reason: kill_cell(k, r, args.trials, rng, folder, jitter=not args.ci))
           for kind in SANDBOXES for reason in REASONS]
    ci_clis = {("claude-code", "budget:tokens"), ("codex", "operator")}
    out += [(f"local/{cli}/kill:{reason}", (cli, reason) in ci_clis,
             lambda folder, rng, c=cli, r=reason: cli_cell(c, r, args.cli_trials, rng, folder, jitter=not args.ci))
            for cli in CLIS for reason in CLI_REASONS]
    out += [(f"{kind}/oracle/kill:{reason}", False,
             lambda folder, rng, k=kind, r=reason: oracle_cell(k, r, args.cli_trials, rng, folder, jitter=not args.ci))
            for kind in ORACLE_SANDBOXES for reason in ORACLE_REASONS]
    out += [(f"{kind}/reference/kill:verifying", False,
             lambda folder, rng, k=kind: verifying_cell(k, args.cli_trials, rng, folder, jitter=not args.ci))
            for kind in ("local", "docker")]
    out.append(("local/reference/runner:kill-9", True, lambda folder, rng: storm_cell(args.storms, rng, folder)))
    out.append(("local/reference/server:dies", True, server_death_cell))
    out.append(("local/reference/store:disk-full", True, disk_full_cell))
    out += [(f"local/{cli}/proxy:upstream-reset", cli == "reference",
             lambda folder, rng, c=cli: upstream_reset_cell(c, rng, folder)) for cli in ("reference", "claude-code")]
    # Never in --ci: it restarts the engine that everyone on this machine shares.
    out.append(("docker/reference/engine:restart", False, engine_restart_cell))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--trials", type=int, default=4, help="burners per kill cell")
    parser.add_argument("--cli-trials", type=int, default=2, help="trials per real-CLI cell")
    parser.add_argument("--storms", type=int, default=20, help="SIGKILLs of the runner")
    parser.add_argument("--only", default="", help="a regular expression: run the cells whose names match")
    parser.add_argument("--ci", action="store_true", help="the fixed-seed subset: 2 burners a cell, 3 storms")
    args = parser.parse_args()
    if args.ci:
        args.seed, args.trials, args.cli_trials, args.storms = 7, 2, 1, 3
    total, seconds = [0, 0, 0], 0.0
    print(f"fault matrix, seed {args.seed}: cell · injected · survived · lost · wall time")
    for name, in_ci, run in cells(args):
        if (args.ci and not in_ci) or not re.search(args.only, name):
            continue
        rng = random.Random(f"{args.seed}:{name}")  # a cell's moments do not depend on which others ran
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="agentmeter-faults-") as tmp:
            try:
                injected, survived, problems = run(Path(tmp), rng)
            except (TimeoutError, ControlError, RuntimeError, subprocess.CalledProcessError) as exc:
                detail = getattr(exc, "stderr", "") or ""
                injected, survived, problems = 1, 0, [f"{type(exc).__name__}: {exc} {detail[-300:]}"]
        lost = injected - survived
        total = [total[0] + injected, total[1] + survived, total[2] + lost]
        seconds += (took := time.monotonic() - started)
        print(f"{name:<40} injected {injected:>3} · survived {survived:>3} · lost {lost} · {took:5.1f} s"
              + (f"  ({'; '.join(problems)[:600]})" if problems else ""), flush=True)
    print(f"{'total':<40} injected {total[0]:>3} · survived {total[1]:>3} · lost {total[2]} · {seconds:5.1f} s"
          f" (load average {os.getloadavg()[0]:.1f})")
    return 1 if total[2] else 0


if __name__ == "__main__":
    sys.exit(main())
