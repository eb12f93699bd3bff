"""SSH connections with host keys checked against known_hosts, and accepting a key explicitly.

An unknown host key is never accepted silently: the connection fails with the key's
fingerprint and the command that accepts it (``agentmeter hosts accept``), which records
it in the known_hosts file after the operator has seen the fingerprint. A key that differs
from the recorded one is refused outright.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ...extras import require

if TYPE_CHECKING:  # asyncssh is an extra: imported only when a host is reached
    from asyncssh import SSHListener

DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"


class HostKeyError(RuntimeError):
    """The host's key is unknown or changed: an operator decision, not a transient failure."""


@dataclass(frozen=True)
class SshTarget:
    address: str
    port: int = 22
    user: str | None = None
    key: str | None = None
    known_hosts: str | None = None

    @classmethod
    def from_url(cls, url: str, key: str | None = None, known_hosts: str | None = None) -> SshTarget:
        parts = urlsplit(url if "://" in url else f"ssh://{url}")
        return cls(parts.hostname or "127.0.0.1", parts.port or 22, parts.username, key, known_hosts)

    @property
    def known_hosts_path(self) -> Path:
        return Path(self.known_hosts or DEFAULT_KNOWN_HOSTS).expanduser()

    @property
    def host_pattern(self) -> str:
        """How known_hosts names this host: ``[address]:port`` unless the port is 22."""
        return self.address if self.port == 22 else f"[{self.address}]:{self.port}"

    def __str__(self) -> str:
        return f"{self.user + '@' if self.user else ''}{self.address}:{self.port}"


def _known_hosts(target: SshTarget) -> Any:
    asyncssh = require("asyncssh")

    path = target.known_hosts_path
    # An empty trust store, never None: None would make asyncssh skip host key checks.
    return asyncssh.read_known_hosts(str(path)) if path.is_file() else asyncssh.import_known_hosts("")


async def connect(target: SshTarget, *, timeout: float = 10.0, keepalive: float = 5.0) -> Any:
    """An ``asyncssh`` connection; raises :class:`HostKeyError` for an unknown or changed key."""
    asyncssh = require("asyncssh")

    options: dict[str, Any] = {"known_hosts": _known_hosts(target), "connect_timeout": timeout,
                               "keepalive_interval": keepalive, "keepalive_count_max": 3}
    if target.user:
        options["username"] = target.user
    if target.key:
        options["client_keys"] = [target.key]
        options["agent_path"] = None
    try:
        return await asyncssh.connect(target.address, target.port, **options)
    except asyncssh.HostKeyNotVerifiable:
        raise HostKeyError(await _unknown_key_message(target)) from None


async def _unknown_key_message(target: SshTarget) -> str:
    fingerprint = "?"
    with contextlib.suppress(OSError, ConnectionError, asyncio.TimeoutError):
        key = await fetch_host_key(target)
        fingerprint = f"{key.get_algorithm()} {key.get_fingerprint()}"
    recorded = _recorded_keys(target)
    if recorded:
        return (f"host {target}: its SSH host key ({fingerprint}) differs from the one recorded in "
                f"{target.known_hosts_path}; refusing to connect (if the host was really reinstalled, "
                f"remove the old line and run `agentmeter hosts accept {target}`)")
    return (f"host {target}: unknown SSH host key ({fingerprint}), not in {target.known_hosts_path}; "
            f"if this fingerprint is right, accept it once with `agentmeter hosts accept {target}"
            f"{' --known-hosts ' + str(target.known_hosts_path) if target.known_hosts else ''}`")


async def fetch_host_key(target: SshTarget) -> Any:
    asyncssh = require("asyncssh")

    key = await asyncssh.get_server_host_key(target.address, target.port)
    if key is None:
        raise ConnectionError(f"host {target} offered no host key")
    return key


def _recorded_keys(target: SshTarget) -> list[Any]:
    """The keys known_hosts trusts for this host (hashed entries and patterns included)."""
    asyncssh = require("asyncssh")

    path = target.known_hosts_path
    if not path.is_file():
        return []
    return list(asyncssh.match_known_hosts(str(path), target.address, target.address, target.port)[0])


async def accept_host_key(target: SshTarget) -> tuple[str, bool]:
    """Record the host's current key in known_hosts; returns (fingerprint, newly added).

    Refuses when a different key is already recorded for the host: a changed key is
    exactly what host key checking exists to catch.
    """
    key = await fetch_host_key(target)
    public = key.export_public_key().decode().split()
    fingerprint = f"{key.get_algorithm()} {key.get_fingerprint()}"
    recorded = _recorded_keys(target)
    if any(k.public_data == key.public_data for k in recorded):
        return fingerprint, False
    if recorded:
        raise HostKeyError(f"host {target}: a different key is recorded in {target.known_hosts_path}; "
                           f"remove that line first if the host was really reinstalled")
    path = target.known_hosts_path
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with path.open("a", encoding="utf-8") as handle:
        os.chmod(path, 0o600)
        handle.write(f"{target.host_pattern} {public[0]} {public[1]}\n")
    return fingerprint, True


class HostConnection:
    """One SSH connection to a host: its channel count, reverse tunnels, one shared SFTP
    session, and a control shell.

    Every exec channel makes sshd start the user's login shell, which reads its rc files
    (100 ms and more with a heavy ~/.bashrc); our own short scripts (kill ladders, sweeps,
    cleanup) instead run in one long-lived ``sh`` per connection, concurrently, each
    reporting its exit status on a line of its own.
    """

    def __init__(self, conn: Any):
        self.conn, self.users = conn, 0
        self.tunnels: dict[tuple[str, int], SSHListener] = {}  # (host, port) reached -> its reverse tunnel
        self.closed = False
        self._sftp: Any = None
        self._lock = asyncio.Lock()
        self._control: Any = None
        self._pending: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)

    @property
    def lost(self) -> bool:
        return self.closed or self.conn.is_closed()

    async def sftp(self) -> Any:
        async with self._lock:
            if self._sftp is None:
                self._sftp = await self.conn.start_sftp_client()
            return self._sftp

    async def script(self, text: str, timeout: float) -> int:
        """Run a shell script on the host; its exit status (output discarded)."""
        async with self._lock:
            if self._control is None:
                self._control = await self.conn.create_process("exec /bin/sh", encoding="utf-8")
                asyncio.get_running_loop().create_task(self._read_control(self._control))
        number = next(self._ids)
        future = self._pending[number] = asyncio.get_running_loop().create_future()
        self._control.stdin.write(f"( ( {text}\n) </dev/null >/dev/null 2>&1; echo \"@@done {number} $?\" ) &\n")
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self._pending.pop(number, None)

    async def _read_control(self, process: Any) -> None:
        error: BaseException = ConnectionError("the control shell on the host ended")
        try:
            async for line in process.stdout:
                fields = line.split()
                if len(fields) == 3 and fields[0] == "@@done" and fields[1].isdigit():
                    future = self._pending.get(int(fields[1]))
                    if future is not None and not future.done():
                        future.set_result(int(fields[2]))
        except Exception as exc:  # noqa: BLE001 - the connection went away, however asyncssh says it
            error = exc
        self._control = None
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(Exception):
            self.conn.close()
