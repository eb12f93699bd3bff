"""``agentmeter completion bash|zsh|fish``: a completion script for the shell.

The script asks ``agentmeter completion --complete`` for the candidates of the word being
typed, so what is offered is always what this version knows: the commands and their options
(from the parser), the suites (folders with a ``suite.toml`` in the current folder, and the
built-in ones by id), and the trial ids of the store named by ``--db`` (or ``./agentmeter.db``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Commands whose first positional argument is a suite, and those whose positional is a trial id.
SUITE_COMMANDS = {"run", "doctor", "calibrate"}
TRIAL_COMMANDS = {"kill", "score", "compare"}
TRIAL_OPTIONS = {"--trial"}

BASH = r'''# agentmeter completion for bash: eval "$(agentmeter completion bash)"
_agentmeter() {
    local IFS=$'\n'
    COMPREPLY=($(agentmeter completion --complete "$COMP_CWORD" "${COMP_WORDS[@]}" 2>/dev/null))
}
complete -o default -F _agentmeter agentmeter
'''
ZSH = r'''# agentmeter completion for zsh: eval "$(agentmeter completion zsh)"
_agentmeter() {
    local -a candidates
    candidates=("${(@f)$(agentmeter completion --complete $((CURRENT - 1)) "${words[@]}" 2>/dev/null)}")
    if (( ${#candidates} )) && [[ -n "${candidates[1]}" ]]; then
        compadd -a candidates
    else
        _files
    fi
}
compdef _agentmeter agentmeter
'''
FISH = r'''# agentmeter completion for fish: agentmeter completion fish | source
function __agentmeter_complete
    set -l words (commandline -opc) (commandline -ct)
    agentmeter completion --complete (math (count $words) - 1) $words 2>/dev/null
end
complete -c agentmeter -f -a '(__agentmeter_complete)'
'''
SCRIPTS = {"bash": BASH, "zsh": ZSH, "fish": FISH}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("completion", help="print a shell completion script (bash, zsh or fish)")
    parser.add_argument("shell", nargs="?", choices=sorted(SCRIPTS), help="the shell")
    parser.add_argument("--complete", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.set_defaults(handler=completion_command)


def completion_command(args: argparse.Namespace) -> int:
    if args.complete is not None:
        return complete(args.complete)
    if args.shell is None:
        print("agentmeter: completion: name a shell: bash, zsh or fish", file=sys.stderr)
        return 2
    sys.stdout.write(SCRIPTS[args.shell])
    return 0


def complete(words: list[str]) -> int:
    """``completion --complete INDEX WORD...``: the candidates, a line each (``cli.main`` hands
    the words here as typed: argparse would drop a ``--`` among them, as in ``review --``)."""
    if not words or not words[0].isdigit():
        return 2
    for candidate in candidates(words[1:], int(words[0])):
        print(candidate)
    return 0


def candidates(words: list[str], index: int) -> list[str]:
    """What may stand at ``words[index]`` (``words[0]`` is the program's name): commands, a
    command's subcommands (``suite``, ``images``), options, an option's choices (``report
    --format``), a positional's choices, suites and trial ids."""
    from ..cli import COMMANDS

    current = words[index] if index < len(words) else ""
    before = words[1:index]
    command = next((w for w in before if not w.startswith("-")), None)
    previous = words[index - 1] if index >= 1 else ""
    if command is None:
        options = ["--help", "--version"] if current.startswith("-") else []
        return [w for w in [*COMMANDS, *options] if w.startswith(current)]
    parser, path = _parser_of(command, before)
    if current.startswith("-"):
        return [o for o in _options(parser) if o.startswith(current)]
    if previous == "--db":
        return []  # the shell's own file completion
    if previous in TRIAL_OPTIONS or (command in TRIAL_COMMANDS and _positionals(before, command) == 0):
        return [str(i) for i, _ in _trials(words) if str(i).startswith(current)]
    option = _option(parser, previous)
    if option is not None and option.nargs != 0:
        return [str(c) for c in option.choices or () if str(c).startswith(current)]
    given = _positionals(before, path[-1])
    subcommands = _subcommands(parser)
    if subcommands and given == 0:
        return [name for name in subcommands if name.startswith(current)]
    if given == 0 and (path in SUITE_PATHS or path == (command,) and command in SUITE_COMMANDS):
        return [s for s in _suites(builtin_only=path in BUILTIN_PATHS) if s.startswith(current)]
    positional = [a for a in parser._actions if not a.option_strings and a.choices
                  and not isinstance(a, argparse._SubParsersAction)]
    if positional and given == 0:
        return [str(c) for c in positional[0].choices or () if str(c).startswith(current)]
    return []


# subcommands whose first positional is a suite (a folder or a built-in id), or a built-in suite's id
SUITE_PATHS = {("images", "build"), ("hosts", "check"), ("suite", "copy")}
BUILTIN_PATHS = {("suite", "copy")}


def _parser_of(command: str, before: list[str]) -> tuple[argparse.ArgumentParser, tuple[str, ...]]:
    """The parser of the command, or of its subcommand when one is typed (``images build``),
    and the words that name it."""
    from ..cli import build_parser

    parser = _subcommands(build_parser([command]))[command]
    path: tuple[str, ...] = (command,)
    for word in before[before.index(command) + 1:]:
        subcommands = _subcommands(parser)
        if word not in subcommands:
            break
        parser, path = subcommands[word], (*path, word)
    return parser, path


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(o for a in parser._actions for o in a.option_strings if a.help != argparse.SUPPRESS)


def _option(parser: argparse.ArgumentParser, word: str) -> argparse.Action | None:
    return next((a for a in parser._actions if word in a.option_strings), None)


def _positionals(before: list[str], command: str) -> int:
    """How many positional words follow the command (an option's value is not one)."""
    after = before[before.index(command) + 1:]
    count, skip = 0, False
    for word in after:
        if skip:
            skip = False
        elif word.startswith("-"):
            skip = "=" not in word
        else:
            count += 1
    return count


def _suites(*, builtin_only: bool = False) -> list[str]:
    from ..core.paths import suites_root

    local = [] if builtin_only else sorted(f"{p.parent.name}/" for p in Path.cwd().glob("*/suite.toml"))
    builtin = sorted(p.parent.name for p in suites_root().glob("*/suite.toml"))
    return [*local, *(b for b in builtin if f"{b}/" not in local)]


def _trials(words: list[str]) -> list[tuple[int, str]]:
    from ..core.paths import DEFAULT_DB
    from ..core.store.quick import trial_choices

    db = DEFAULT_DB
    for n, word in enumerate(words):
        if word == "--db" and n + 1 < len(words):
            db = words[n + 1]
        elif word.startswith("--db="):
            db = word.split("=", 1)[1]
    return trial_choices(Path(db).expanduser()) if Path(db).expanduser().is_file() else []
