"""``agentmeter doctor [SUITE] [--clean]``: is this machine ready to run the suite?

For each agent CLI the suite uses (every registered one without a suite): installed or not,
its version against the pin, and a one-turn scenario run through it against the scripted
model server, parsed by its adapter. Then the suite's sandbox hosts and the store. A table
gives the fix for each failure; the exit code is 1 when anything failed. ``--clean`` has
every sandbox kind remove what its runners that are gone left (the docker kinds: containers,
services, volumes and networks).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from ..core import doctor
from ..core.paths import default_clis_root
from . import add_db_argument

EXIT_FAILED, EXIT_BAD_INPUT = 1, 2


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("doctor", help="check the agent CLIs, sandbox hosts and store a suite needs")
    parser.add_argument("suite", nargs="?", help="suite folder or name (default: every registered CLI)")
    add_db_argument(parser)
    parser.add_argument("--clean", action="store_true",
                        help="remove what crashed runners left in each kind of sandbox "
                             "(on docker engines: containers, services, ...)")
    parser.add_argument("--clis-root", help="where install-clis put the agent CLIs (default: $AGENTMETER_CLIS_DIR "
                                            "or .clis)")
    parser.add_argument("--only", action="append", metavar="CLI", help="check only this CLI (repeatable)")
    parser.add_argument("--timeout", type=float, default=180, help="seconds for each one-turn run (default 180)")
    parser.set_defaults(handler=doctor_command)


def doctor_command(args: argparse.Namespace) -> int:
    store = doctor.check_store(Path(args.db))
    if store.ok is False:  # a --db that is no store is a bad argument: said before minutes of checks
        print(f"agentmeter: {store.detail}", file=sys.stderr)
        return EXIT_FAILED
    suite = None
    if args.suite:
        from ..core.suites.load import load_suite
        from ..core.tomlerrors import InputError
        from .run import resolve_suite_path, suite_hint

        try:
            suite = load_suite(resolve_suite_path(args.suite))
        except InputError as exc:
            print(f"agentmeter: {exc}{suite_hint(args.suite)}", file=sys.stderr)
            return EXIT_BAD_INPUT
    plans = doctor.plans_for(suite)
    if args.only:
        unknown = sorted(set(args.only) - {p.adapter.name for p in plans})
        if unknown:
            print(f"agentmeter: not among the CLIs to check: {', '.join(unknown)}", file=sys.stderr)
            return EXIT_BAD_INPUT
        plans = [p for p in plans if p.adapter.name in args.only]
    clis_root = Path(args.clis_root).resolve() if args.clis_root else default_clis_root()
    clis, hosts = asyncio.run(_checks(plans, clis_root, suite, args))
    _print(clis, hosts, clis_root)
    failed = any(c.ok is False for c in clis) or any(h.ok is False for h in hosts)
    return EXIT_FAILED if failed else 0


async def _checks(plans, clis_root: Path, suite, args) -> tuple[list, list]:
    from ..core.scripted.client import start_server_process

    print(f"checking {len(plans)} CLI(s) against the scripted model server...", file=sys.stderr, flush=True)
    server = await asyncio.to_thread(start_server_process)
    try:
        clis = await doctor.check_clis(plans, clis_root, server, timeout=args.timeout)
    finally:
        await asyncio.to_thread(server.stop)
    hosts = [doctor.check_store(Path(args.db))]
    if suite is not None:
        from ..core.sandboxes.hostcheck import check_suite_hosts

        hosts.extend(await check_suite_hosts(suite))
    if args.clean:
        hosts.extend(await asyncio.to_thread(doctor.clean_leftovers, suite))
    return clis, hosts


def _mark(ok: bool | None) -> str:
    return {True: "[green]ok[/]", False: "[red]FAIL[/]", None: "[yellow]skip[/]"}[ok]


def _print(clis: list[doctor.CliCheck], hosts: list[doctor.HostCheck], clis_root: Path) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(highlight=False)
    table = Table(title=f"agent CLIs ({clis_root})", title_justify="left")
    for column in ("CLI", "pinned", "installed", "one-turn run", "detail", "fix"):
        table.add_column(column, overflow="fold")
    for cli in clis:
        installed = (cli.version or "?") if cli.installed else "[red]no[/]"
        table.add_row(cli.name, cli.pinned, installed, _mark(cli.ok), escape(cli.detail), escape(cli.fix))
    console.print(table)
    others = Table(title="hosts and store", title_justify="left")
    for column in ("check", "status", "detail", "fix"):
        others.add_column(column, overflow="fold")
    for host in hosts:
        others.add_row(escape(host.subject), _mark(host.ok), escape(host.detail), escape(host.fix))
    console.print(others)
    failed = [(c.name, c.detail, c.fix) for c in clis if c.ok is False]
    failed += [(h.subject, h.detail, h.fix) for h in hosts if h.ok is False]
    if failed:
        console.print(f"[red]{len(failed)} check(s) failed[/]")
        for name, detail, fix in failed:  # plain lines too, for logs and narrow terminals
            console.print(f"  {name}: {detail}" + (f" -> {fix}" if fix else ""), markup=False)
    else:
        console.print("[green]all checks passed[/]")
