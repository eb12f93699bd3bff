"""A TCP relay from an address a sandbox can reach to a service on the runner's loopback.

The scripted model server and the metering proxy listen on 127.0.0.1 of the runner, which
a container on a bridge network cannot reach. A :class:`Relay` listens on the network's
gateway address (an address of this machine on that bridge) and pipes each connection to
the loopback service; on an ``--internal`` network that gateway is the only thing a
container reaches, which makes a network that "only reaches the metering proxy".
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from urllib.parse import urlsplit, urlunsplit

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def is_loopback(url: str) -> bool:
    return (urlsplit(url).hostname or "") in LOOPBACK


def replace_host(url: str, host: str, port: int) -> str:
    parts = urlsplit(url)
    netloc = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def target_of(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


class Relay:
    """Listens on ``bind_host`` (an ephemeral port) and forwards to ``target``; or on ``sock``,
    a listener made elsewhere (in a local trial's network namespace: :mod:`.netns`)."""

    def __init__(self, bind_host: str, target: tuple[str, int], sock: socket.socket | None = None):
        self.bind_host, self.target = bind_host, target
        # The socket is bound and listening at once, synchronously, so a URL naming it can be
        # handed out before the server task runs; early connections wait in the backlog.
        if sock is None:
            sock = socket.socket(socket.AF_INET6 if ":" in bind_host else socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((bind_host, 0))
            sock.listen(256)
            sock.setblocking(False)
        self.sock = sock
        name = self.sock.getsockname()
        self.port = name[1] if isinstance(name, tuple) else 0  # 0: a unix socket (:mod:`.local`)
        self.server: asyncio.AbstractServer | None = None
        self._start = asyncio.get_running_loop().create_task(self._serve())

    async def _serve(self) -> None:
        self.server = await asyncio.start_server(self._handle, sock=self.sock)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    async def close(self) -> None:
        await self._start
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 1.0)


class RelayPool:
    """One relay per (bind address, target), made on first use."""

    def __init__(self) -> None:
        self.relays: dict[tuple[str, tuple[str, int]], Relay] = {}

    def translate(self, url: str, bind_host: str) -> str:
        """``url`` as seen from a sandbox whose way to this machine is ``bind_host``."""
        if not is_loopback(url):
            return url
        target = target_of(url)
        key = (bind_host, target)
        relay = self.relays.get(key)
        if relay is None:
            relay = self.relays[key] = Relay(bind_host, target)
        return replace_host(url, bind_host, relay.port)

    async def close(self) -> None:
        for relay in self.relays.values():
            await relay.close()
        self.relays.clear()
