"""``agentmeter meter [OPTIONS] -- COMMAND [ARGS...]``: one metered, budgeted run of any agent
command, outside a suite (``docs/proxy.md``, "agentmeter meter")."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path

import orjson

from ..core.proxy.meter import EXIT_OVER_BUDGET, Meter, MeterRun, kinds, run_metered, totals_text


def register(subparsers: argparse._SubParsersAction) -> None:
    meter = subparsers.add_parser(
        "meter", help="run a command behind the metering proxy: tokens, cost and budgets at the wire",
        description="Run COMMAND with its model calls going through a metering proxy on 127.0.0.1. "
                    "Every call's usage is read off the wire; the real API keys stay in the proxy.",
        usage="agentmeter meter [OPTIONS] -- COMMAND [ARGS...]")
    meter.add_argument("--upstream", action="append", default=[], metavar="KIND=URL",
                       help=f"where calls of a kind go ({', '.join(kinds())}); default: the public endpoint")
    meter.add_argument("--port", type=int, default=0,
                       help="the proxy's port on 127.0.0.1 (default: a free one), for CLI configs with a fixed URL")
    meter.add_argument("--key-env", action="append", default=[], metavar="NAME=KIND",
                       help="also give variable NAME the placeholder key of KIND (a config's own key variable)")
    meter.add_argument("--json", action="store_true", help="print the totals as one JSON object on stdout")
    meter.add_argument("--log-calls", type=Path, metavar="FILE", help="write one JSON line per model call")
    meter.add_argument("--prices", type=Path, metavar="FILE", help="a price snapshot (TOML) to price calls by model")
    meter.add_argument("--price-key", metavar="KEY", help="price every call as this snapshot entry")
    meter.add_argument("--budget-usd", metavar="X", help="stop the command at the first call over this cost")
    meter.add_argument("--budget-tokens", type=int, metavar="N", help="stop the command at the first call over N tokens")
    meter.add_argument("--db", type=Path, metavar="PATH", help="keep the run as a trial in this store")
    meter.add_argument("command", nargs=argparse.REMAINDER, help="the command and its arguments, after --")
    meter.set_defaults(handler=meter_command)


def _fail(message: str) -> int:
    print(f"agentmeter meter: {message}", file=sys.stderr)
    return 2


def meter_command(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        return _fail("no command given (agentmeter meter [OPTIONS] -- COMMAND [ARGS...])")
    known = kinds()
    upstreams = {}
    for item in args.upstream:
        kind, _, url = item.partition("=")
        if kind not in known or not url.startswith(("http://", "https://")):
            return _fail(f"--upstream {item!r}: expected KIND=URL with KIND one of {', '.join(known)}")
        upstreams[kind] = url.rstrip("/")
    key_env = {}
    for item in args.key_env:
        name, _, kind = item.partition("=")
        if not name or kind not in known:
            return _fail(f"--key-env {item!r}: expected NAME=KIND with KIND one of {', '.join(known)}")
        key_env[name] = kind
    budget_usd = None
    if args.budget_usd is not None:
        try:
            budget_usd = Decimal(args.budget_usd)
        except InvalidOperation:
            return _fail(f"--budget-usd {args.budget_usd!r} is not a number")
    prices = None
    if args.prices is not None:
        from ..core.pricing import PriceSnapshot
        from ..core.tomlerrors import InputError

        try:
            prices = PriceSnapshot.load(args.prices)
        except (InputError, OSError) as exc:
            return _fail(str(exc))
        if args.price_key and prices.find(args.price_key) is None:
            return _fail(f"--price-key {args.price_key!r}: no such entry (or alias) in {args.prices}")
    elif args.price_key or budget_usd is not None:
        return _fail("--price-key and --budget-usd need --prices FILE")
    if args.db is not None:  # a store that cannot keep the trial is named before the command runs
        from ..core.store import Store
        from ..core.store.check import check_file

        if check_file(Path(args.db), create=True, write=True):
            Store(args.db).close()
    meter = Meter(prices=prices, price_key=args.price_key, budget_usd=budget_usd, budget_tokens=args.budget_tokens)
    started = datetime.now(UTC).isoformat()
    try:
        run = asyncio.run(run_metered(command, meter, upstreams=upstreams, log_calls=args.log_calls,
                                      port=args.port, key_env=key_env))
    except FileNotFoundError:
        return _fail(f"{command[0]}: command not found")
    totals = meter.totals(run.exit_code, run.killed)
    print(totals_text(totals), file=sys.stderr)
    if args.json:
        print(orjson.dumps(totals).decode(), flush=True)
    if args.db is not None:
        keep_as_trial(args.db, command, run, totals, started)
    if run.killed and meter.over:
        return EXIT_OVER_BUDGET
    code = run.exit_code or 0
    return code if code >= 0 else 128 - code  # killed by a signal: the shell's convention


def keep_as_trial(db: Path, command: list[str], run: MeterRun, totals: dict, started: str) -> int:
    """The run as one imported trial of suite ``meter``: task = the program, cli = its name."""
    from ..core.reporting.records import TrialRecord, import_records
    from ..core.store import Store

    models = [c.model for c in run.meter.calls if c.model]
    model = max(set(models), key=models.count) if models else "unknown"
    program = os.path.basename(command[0])
    status = "killed" if run.killed else "passed" if run.exit_code == 0 else "failed"
    store = Store(db)
    try:
        index = sum(1 for t in store.trials("meter") if t["task_id"] == program)
        cost_actual = totals["cost_actual_usd"]
        record = TrialRecord(
            suite="meter", task=program, tier=None, model=model, cli=program, trial=index, status=status,
            passed=status == "passed", quality=0.0, tokens=run.meter.usage, cost_usd=totals["cost_usd"],
            cost_source="snapshot" if totals["cost_usd"] is not None else None, turns=totals["calls"],
            tool_calls=0, started_at=started, finished_at=datetime.now(UTC).isoformat(),
            extra={"cost_actual_usd": cost_actual, "cost_actual_source": totals["cost_actual_source"],
                   "reason": totals["budget"], "usage_source": "proxy", "command": command,
                   "proxy": {"calls": totals["calls"], "refused": totals["refused"], "errors": totals["errors"],
                             "cache_write_1h": totals["tokens"]["cache_write_1h"]},
                   "calls": [run.meter.call_line(c) for c in run.meter.calls]})
        return import_records(store, [record])
    finally:
        store.close()
