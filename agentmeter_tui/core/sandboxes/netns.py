"""Each local trial's own network namespace, made and entered by the runner (root) itself.

A trial's agent gets a network namespace holding only its loopback: no address of this
machine, no listener of the host's (the runner's scripted server, other runners' proxies,
sshd), no abstract unix socket of another program, no other trial. Its one path to its model
is a listening socket the runner opens *in that namespace* at its model's port on 127.0.0.1
(a socket stays in the namespace it was made in, whoever holds it) and relays to the proxy's
or the scripted server's port on the host's loopback (:class:`.relay.Relay`): no relay
process, no exec, nothing in the trial's view.

Why the runner and not bwrap's ``--unshare-net``: only a process in the namespace can open a
socket there, and bwrap runs nothing of ours before the agent. A thread's network namespace
is its own (``setns`` moves the calling thread only), so the runner moves the thread that
spawns the agent into the trial's namespace for the spawn (the child, forked there, stays)
and back at once. Making a namespace costs the kernel about 1.2 ms of CPU here, so a few
are made ahead, off the trials' path, by a thread of their own; each is one trial's only and
closed after it. Reusing them (as trial roots are) would carry one trial's sockets into the
next: its TIME_WAIT connections (a later agent's server could not bind their port), an
orphaned or in-flight socket still listening at the port the runner must open.

Root only: ``unshare`` and ``setns`` of a network namespace need CAP_SYS_ADMIN, which a
runner that is not root does not have (its bwrap's user namespace does, but a threaded
process cannot join a user namespace). Such a runner gives a trial with no model on this
machine bwrap's ``--unshare-net``; a trial whose model is on the host's loopback keeps the
host's network, and its transcript says so.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import socket
import struct
import threading
from collections.abc import Iterator

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
WARM = 4  # namespaces made ahead
_LIBC = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def _this_thread() -> int:
    return os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(sock, SIOCGIFFLAGS, request)[:18])[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP))


class NetPool:
    """The runner's network namespaces for its trials, each held by a descriptor: a few made
    ahead by a thread of their own (:data:`WARM`), so a trial's open only takes one. Each is a
    trial's alone and closed after it, never reused. Made on a thread that is in the host's
    namespace (the loop's, before any trial)."""

    def __init__(self) -> None:
        self.host = _this_thread()
        self.stock: list[int] = []
        self.lock = threading.Lock()
        self.wanted = threading.Event()  # the stock is short: the filler's cue
        self.filler: threading.Thread | None = None

    def take(self) -> int:
        """A namespace never used, with only its loopback, up."""
        with self.lock:
            namespace = self.stock.pop() if self.stock else None
            if self.filler is None:
                self.filler = threading.Thread(target=self._fill, name="agentmeter-netns", daemon=True)
                self.filler.start()
        self.wanted.set()
        return namespace if namespace is not None else self._new()

    def _fill(self) -> None:
        """The filler, for the runner's life (one thread: starting one per trial cost more)."""
        while self.wanted.wait():
            self.wanted.clear()
            try:
                while len(self.stock) < WARM:
                    namespace = self._new()
                    with self.lock:
                        self.stock.append(namespace)
            except OSError:
                return  # take() makes its own, and says why if it cannot

    def _new(self) -> int:
        _check(_LIBC.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
        try:
            _loopback_up()
            return _this_thread()
        finally:
            self._home()

    def _home(self) -> None:
        # Never left in a trial's namespace: the thread would open the runner's sockets there.
        _check(_LIBC.setns(self.host, CLONE_NEWNET), "setns back to the runner's network namespace")

    @contextlib.contextmanager
    def entered(self, namespace: int) -> Iterator[None]:
        """The calling thread in ``namespace`` (for sockets made and children forked inside)."""
        _check(_LIBC.setns(namespace, CLONE_NEWNET), "setns into the trial's network namespace")
        try:
            yield
        finally:
            self._home()

    @staticmethod
    def give_back(namespace: int) -> None:
        """``namespace``'s trial is done: the kernel removes it once its last socket is closed."""
        os.close(namespace)


def listen(port: int) -> socket.socket:
    """A listener on 127.0.0.1:``port`` of the calling thread's namespace."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a reused namespace's TIME_WAIT
    sock.bind(("127.0.0.1", port))
    sock.listen(256)
    sock.setblocking(False)
    return sock


_POOL: NetPool | None = None
_POOL_LOCK = threading.Lock()


def pool() -> NetPool | None:
    """The runner's pool (None: not root, no namespace of ours to be had). Made once, by the
    first trial's sandbox, on the thread that opens it."""
    global _POOL
    if os.geteuid() != 0:
        return None
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = NetPool()
        return _POOL


def problem() -> str | None:
    """Why the runner (root) cannot give its trials network namespaces (None: it can, or it is
    not root and bwrap makes them). One is made, as a trial's would be, and kept for a trial."""
    nets = pool()
    if nets is None:
        return None
    try:
        namespace = nets.take()
    except OSError as exc:
        return f"no network namespace for a trial: {exc.strerror or exc}"  # the cause, without errno's number
    with nets.lock:
        nets.stock.append(namespace)
    return None
