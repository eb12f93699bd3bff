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
        if not args.complete or not args.complete[0].isdigit():
            return 2
        for candidate in candidates(args.complete[1:], int(args.complete[0])):
            print(candidate)
        return 0
    if args.shell is None:
        print("agentmeter: completion: name a shell: bash, zsh or fish", file=sys.stderr)
        return 2
    sys.stdout.write(SCRIPTS[args.shell])
    return 0


def candidates(words: list[str], index: int) -> list[str]:
    """What may stand at ``words[index]`` (``words[0]`` is the program's name)."""
    from ..cli import COMMANDS

    current = words[index] if index < len(words) else ""
    before = words[1:index]
    command = next((w for w in before if not w.startswith("-")), None)
    previous = words[index - 1] if index >= 1 else ""
    if command is None:
        options = ["--help", "--version"] if current.startswith("-") else []
        return [w for w in [*COMMANDS, *options] if w.startswith(current)]
    if current.startswith("-"):
        return [o for o in _options(command) if o.startswith(current)]
    if previous == "--db":
        return []  # the shell's own file completion
    if previous in TRIAL_OPTIONS or (command in TRIAL_COMMANDS and _positionals(before, command) == 0):
        return [str(i) for i, _ in _trials(words) if str(i).startswith(current)]
    if command in SUITE_COMMANDS and _positionals(before, command) == 0:
        return [s for s in _suites() if s.startswith(current)]
    return []


def _options(command: str) -> list[str]:
    from ..cli import build_parser

    parser = build_parser([command])
    for action in parser._subparsers._group_actions:  # the subcommand's own parser
        sub = action.choices.get(command)
        if sub is not None:
            return sorted(o for a in sub._actions for o in a.option_strings if a.help != argparse.SUPPRESS)
    return []


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


def _suites() -> list[str]:
    from ..core.paths import suites_root

    local = sorted(f"{p.parent.name}/" for p in Path.cwd().glob("*/suite.toml"))
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
