"""``agentmeter run --headless`` follows the runner over its socket. A connection that ends
before the runner says the run is over is not the run's end: while the runner still answers,
the follower connects again and prints each trial once; when the runner is gone without
finishing, it says so with its log's last lines (CI once saw only "lost the connection to the
runner" and exit 1, with nothing to tell why)."""

from __future__ import annotations

import socket
import threading

import pytest

from agentmeter_tui.commands.headless import follow_headless
from agentmeter_tui.core.paths import runner_log_path
from agentmeter_tui.core.run.control import ControlError, encode, socket_path


def meter(trial_id: int, status: str = "passed") -> dict:
    return {"id": trial_id, "task": "t", "model": "m", "cli": "c", "trial": trial_id, "status": status,
            "tokens": {"output": 10}, "cost_usd": 0.001}


def snapshot(*done: dict) -> dict:
    return {"ok": True, "type": "snapshot", "progress": {"done": len(done), "total": 2, "running": 2 - len(done)},
            "done": list(done)}


class FakeRunner:
    """A socket that plays one script per connection: the lines it sends, then it closes."""

    def __init__(self, db, scripts: list[list[dict]]):
        path = socket_path(db)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(4)
        self.scripts = scripts
        self.thread = threading.Thread(target=self._serve)
        self.thread.start()

    def _serve(self) -> None:
        for script in self.scripts:
            conn, _ = self.server.accept()
            with conn:
                conn.recv(4096)  # the subscribe request
                for message in script:
                    conn.sendall(encode(message))
        self.server.close()  # the runner is gone: nothing listens any more
        self.path.unlink()

    def join(self) -> None:
        """Wait for the scripts; those no follower came for are played to a throwaway client
        (a follower that gave up too early must fail the test, not hang it)."""
        while self.thread.is_alive():
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                try:
                    client.connect(str(self.path))
                    client.sendall(b"\n")
                    while client.recv(4096):
                        pass
                except OSError:
                    pass
            self.thread.join(0.05)


def followed(db, scripts: list[list[dict]], capsys) -> tuple[int, str]:
    """``run --headless``'s follower against a runner playing ``scripts``: its exit code and output."""
    runner = FakeRunner(db, scripts)
    try:
        code = follow_headless(db)
    finally:
        runner.join()
    return code, capsys.readouterr().out


def test_a_dropped_connection_under_a_live_runner_is_followed_again(tmp_path, capsys):
    db = tmp_path / "a.db"
    code, out = followed(db, [
        [snapshot(meter(1))],  # dropped before the run is over
        [snapshot(meter(1)), {"type": "tick", "finished": [meter(2)], "progress": {"done": 2, "total": 2}},
         {"type": "finished", "status": "finished", "progress": {"done": 2, "total": 2}}],
    ], capsys)
    assert code == 0, out
    assert out.count("#1 ") == 1 and out.count("#2 ") == 1, out
    assert "2/2 done" in out


def test_a_runner_gone_without_finishing_is_named_with_its_log(tmp_path, capsys):
    db = tmp_path / "a.db"
    runner_log_path(db).write_text("run 1: 2 trial(s) to go\nTraceback (most recent call last):\nRuntimeError: boom\n")
    code, out = followed(db, [[snapshot(meter(1))]], capsys)
    assert code == 1
    assert out.count("#1 ") == 1
    assert "ended without finishing the run" in out and str(runner_log_path(db)) in out
    assert "RuntimeError: boom" in out


def test_a_runner_gone_before_its_first_snapshot_is_named_with_its_log(tmp_path):
    """Connected, then dropped before any snapshot, and nothing listens any more: the runner
    ended without finishing (its log says why), not 'no runner is listening'."""
    db = tmp_path / "a.db"
    runner = FakeRunner(db, [[]])
    try:
        with pytest.raises(ControlError, match="ended without finishing the run") as info:
            follow_headless(db)
    finally:
        runner.join()
    assert str(runner_log_path(db)) in str(info.value)


def test_a_follower_that_came_during_the_preparation_prints_its_steps_from_the_start(tmp_path, capsys):
    """The runner answers before it prepares (image builds take minutes), and a loaded machine
    can start following after the first steps went by: the snapshot carries them."""
    from types import SimpleNamespace

    from agentmeter_tui.core.run.feed import Feed

    runner = SimpleNamespace(scheduler=None, run_id=None, suite=SimpleNamespace(id="s"), db=tmp_path / "a.db",
                             started=0.0, early={}, caps=SimpleNamespace(status=lambda: []), subscribers={})
    feed = Feed(runner)  # type: ignore[arg-type]
    steps = ["task images on local: 1/2", "building the image of task a: Step 1/2 : FROM scratch",
             "building the image of task a: Step 2/2 : COPY x /x"]
    for text in steps:
        feed.prepare(text)
    told = feed.snapshot()
    assert told["prepared"] == steps and told["progress"]["preparing"] == steps[-1]

    db = tmp_path / "a.db"
    end = {"type": "finished", "status": "finished", "progress": {"done": 0, "total": 0}}
    code, out = followed(db, [[{"ok": True, **told}, {"type": "preparing", "text": steps[-1]},
                               {"type": "preparing", "text": "task images on local: 2/2"}, end]], capsys)
    assert code == 0, out
    printed = [line.split("preparing: ", 1)[1] for line in out.splitlines() if "preparing: " in line]
    assert printed == [*steps, "task images on local: 2/2"]  # each once, in order


def test_a_run_that_ended_before_the_follower_came_still_prints_its_table(tmp_path, capsys):
    """The runner finished between `run` finding it and following it (CI: the raised runner of a
    capped run ended first): the follower says so and prints the run's table, from the store."""
    from tests.conftest import agentmeter
    from tests.core.sandbox_support import SMOKE, suite_copy, unique_id

    db = tmp_path / "done.db"
    suite_id = unique_id("ended-first")
    suite = suite_copy(SMOKE, tmp_path / "suite", 'kind = "local"', suite_id=suite_id)
    ran = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    capsys.readouterr()
    assert follow_headless(db) == 0  # nothing listens: the store says the run is over
    out = capsys.readouterr().out
    assert "the run has finished; nothing left to follow" in out, out
    assert f"results of suite {suite_id}, per configuration" in out and "agentmeter report --db" in out, out
