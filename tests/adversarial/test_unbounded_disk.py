"""An agent writes past the size limit of a writable place the kernel does not bound (issue 37,
item 11): docker's bind mode (the workspace is a folder of this machine) and a Harbor task's
writable root filesystem (overlay2 on ext4 takes no ``--storage-opt size``). Today both take
whatever is written; now the trial is killed with reason ``limit:disk`` soon after it crosses
the limit, and what it left on the disk is the limit plus about a second of writing."""

from __future__ import annotations

import shutil

import pytest

from agentmeter_tui.core.store import Store
from tests.adversarial.support import command_suite
from tests.conftest import FIXTURES, agentmeter
from tests.core.sandbox_support import docker_client, unique_id

pytestmark = pytest.mark.docker

LIMIT_MB = 32
# Writes 1 MiB at a time (flushed to the file system) up to 2 GiB, far past the limit.
WRITER = r"""
import os, sys
with open(sys.argv[1], "wb") as out:
    for n in range(2048):
        out.write(os.urandom(1 << 20))
        out.flush()
        os.fsync(out.fileno())
print("WROTE ALL", flush=True)
"""


def _killed(db, suite_id: str) -> dict:
    store = Store(db)
    [trial] = store.trials(suite_id)
    trial["said"] = "\n".join(row[4] or "" for row in store.events(trial["id"]))[-3000:]
    return trial


def test_bind_mode_workspace_past_its_size_is_killed(tmp_path, db):
    docker_client().close()
    suite_id = unique_id("disk-bind")
    sandbox = f'\n[sandbox]\nkind = "docker"\nwarm = 0\nworkspace = "bind"\nworkspace_size = "{LIMIT_MB}m"\n'
    folder = command_suite(tmp_path / "suite", ["python3", "-c", WRITER, "big.bin"], suite_id=suite_id, rest=sandbox)
    result = agentmeter("run", str(folder), "--headless", "--db", str(db), timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    trial = _killed(db, suite_id)
    assert (trial["status"], trial["reason"]) == ("killed", "limit:disk"), trial["said"]
    assert "WROTE ALL" not in trial["said"] and "MB written, the limit is 32 MB" in trial["said"], trial["said"]


def test_harbor_root_filesystem_past_storage_mb_is_killed(tmp_path, db):
    docker_client().close()
    suite_id = unique_id("disk-root")
    sandbox = '\n[sandbox]\nkind = "docker"\nwarm = 0\n'
    folder = command_suite(tmp_path / "suite", ["python3", "-c", WRITER, "/app/big.bin"], suite_id=suite_id,
                           rest=sandbox)
    shutil.rmtree(folder / "task")
    shutil.copytree(FIXTURES / "harbor" / "tasks" / "greet", folder / "task")
    toml = folder / "task" / "task.toml"
    toml.write_text(toml.read_text().replace("storage_mb = 1024", f"storage_mb = {LIMIT_MB}"))
    result = agentmeter("run", str(folder), "--headless", "--db", str(db), timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    trial = _killed(db, suite_id)
    assert (trial["status"], trial["reason"]) == ("killed", "limit:disk"), trial["said"]
    assert "WROTE ALL" not in trial["said"] and "MB written, the limit is 32 MB" in trial["said"], trial["said"]
