"""``agentmeter difftest``: make differential test cases from a schema, and judge a tool folder.

``gen SCHEMA [--oracle DIR] [--out FILE]`` unrolls a command schema into classes and cases; with
an oracle it keeps only the cases the oracle runs the same way twice. ``run CANDIDATE`` judges a
tool folder against the oracle on a case file (a task's settings with ``--task``) and prints the
funnel: what the differential verifier would say, for task authors checking their cases.
``report`` prints the funnel per configuration of a suite's differential trials.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from ..core.tomlerrors import InputError
from . import add_db_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("difftest", help="differential test cases for CLI-tool tasks",
                                   description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="difftest_command", metavar="ACTION", required=True)

    gen = commands.add_parser("gen", help="derive test cases from a command schema")
    gen.add_argument("schema", type=Path, help="the command schema (TOML)")
    gen.add_argument("--oracle", type=Path, help="oracle tool folder: keep only cases it runs stably")
    gen.add_argument("--out", type=Path, help="case file to write (default: stdout)")
    gen.add_argument("--run", help="how to invoke the tool (default: the schema's tool.run)")
    gen.add_argument("--install", help="how to install it (default: the schema's tool.install)")
    gen.add_argument("--jobs", type=int, default=4, help="cases run at once (default 4)")
    gen.set_defaults(handler=_gen)

    run = commands.add_parser("run", help="judge a candidate tool folder against an oracle and print the funnel")
    run.add_argument("candidate", type=Path, help="the candidate tool folder")
    run.add_argument("--task", type=Path, help="take cases, oracle, run, install, metric from this task's task.toml")
    run.add_argument("--cases", type=Path, help="case file")
    run.add_argument("--oracle", type=Path, help="oracle tool folder")
    run.add_argument("--run", dest="run_command", help="how to invoke the tool ({tool}, {python})")
    run.add_argument("--install", help="install command run in each tool folder")
    run.add_argument("--metric", choices=["exec", "side_effects", "exact", "fuzzy", "semantic"])
    run.add_argument("--judge", help="Semantic Match command (gets the two stdout files, prints yes/no)")
    run.add_argument("--jobs", type=int)
    run.add_argument("--json", action="store_true", help="print the whole funnel as JSON")
    run.set_defaults(handler=_run)

    report = commands.add_parser("report", help="the funnel per configuration of a suite's differential trials")
    add_db_argument(report)
    report.add_argument("--suite", help="suite id (default: the latest suite in the store)")
    report.add_argument("--records", type=Path, help="read trial records (JSONL) instead of the store")
    report.add_argument("--by-task", action="store_true", help="one row per configuration and task")
    report.add_argument("--json", action="store_true")
    report.set_defaults(handler=_report)


def _gen(args: argparse.Namespace) -> int:
    from ..core.difftest.cases import save_cases
    from ..core.difftest.executor import ToolCommand
    from ..core.difftest.generate import generate
    from ..core.difftest.schema import load_schema

    try:
        schema, sha = load_schema(args.schema)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    command = None
    if args.oracle:
        run = args.run or schema.tool.run
        if not run:
            print(f"error: {args.schema}: field 'tool.run': needed to run the oracle (or pass --run)", file=sys.stderr)
            return 2
        command = ToolCommand(run=run, install=args.install or schema.tool.install)
    try:
        cases, summary = asyncio.run(generate(schema, sha, args.oracle, command, jobs=args.jobs))
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.out:
        save_cases(cases, args.out)
    else:
        sys.stdout.write(json.dumps(cases.model_dump(), indent=1, ensure_ascii=False) + "\n")
    report = sys.stderr
    print(f"{len(cases.classes)} classes, {cases.case_count()} cases"
          + (f" -> {args.out}" if args.out else ""), file=report)
    if args.oracle:
        print(f"  {'class':<36} {'pos':>4} {'neg':>4} {'unstable':>8}", file=report)
        for class_id, positive, negative, unstable in summary.classes:
            warn = "  <- no case where the oracle succeeds" if positive == 0 else ""
            print(f"  {class_id[:36]:<36} {positive:>4} {negative:>4} {unstable:>8}{warn}", file=report)
    return 0


def _run(args: argparse.Namespace) -> int:
    from ..core.difftest import render_text
    from ..core.suites.suite import Task
    from ..core.suites.load import load_task
    from ..core.suites.taskfolders import TaskFile
    from ..core.verifiers.differential import DifferentialVerifier

    overrides = {"cases": args.cases, "oracle": args.oracle, "run": args.run_command, "install": args.install,
                 "metric": args.metric, "judge": args.judge, "jobs": args.jobs}
    overrides = {k: str(v.resolve()) if isinstance(v, Path) else v for k, v in overrides.items() if v is not None}
    try:
        if args.task:
            task = load_task(args.task)
            base = task.verifier.model_dump()
            if base.get("kind") != "differential":
                raise InputError(args.task / "task.toml", None, "verifier.kind", "not a differential task")
        else:
            task = Task(id="adhoc", path=Path.cwd(), tier=None, instruction="", spec=TaskFile())
            base = {"kind": "differential", "command": None}
        settings = DifferentialVerifier.Settings.model_validate({**base, **overrides})
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # pydantic: a missing --run, a bad combination
        print(f"error: {str(exc).splitlines()[0]}: {exc}", file=sys.stderr)
        return 2
    verifier = DifferentialVerifier(task)
    result = asyncio.run(verifier.judge_folder(args.candidate.resolve(), settings))
    if result.infra_error:
        print(f"error: {result.infra_error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.details, indent=1, ensure_ascii=False))
    else:
        print(render_text(result.details, max_failing=20), end="")
        print(f"R = {result.quality:.3f} ({settings.metric}); {'PASSED' if result.passed else 'FAILED'}")
    return 0 if result.passed else 1


def _report(args: argparse.Namespace) -> int:
    from ..core.difftest.summary import funnel_markdown, funnel_rows
    from ..core.reporting.records import RecordError, load_records, records_from_store
    from ..core.store import Store

    try:
        if args.records:
            records = load_records(args.records)
        else:
            if not Path(args.db).is_file():
                print(f"error: no store at {args.db}", file=sys.stderr)
                return 2
            records = records_from_store(Store(args.db, readonly=True), args.suite)
    except (OSError, RecordError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows = funnel_rows(records, by_task=args.by_task)
    if args.json:
        print(json.dumps([row.as_dict() for row in rows], indent=1))
    elif not rows:
        print("no differential trials")
    else:
        print(funnel_markdown(rows), end="")
    return 0
