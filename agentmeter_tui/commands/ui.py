"""``agentmeter demo``, ``agentmeter review`` and ``agentmeter attach``: the commands that open the TUI.

- ``demo`` runs ``suites/demo`` offline (scripted models) in a fresh store, over the reference
  agent plus every real agent CLI whose adapter says it is installed, and opens the TUI on it.
  Quitting the demo stops its runner (it is a throwaway); the store is kept for ``review``.
- ``review`` opens the TUI on the review screen over any store, without a runner (imported
  trials included).
- ``attach`` reconnects the TUI to the runner of a store, e.g. after the TUI was closed or killed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from . import add_db_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    demo = subparsers.add_parser("demo", help="the TUI on a demo grid of scripted models, offline")
    demo.add_argument("--db", metavar="PATH", help="a new store for the demo (default: one in a temp folder)")
    demo.add_argument("--clis", metavar="A,B", help="adapters to run (default: reference plus the installed CLIs)")
    demo.add_argument("--clis-root", help="where install-clis put the agent CLIs")
    demo.add_argument("--headless", action="store_true", help="print progress instead of opening the TUI")
    demo.set_defaults(handler=demo_command)

    review = subparsers.add_parser("review", help="read and hand-score finished transcripts (no runner needed)")
    add_db_argument(review)
    review.add_argument("--trial", type=int, metavar="ID", help="open this trial (default: the first unscored)")
    review.add_argument("--suite", metavar="ID", help="the suite to review (default: the latest in the store)")
    review.add_argument("--blind", action="store_true",
                        help="hide model, CLI, tokens, cost, flags and grid position; only trials you have not "
                             "scored, in a seeded shuffled order")
    review.add_argument("--seed", type=int, metavar="N", help="blind order seed (default: from suite and reviewer)")
    review.add_argument("--reviews", type=int, metavar="N", help="independent reviews each trial asks for (kept in the store)")
    review.add_argument("--disagreement", type=int, choices=(1, 2, 3), metavar="POINTS",
                        help="score spread that sends a trial to adjudication (default 2; kept in the store)")
    review.add_argument("--adjudicate", action="store_true",
                        help="open the adjudication queue: trials whose reviewers disagree")
    review.add_argument("--flag", metavar="NAME",
                        help="only trials a triage scanner flagged NAME (agentmeter scan --list names them)")
    review.add_argument("--by-flags", action="store_true", help="flagged trials first in the queue, most flags first")
    review.set_defaults(handler=review_command)

    compare = subparsers.add_parser("compare", help="two trials of one task side by side, step by step")
    add_db_argument(compare)
    compare.add_argument("left", type=int, metavar="A", help="a trial id")
    compare.add_argument("right", type=int, metavar="B", help="another trial id (same task)")
    compare.set_defaults(handler=compare_command)

    attach = subparsers.add_parser("attach", help="open the TUI on the runner of a store (after closing it)")
    add_db_argument(attach)
    attach.add_argument("--headless", action="store_true", help="print progress instead of opening the TUI")
    attach.set_defaults(handler=attach_command)


def demo_clis(clis_root: Path) -> list[str]:
    """``reference`` plus every real agent CLI that is installed.

    Bundled adapters other than ``reference`` (``command`` runs a program named in the suite) are
    not agent CLIs; adapters that fail to load are skipped.
    """
    from ..core.harnesses import ADAPTERS

    found = ["reference"]
    for name in ADAPTERS.names():
        if name == "reference":
            continue
        try:
            adapter = ADAPTERS.get(name)()
            if adapter.install.registry != "bundled" and adapter.is_installed(clis_root):
                found.append(name)
        except Exception:  # an adapter still being written must not break the demo
            continue
    return found


def demo_suite(folder: Path, clis: list[str]) -> Path:
    """The demo suite with ``clis`` as its [[clis]]: the original folder, or a copy in ``folder``."""
    import shutil

    import tomlkit

    from ..core.paths import suites_root

    source = suites_root() / "demo"
    if clis == ["reference"]:
        return source
    target = folder / "demo"
    shutil.copytree(source, target)
    document = tomlkit.parse((source / "suite.toml").read_text(encoding="utf-8"))
    tables = tomlkit.aot()
    for name in clis:
        table = tomlkit.table()
        table["adapter"] = name
        tables.append(table)
    document["clis"] = tables
    # One trial per cell once real CLIs join: the grid stays watchable in a few minutes.
    document["suite"]["trials"] = 1
    (target / "suite.toml").write_text(tomlkit.dumps(document), encoding="utf-8")
    return target


def demo_command(args: argparse.Namespace) -> int:
    from ..core.paths import default_clis_root
    from .run import follow, no_terminal, spawn_runner

    folder = Path(tempfile.mkdtemp(prefix="agentmeter-demo-"))
    db = Path(args.db) if args.db else folder / "agentmeter.db"
    if db.exists():
        print(f"agentmeter: {db} exists; the demo needs a fresh store (give a new --db path)", file=sys.stderr)
        return 2
    clis_root = Path(args.clis_root) if args.clis_root else default_clis_root()
    clis = [c.strip() for c in args.clis.split(",") if c.strip()] if args.clis else demo_clis(clis_root)
    suite = demo_suite(folder, clis)
    hello = spawn_runner(suite, db, args.clis_root)
    if isinstance(hello, int):  # the runner died before it answered: its exit code
        return hello
    if args.headless or no_terminal():
        code = follow(db, headless=True)
    else:
        from ..ui.app import run_app

        code = run_app(db, mode="live", demo=True, notices=[
            f"Demo: 5 scripted models × {', '.join(clis)}, offline. l live panes · enter opens a cell · "
            "r review · t report · ? keys"])
    print(f"The demo's store is {db}; read it again with: agentmeter review --db {db}")
    return code


def review_command(args: argparse.Namespace) -> int:
    db = Path(args.db)
    if not db.is_file():
        print(f"agentmeter: no store at {db}", file=sys.stderr)
        return 2
    if args.reviews is not None or args.disagreement is not None:
        code = _set_plan(db, args)
        if code or not has_terminal():  # the plan is set: that much a script may ask for
            return code
    if not has_terminal():
        return _needs_terminal("review", f"score a trial with `agentmeter score --db {db} TRIAL N`, "
                               f"read one with `agentmeter export atif --db {db}` or the HTML report")
    from ..core.scanners import SCANNERS
    from ..core.scanners.scan import scan_store
    from ..core.store import Store
    from ..ui.app import run_app

    if args.flag is not None and args.flag not in SCANNERS:
        print(f"agentmeter: no scanner '{args.flag}'; known: {', '.join(SCANNERS.names())}", file=sys.stderr)
        return 2
    store = Store(db)  # a store review cannot read or write is named here, not in the TUI's worker
    if args.flag is not None or args.by_flags:
        scan_store(store, args.suite)  # trials finished since the last scan: the queue is complete
    store.close()

    return run_app(db, mode="review", trial=args.trial, suite=args.suite, blind=args.blind, seed=args.seed,
                   screen="adjudicate" if args.adjudicate else None, flag=args.flag, by_flags=args.by_flags)


def has_terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def _needs_terminal(command: str, instead: str) -> int:
    """A screen opened without a terminal (cron, CI, output into a file) would draw into the
    file and wait for keys that never come: say so and end, with a code a script can act on."""
    print(f"agentmeter {command}: needs a terminal (stdin and stdout are not one); {instead}", file=sys.stderr)
    return 2


def _set_plan(db: Path, args: argparse.Namespace) -> int:
    from ..core.review.reviewing import default_reviewer
    from ..core.store import Store

    if args.reviews is not None and not 1 <= args.reviews <= 20:
        print("agentmeter review: --reviews must be 1 to 20", file=sys.stderr)
        return 2
    store = Store(db)
    try:
        row = store.suite_row(args.suite)
        if row is None:
            print(f"agentmeter review: no suite {args.suite or ''} in {db}", file=sys.stderr)
            return 1
        store.reviews.set_review_plan(row["id"], args.reviews, args.disagreement, default_reviewer())
    finally:
        store.close()
    return 0


def compare_command(args: argparse.Namespace) -> int:
    from ..core.store import Store

    db = Path(args.db)
    if not db.is_file():
        print(f"agentmeter: no store at {db}", file=sys.stderr)
        return 2
    store = Store(db, readonly=True)
    try:
        missing = [t for t in (args.left, args.right) if store.trial(t) is None]
    finally:
        store.close()
    if missing:
        print(f"agentmeter compare: no trial {missing[0]} in {db}", file=sys.stderr)
        return 1
    if not has_terminal():
        return _needs_terminal("compare", f"`agentmeter export atif --db {db}` writes both trials' steps to read "
                               "or diff; `agentmeter report --compare A B` compares two stores' runs")
    from ..ui.app import run_app

    return run_app(db, mode="review", screen="compare", compare=(args.left, args.right))


def attach_command(args: argparse.Namespace) -> int:
    from ..core.run.control import runner_alive
    from .run import follow

    db = Path(args.db)
    if not runner_alive(db):
        print(f"agentmeter: no runner is running for {db}; `agentmeter review --db {db}` shows the store",
              file=sys.stderr)
        return 1
    return follow(db, headless=args.headless)
