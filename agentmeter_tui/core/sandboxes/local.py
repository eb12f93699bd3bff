"""The local sandbox: a fresh copy of the workspace seed and a fresh HOME per trial, under a
temporary root on this machine (new, or a finished trial's emptied one: :mod:`.rootpool`); the
agent runs with a clean environment under bubblewrap, in namespaces of its own and (when the
runner is root) as a uid of its own (:mod:`.isolation`, :mod:`.uidpool`), and every process of
the trial (verifier included) in the trial's cgroup (:mod:`..cgroups`, :mod:`.joining`) before
its command runs. Where bwrap is missing or the kernel refuses its namespaces, the run does not
start unless the suite says ``isolation = "none"``, and then every trial's transcript says it
ran without walls.

A trial folder's name carries the runner that made it (``t<id>-r<pid>-<start time>-...``), so
the next runner removes what one killed with kill -9 left, and leaves a live one's alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import psutil

from .. import cgroups, procs
from ..paths import default_clis_root, private_folder
from . import hostfs, isolation, joining, netns
from .base import (
    AgentHandle,
    ExecResult,
    KillPolicy,
    LaunchSpec,
    OutputCallback,
    Sandbox,
    SandboxSession,
    TrialSlot,
)
from .common import SYSTEM_PATH, Settings
from .hostcheck import HostCheck
from .isolation import Walls
from .relay import Relay, is_loopback, replace_host, target_of
from .rootpool import FOLDERS, RootPool, remove_root
from .spawn import Spawned
from .uidpool import UidPool, write_accounts

if TYPE_CHECKING:
    from ..suites.suite import Task

OWNER = re.compile(r"t\d+-r(\d+-\d+)-")  # the runner in a trial folder's name
BASES = ("home", "workspace", "scratch")  # the folders under a trial's root that files go to and come from


class LocalSettings(Settings):
    """``[sandbox]`` keys of the local sandbox."""

    root: str | None = None  # where trial folders go (default: $AGENTMETER_SANDBOX_ROOT, else the temp dir)
    processes: bool = True  # False: folders only, nothing runs (docker's bind-mode host folders)
    # "none": no namespaces and no uid of its own (a kernel that forbids them); every transcript says so
    isolation: Literal["namespaces", "none"] = "namespaces"



class LocalAgent(AgentHandle):
    def __init__(self, process: Spawned, token: str, group: cgroups.Group | None = None):
        self.process, self.token, self.group = process, token, group
        self.pid = process.pid

    async def wait(self) -> int:
        process = self.process
        await process.exited.wait()
        process.release()
        if self.group is not None:
            # The agent is gone: what is left in its group (a background job, a daemon) is a
            # leftover, and goes now, before the verifier runs.
            self.group.kill()
        try:
            # A background job the agent left behind may hold our pipes open; it is killed by
            # the session's cleanup, so don't wait long for the pipes to drain. (Mostly they
            # closed with the agent: then no timer and no task.)
            if not process.pipes_closed.done():
                await asyncio.wait_for(asyncio.shield(process.pipes_closed), 0.5)
        except TimeoutError:
            await asyncio.to_thread(procs.sweep, self.token, None, self.group)
            await asyncio.wait_for(asyncio.shield(process.pipes_closed), 5)
        process.close()
        procs.OWN_CHILDREN.pids.discard(self.pid)
        return process.returncode if process.returncode is not None else -1


class LocalSession(SandboxSession):
    def __init__(self, root: Path, token: str, group: cgroups.Group | None = None, pool: RootPool | None = None,
                 walls: Walls | None = None):
        self.root = root
        self.token = token
        self.group = group
        self.pool = pool  # where the root goes when the trial is done (reused when safe), else removed
        self.walls = walls  # None: nothing of the trial runs in a sandbox of bwrap's
        self.notes = [cgroups.describe(group)]
        if walls is not None:
            self.notes.append(walls.describe())
        self.workspace = str(root / "workspace")
        self.home = str(root / "home")
        self.scratch = str(root / "scratch")
        self.slot = TrialSlot("local")
        self.agent: LocalAgent | None = None
        self.owner: int | None = None  # docker's bind mode: the agent's uid gets what the runner writes
        self.model_ports: list[int] = []  # its model's ports on this machine's loopback (translate_url)
        self.direct: str | None = None  # a model elsewhere (proxy = false): the agent needs the host's network
        self.relays: list[Relay] = []

    def _base_env(self) -> dict[str, str]:
        return {
            "PATH": SYSTEM_PATH, "HOME": self.home, "PWD": self.workspace, "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8", "TERM": "dumb", "TMPDIR": str(self.root / "tmp"), "USER": self._user(),
            "LOGNAME": self._user(), procs.TOKEN_VAR: self.token,
        }

    def _user(self) -> str:
        return isolation.AGENT_USER if self.walls is not None and self.walls.uid is not None else _user()

    def environment(self, extra: dict[str, str]) -> dict[str, str]:
        env = self._base_env()
        env.update(extra)
        env[procs.TOKEN_VAR] = self.token  # never overridable: the kill sweep depends on it
        return env

    def translate_url(self, url: str) -> str:
        """The model's URL as the agent uses it: one on this machine's loopback is the port the
        runner listens at in the agent's network namespace (:meth:`start`), on 127.0.0.1."""
        if not is_loopback(url):
            self.direct = url
            return url
        port = target_of(url)[1]
        if port not in self.model_ports:
            self.model_ports.append(port)
        return replace_host(url, "127.0.0.1", port)

    async def start(self, spec: LaunchSpec, on_output: OutputCallback) -> AgentHandle:
        cwd = spec.cwd or self.workspace
        env = self.environment({**spec.env, "PWD": cwd})
        walls = self.walls if self.walls is not None and self.walls.program is not None else None
        namespace = walls.namespace if walls is not None and self.direct is None else None
        if walls is not None and self.direct is not None:
            self.note(self._host_network())
        relay = self._relayed() if walls is not None and namespace is None and self.direct is None else ()
        argv, handshake = self._contained(spec.argv, env, cwd, net=walls is not None and namespace is None
                                          and self.direct is None, relay=relay)
        with handshake or contextlib.nullcontext():
            procs.OWN_CHILDREN.spawning += 1
            try:
                if namespace is not None:
                    process = self._spawn_inside(namespace, argv, env, cwd, on_output, handshake)
                else:
                    process = _spawned(argv, env, cwd, on_output, handshake, self._fds())
                procs.OWN_CHILDREN.pids.add(process.pid)
            finally:
                procs.OWN_CHILDREN.spawning -= 1
            if handshake is not None:
                await _joined(process, handshake)
        self.agent = LocalAgent(process, self.token, self.group)
        return self.agent

    def _relayed(self) -> tuple[str, ...]:
        """Not root: the runner listens on a unix socket per model port in the trial's tmp (in
        its view), relayed to that port of the host's loopback; inside, :mod:`.netrelay` opens
        the port and pipes it there."""
        pairs = []
        folder = os.open(self.root / "tmp", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for port in self.model_ports:
                name = f".model-{port}.sock"
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=folder)
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.bind(f"/proc/self/fd/{folder}/{name}")  # by the folder: a trial's path may pass 107 bytes
                sock.listen(256)
                sock.setblocking(False)
                self.relays.append(Relay(name, ("127.0.0.1", port), sock))
                pairs.append(f"{port}={self.root / 'tmp' / name}")
        finally:
            os.close(folder)
        return tuple(pairs)

    def _spawn_inside(self, namespace: int, argv: list[str], env: dict[str, str], cwd: str,
                      on_output: OutputCallback, handshake: joining.Handshake | None) -> Spawned:
        """The agent forked in its trial's network namespace, with the runner's listener at each
        of its model's ports there, relayed to the same port of the host's loopback."""
        assert self.walls is not None and self.walls.net is not None
        listeners: list[socket.socket] = []
        try:
            with self.walls.net.entered(namespace):
                listeners += [netns.listen(port) for port in self.model_ports]
                process = _spawned(argv, env, cwd, on_output, handshake, self._fds())
        except BaseException:
            for sock in listeners:
                sock.close()
            raise
        self.relays += [Relay("127.0.0.1", ("127.0.0.1", port), sock)
                        for port, sock in zip(self.model_ports, listeners)]
        return process

    def _host_network(self) -> str:
        assert self.direct is not None
        return (f"network: the host's (its model is not on this machine: {target_of(self.direct)[0]}, and the "
                "suite says proxy = false): the agent reaches every address of this machine and whatever listens there")

    def _contained(self, argv: list[str], env: dict[str, str], cwd: str, net: bool = True,
                   relay: tuple[str, ...] = ()) -> tuple[list[str], joining.Handshake | None]:
        """The argv that runs ``argv`` in the trial's walls and group, and the handshake that
        puts bwrap into the group once spawned (None: the ``sh`` join does, or there is none)."""
        if self.walls is not None and self.walls.program is not None:
            cgroups.findable(argv, env.get("PATH"), cwd)
            argv = isolation.argv_for(self.walls.program, argv, root=self.root, cwd=cwd, tools=self.walls.tools,
                                      uid=self.walls.uid, net=net, relay=relay, space=self.walls.space)
            if self.group is None:
                return argv, None
            handshake = joining.Handshake(self.group)
            return handshake.argv(argv), handshake
        return (self.group.wrap(argv, env.get("PATH"), cwd) if self.group is not None else list(argv)), None

    def _fds(self) -> tuple[int, ...]:
        """What a walled spawn passes to bwrap besides the handshake's pipes."""
        return self.walls.fds if self.walls is not None and self.walls.program is not None else ()

    async def exec(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
                   timeout: float | None = None) -> ExecResult:
        started = time.monotonic()
        cwd, env = cwd or self.workspace, self.environment(env or {})
        contained, handshake = self._contained(argv, env, cwd)
        with handshake or contextlib.nullcontext():
            procs.OWN_CHILDREN.spawning += 1
            try:
                proc = await asyncio.create_subprocess_exec(
                    *contained, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE, cwd=cwd, env=env, start_new_session=True,
                    pass_fds=(*(handshake.fds if handshake is not None else ()), *self._fds()))
                procs.OWN_CHILDREN.pids.add(proc.pid)
            finally:
                procs.OWN_CHILDREN.spawning -= 1
            if handshake is not None:
                handshake.started(proc.pid)
                try:
                    await handshake.join(proc.pid)
                except BaseException:
                    # killed: asyncio reaps it, and closes its transport once its pipes are done
                    procs.OWN_CHILDREN.pids.discard(proc.pid)
                    raise
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
            timed_out = False
        except TimeoutError:
            await procs.kill_ladder(proc.pid, None, int_grace=0.2, grace=1.0)
            out, err = await proc.communicate()
            timed_out = True
        procs.OWN_CHILDREN.pids.discard(proc.pid)
        return ExecResult(proc.returncode if proc.returncode is not None else -1, out, err,
                          time.monotonic() - started, timed_out)

    async def kill(self, policy: KillPolicy) -> None:
        pid = self.agent.pid if self.agent else None
        exited = self.agent.process.exited if self.agent else None
        await procs.kill_ladder(pid, self.token, int_grace=policy.int_grace, grace=policy.grace, exited=exited,
                               group=self.group, spare=self._monitors(pid))

    def _monitors(self, pid: int | None) -> frozenset[int]:
        """bwrap's own two processes (its monitor and the namespace's init): SIGINT or SIGTERM
        would end them, and with them, at once, the agent they hold (``--die-with-parent``),
        so only the agent and its tools get the gentle signals; bwrap goes when its command does."""
        if pid is None or self.walls is None or self.walls.program is None:
            return frozenset()
        try:
            return frozenset({pid, *(child.pid for child in psutil.Process(pid).children())})
        except psutil.NoSuchProcess:
            return frozenset()

    async def end_agent(self) -> None:
        # Its processes carry the trial's token however they detached (setsid, double fork);
        # the scan for it reads every process's environment, so it is skipped when nothing can
        # be left (``procs.strays``).
        if procs.strays(self.token):
            await asyncio.to_thread(procs.sweep, self.token)

    async def write_files(self, base: str, files: dict[str, bytes]) -> None:
        # Under the trial's root, whatever the agent planted there (hostfs.py); in docker's bind
        # mode what is made here is given to the agent's user (``owner``).
        for text in await asyncio.to_thread(hostfs.write_files, self.root, _base(base), files, self.owner):
            self.note(text)

    async def fetch_files(self, base: str, patterns: list[str], limit_bytes: int = 64 << 20) -> dict[str, bytes]:
        found, notes = await asyncio.to_thread(hostfs.read_globs, self.root, _base(base), patterns, limit_bytes)
        for text in notes:
            self.note(text)
        return found

    async def collect_workspace(self, dest: Path) -> Path:
        return Path(self.workspace)

    async def cleanup(self, keep: bool = False) -> None:
        # Leftovers of a finished agent (a backgrounded job) are killed by the runner's sweeper
        # within a fraction of a second; a kill already swept synchronously.
        procs.SWEEPER.add(self.token, self.group)
        for relay in self.relays:
            await relay.close()
        self.relays = []
        if not keep:
            # Off the loop and off the trial's critical path: the slot is free meanwhile.
            _REMOVALS.add(self.root, self.group, self.pool, self.walls)
        elif self.walls is not None:
            self.walls.release()  # a kept root is never reused, and its processes are gone with its namespace


class LocalSandbox(Sandbox):
    name = "local"
    keeps_for_regrade = True
    differential_side = "agentmeter_tui.core.difftest.executor:LocalExecutor"
    Settings = LocalSettings

    def __init__(self, suite: Any, settings: dict[str, Any] | None = None):
        super().__init__(suite, settings)
        self.root = _sandbox_root(self.settings)
        self.root.mkdir(parents=True, exist_ok=True)
        self.removed = remove_dead_owners(self.root)
        self.pool = RootPool()
        self.uids = UidPool()
        self.program: str | None = None  # bwrap, once preflight found it working

    async def preflight(self) -> None:
        """Refuse to run trials without walls unless the suite says so (``isolation = "none"``)."""
        if not self.settings.get("processes", True) or self.settings.get("isolation") == "none":
            return
        program = isolation.bwrap()
        why = "bwrap (Debian's bubblewrap) is not on PATH" if program is None else \
            await asyncio.to_thread(isolation.probe, program) or await asyncio.to_thread(netns.problem)
        if why is not None:
            # "install bubblewrap" only where it is missing: where the kernel refuses, it would mislead
            fix = "install bubblewrap, or say" if program is None else "allow namespaces here, or say"
            raise RuntimeError(f"the local sandbox cannot wall its trials in ({why}); {fix} "
                               'isolation = "none" under [sandbox] to run them without walls')
        if os.geteuid() == 0:  # the trials' user namespace made now, off the loop, not by the first trial
            await asyncio.to_thread(isolation.pool_namespace, program)
        self.program = program

    def _walls(self) -> Walls:
        if self.settings.get("isolation") == "none":
            return Walls(None, None, ())
        if self.program is None:  # opened without preflight (a test, doctor): probed now
            why = (isolation.probe(p) if (p := isolation.bwrap()) else "bwrap is not on PATH")
            if why is not None:
                raise RuntimeError(f"the local sandbox cannot wall its trials in ({why})")
            self.program = p
        uid = self.uids.take() if os.geteuid() == 0 else None
        try:
            return Walls(self.program, uid, tuple(self.tool_roots), self.uids.give_back, netns.pool())
        except OSError as exc:  # root, yet no network namespace (a container without CAP_SYS_ADMIN)
            if uid is not None:
                self.uids.give_back(uid)
            raise RuntimeError(f"the local sandbox cannot wall its trials in ({exc})") from exc

    async def check_hosts(self) -> list[HostCheck]:
        """How a root runner's trials get their uid of its own here (``doctor``, ``hosts check``):
        bwrap sets it, or an exec in the sandbox does, and which folder makes it so. Nothing
        for a runner that is not root or a suite without walls (their trials have no uid of
        their own), nor without a working bwrap (the run's preflight refuses, naming why)."""
        program = isolation.bwrap()
        if os.geteuid() != 0 or self.settings.get("isolation") == "none" or program is None:
            return []
        check = await asyncio.to_thread(self._uid_check, program)
        return [check] if check is not None else []

    def _uid_check(self, program: str) -> HostCheck | None:
        if isolation.probe(program) is not None:
            return None
        subject, drop = "trials' uid", "an exec in each trial's sandbox (unshare -G -S, about 0.9 ms a trial)"
        if isolation.pool_namespace(program) is None:
            return HostCheck(subject, True, f"{drop}: no user namespace here for bwrap to set it in")
        found = isolation.blocked(tuple(self.tool_roots) or (str(default_clis_root()),), self.root)
        if found is None:
            return HostCheck(subject, True, "set by bwrap itself (no exec in the sandbox)")
        source, folder = found
        return HostCheck(subject, True, f"{drop}: a CLI trial's view holds {source}, and {folder} lets no other user "
                         "pass", "for bwrap to set it: Python and the CLIs' interpreters where other users may read "
                         "them (/usr, /opt, /usr/local)")

    @classmethod
    def clean_leftovers(cls, suite: Any) -> list[HostCheck]:
        """This machine's process groups of runners and meters that are gone (whatever the suite's
        kind: every one of them runs its processes here), and the local trial folders they left."""
        if cgroups.hierarchy() is None:
            checks = [HostCheck("clean processes", None, cgroups.describe())]
        else:
            groups, killed = cgroups.clean_leftovers()
            checks = [HostCheck("clean processes", True, f"{killed} process(es) in {groups} group(s) of runners "
                                "that are gone" if groups else "nothing left behind")]
        local = suite is not None and suite.spec.sandbox.kind == cls.name
        folders = remove_dead_owners(_sandbox_root(suite.spec.sandbox.model_dump() if local else {}))
        return [*checks, HostCheck("clean trial folders", True, f"{len(folders)} folder(s) of runners that are gone"
                                   if folders else "nothing left behind")]

    async def open(self, task: Task, trial_id: int, token: str) -> LocalSession:
        if task.workspace_seed is None and self.pool:
            # An emptied root of a finished trial waits (rootpool.py): a rename and the group's
            # folder, cheaper on the loop than a hop to a thread.
            return self._open(task, trial_id, token)
        # Off the loop even for an empty workspace: a folder made on ext4 costs ~0.15 ms of CPU,
        # and a new root makes six (with its cgroup), far more than the hop to a thread.
        return await asyncio.to_thread(self._open, task, trial_id, token)

    def _open(self, task: Task, trial_id: int, token: str) -> LocalSession:
        name = f"t{trial_id}-r{cgroups.owner_key()}-"
        root = self.pool.take(name)
        if root is None:
            root = Path(tempfile.mkdtemp(prefix=name, dir=self.root))
            for folder in FOLDERS:
                (root / folder).mkdir()
        if task.workspace_seed is not None:
            shutil.copytree(task.workspace_seed, root / "workspace", symlinks=True, dirs_exist_ok=True)
        return self._session(root, token)

    def _session(self, root: Path, token: str) -> LocalSession:
        # Docker's bind-mode host folders run nothing here: no group for them, and no reuse.
        if not self.settings.get("processes", True):
            return LocalSession(root, token)
        walls = self._walls()
        session = LocalSession(root, token, cgroups.new_group(token), self.pool, walls)
        if walls.program is not None:
            try:
                _give_folders(session, walls.uid)
            except BaseException:
                walls.release()
                raise
        return session

    async def close(self) -> None:
        await asyncio.to_thread(self.pool.clear)


def _spawned(argv: list[str], env: dict[str, str], cwd: str, on_output: OutputCallback,
             handshake: joining.Handshake | None, fds: tuple[int, ...]) -> Spawned:
    """The agent spawned, with the handshake's pipes and its first move where it has one, and
    ``fds`` passed on."""
    if handshake is None:
        return Spawned(argv, env=env, cwd=cwd, on_output=on_output, pass_fds=fds)
    return Spawned(argv, env=env, cwd=cwd, on_output=on_output, pass_fds=(*handshake.fds, *fds),
                   joined=handshake.started)


async def _joined(process: Spawned, handshake: joining.Handshake) -> None:
    """The agent's bwrap in its group (:mod:`.joining`); if that fails it was killed, and is
    reaped and forgotten before the error goes up."""
    try:
        await handshake.join(process.pid)
    except BaseException:
        await process.exited.wait()
        process.close()
        procs.OWN_CHILDREN.pids.discard(process.pid)
        raise


def _sandbox_root(settings: dict[str, Any]) -> Path:
    root = settings.get("root") or os.environ.get("AGENTMETER_SANDBOX_ROOT")
    # the default is in a shared place: checked; as root others may pass it (not list it), so
    # that a trial's uid can reach its root there (userns.py): each root is closed to all but its trial
    mode = 0o711 if os.geteuid() == 0 else 0o700
    return Path(root) if root else private_folder(Path(tempfile.gettempdir()) / "agentmeter", mode)


def remove_dead_owners(base: Path) -> list[Path]:
    """Trial folders of runners that are gone (killed with kill -9): removed, and named. Removed
    as a finished trial's are (``remove_root``): an agent may have nested them past any recursion."""
    gone = [folder for folder in base.glob("t*-r*-*-*")
            if (owner := OWNER.match(folder.name)) and folder.is_dir() and not cgroups.owner_alive(owner[1])]
    for folder in gone:
        remove_root(folder)
    return gone


def _base(base: str) -> str:
    if base not in BASES:
        raise ValueError(f"no folder '{base}' in a trial: one of {', '.join(BASES)}")
    return base


class _Removals:
    """Trial roots waiting to be removed, taken by one worker thread in batches: a hop to a
    thread per trial cost the loop more than a trivial trial's whole removal. The runner
    waits for the last batch (``procs.BACKGROUND``) before it says the run finished."""

    def __init__(self) -> None:
        self.roots: list[tuple[Path, cgroups.Group | None, RootPool | None, Walls | None]] = []
        self.task: asyncio.Future | None = None

    def add(self, root: Path, group: cgroups.Group | None = None, pool: RootPool | None = None,
            walls: Walls | None = None) -> None:
        self.roots.append((root, group, pool, walls))
        if self.task is None or self.task.done() or self.task.get_loop() is not asyncio.get_running_loop():
            self.task = procs.BACKGROUND.run(self._drain())

    async def _drain(self) -> None:
        while self.roots:
            roots, self.roots = self.roots, []
            await asyncio.to_thread(_recycle, roots)


def _recycle(roots: list[tuple[Path, cgroups.Group | None, RootPool | None, Walls | None]]) -> None:
    for root, group, pool, walls in roots:
        uid = walls.uid if walls is not None else None
        if pool is None:
            remove_root(root)
        else:
            pool.offer(root, group, uid)
        if walls is not None:
            walls.release()  # after the root is emptied: nothing of the uid is left in it


def _give_folders(session: LocalSession, uid: int | None) -> None:
    """The trial's passwd and group beside its folders, and (as root) its folders given to its
    uid: the folders themselves and the workspace seed just copied in (nothing ran there yet,
    so no link the walk could follow was planted). The root itself stays the runner's, its
    group the trial's, mode 0750: the agent passes and lists it (bwrap binds the root whole: one mount,
    not four) but makes nothing in it; the rootpool sets it back to 0700."""
    root = session.root
    write_accounts(root, uid if uid is not None else os.getuid(), session._user(), session.home)
    if uid is None:
        return
    session.owner = uid  # what the runner writes later (CLI config, the verifier's tests) is the agent's too
    os.lchown(root, -1, uid)
    os.chmod(root, 0o750)
    for name in isolation.BOUND:
        os.lchown(root / name, uid, uid)
    for parent, folders, files in os.walk(root / "workspace"):
        for entry in (*folders, *files):
            os.lchown(os.path.join(parent, entry), uid, uid)


_REMOVALS = _Removals()


@functools.lru_cache(maxsize=256)
def _small(seed: Path, limit: int = 32) -> bool:
    """Whether a workspace seed is a few files (cached per task folder for the run)."""
    return sum(1 for _ in itertools.islice(seed.rglob("*"), limit + 1)) <= limit


@functools.cache
def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (KeyError, ImportError):
        return "agent"
