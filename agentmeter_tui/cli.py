"""The ``agentmeter`` command line.

Each subcommand lives in ``agentmeter_tui/commands/<module>.py`` with a ``register(subparsers)``
function; modules are imported only when their command runs, except for registration, which
is cheap (argparse only). Commands that open the TUI import ``agentmeter_tui.ui`` inside
their handler, so headless commands never load Textual.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# One line per command module; a new command is a new module plus one line here.
COMMAND_MODULES = (
    "run",
    "suite",
    "control",
    "trials",
    "interop",
    "prices",
    "mockllm",
    "transcript",
    "doctor",
    "hosts",
    "install_clis",
    "score",
    "scores",
    "report",
    "calibrate",
    "difftest",
    "meter",
    "ui",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentmeter", description="Run, watch, meter and hand-score coding-agent benchmarks over a model x CLI grid.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"agentmeter_tui.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"agentmeter_tui.commands.{name}":
                continue  # a command not built yet; the rest still work
            raise
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
