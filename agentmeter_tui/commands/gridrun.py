"""``agentmeter run`` without a suite.toml (a folder of task folders, or a dataset by name), or
with grid options over one: the suite the command line implies, written beside the store and
into it (core/suites/grid.py), and the dataset's tasks fetched and pinned (core/datasets)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.tomlerrors import InputError, load_toml

if TYPE_CHECKING:
    from ..core.datasets.fetch import TaskSource

EXIT_BAD_INPUT = 2


def add_grid_arguments(parser: argparse.ArgumentParser) -> None:
    grid = parser.add_argument_group("grid options (a run without a suite.toml, or overriding its grid)")
    grid.add_argument("-m", "--model", action="append", default=[], metavar="PROVIDER/MODEL",
                      help="a model, e.g. anthropic/claude-sonnet-4-5 or scripted/solver (repeat)")
    grid.add_argument("-a", "--agent", action="append", default=[], metavar="CLI",
                      help="an agent CLI adapter, e.g. claude-code (repeat)")
    grid.add_argument("-t", "--task", action="append", default=[], metavar="GLOB",
                      help="run only the task folders matching (repeat)")
    grid.add_argument("-x", "--exclude-task", action="append", default=[], metavar="GLOB",
                      help="leave out the task folders matching (repeat)")
    grid.add_argument("-k", "--attempts", type=int, metavar="N", help="trials per cell")
    grid.add_argument("-n", "--concurrency", type=int, metavar="N", help="trials at once")
    grid.add_argument("--sandbox", metavar="KIND", help="sandbox kind (default: docker for Harbor tasks, else local)")
    grid.add_argument("--budget-usd", type=float, metavar="X", help="the whole run's spending cap in USD")
    grid.add_argument("--scenarios", type=Path, metavar="DIR", help="scripted models' scenarios (MODEL/TASK.toml)")
    grid.add_argument("--prices", type=Path, metavar="FILE",
                      help="price snapshot (default: drafted from genai-prices for today, kept for resumes)")
    grid.add_argument("--suite-id", metavar="ID", help="the implied suite's id (default: a hash of the options)")
    grid.add_argument("--registry", metavar="FILE_OR_URL",
                      help="a dataset registry in Harbor's format for NAME@VERSION (default: $AGENTMETER_REGISTRY)")


def grid_options(args: argparse.Namespace):
    from ..core.suites.grid import GridOptions

    return GridOptions(models=args.model, agents=args.agent, include=args.task, exclude=args.exclude_task,
                       attempts=args.attempts, concurrency=args.concurrency, sandbox=args.sandbox,
                       budget_usd=args.budget_usd, scenarios=args.scenarios, prices=args.prices,
                       suite_id=args.suite_id)


def implied_suite(args: argparse.Namespace, db: Path) -> Path | int:
    """The suite folder to run: the given one as it is, or the one the options imply (written
    beside the store and recorded in it). An exit code, the reason printed, when it cannot be."""
    from ..core.harbor.dataset_registry import is_dataset_ref
    from ..core.run.launch import resolve_suite_path
    from ..core.suites.grid import GridError

    options = grid_options(args)
    target = args.suite
    suite_path = resolve_suite_path(target)
    has_file = (suite_path / "suite.toml").is_file()
    if not options.given() and not is_dataset_ref(target):
        return suite_path  # a suite as it is (or its load error, naming the file): today's path
    try:
        numbers = [("-k/--attempts", args.attempts, 1, 10_000), ("-n/--concurrency", args.concurrency, 1, 512)]
        for option, value, low, high in numbers:
            if value is not None and not low <= value <= high:
                raise GridError(option, f"{value} is not in {low}..{high}")
        if args.budget_usd is not None and not args.budget_usd > 0:
            raise GridError("--budget-usd", f"{args.budget_usd} is not above 0")
        for option, path in (("--scenarios", args.scenarios), ("--prices", args.prices)):
            if path is not None and not path.exists():
                raise GridError(option, f"{path}: no such file or folder")
        sources: list[TaskSource] = []
        if is_dataset_ref(target):
            tasks_dir, sources = _dataset(target, args.registry, db)
            base = None
        elif has_file:
            tasks_dir, base = _base_suite(suite_path)
        elif suite_path.is_dir():
            tasks_dir, base = suite_path.resolve(), None
        else:
            raise GridError("PATH", f"'{target}' is no suite folder, task folder or dataset NAME@VERSION")
        return _write(options, tasks_dir, base, sources, db)
    except (GridError, InputError) as exc:
        print(f"agentmeter run: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except _Refused as exc:
        print(f"agentmeter run: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


class _Refused(Exception):
    """A dataset that cannot be run (bad registry, a fetch that failed, a task changed under its commit)."""


def _base_suite(suite_path: Path) -> tuple[Path, dict]:
    from ..core.suites.grid import absolute_paths

    data, _ = load_toml(suite_path / "suite.toml")
    data = absolute_paths(data, suite_path.resolve())
    return Path(data["suite"]["tasks_dir"]), data


def _dataset(ref: str, registry: str | None, db: Path) -> tuple[Path, list[TaskSource]]:
    from ..core.datasets.fetch import FetchError, fetch_dataset
    from ..core.harbor.dataset_registry import RegistryError, find_dataset
    from ..core.store import Store

    try:
        dataset = find_dataset(registry, ref)
        tasks_dir, sources, fetched = fetch_dataset(dataset)
    except (RegistryError, FetchError) as exc:
        raise _Refused(str(exc)) from None
    store = Store(db)
    try:
        for source in sources:  # a folder this store ran under the same commit must be the same folder
            recorded = store.sources.recorded_hash(source.git_url, source.commit_id, source.path)
            if recorded is not None and recorded[1] != source.tree_hash:
                raise _Refused(f"dataset {ref}: task '{source.task_id}' changed under commit {source.commit_id} "
                               f"(hashes {source.tree_hash[:12]}; this store ran it as {recorded[1][:12]}); refused")
    finally:
        store.close()
    print(f"dataset {ref}: {len(sources)} task(s), {fetched} fetched now, {len(sources) - fetched} from the cache "
          f"({tasks_dir})", file=sys.stderr)
    return tasks_dir, sources


def _write(options, tasks_dir: Path, base: dict | None, sources: list, db: Path) -> Path:
    from ..core.store import Store
    from ..core.suites.grid import grid_suite, write_grid_suite

    data = grid_suite(tasks_dir, options, base)
    folder = write_grid_suite(data, db.resolve().parent / f"{db.name}.suites", options.prices)
    store = Store(db)
    try:
        store.sources.record_suite_file(data["suite"]["id"], (folder / "suite.toml").read_text(encoding="utf-8"),
                                shlex.join(["agentmeter", *sys.argv[1:]]))
        if sources:
            store.sources.record_task_sources(data["suite"]["id"], sources)
    finally:
        store.close()
    print(f"suite {data['suite']['id']} (from the command line): {folder / 'suite.toml'}; "
          f"print it with: agentmeter suite show --db {db}", file=sys.stderr)
    return folder
