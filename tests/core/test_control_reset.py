"""A runner that goes down while a client waits for its reply resets the connection (its
socket closed with the request unread): the client says the runner closed the connection, as
for a clean close, instead of raising ConnectionResetError into a command or a test's teardown
(seen in CI: ``stop`` sent to a runner that was ending on its own)."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmeter_tui.core.run.control import ControlClient, ControlError, socket_path


@contextlib.contextmanager
def resetting_runner(db: Path) -> Iterator[None]:
    """A control socket for ``db`` that takes one connection and resets it once the request
    has arrived (closed with SO_LINGER 0 and the request unread), as a runner going down does."""
    path = socket_path(db)
    path.parent.mkdir(parents=True, exist_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def reset_after_the_request() -> None:
        conn, _ = server.accept()
        conn.recv(1)  # the request has arrived; the rest of it stays unread
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()

    door = threading.Thread(target=reset_after_the_request)
    door.start()
    try:
        yield
    finally:
        door.join()
        server.close()


def test_a_reset_reads_as_the_runner_closing_the_connection(tmp_path):
    db = tmp_path / "a.db"
    with resetting_runner(db), ControlClient(db) as client, \
            pytest.raises(ControlError, match="closed the connection"):
        client.request("stop", reason="x" * 4096)


def test_a_reset_ends_a_subscription_like_a_close(tmp_path):
    """``agentmeter run --headless`` on a run over at once: the runner ended with the subscribe
    request unread and the follower printed ``ConnectionResetError`` and exited 1 (CI)."""
    db = tmp_path / "a.db"
    with resetting_runner(db), ControlClient(db) as client:
        assert list(client.subscribe(events=False)) == []
