"""Whether a runner runs for a store, as `attach` and `doctor` ask it: a runner that took the
connection but is too busy to answer within the probe's timeout is running (a loaded machine
made `attach` say "no runner is running" of a run that was going on); a socket nobody listens
on, or a runner that hangs up without a word, is not."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from agentmeter_tui.core.paths import socket_path
from agentmeter_tui.core.run import control
from agentmeter_tui.core.run.control import runner_alive


class Listener:
    """A stand-in runner on the store's socket that answers each connection with ``answer``
    (bytes, or None to hang up at once), or never answers until the test ends."""

    def __init__(self, db: Path, answer: bytes | None | str = "never"):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(socket_path(db)))
        self.sock.listen()
        self.answer, self.done = answer, threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        conn.recv(4096)
        if self.answer == "never":
            self.done.wait()
        elif self.answer is not None:
            conn.sendall(self.answer)
        conn.close()

    def close(self) -> None:
        self.done.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def short_probe(monkeypatch):
    """The probe's 2 s timeout, shortened: the busy runner's silence is what is tested, not its length."""
    client = control.ControlClient
    monkeypatch.setattr(control, "ControlClient", lambda db, timeout=None: client(db, timeout=0.2))


def test_no_socket_is_no_runner(tmp_path):
    assert not runner_alive(tmp_path / "run.db")


def test_a_socket_nobody_listens_on_is_no_runner(tmp_path):
    db = tmp_path / "run.db"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(socket_path(db)))  # the file stays; nothing listens (a runner killed with -9)
    stale.close()
    assert socket_path(db).exists() and not runner_alive(db)


@pytest.mark.parametrize("answer, alive", [
    ("never", True),  # busy past the probe's timeout: it runs
    (b'{"ok": false, "error": "too many clients"}\n', True),  # refuses in its own words: it runs
    (b'{"ok": true, "op": "hello"}\n', True),
    (None, False),  # hangs up without a word: going down
], ids=["busy", "refusing", "answering", "hanging-up"])
def test_a_listening_runner(tmp_path, short_probe, answer, alive):
    listener = Listener(tmp_path / "run.db", answer)
    try:
        assert runner_alive(tmp_path / "run.db") is alive
    finally:
        listener.close()
