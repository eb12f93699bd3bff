"""``agentmeter prices draft``: a dated price snapshot drafted from genai-prices."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from ..core.pricing import draft_snapshot


def register(subparsers: argparse._SubParsersAction) -> None:
    prices = subparsers.add_parser("prices", help="price snapshots")
    sub = prices.add_subparsers(dest="prices_command", metavar="COMMAND")
    draft = sub.add_parser("draft", help="draft a snapshot file from genai-prices (offline)")
    draft.add_argument("--as-of", required=True, help="the snapshot's date, YYYY-MM-DD")
    draft.add_argument("models", nargs="*", help="price keys: provider/model or model")
    draft.add_argument("--suite", help="take the price keys from this suite's models")
    draft.add_argument("--out", help="write here (default: stdout)")
    draft.set_defaults(handler=draft_command)
    prices.set_defaults(handler=lambda a: prices.print_help() or 2)


def draft_command(args: argparse.Namespace) -> int:
    try:
        as_of = datetime.strptime(args.as_of, "%Y-%m-%d").replace(hour=12, tzinfo=UTC)
    except ValueError:
        print(f"agentmeter: --as-of: '{args.as_of}' is not a date like 2026-11-01", file=sys.stderr)
        return 2
    refs = list(args.models)
    if args.suite:
        from ..core.suites.load import load_suite
        from ..core.tomlerrors import InputError

        try:
            suite = load_suite(args.suite)
        except InputError as exc:
            print(f"agentmeter: {exc}", file=sys.stderr)
            return 2
        refs += [m.price_ref for m in suite.spec.models]
    if not refs:
        print("agentmeter: name the models to price, or --suite", file=sys.stderr)
        return 2
    text, missing = draft_snapshot(list(dict.fromkeys(refs)), as_of)
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    for ref in missing:
        print(f"agentmeter: genai-prices has no price for '{ref}': add it by hand (per million tokens)",
              file=sys.stderr)
    return 0
