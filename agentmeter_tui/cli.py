"""The ``agentmeter`` command line.

Each subcommand lives in ``agentmeter_tui/commands/<module>.py`` with a ``register(subparsers)``
function. Only the module of the command being run is imported: a reviewer scripting 200
``agentmeter score`` calls, or an operator's ``status``, should not pay for the report's numpy,
the proxy's aiohttp or the TUI's Textual. ``COMMANDS`` names every command, its module and its
one-line help, so ``agentmeter --help`` lists them all without importing any; a test checks that
the table and the modules' own ``register`` agree.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# command -> (module in agentmeter_tui.commands, one-line help as the module registers it).
# A new command is a new module plus one line here.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "run a suite's grid (starts a runner, then follows it)"),
    "suite": ("suite", "make suites, or copy a built-in one to edit"),
    "status": ("control", "what the runner is doing now (or how the last run ended)"),
    "kill": ("control", "kill a running trial (reason: operator)"),
    "pause": ("control", "start no new trials until resumed"),
    "resume": ("control", "start trials again"),
    "stop": ("control", "stop the run: running trials end infra-invalid and rerun on the next run"),
    "budget": ("control", "raise (or set) budgets of a running trial, a model, a CLI, a cell or the run, "
                          "and the run's, a provider's or a model's cap"),
    "rerun": ("rerun", "run finished cells again as new attempts (nothing overwritten)"),
    "regrade": ("regrade", "run the task's current verifier again on trials' kept final workspaces; new verdicts "
                           "appended, originals kept"),
    "export-trials": ("trials", "write finished trials as JSONL trial records"),
    "import-trials": ("trials", "read JSONL trial records into the store"),
    "import": ("interop", "import runs made elsewhere: Harbor jobs, ATIF files, CLI sessions"),
    "export": ("interop", "write trials in another tool's format"),
    "submission": ("submission", "check a leaderboard submission (Harbor job folders)"),
    "prices": ("prices", "price snapshots"),
    "mockllm": ("scripted", "the scripted model server (offline model APIs)"),
    "transcript": ("transcript", "read saved agent CLI output"),
    "images": ("images", "build a suite's task images ahead of its run"),
    "doctor": ("doctor", "check the agent CLIs, sandbox hosts and store a suite needs"),
    "hosts": ("hosts", "accept SSH host keys; check the hosts a suite's sandbox uses"),
    "install-clis": ("install_clis", "install the pinned agent CLIs (into .clis in a checkout, else the user data folder)"),
    "score": ("score", "hand-score a trial 0-3 (append-only; the latest score counts)"),
    "scan": ("scan", "flag finished trials a reviewer should look at first (triage scanners)"),
    "flag": ("scan", "a reviewer's verdict on a triage flag: right or wrong (append-only)"),
    "scores": ("scores", "export, import or merge reviewers' scores (CSV, another store)"),
    "report": ("report", "success, token, cost and AgentMeter Score tables for a suite"),
    "calibrate": ("calibrate", "derive tiers, budget grids and tau from a suite's trials"),
    "difftest": ("difftest", "differential test cases for CLI-tool tasks"),
    "meter": ("meter", "run a command behind the metering proxy: tokens, cost and budgets at the wire"),
    "demo": ("ui", "the TUI on a demo grid of scripted models, offline"),
    "review": ("ui", "read and hand-score finished transcripts (no runner needed)"),
    "compare": ("ui", "two trials of one task side by side, step by step"),
    "attach": ("ui", "open the TUI on the runner of a store (after closing it)"),
    "completion": ("completion", "print a shell completion script (bash, zsh or fish)"),
}

DESCRIPTION = "Run, watch, meter and hand-score coding-agent benchmarks over a model x CLI grid."


class _Parser(argparse.ArgumentParser):
    """A bad argument is one line naming it (exit 2), not the usage block and then the error;
    ``--help`` still shows the usage. Subcommands' parsers are of this class too."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _new_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    from . import __version__

    parser = _Parser(prog="agentmeter", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"agentmeter-tui {__version__}")
    return parser, parser.add_subparsers(dest="command", metavar="COMMAND")


def _command_word(argv: list[str]) -> str | None:
    """The first word that is not an option: the command, when there is one."""
    for word in argv:
        if not word.startswith("-"):
            return word
    return None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """A parser that knows every command by name; the full parser only of ``argv``'s command.

    With no argv (or no known command in it) every command is a stub carrying its help, which
    is all ``--help`` and an unknown command's error need. ``build_full_parser`` registers
    every module, for tests and documentation.
    """
    parser, subparsers = _new_parser()
    word = _command_word(argv or [])
    module_name = COMMANDS.get(word, (None, ""))[0] if word else None
    registered: set[str] = set()
    if module_name:
        module = importlib.import_module(f"agentmeter_tui.commands.{module_name}")
        module.register(subparsers)
        registered = set(subparsers.choices)
        describe(parser)
    for name, (_module, text) in COMMANDS.items():
        if name not in registered:
            subparsers.add_parser(name, help=text)
    return parser


def build_full_parser() -> argparse.ArgumentParser:
    parser, subparsers = _new_parser()
    for module_name in dict.fromkeys(module for module, _help in COMMANDS.values()):
        importlib.import_module(f"agentmeter_tui.commands.{module_name}").register(subparsers)
    describe(parser)
    return parser


def describe(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> None:
    """Every registered command's and subcommand's ``--help``: its one-line help as its
    description when it has none of its own, and its examples (``commands/examples.py``)
    under the options."""
    from .commands.examples import EXAMPLES

    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help for choice in action._choices_actions}
        for name, sub in action.choices.items():
            words = (*path, name)
            summary = helps.get(name)
            if not sub.description and summary:
                sub.description = summary[0].upper() + summary[1:] + "."
            examples = EXAMPLES.get(" ".join(words), ())
            if examples and "example" not in (sub.epilog or ""):
                block = "examples:\n" + "\n".join(f"  {line}" for line in examples)
                sub.epilog = f"{sub.epilog}\n\n{block}" if sub.epilog else block
                if sub.formatter_class is argparse.HelpFormatter:
                    sub.formatter_class = argparse.RawDescriptionHelpFormatter
            describe(sub, words)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:2] == ["completion", "--complete"]:  # the words as typed: argparse would eat a "--" among them
        return importlib.import_module("agentmeter_tui.commands.completion").complete(argv[2:])
    parser = build_parser(argv)
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
    except Exception as exc:  # noqa: BLE001 - no traceback reaches the user, ever: one line instead
        if os.environ.get("AGENTMETER_DEBUG"):
            raise
        print(f"agentmeter: {one_line(exc, args)}", file=sys.stderr)
        return 1


def one_line(exc: Exception, args: argparse.Namespace) -> str:
    """What went wrong, on one line naming the file. A store that cannot be used (the store's
    ``StoreError``, or SQLite failing on it midway) names ``--db``; a file error its file."""
    store_errors = sys.modules.get("agentmeter_tui.core.store.check")
    extras = sys.modules.get("agentmeter_tui.core.extras")
    sqlite = sys.modules.get("sqlite3")
    paths = sys.modules.get("agentmeter_tui.core.paths")
    db = getattr(args, "db", None)
    if store_errors is not None and isinstance(exc, store_errors.StoreError):
        text = str(exc)
    elif paths is not None and isinstance(exc, paths.ForeignFolder):  # names its folder already
        text = str(exc)
    elif extras is not None and isinstance(exc, extras.MissingExtra):  # names the extra and its pip command
        text = str(exc)
    elif sqlite is not None and isinstance(exc, sqlite.DatabaseError) and db:
        text = f"{db}: the store failed: {exc}"
    elif isinstance(exc, OSError) and exc.filename:
        text = f"{exc.filename}: {exc.strerror or exc}"
    else:
        text = f"{type(exc).__name__}: {exc} (AGENTMETER_DEBUG=1 shows where)"
    return " ".join(text.split())


if __name__ == "__main__":
    sys.exit(main())
