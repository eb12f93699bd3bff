"""``agentmeter transcript parse``: read a saved stdout stream of an agent CLI (and, with
``--session``, that CLI's session files) into the normalized summary a trial would record:
the five token classes, turns, tool calls, the CLI's own cost, errors, final status and
events by kind. ``--json`` keys: tokens, turns, tool_calls, reported_cost_usd, is_error,
events (plus cli, error, final_seen, usage_source).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..core.harnesses import ADAPTERS, get_adapter
from ..core.harnesses.summary import TranscriptSummary, session_files, summarize
from ..core.inert import inert
from ..core.registry import UnknownName
from ..core.usage import TOKEN_CLASSES


def register(subparsers: argparse._SubParsersAction) -> None:
    transcript = subparsers.add_parser("transcript", help="read saved agent CLI output")
    actions = transcript.add_subparsers(dest="transcript_action", metavar="ACTION")
    parse = actions.add_parser(
        "parse", help="normalize a saved stdout stream of an agent CLI",
        description="Read a CLI's saved stdout (one JSON event a line) with that CLI's adapter and print "
                    "the token classes, turns, tool calls, reported cost, errors and event counts.")
    parse.add_argument("--cli", required=True, metavar="NAME", help=f"adapter name: {', '.join(ADAPTERS.names())}")
    parse.add_argument("file", help="the saved stdout stream ('-' reads standard input)")
    parse.add_argument("--session", metavar="PATH",
                       help="a session file of that CLI, or a HOME folder holding its session files "
                            "(usage that stdout lacks: a killed run, or a CLI that prints none)")
    parse.add_argument("--exit-code", type=int, metavar="N", help="the CLI's exit code, if known")
    parse.add_argument("--killed", action="store_true",
                       help="the run was killed: a missing final record is not an error")
    parse.add_argument("--json", action="store_true", help="print one JSON object")
    parse.set_defaults(handler=parse_command)
    transcript.set_defaults(handler=lambda args: _usage(transcript))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def parse_command(args: argparse.Namespace) -> int:
    try:
        adapter = get_adapter(args.cli)
    except UnknownName as exc:
        return _fail(str(exc).strip('"'))
    except ImportError as exc:
        return _fail(f"the {args.cli} adapter cannot be loaded: {exc}")
    try:
        data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    except OSError as exc:
        return _fail(f"{args.file}: {exc.strerror}")
    files: dict[str, bytes] = {}
    if args.session:
        session = Path(args.session)
        if not session.exists():
            return _fail(f"{session}: no such file or folder")
        try:
            files = session_files(adapter, session)
        except OSError as exc:
            return _fail(f"{session}: {exc.strerror}")
        if not files:
            return _fail(f"{session}: no session files of {adapter.name} there "
                         f"(looked for {', '.join(adapter.session_globs) or 'none: it keeps none'})")
    lines = [line for line in data.splitlines() if line.strip()]
    summary = summarize(adapter, lines, files, exit_code=args.exit_code, killed=args.killed)
    if args.json:
        print(json.dumps(summary.as_json(), indent=2))
    else:
        print(render(summary, adapter.merged_classes, len(files)))
    return 0


def render(summary: TranscriptSummary, merged: dict[str, str], session_count: int) -> str:
    usage = summary.usage.as_dict()
    names = {"uncached_input": "uncached input", "cached_input": "cached input", "cache_write": "cache write",
             "output": "output", "reasoning": "reasoning"}
    out = [f"{summary.cli}: {summary.lines} line(s)"
           + (f", {session_count} session file(s)" if session_count else "")
           + f"; usage from {summary.usage_source}"]
    out += [f"  {names[c]:<15} {usage[c]:>12,}" for c in TOKEN_CLASSES]
    out.append(f"  {'raw tokens':<15} {summary.usage.raw:>12,}")
    for source, target in merged.items():
        out.append(f"  ({summary.cli} cannot tell {names[source]} apart: counted as {names[target]})")
    cost = "none" if summary.reported_cost_usd is None else f"${summary.reported_cost_usd:.6f}"
    out.append(f"turns {summary.turns}, tool calls {summary.tool_calls}, reported cost {cost}")
    status = f"error: {inert(summary.outcome.error or '')}" if summary.outcome.errored else "ok"
    out.append(f"final record {'seen' if summary.final_seen else 'missing'}; {status}")
    out.append("events: " + (", ".join(f"{k} {v}" for k, v in sorted(summary.events.items())) or "none"))
    return "\n".join(out)


def _fail(message: str) -> int:
    print(f"agentmeter transcript: {message}", file=sys.stderr)
    return 2
