"""``agentmeter suite new NAME --tasks DIR --model M --cli C``: a suite over a task folder
(a checkout of a Harbor dataset, say) that stays where it is."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.harnesses import ADAPTERS
from ..core.paths import suites_root
from ..core.wire import provider_kinds
from . import add_db_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    suite = subparsers.add_parser("suite", help="make suites, or copy a built-in one to edit")
    sub = suite.add_subparsers(dest="suite_command", metavar="COMMAND")
    new = sub.add_parser("new", help="write a suite.toml whose tasks are read in place from a folder")
    new.add_argument("name", help="the suite's id; its folder is suites/NAME unless --out says otherwise")
    new.add_argument("--tasks", required=True, type=Path, help="the folder holding one folder per task")
    new.add_argument("--model", action="append", required=True, help="a model id (repeat for several)")
    new.add_argument("--cli", action="append", required=True, help=f"an adapter: {', '.join(ADAPTERS.names())} (repeat)")
    new.add_argument("--provider", default="scripted",
                     help=f"the models' provider kind: scripted (default), {', '.join(provider_kinds())}, none")
    new.add_argument("--include", action="append", default=[], help="glob on task folder names (repeat)")
    new.add_argument("--exclude", action="append", default=[], help="glob on task folder names (repeat)")
    new.add_argument("--sandbox", help="sandbox kind (default: docker when a task follows Harbor's contract)")
    new.add_argument("--trials", type=int, default=1)
    new.add_argument("--out", type=Path, help="the suite folder to write (default suites/NAME)")
    new.add_argument("--force", action="store_true", help="replace an existing suite.toml")
    new.set_defaults(handler=new_command)
    copy = sub.add_parser("copy", help="write a built-in suite (demo, smoke, ...) out to a folder, to edit")
    copy.add_argument("name", help="a built-in suite's id (`agentmeter suite list` names them)")
    copy.add_argument("dest", type=Path, help="the folder to create (it must not exist)")
    copy.set_defaults(handler=copy_command)
    show = sub.add_parser("show", help="print the suite.toml a command-line run implied (from the store)")
    show.add_argument("suite_id", nargs="?", help="the suite's id (default: the newest)")
    add_db_argument(show)
    show.set_defaults(handler=show_command)
    listing = sub.add_parser("list", help="the built-in suites")
    listing.set_defaults(handler=list_command)
    suite.set_defaults(handler=lambda a: suite.print_help() or 2)


def new_command(args: argparse.Namespace) -> int:
    from ..core.suites.load import load_suite
    from ..core.suites.grid import default_sandbox
    from ..core.suites.taskfolders import suite_toml, task_folders, tasks_dir_for
    from ..core.tomlerrors import InputError

    tasks = args.tasks.expanduser().resolve()
    if not tasks.is_dir():
        print(f"agentmeter: --tasks {args.tasks}: no such folder", file=sys.stderr)
        return 2
    folders = task_folders(tasks, args.include, args.exclude)
    if not folders:
        print(f"agentmeter: no task folder (with a task.toml) under {tasks} matches", file=sys.stderr)
        return 2
    sandbox = args.sandbox or default_sandbox(folders)
    out = (args.out or suites_root() / args.name).resolve()
    target = out / "suite.toml"
    if target.exists() and not args.force:
        print(f"agentmeter: {target} exists (--force replaces it)", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    text = suite_toml(args.name, tasks_dir_for(tasks, out), models=args.model, clis=args.cli,
                      provider=args.provider, sandbox=sandbox, include=args.include, exclude=args.exclude,
                      trials=args.trials)
    partial = target.with_name("suite.toml.part")
    partial.write_text(text, encoding="utf-8")
    partial.replace(target)  # all or nothing: never a half-written suite file
    print(f"wrote {target}: {len(folders)} task folder(s) from {tasks}, sandbox {sandbox}")
    try:
        suite = load_suite(out)
    except InputError as exc:
        print(f"agentmeter: the suite does not load yet: {exc}", file=sys.stderr)
        return 2
    for skipped in suite.skipped:
        print(f"agentmeter: task skipped: {skipped}", file=sys.stderr)
    print(f"suite {suite.id}: {len(suite.tasks)} task(s), seed-prompt hash {suite.seed_hash[:12]}")
    return 0


def builtin_suites() -> list[str]:
    return sorted(p.parent.name for p in suites_root().glob("*/suite.toml"))


def list_command(args: argparse.Namespace) -> int:
    for name in builtin_suites():
        print(f"{name}\t{suites_root() / name}")
    return 0


def copy_command(args: argparse.Namespace) -> int:
    """A built-in suite copied out whole (tasks, scenarios, prices): the copy is the user's to
    edit, and ``agentmeter run DEST`` runs it. Written beside DEST first and renamed, so an
    interrupted copy never leaves a half suite under the real name."""
    import shutil

    if args.name not in builtin_suites():
        print(f"agentmeter: no built-in suite '{args.name}'; built-in: {', '.join(builtin_suites())}",
              file=sys.stderr)
        return 2
    dest = args.dest.expanduser()
    if dest.exists():
        print(f"agentmeter: {dest} exists; name a new folder", file=sys.stderr)
        return 2
    partial = dest.with_name(dest.name + ".part")
    try:
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(suites_root() / args.name, partial, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        partial.rename(dest)
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        print(f"agentmeter: {dest}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"wrote {dest}: the built-in suite '{args.name}'; run it with: agentmeter run {dest}")
    return 0


def show_command(args: argparse.Namespace) -> int:
    """The suite.toml a command-line run implied, as the store holds it (save it and `agentmeter
    run` that folder to run the same grid)."""
    from ..core.store import Store

    db = Path(args.db)
    if not db.is_file():
        print(f"agentmeter suite show: no store at {db}", file=sys.stderr)
        return 2
    store = Store.for_reading(db)
    try:
        row = store.sources.suite_file(args.suite_id)
    finally:
        store.close()
    if row is None:
        which = f"suite '{args.suite_id}'" if args.suite_id else "any suite"
        print(f"agentmeter suite show: {db} holds no command-line suite for {which} "
              "(a suite run from its folder is its own suite.toml)", file=sys.stderr)
        return 2
    sys.stdout.write(row["toml"])
    print(f"# run as: {row['command']}", file=sys.stderr)
    return 0
