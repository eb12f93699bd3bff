"""Clients of a running runner: ``status``, ``kill``, ``pause``, ``resume``, ``budget``, ``stop``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..core.run.control import ControlClient, ControlError
from . import add_db_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    status = subparsers.add_parser("status", help="what the runner is doing now")
    add_db_argument(status)
    status.add_argument("--json", action="store_true", help="print the raw status object")
    status.set_defaults(handler=status_command)

    kill = subparsers.add_parser("kill", help="kill a running trial (reason: operator)")
    kill.add_argument("trial", type=int, help="trial id")
    kill.add_argument("--reason", default="operator")
    add_db_argument(kill)
    kill.set_defaults(handler=lambda a: _request(a, "kill", trial=a.trial, reason=a.reason))

    for op, text in (("pause", "start no new trials until resumed"), ("resume", "start trials again"),
                     ("stop", "stop the run: running trials end infra-invalid and rerun on the next run")):
        parser = subparsers.add_parser(op, help=text)
        add_db_argument(parser)
        parser.set_defaults(handler=lambda a, op=op: _request(a, op))

    budget = subparsers.add_parser("budget", help="raise (or set) budgets of a running trial or of the run")
    budget.add_argument("--trial", type=int, help="one running trial; default: the rest of the run")
    budget.add_argument("--tokens", type=int)
    budget.add_argument("--usd", type=float)
    budget.add_argument("--wall-seconds", type=float)
    add_db_argument(budget)
    budget.set_defaults(handler=lambda a: _request(a, "budget", trial=a.trial, tokens=a.tokens, usd=a.usd,
                                                   wall_seconds=a.wall_seconds))


def _request(args: argparse.Namespace, op: str, **fields) -> int:
    try:
        with ControlClient(Path(args.db)) as client:
            reply = client.request(op, **fields)
    except ControlError as exc:
        print(f"agentmeter: {exc}", file=sys.stderr)
        return 1
    reply.pop("ok", None)
    print(json.dumps(reply) if reply else "ok")
    return 0


def status_command(args: argparse.Namespace) -> int:
    try:
        with ControlClient(Path(args.db)) as client:
            status = client.request("status")
    except ControlError as exc:
        print(f"agentmeter: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    progress = status.get("progress", {})
    print(f"suite {status.get('suite')} · run {status.get('run_id')} · runner pid {status.get('pid')}")
    print(f"{progress.get('done')}/{progress.get('total')} done, {progress.get('running')} running, "
          f"{progress.get('queued')} queued" + (" · PAUSED" if progress.get("paused") else ""))
    for meter in status.get("running", []):
        tokens = sum((meter.get("tokens") or {}).values())
        cost = meter.get("cost_usd")
        print(f"  #{meter['id']} {meter['task']} · {meter['model']} × {meter['cli']} · t{meter['trial']}  "
              f"{meter['status']}  {tokens:,} tok  {'unpriced' if cost is None else f'${cost:.4f}'}  "
              f"{meter.get('elapsed') or 0:.1f}s" + (f"  [{', '.join(meter['flags'])}]" if meter.get("flags") else "")
              + (f"  on {meter['node']}" if meter.get("node") else ""))
    return 0
