"""The differential verifier runs the agent's tool on each case and compares the case's work
folder before and after it (side effects), then removes the folder. A tool that nests 1,200
folders in it made both recurse once per level: RecursionError out of the snapshot (and out of
``shutil.rmtree``, which ``ignore_errors`` does not hold), so the verifier raised instead of
judging, and a trial that cannot be judged is not counted: a failing agent could erase its own
failure."""

from __future__ import annotations

import hashlib
import os
import socket
import threading

from agentmeter_tui.core.difftest.batchrun import snapshot
from agentmeter_tui.core.sandboxes.hostfs import remove_tree
from tests.adversarial.walls_support import nest
from tests.core.test_difftest_eval import by_id, candidate, judge

NEST = "\nimport os as _os\n_here = _os.getcwd()\nfor _ in range(1200):\n    _os.mkdir('d')\n    _os.chdir('d')\n_os.chdir(_here)\n"


async def test_a_tool_that_nests_a_thousand_folders_fails_its_side_effects_not_the_verifier(tmp_path):
    report = await judge(candidate(tmp_path, extra=NEST))
    cases = by_id(report)
    assert report.built
    for verdict in cases.values():  # every case made the tree: none has the oracle's side effects
        created = [path for path in verdict.candidate.side_effects.created if path.startswith("d")]
        assert len(created) == 1200, verdict.case_id
        assert not verdict.side_effects, verdict.case_id
    assert report.scores["side_effects"] == 0.0


async def test_a_tool_folder_nested_a_thousand_deep_is_judged_as_any_other(tmp_path):
    """The agent's tool folder itself nested 1,200 deep (the oracle's code beside it): copying it
    for the build recursed once per level, RecursionError out of the verifier. It is copied,
    built and judged like the oracle: 1."""
    folder = candidate(tmp_path)
    deep = nest(folder / "cache", 1200)
    try:
        report = await judge(folder)
    finally:  # pytest's own removal of old temporary folders recurses, and would fail on it
        remove_tree(deep)
    assert report.built and report.score == 1.0, report.as_dict()


def test_a_snapshot_names_every_level_of_a_deep_tree(tmp_path):
    """1,500 levels and a file at the bottom: every folder and the file are in the snapshot, as
    ``find`` lists them (counted here from the tree the test made, by descriptor)."""
    deep = nest(tmp_path, 1500, {"bottom.txt": b"found\n"})
    try:
        entries = snapshot(tmp_path)
    finally:  # pytest's own removal of old temporary folders recurses, and would fail on it
        remove_tree(deep)
    assert len(entries) == 1501
    assert "/".join(["d"] * 1500 + ["bottom.txt"]) in entries


def test_a_fifo_the_tool_leaves_is_named_in_the_snapshot_not_opened(tmp_path):
    """A tool that leaves a named pipe in its work folder: the snapshot opened it to hash it and
    waited for a writer that never came, and the verifier with it, until its timeout made the
    trial infra-invalid. Now it is named by kind (a socket too), and a regular file beside it
    still hashed. The thread's bound only turns the old hang into a failure."""
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "plain.txt").write_bytes(b"plain\n")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "sock"))
        result: dict = {}
        worker = threading.Thread(target=lambda: result.update(snapshot(tmp_path)), daemon=True)
        worker.start()
        worker.join(120)
    assert not worker.is_alive(), "the snapshot is blocked on the FIFO"
    assert result == {"pipe": "<fifo>", "sock": "<socket>", "plain.txt": hashlib.sha256(b"plain\n").hexdigest()}
