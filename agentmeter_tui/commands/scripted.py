"""``agentmeter mockllm serve``: run the scripted model server alone (see docs/scenarios.md)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("mockllm", help="the scripted model server (offline model APIs)")
    sub = parser.add_subparsers(dest="scripted_command", metavar="SUBCOMMAND", required=True)
    serve = sub.add_parser("serve", help="serve scripted scenarios until SIGTERM/SIGINT",
                           description="Print 'listening on http://HOST:PORT', then serve the Anthropic, "
                                       "OpenAI (Chat Completions, Responses) and Gemini APIs.")
    from ..core.scripted.options import add_arguments

    add_arguments(serve)
    serve.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    from ..core.scripted.server import run

    return run(args)
