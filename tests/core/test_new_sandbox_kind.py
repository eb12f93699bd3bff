"""Adding a sandbox kind is one module and one registration: a kind written here (outside the
package), with its own cleanup and its own differential-testing side, runs a suite's trial
end to end (``agentmeter run``), its side judges the trial's tool, and ``agentmeter doctor
--clean`` calls its cleanup. Nothing in the package names it.

The runner and doctor are processes of their own: the registration reaches them the way a
plugin's would, from a ``sitecustomize`` module on their PYTHONPATH (the second file)."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from agentmeter_tui.core.difftest.cases import CaseFile, load_cases, save_cases
from agentmeter_tui.core.sandboxes import SANDBOXES
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.suites.load import load_suite
from tests.conftest import ROOT, agentmeter

KIND = '''
"""A made-up sandbox kind "cell": each trial in a folder of its own under the kind's root,
marked with the runner that made it. Its differential sides run in that root too; its cleanup
removes the cells whose runner is gone."""
import os
import shutil
from pathlib import Path

from agentmeter_tui.core.difftest.executor import LocalExecutor
from agentmeter_tui.core.sandboxes.base import TrialSlot
from agentmeter_tui.core.sandboxes.hostcheck import HostCheck
from agentmeter_tui.core.sandboxes.local import LocalSandbox

RUNNER_FILE = "runner.pid"


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


class CellSandbox(LocalSandbox):
    name = "cell"
    differential_side = "cell_sandbox:CellSides"

    def _open(self, task, trial_id, token):
        session = super()._open(task, trial_id, token)
        (session.root / RUNNER_FILE).write_text(str(os.getpid()))
        session.slot = TrialSlot("cell", host="cell")
        return session

    @classmethod
    def clean_leftovers(cls, suite):
        if suite is None or suite.spec.sandbox.kind != cls.name:
            return []
        root = cls(suite, suite.spec.sandbox.model_dump(exclude={"kind"})).root
        gone = [cell for cell in root.iterdir()
                if (cell / RUNNER_FILE).is_file() and not _alive(int((cell / RUNNER_FILE).read_text()))]
        for cell in gone:
            shutil.rmtree(cell)
        return [HostCheck(f"clean cell {root.name}", True, f"{len(gone)} cell(s) of gone runners removed")]


class CellSides:
    """Both sides of a cell trial's differential test, in the kind's root; each one logged."""

    def __init__(self, root):
        self.root = root
        self.cache_key = f"cell:{root}"

    @classmethod
    async def for_session(cls, session):
        return cls(session.root.parent)

    def __call__(self, root, command):
        with open(self.root / "sides.log", "a") as log:
            log.write(root.name + "\\n")
        return LocalExecutor(self.root / "sides" / root.name, command)
'''

REGISTRATION = '''
from agentmeter_tui.core.sandboxes import SANDBOXES

SANDBOXES.register("cell", "cell_sandbox:CellSandbox")  # the one registration
'''

SUITE = '''
[suite]
id = "cell-suite"
trials = 1
concurrency = 1
tasks = ["file-sweeper"]

[[models]]
id = "builder"
provider = "scripted"

[[clis]]
adapter = "reference"

[providers.scripted]
kind = "scripted"

[sandbox]
kind = "cell"
root = "{root}"
'''


@pytest.fixture
def cell(tmp_path, monkeypatch):
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "cell_sandbox.py").write_text(textwrap.dedent(KIND))
    (plugin / "sitecustomize.py").write_text(textwrap.dedent(REGISTRATION))
    monkeypatch.syspath_prepend(str(plugin))
    exec(REGISTRATION, {})  # this process's registration, as the subprocesses' sitecustomize does
    yield plugin
    SANDBOXES._entries.pop("cell", None)
    SANDBOXES._loaded.pop("cell", None)
    sys.modules.pop("cell_sandbox", None)


def cell_suite(tmp_path: Path) -> Path:
    """The cli-tools suite's file-sweeper task, its first cases of each class only, in a cell."""
    suite = tmp_path / "suite"
    task = suite / "file-sweeper"
    shutil.copytree(ROOT / "suites" / "cli-tools" / "file-sweeper", task)
    cases = load_cases(task / "tests" / "cases.json")
    save_cases(CaseFile(**{**cases.model_dump(), "classes": [
        {**c.model_dump(), "cases": [case.model_dump() for case in c.cases[:3]]} for c in cases.classes]}),
        task / "tests" / "cases.json")
    (suite / "suite.toml").write_text(SUITE.format(root=tmp_path / "cells"))
    return suite


def test_a_new_kind_runs_a_trial_judges_it_with_its_side_and_cleans_up(cell, tmp_path):
    suite_path = cell_suite(tmp_path)
    assert load_suite(suite_path).spec.sandbox.kind == "cell"  # the loader knows the kind by its registration
    kind = SANDBOXES.get("cell")
    assert kind.differential_sides().__name__ == "CellSides" and not kind.harbor_contract
    env = {"PYTHONPATH": str(cell)}

    db = tmp_path / "a.db"
    result = agentmeter("run", str(suite_path), "--headless", "--db", str(db), env=env, timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    (trial,) = Store(db).trials("cell-suite")
    assert (trial["sandbox"], trial["host"]) == ("cell", "cell")
    assert trial["status"] == "passed" and trial["quality"] == 1.0, trial["verifier_output"]
    cells = tmp_path / "cells"
    assert len((cells / "sides.log").read_text().splitlines()) == 2  # the oracle's side and the candidate's
    assert not (cells / "sides").exists() or not any((cells / "sides").iterdir())  # both closed

    dead = cells / "t99-left"  # a cell whose runner is gone: above pid_max, no process has its pid
    dead.mkdir()
    (dead / "runner.pid").write_text(str(2 ** 22 + 7))
    live = cells / "t98-live"
    live.mkdir()
    (live / "runner.pid").write_text(str(os.getpid()))
    # No engine answers here, so the docker kind's cleanup touches no shared engine.
    result = agentmeter("doctor", str(suite_path), "--clean", "--only", "reference", "--db", str(db),
                        env={**env, "DOCKER_HOST": "unix:///nonexistent/docker.sock", "COLUMNS": "200"})
    out = " ".join(result.stdout.split())
    assert result.returncode == 0, out + result.stderr
    assert "clean cell cells │ ok │ 1 cell(s) of gone runners removed" in out
    assert not dead.exists() and live.exists()
