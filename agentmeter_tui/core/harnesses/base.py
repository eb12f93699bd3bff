"""The harness adapter interface: everything the runner must know about one agent CLI.

An adapter builds the command line, environment and HOME files for (model, instruction,
workspace); its :class:`StreamParser` turns the CLI's output lines into normalized events
following that CLI's real token semantics; it decides whether the run errored (the exit
code alone is not trusted), and recovers usage from the CLI's session files after a kill.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import ClassVar, Literal

from ..usage import TokenUsage
from ..vocab import EventKind, ParsedEvent

@dataclass(frozen=True)
class InstallSpec:
    """How ``agentmeter install-clis`` gets the CLI: an npm package or a PyPI package in its own venv."""

    registry: Literal["npm", "pypi", "bundled"]
    package: str
    version: str
    bin: str  # the executable's name
    python: str | None = None  # pypi: the interpreter the venv needs (e.g. "3.13")
    size_hint: str = ""
    #: npm: a static binary inside the package (relative to the install root) that the launcher
    #: script would start; containers run it directly, with no node (Codex's musl build)
    native: str | None = None

    @property
    def hint(self) -> str:
        if self.registry == "bundled":
            return "ships with agentmeter"
        return f"agentmeter install-clis --only {self.package}@{self.version}"


@dataclass
class LaunchContext:
    """What an adapter needs to build one trial's launch; paths are in the sandbox's terms."""

    model_name: str  # the model name the CLI sends to its provider
    instruction: str
    workspace: str
    home: str
    base_url: str  # the provider's base URL, without a trailing /v1
    api_key: str
    clis_root: str  # where install-clis put the CLIs (inside the sandbox)
    python: str = "python3"  # the interpreter for Python agents
    suite_dir: str = ""  # the suite folder, for agents shipped with a suite
    solution_dir: str = ""  # where the task's solution/ was placed (the oracle), else empty
    extra_args: list[str] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)
    price: dict[str, str] | None = None  # per-million prices, for CLIs that want them in config


class TaskUnfit(Exception):
    """The task lacks what this agent needs (the oracle on a task without solution/solve.sh):
    that trial fails with this message as its reason; the run goes on."""


@dataclass
class AgentOutcome:
    """The adapter's verdict on a finished (or killed) agent process."""

    errored: bool
    error: str | None = None


class StreamParser(ABC):
    """Stateful parser of one trial's output. Never raises on bad input: unparsable lines
    become ``raw`` events. Totals are kept so usage deltas never double count."""

    #: the end-of-run record the CLI always prints (``"result"``): when set, a run that was not
    #: killed errored if that record is missing, whatever its exit code (CLIs exit 0 on a signal
    #: or with an error inside); None trusts a non-zero exit code instead
    final_record: ClassVar[str | None] = None

    def __init__(self) -> None:
        self.usage = TokenUsage()
        self.reported_cost_usd: Decimal | None = None
        self.turns = 0
        self.tool_calls = 0
        self.errors: list[str] = []
        self.final_seen = False  # the CLI printed its end-of-run record
        self._messages: dict[str, TokenUsage] = {}  # message id -> usage counted (count_message)
        self._total_set = False  # a cumulative total (set_total) replaced the per-message sum

    @abstractmethod
    def feed(self, stream: str, line: bytes) -> list[ParsedEvent]: ...

    def outcome(self, exit_code: int | None, killed: bool) -> AgentOutcome:
        if killed:
            return AgentOutcome(False)
        if self.errors:
            return AgentOutcome(True, self.errors[-1])
        if self.final_record is not None:
            if not self.final_seen:
                return AgentOutcome(True, f"ended without its {self.final_record} record (exit code {exit_code})")
            return AgentOutcome(False)
        if exit_code not in (0, None):
            return AgentOutcome(True, f"exit code {exit_code}")
        return AgentOutcome(False)

    # Helpers for subclasses -----------------------------------------------------------------

    def add_usage(self, delta: TokenUsage, model: str | None = None, turns: int = 1) -> ParsedEvent:
        self.usage = self.usage + delta
        self.turns += turns
        return ParsedEvent(EventKind.USAGE, delta.text(), usage=delta, turns=turns, model=model)

    def count_message(self, message_id: str, usage: TokenUsage, model: str | None = None) -> ParsedEvent | None:
        """One model call's usage, printed on several lines under one message id: counted once
        (one turn); a later copy with larger figures adds only the growth (keep the largest,
        never sum the copies). None when the line adds nothing."""
        seen = self._messages.get(message_id)
        if seen is None:
            self._messages[message_id] = usage
            return self.add_usage(usage, model=model, turns=1)
        uncached, cached, write, output, reasoning = (max(a, b) for a, b in zip(seen.as_tuple(), usage.as_tuple(),
                                                                                strict=True))
        grown = TokenUsage(uncached, cached, write, output, reasoning,
                           cache_write_1h=max(seen.cache_write_1h, usage.cache_write_1h))
        if grown == seen:
            return None
        self._messages[message_id] = grown
        return self.add_usage(grown - seen, model=model, turns=0)

    def set_total(self, total: TokenUsage, model: str | None = None, turns: int | None = None) -> ParsedEvent | None:
        """Record a cumulative total: emit only the difference from what was already counted.

        The difference may be negative in a class when the CLI's per-call figures were wrong
        (Claude Code's per-message output count): the total is what the CLI bills, so the
        event corrects the running sum to it rather than adding the total on top.
        """
        if not total.cache_write_1h and self.usage.cache_write_1h:
            # a total without the 5m/1h split (modelUsage) keeps the 1-hour share counted per call
            total = replace(total, cache_write_1h=min(self.usage.cache_write_1h, total.cache_write))
        delta = total - self.usage
        new_turns = 0 if turns is None else max(0, turns - self.turns)
        if not new_turns and not any(delta.as_tuple()):
            return None
        self._total_set = True
        self.usage = total
        self.turns += new_turns
        return ParsedEvent(EventKind.USAGE, delta.text(), usage=delta, turns=new_turns, model=model)

    def absorb(self, recovery: Recovery) -> ParsedEvent | None:
        """Usage read from the CLI's session files (during the run or after it), taken as the
        running total where it shows more than the stream has; an event with the difference."""
        if recovery.calls and not self._total_set:
            event = self._absorb_calls(recovery.calls)
        elif (recovery.usage.raw, recovery.turns) <= (self.usage.raw, self.turns):
            return None  # shows no more than the stream: fewer tokens, or as many and no more calls
        else:
            event = self.set_total(recovery.usage, turns=recovery.turns)
        if event is not None:
            if event.usage is not None and not any(event.usage.as_tuple()):
                event.text = f"{event.turns} more model call(s), no new tokens (from {recovery.source})"
            else:
                event.text = f"{event.text} (from {recovery.source})"
        return event

    def _absorb_calls(self, calls: dict[str, TokenUsage]) -> ParsedEvent | None:
        """Merge per message id, keeping each class's larger figure. A total would not do: after
        a kill the files may lack the last call (written on a timer) while holding the final
        figures of the others, whose stream copies were only estimates (Claude Code's output 1)."""
        usage, turns = self.usage, self.turns
        for message_id, found in calls.items():
            self.count_message(message_id, found)
        if (self.usage, self.turns) == (usage, turns):
            return None
        delta = self.usage - usage
        return ParsedEvent(EventKind.USAGE, delta.text(), usage=delta, turns=self.turns - turns)

    def raw(self, line: bytes) -> ParsedEvent:
        return ParsedEvent(EventKind.RAW, line.decode("utf-8", "replace")[:2000])


@dataclass
class Recovery:
    """Usage found in a CLI's session files after its stdout fell short (a kill, or Kimi)."""

    usage: TokenUsage
    turns: int
    source: str  # e.g. "session:.codex/sessions/.../rollout-x.jsonl"
    #: per call, only where the files name calls as the stream does (Claude Code's message ids):
    #: then the two are merged call by call instead of total against total
    calls: dict[str, TokenUsage] = field(default_factory=dict)

    @classmethod
    def per_call(cls, calls: dict[str, TokenUsage], files: set[str], *, stream_ids: bool = False) -> Recovery | None:
        """The sum of de-duplicated per-call figures (one entry per call id), None if none;
        ``stream_ids``: the ids are those the CLI's stdout uses too."""
        if not calls:
            return None
        return cls(sum(calls.values(), TokenUsage()), len(calls), "session:" + ", ".join(sorted(files)),
                   dict(calls) if stream_ids else {})


class HarnessAdapter(ABC):
    name: ClassVar[str]
    protocol: ClassVar[str]  # the model API it speaks: a name in core.wire.PROTOCOLS
    install: ClassVar[InstallSpec]
    #: package versions never to install (version -> why), refused by ``install-clis``
    blocked_versions: ClassVar[dict[str, str]] = {}
    #: a model name for ``agentmeter doctor``'s smoke run, for a CLI that refuses names it does
    #: not know; None: the doctor's own placeholder name
    probe_model: ClassVar[str | None] = None
    #: False for an adapter with nothing to check without a suite (it runs what the suite names)
    checked_alone: ClassVar[bool] = True
    #: the name of the shell tool the CLI offers its model; the scripted model server calls it
    #: to run a scenario's commands (filling the tool's own schema)
    shell_tool: ClassVar[str | None] = None
    #: the reader of the CLI's own session store (``agentmeter import sessions``), "module:Class"
    session_reader: ClassVar[str | None] = None
    #: Harbor's names for this agent (its ``--agent``), read back by ``agentmeter import harbor``
    harbor_names: ClassVar[tuple[str, ...]] = ()
    #: the CLI's own variables besides its protocol's SDK ones (core/wire/), which ``agentmeter
    #: meter`` points at its proxy: base URL variables with the path to add, and key variables
    base_url_env: ClassVar[dict[str, str]] = {}
    key_env: ClassVar[tuple[str, ...]] = ()
    #: whether the CLI's reported cost, if any, is the provider's bill when it talks to
    #: ``provider_kind`` (Claude Code on Anthropic); anywhere else it is kept as "actual" only
    reports_cost_for: ClassVar[frozenset[str]] = frozenset()
    #: glob patterns under HOME where the CLI keeps per-call usage (for recovery after a kill)
    session_globs: ClassVar[list[str]] = []
    #: token classes this CLI cannot tell apart, e.g. {"reasoning": "output"} when reasoning is
    #: folded into output; tests and the UI use it to compare like with like
    merged_classes: ClassVar[dict[str, str]] = {}
    #: seconds between reads of ``session_globs`` while the CLI runs, for CLIs whose stdout has
    #: no per-call usage (Codex, Gemini CLI) or only an estimate (Claude Code's output count):
    #: meters and budgets then see every call; None reads them only after the run
    live_session_poll: ClassVar[float | None] = None
    #: False for agents that call no model (the oracle): no scenario, no relay, no proxy route
    needs_model: ClassVar[bool] = True

    @property
    def version(self) -> str:
        return self.install.version

    def executable(self, clis_root: str) -> str:
        if self.install.registry == "npm":
            return f"{clis_root}/node_modules/.bin/{self.install.bin}"
        if self.install.registry == "pypi":
            return f"{clis_root}/{self.name}/bin/{self.install.bin}"
        return self.install.bin

    def is_installed(self, clis_root: Path) -> bool:
        return Path(self.executable(str(clis_root))).exists()

    @abstractmethod
    def command(self, ctx: LaunchContext) -> list[str]: ...

    def environment(self, ctx: LaunchContext) -> dict[str, str]:
        """Variables on top of the sandbox's base (PATH, HOME, PWD, LANG, TMPDIR)."""
        return {}

    def solution_files(self, task_path: Path) -> dict[str, bytes]:
        """The task's own files this agent runs (the oracle's ``solution/``), placed before it
        starts and named in ``LaunchContext.solution_dir``; may raise :class:`TaskUnfit`."""
        return {}

    def home_files(self, ctx: LaunchContext) -> dict[str, bytes]:
        """Config files to write under the fresh HOME before launch, by relative path."""
        return {}

    @abstractmethod
    def new_parser(self) -> StreamParser: ...

    def recover(self, files: dict[str, bytes]) -> Recovery | None:
        """Usage from session files fetched with ``session_globs``; None when there is none."""
        return None
