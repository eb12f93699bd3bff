"""The ssh sandbox: trials on a pool of hosts over SSH (``asyncssh``), each host with slots.

Per trial: a folder ``<work_root>/t<id>-<token>`` on the host (workspace, home, tmp,
scratch, tools), the workspace seed uploaded over SFTP, the agent started in its own SSH
session (sshd gives each channel a new session) with exactly the trial's environment, its
output streamed back line by line, and the model server on this machine's loopback reached
through a reverse tunnel. The command verifier runs on the host (``exec``); runner-side
verifiers get the workspace fetched back. Kill: the signal ladder runs on the host in one
round trip over every process carrying the trial's token.

Losing a host's connection makes its running trials infra-invalid (the scheduler retries
them elsewhere); the host is marked down, re-probed every ``probe_interval`` seconds, and
what its trials left running is swept when it comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...lines import LineSplitter
from ...run.placement import Host, Placement
from ..base import (
    AgentHandle,
    ExecResult,
    KillPolicy,
    LaunchSpec,
    OutputCallback,
    Sandbox,
    SandboxSession,
    TrialSlot,
)
from ..common import HostWatch, load_settings, map_argv, shipped_files, trial_env
from ..hostcheck import HostCheck, check_ssh_host
from ..hostfs import FETCH_LIMIT
from ..relay import is_loopback, replace_host, target_of
from . import files as files_on_host
from .conn import HostConnection, HostKeyError, connect
from .hosts import SshHost, SshSettings, check_root, containment, kill_script, launch_command, q, sweep_script

if TYPE_CHECKING:
    from ...suites.suite import Task


class HostLost(ConnectionError):
    pass


class SshSandbox(Sandbox):
    name = "ssh"
    differential_side = "agentmeter_tui.core.sandboxes.ssh.difftest:SshSides"
    Settings = SshSettings

    def __init__(self, suite: Any, settings: dict[str, Any] | None = None):
        super().__init__(suite, settings)
        self.config = load_settings(SshSettings, suite, self.settings)
        self.hosts = {h.display: h for h in self.config.hosts}
        self.placement = Placement([Host(h.display, h.slots, frozenset(h.labels)) for h in self.hosts.values()])
        self.pools: dict[str, list[HostConnection]] = {name: [] for name in self.hosts}
        self.locks = {name: asyncio.Lock() for name in self.hosts}
        self.stale: dict[str, set[str]] = {name: set() for name in self.hosts}  # tokens to sweep on return
        self.containment: dict[str, str] = {}  # host -> what holds its trials' processes
        self.watch = HostWatch(self.placement, self._probe, self.config.probe_interval)

    def capacity(self) -> int:
        return self.placement.total_slots()

    async def check_hosts(self) -> list[HostCheck]:
        return [check for host in self.config.hosts
                for check in await check_ssh_host(host, self.suite, self.config.known_hosts)]

    # -- connections ----------------------------------------------------------------------------

    async def _new_connection(self, name: str) -> HostConnection:
        host = self.hosts[name]
        conn = HostConnection(await connect(host.target(self.config.known_hosts), timeout=self.config.connect_timeout))
        asyncio.get_running_loop().create_task(self._watch_connection(name, conn))
        if self.stale[name]:
            for token in list(self.stale[name]):
                with contextlib.suppress(Exception):
                    await conn.script(sweep_script(token), timeout=30)
                    self.stale[name].discard(token)
        return conn

    async def _watch_connection(self, name: str, conn: HostConnection) -> None:
        with contextlib.suppress(Exception):
            await conn.conn.wait_closed()
        if not conn.closed:  # not closed by us: the host or the network went away
            conn.closed = True
            if conn in self.pools[name]:
                self.pools[name].remove(conn)
            self.watch.down(name, "connection lost")

    async def connection(self, name: str) -> HostConnection:
        """The least used connection to ``name``, opening another while all are busy."""
        async with self.locks[name]:
            pool = [c for c in self.pools[name] if not c.lost]
            limit = math.ceil(self.hosts[name].slots / self.config.sessions_per_connection)
            free = [c for c in pool if c.users < self.config.sessions_per_connection]
            if free:
                chosen = min(free, key=lambda c: c.users)
            elif len(pool) < limit or not pool:
                chosen = await self._new_connection(name)
                self.pools[name].append(chosen)
            else:
                chosen = min(pool, key=lambda c: c.users)
            chosen.users += 1
            return chosen

    async def _probe(self, name: str) -> None:
        conn = await self._new_connection(name)
        await conn.script("true", timeout=10)
        async with self.locks[name]:
            self.pools[name].append(conn)

    async def preflight(self) -> None:
        """Connect to every host; an unknown host key stops the run, an unreachable host is
        marked down (and re-probed) as long as another host is up."""
        errors = []
        for name in self.hosts:
            try:
                conn = await self.connection(name)
                conn.users -= 1
            except HostKeyError:
                raise
            except Exception as exc:  # noqa: BLE001 - unreachable, refused, auth: this host is down
                errors.append(f"{name}: {exc}")
                self.watch.down(name, str(exc))
        if len(errors) == len(self.hosts):
            raise HostLost("no ssh host is reachable: " + "; ".join(errors))

    async def open(self, task: Task, trial_id: int, token: str) -> SshSession:
        slot = self.placement.slot_for(token)
        if slot is not None:
            name = slot.host
        elif (picked := self.placement.pick()) is not None:
            name = picked.name
        else:
            raise HostLost("no ssh host is up to open a trial on")
        try:
            conn = await self.connection(name)
        except HostKeyError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the failure, the host is down for now
            self.watch.down(name, str(exc))
            raise HostLost(f"host {name}: {exc}") from None
        session = SshSession(self, self.hosts[name], conn, trial_id, token)
        try:
            if name not in self.containment:  # once per host and run
                self.containment[name] = await containment(conn, name, token)
            session.notes = [self.containment[name]]
            await session.create(task)
        except Exception as exc:
            await session.cleanup()
            if conn.lost or _connection_error(exc):
                raise HostLost(f"host {name}: connection lost while preparing the trial ({exc})") from None
            raise
        return session

    async def close(self) -> None:
        await self.watch.close()
        for pool in self.pools.values():
            for conn in pool:
                conn.close()
        for pool in self.pools.values():
            for conn in pool:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(conn.conn.wait_closed(), 2)


def _connection_error(exc: BaseException) -> bool:
    import asyncssh

    if isinstance(exc, asyncssh.ProcessError):
        # A command that ran past its timeout (asyncssh.TimeoutError is a builtin TimeoutError,
        # so an OSError) is the command's verdict, not a lost host: the conformance checklist
        # found every verifier timeout on ssh turned into an infra-invalid, retried trial.
        return False
    return isinstance(exc, (OSError, asyncssh.DisconnectError, asyncssh.ChannelOpenError,
                            asyncssh.SFTPConnectionLost))


@functools.cache
def _channel_class() -> type:
    import asyncssh  # lazily: only suites with an ssh sandbox load it

    class AgentChannel(asyncssh.SSHClientSession):
        """Splits the agent's output into lines; remembers how its process ended."""

        def __init__(self, on_output: OutputCallback, done: asyncio.Future):
            self.on_output, self.done = on_output, done
            self.splitters = {None: LineSplitter(), asyncssh.EXTENDED_DATA_STDERR: LineSplitter()}
            self.exit_code: int | None = None
            self.chan: Any = None  # asyncssh's channel, once connected
            self.held = False  # not reading while the store writer is behind (SSH flow control
            self.holding = True  # then holds the remote agent); after its exit, the rest at once

        def connection_made(self, chan) -> None:
            self.chan = chan

        def data_received(self, data: bytes, datatype: int | None) -> None:
            lines = self.splitters.get(datatype, self.splitters[None]).feed(data)
            if lines:
                hold = self.on_output("stdout" if datatype is None else "stderr", lines)
                if hold is not None and self.holding and not self.held and self.chan is not None:
                    self.held = True
                    self.chan.pause_reading()
                    hold.add_done_callback(lambda _: self._resume())

        def _resume(self) -> None:
            if self.held:
                self.held = False
                self.chan.resume_reading()

        def exit_status_received(self, status: int) -> None:
            self.exit_code = status
            self.holding = False
            self._resume()

        def exit_signal_received(self, signal: str, core_dumped: bool, msg: str, lang: str) -> None:
            self.exit_code = -1
            self.holding = False
            self._resume()

        def connection_lost(self, exc: Exception | None) -> None:
            for datatype, splitter in self.splitters.items():
                rest = splitter.flush()
                if rest:
                    self.on_output("stdout" if datatype is None else "stderr", rest)
            if not self.done.done():
                self.done.set_result(exc)

    return AgentChannel


class SshAgent(AgentHandle):
    def __init__(self, session: SshSession, channel: Any, done: asyncio.Future):
        self.session, self.channel, self.done = session, channel, done
        self.pid: int | None = None

    async def wait(self) -> int:
        exc = await asyncio.shield(self.done)
        if self.channel.exit_code is None and (exc is not None or self.session.conn.lost):
            raise HostLost(f"host {self.session.host.display}: connection lost while the agent ran"
                           + (f" ({exc})" if exc else ""))
        return self.channel.exit_code if self.channel.exit_code is not None else -1


class SshSession(SandboxSession):
    def __init__(self, sandbox: SshSandbox, host: SshHost, conn: HostConnection, trial_id: int, token: str):
        self.sandbox, self.host, self.conn, self.token = sandbox, host, conn, token
        self.root = f"{host.work_root}/t{trial_id}-{token}"
        self.workspace, self.home = f"{self.root}/workspace", f"{self.root}/home"
        self.scratch, self.tmp = f"{self.root}/scratch", f"{self.root}/tmp"
        self.python, self.clis_root = host.python, host.clis
        self.slot = TrialSlot("ssh", host.display)
        self.sftp: Any = None
        self.agent: SshAgent | None = None
        self._released = False

    async def _run(self, command: str, timeout: float | None = None) -> Any:
        return await self.conn.conn.run(command, check=False, timeout=timeout, encoding=None)

    @contextlib.asynccontextmanager
    async def _on_host(self, doing: str) -> AsyncIterator[None]:
        """Name the host when its connection fails under us: the trial is infra-invalid."""
        try:
            yield
        except Exception as exc:
            if self.conn.lost or _connection_error(exc):
                raise HostLost(f"host {self.host.display}: connection lost while {doing} ({exc})") from None
            raise

    async def create(self, task: Task) -> None:
        import asyncssh

        await check_root(self.conn.conn, self.host)  # every trial: a folder swapped since is seen
        self.sftp = await self.conn.sftp()
        try:
            await self.sftp.makedirs(self.root, exist_ok=True)
            await self.sftp.chmod(self.root, 0o700)
            for folder in ("workspace", "home", "tmp", "scratch", "tools"):
                await self.sftp.mkdir(f"{self.root}/{folder}")
        except asyncssh.SFTPError as exc:
            raise RuntimeError(f"host {self.host.display}: cannot create {self.root}: {exc}") from None
        seed = task.workspace_seed
        if seed is not None:
            entries = sorted(str(p) for p in seed.iterdir())
            if entries:
                await self.sftp.put(entries, self.workspace, recurse=True, preserve=True)
        await self.write_files("", shipped_files())

    async def translate_url(self, url: str) -> str:
        """Loopback URLs go through a reverse tunnel: the host's 127.0.0.1:<port> reaches ours."""
        if not is_loopback(url):
            return url
        target = target_of(url)
        listener = self.conn.tunnels.get(target)
        if listener is None:
            async with self._on_host("opening the tunnel to the model"):
                listener = await self.conn.conn.forward_remote_port("127.0.0.1", 0, *target)
            self.conn.tunnels[target] = listener
        return replace_host(url, "127.0.0.1", listener.get_port())

    def environment(self, extra: dict[str, str], cwd: str | None = None) -> dict[str, str]:
        env = trial_env(home=self.home, workspace=cwd or self.workspace, tmp=self.tmp, token=self.token,
                        user=self.host.user, extra=extra)
        env["PWD"] = cwd or self.workspace
        return env

    async def start(self, spec: LaunchSpec, on_output: OutputCallback) -> SshAgent:
        cwd = spec.cwd or self.workspace
        command = launch_command(map_argv(spec.argv, self.root), self.environment(spec.env, cwd), cwd,
                                 f"{self.root}/agent.pid")
        done = asyncio.get_running_loop().create_future()
        channel = _channel_class()(on_output, done)
        async with self._on_host("starting the agent"):
            await self.conn.conn.create_session(lambda: channel, command, encoding=None)
        self.agent = SshAgent(self, channel, done)
        return self.agent

    async def exec(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
                   timeout: float | None = None) -> ExecResult:
        import asyncssh

        cwd = cwd or self.workspace
        command = launch_command(map_argv(argv, self.root), self.environment(env or {}, cwd), cwd,
                                 f"{self.root}/exec.pid")
        started = asyncio.get_running_loop().time()
        try:
            async with self._on_host("running a command"):
                result = await self._run(command, timeout)
            timed_out = False
        except asyncssh.TimeoutError as exc:
            await self.conn.script(sweep_script(self.token), timeout=30)
            result, timed_out = exc, True
        duration = asyncio.get_running_loop().time() - started
        code = result.exit_status if result.exit_status is not None else -1
        return ExecResult(code, result.stdout or b"", result.stderr or b"", duration, timed_out)

    async def kill(self, policy: KillPolicy) -> None:
        script = kill_script(self.token, f"{self.root}/agent.pid", policy.int_grace, policy.grace)
        async with self._on_host("killing the agent"):
            code = await self.conn.script(script, timeout=policy.grace + 15)
        if code != 0:
            raise RuntimeError(f"host {self.host.display}: processes of trial {self.token} survive SIGKILL")

    async def end_agent(self) -> None:
        async with self._on_host("stopping what the agent left"):
            await self.conn.script(sweep_script(self.token), timeout=30)

    # -- files ----------------------------------------------------------------------------------

    async def write_files(self, base: str, files: dict[str, bytes]) -> None:
        async with self._on_host("writing files"):  # from the trial's folder down, no link followed
            await files_on_host.write_files(self.sftp, self.root, base, files, self.note)

    async def fetch_files(self, base: str, patterns: list[str], limit_bytes: int = 64 << 20) -> dict[str, bytes]:
        async with self._on_host("fetching files"):
            return await files_on_host.read_globs(self.sftp, self.root, base, patterns, limit_bytes, self.note)

    async def collect_workspace(self, dest: Path) -> Path:
        dest.mkdir(parents=True, exist_ok=True)
        async with self._on_host("fetching the workspace"):
            return await files_on_host.fetch_tree(self.sftp, self.workspace, dest, self.note, FETCH_LIMIT)

    async def cleanup(self, keep: bool = False) -> None:
        try:
            if not self.conn.lost:  # one script: sweep the trial's processes, then its folder
                remove = "" if keep else f"; rm -rf {q(self.root)}"
                await self.conn.script(f"({sweep_script(self.token)}){remove}", timeout=60)
            else:
                self.sandbox.stale[self.host.display].add(self.token)
        except Exception:  # noqa: BLE001 - swept when the host is back
            self.sandbox.stale[self.host.display].add(self.token)
        finally:
            if not self._released:
                self._released = True
                self.conn.users -= 1
