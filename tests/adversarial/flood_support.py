"""Misbehaving control-socket clients, for the flood test and benchmarks/socket_flood.py."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from agentmeter_tui.core.paths import socket_path

FLOOD = b"\n" * (1 << 20)  # newlines: each one a request to the old runner
STATUS_UNREAD = b'{"op": "status"}\n' * 64  # replies the sender never reads


def connect(db: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(socket_path(db)))
    return sock


def keep_sending(db: Path, data: bytes, stop: threading.Event, sent: list[int]) -> None:
    """Send ``data`` over and over, never reading; on a close, connect again (until the runner
    is gone or ``stop`` is set). ``sent[0]`` counts the bytes the socket took."""
    while not stop.is_set():
        try:
            with connect(db) as sock:
                while not stop.is_set():
                    sent[0] += sock.send(data)
        except (BrokenPipeError, ConnectionResetError):
            continue
        except (FileNotFoundError, ConnectionRefusedError):  # the runner is gone: the run ended
            return


Clients = tuple[list[threading.Thread], list[socket.socket], list[int]]


def misbehave(db: Path, stop: threading.Event, idle: int) -> Clients:
    """A flooder and a client that never reads (threads, not started yet), ``idle`` idle
    connections, and the flooder's byte count."""
    flooded, asked = [0], [0]
    threads = [threading.Thread(target=keep_sending, args=(db, FLOOD, stop, flooded), daemon=True),
               threading.Thread(target=keep_sending, args=(db, STATUS_UNREAD, stop, asked), daemon=True)]
    return threads, [connect(db) for _ in range(idle)], flooded
