"""The sandbox interface: one :class:`Sandbox` per kind per runner, one
:class:`SandboxSession` per trial.

A session owns a fresh workspace (the task's seed files) and a fresh HOME, both addressed in
the sandbox's own terms (a local path, a path inside a container, a path on a remote host).
Everything an adapter or verifier needs goes through the session, so neither knows where
the trial runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..registry import load

if TYPE_CHECKING:
    import asyncio

    from ..suites.suite import Suite, Task
    from .checks import HostCheck

# (stream name, complete lines without their newline). Called on the runner's event loop.
# Returns None, or a future that the sandbox waits for before it reads more of the agent's
# output (the store writer is behind: see store.writer.StoreWriter.room).
OutputCallback = Callable[[str, list[bytes]], "asyncio.Future | None"]


@dataclass(frozen=True)
class KillPolicy:
    """The signal ladder: SIGINT, then SIGTERM after ``int_grace``, SIGKILL after ``grace``.

    SIGINT goes first because Claude Code, Codex and Qwen Code then flush their usage and
    stop their tools; SIGKILL is always the fallback because opencode and Gemini CLI ignore
    the polite signals in some states.
    """

    int_grace: float = 1.0
    grace: float = 5.0


@dataclass
class LaunchSpec:
    argv: list[str]
    env: dict[str, str]  # the complete environment: nothing is inherited from the runner
    cwd: str | None = None  # default: the session's workspace


@dataclass
class ExecResult:
    exit_code: int
    stdout: bytes
    stderr: bytes
    duration: float
    timed_out: bool = False


@dataclass
class TrialSlot:
    """Where a trial runs: filled in by the sandbox when a session opens."""

    sandbox: str
    host: str = "local"
    node: str | None = None  # the engine's node inside a host (a Swarm fleet's node), once placed
    extra: dict[str, Any] = field(default_factory=dict)


class AgentHandle(ABC):
    pid: int | None

    @abstractmethod
    async def wait(self) -> int:
        """Wait for the agent process to exit and for its output to be drained; return its exit code."""


class SandboxSession(ABC):
    workspace: str  # the agent's working folder (a fresh copy of the task's seed files)
    home: str  # a fresh HOME: the CLIs keep their config and session files there
    scratch: str  # ours, outside the workspace: verifier tests, reward file
    slot: TrialSlot
    # What the trial should know about its sandbox, e.g. a task's limit this engine cannot apply,
    # or a link the agent planted that a host-side file operation refused (``hostfs.py``): the
    # runner writes those of ``open`` into the trial's transcript, later ones as they come.
    notes: Sequence[str] = ()
    noting: Callable[[str], None] | None = None
    # Set once a limit the sandbox watches (not one the kernel holds) is crossed while the agent
    # runs: its result is the reason, and the runner kills the trial with ``limit:disk``.
    breach: asyncio.Future[str] | None = None

    def note(self, text: str) -> None:
        if self.noting is not None:
            self.noting(text)
        else:
            self.notes = [*self.notes, text]

    def notes_to(self, note: Callable[[str], None]) -> None:
        """Hand the notes so far to ``note`` (the trial's transcript), and every later one."""
        for text in self.notes:
            note(text)
        self.noting = note

    @abstractmethod
    async def start(self, spec: LaunchSpec, on_output: OutputCallback) -> AgentHandle:
        """Start the agent in its own session, stdin from /dev/null, output line by line."""

    @abstractmethod
    async def exec(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
                   timeout: float | None = None) -> ExecResult:
        """Run a short command (a verifier, a probe) in the sandbox and wait for it."""

    @abstractmethod
    async def kill(self, policy: KillPolicy) -> None:
        """Stop the agent and every process it started; return when none is left."""

    async def end_agent(self) -> None:
        """Stop whatever the agent left running (a background job, a daemon) before a verifier
        runs: nothing of the agent's may write what the verifier writes or reads. A sandbox
        whose agent processes end with their command (a swarm job's container) keeps this."""

    @abstractmethod
    async def write_files(self, base: str, files: dict[str, bytes]) -> None:
        """Write files under ``base`` ("home" or "workspace"), creating folders."""

    @abstractmethod
    async def fetch_files(self, base: str, patterns: list[str], limit_bytes: int = 64 << 20) -> dict[str, bytes]:
        """Files under ``base`` matching glob ``patterns`` (relative), e.g. a CLI's session files."""

    async def write_solution(self, files: dict[str, bytes]) -> str:
        """Place a task's ``solution/`` for the oracle, out of the workspace; return its folder."""
        await self.write_files("scratch", {f"solution/{rel}": data for rel, data in files.items()})
        return f"{self.scratch}/solution"

    @abstractmethod
    async def collect_workspace(self, dest: Path) -> Path:
        """A local copy (or the local path) of the workspace, for verifiers that run on the runner."""

    @abstractmethod
    async def cleanup(self, keep: bool = False) -> None:
        """Remove the workspace and HOME unless ``keep``; make sure no process is left either way."""


class Sandbox(ABC):
    """A kind of sandbox. ``open`` makes a fresh session for one trial.

    A kind also says what the rest of agentmeter needs of it, so that nothing outside its
    package names it: its differential-testing side, whether it gives a task Harbor's
    container contract, its hosts' checks and what its dead runners leave behind.
    """

    name: ClassVar[str]
    # "module:Class" of the differential verifier's sides in this kind of sandbox: the class's
    # ``for_session(session)`` gives the executor factory of a trial's oracle and candidate
    # (see difftest/executor.py). None: a trial's tool runs on the runner's machine only when
    # its task says ``run_on = "runner"``.
    differential_side: ClassVar[str | None] = None
    # Whether a task written for Harbor (its tests write /logs/verifier/reward.*, as root in
    # a container) runs here as Harbor runs it.
    harbor_contract: ClassVar[bool] = False
    # Whether a finished trial's final workspace is kept for a regrade (``core/regrade``): the kind
    # can open a fresh session on a kept copy and run the verifier there again.
    keeps_for_regrade: ClassVar[bool] = False
    # Whether its trials run in task images it builds (``agentmeter images build`` prepares them).
    task_images: ClassVar[bool] = False

    def __init__(self, suite: Suite, settings: dict[str, Any] | None = None):
        self.suite = suite
        self.settings = settings or {}
        # The runner's folders agent commands run from (the CLIs' install root): a sandbox with a
        # filesystem view of its own shows them, read-only (set by the runner).
        self.tool_roots: list[str] = []

    # What the sandbox is preparing now (``preflight``: an image being built, step by step);
    # the runner sets its own, callable from any thread, to tell its clients. An attribute, not
    # a method: the runner and ``agentmeter images`` replace it on the instance.
    on_progress: Callable[[str], None] = staticmethod(lambda text: None)

    def capacity(self) -> int:
        """How many trials this sandbox can run at once (its hosts' slots)."""
        return self.suite.concurrency

    def fleet_nodes(self) -> list[dict[str, Any]]:
        """The nodes an engine places trials on, as last seen: ``name``, ``state`` (ready, drain,
        down), ``slots`` (trials it holds at once) and ``seen`` (wall time it was last reported
        ready); none for sandboxes that place trials themselves."""
        return []

    async def read_nodes(self) -> None:
        """Read the nodes again (the fleet view's figures age while no job watcher reads them)."""

    async def set_node(self, name: str, availability: str) -> None:
        """Make a node take new trials (``active``) or none (``drain``); its running ones go on."""
        raise ValueError("no fleet: this run's sandbox places no trials on nodes")

    async def preflight(self) -> None:
        """Check the sandbox can run trials at all (engine answering, hosts reachable)."""

    @abstractmethod
    async def open(self, task: Task, trial_id: int, token: str) -> SandboxSession: ...

    async def close(self) -> None:
        """Release shared resources (connections, networks) when the runner stops."""

    async def check_hosts(self) -> list[HostCheck]:
        """The checks of this sandbox's hosts for ``agentmeter doctor`` and ``hosts check`` (none:
        this machine)."""
        return []

    @classmethod
    def differential_sides(cls) -> Any | None:
        """The class named by ``differential_side``, imported now; None when the kind has none."""
        return load(cls.differential_side) if cls.differential_side else None

    @classmethod
    def clean_leftovers(cls, suite: Suite | None) -> list[HostCheck]:
        """Remove what runners that are gone left in this kind of sandbox (``agentmeter doctor
        --clean``), one check per place cleaned. Blocking.

        ``suite`` is the suite doctor checks (None without one), whatever its kind: a kind
        cleans the suite's hosts when the suite uses it, and this machine otherwise.
        """
        return []
