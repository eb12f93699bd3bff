"""Issue 37's uid wall when bwrap itself becomes the trial's uid (sandboxes/userns.py), a root
runner's default: the agent is its pool uid on the host, holds no capability, no supplementary
group (not even one the runner had: root's group 0 would open every 0640 root:root file to
it), cannot regain a privilege, and cannot write its view's empty root, which bwrap made as
that uid. A trial whose view names a file its uid cannot reach on the host (under a 0700
folder) still runs, with the exec drop. Each case runs in a fresh runner process (the user
namespace and the runner's groups are set up once per runner), as a suite's trials are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from agentmeter_tui.core.sandboxes import isolation
from tests.conftest import ROOT, need

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the uid wall needs a root runner")

RUN = r"""
import asyncio, json, os, sys
from types import SimpleNamespace
from agentmeter_tui.core.sandboxes import isolation
from agentmeter_tui.core.sandboxes.base import LaunchSpec
from agentmeter_tui.core.sandboxes.local import LocalSandbox

os.setgroups([0])  # a runner started from a login shell: root's own group
used = []
argv_for = isolation.argv_for
isolation.argv_for = lambda *a, **k: used.append(argv_for(*a, **k)) or used[-1]

async def main(root, commands):
    sandbox = LocalSandbox(None, {"root": root})
    await sandbox.preflight()
    session = await sandbox.open(SimpleNamespace(workspace_seed=None), 0, "userns0")
    found = []
    for command in commands:
        lines = []
        agent = await session.start(LaunchSpec(command, {}), lambda stream, got: lines.extend(got))
        code = await agent.wait()
        found.append({"code": code, "out": [line.decode(errors="replace") for line in lines],
                      "userns": "--userns" in used[-1], "drop": any("--setuid" in arg for arg in used[-1])})
    done = await session.exec(["/usr/bin/id", "-u"])  # a verifier's way in: the same walls
    found.append({"code": done.exit_code, "out": done.stdout.decode().split(), "userns": "--userns" in used[-1],
                  "drop": any("--setuid" in arg for arg in used[-1])})
    await session.cleanup()
    print(json.dumps(found))

asyncio.run(main(sys.argv[1], json.loads(sys.argv[2])))
"""


@pytest.fixture
def place() -> Path:
    """A folder trials' uids may pass (pytest's own are 0700), in the tests' sandbox folder."""
    folder = Path(tempfile.mkdtemp(dir=os.environ["AGENTMETER_SANDBOX_ROOT"]))
    folder.chmod(0o711)
    return folder


def _run(place: Path, commands: list[list[str]]) -> list[dict]:
    need(isolation.bwrap() is not None, "bwrap is not on PATH")
    root = place / "roots"
    root.mkdir(mode=0o711)
    done = subprocess.run([sys.executable, "-c", RUN, str(root), json.dumps(commands)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _secret(folder: Path, mode: int) -> Path:
    folder.mkdir(exist_ok=True)
    folder.chmod(0o755)
    secret = folder / "secret.txt"
    secret.write_text("the runner's\n")
    os.chown(secret, 0, 0)
    secret.chmod(mode)
    return secret


def test_bwrap_becomes_the_uid_and_the_agent_holds_nothing(place):
    group_secret = _secret(place / "open", 0o640)
    status, cat, touch, verifier = _run(place, [["/usr/bin/cat", "/proc/thread-self/status"],
                                                   ["/usr/bin/cat", str(group_secret)], ["/usr/bin/touch", "/planted"]])
    cases = (status, cat, touch, verifier)
    assert all(case["userns"] and not case["drop"] for case in cases), cases
    fields = dict(line.split(":", 1) for line in status["out"] if ":" in line)
    uids = fields["Uid"].split()
    assert len(set(uids)) == 1 and int(uids[0]) >= 1_900_000_000, fields["Uid"]
    assert fields["Gid"].split() == uids, fields["Gid"]
    assert fields["Groups"].split() == [], fields["Groups"]  # not the runner's group 0
    for name in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(fields[name], 16) == 0, (name, fields[name])
    assert fields["NoNewPrivs"].strip() == "1"
    assert cat["code"] != 0 and "Permission denied" in " ".join(cat["out"]), cat
    assert touch["code"] != 0 and "Read-only file system" in " ".join(touch["out"]), touch
    assert verifier["code"] == 0 and verifier["out"] == [uids[0]], verifier


def test_a_source_its_uid_cannot_reach_gets_the_exec_drop(place):
    private = place / "private"
    readable = _secret(private, 0o644)
    private.chmod(0o700)  # the agent's uid cannot pass it on the host: bwrap, as that uid, could not bind it
    cat, _verifier = _run(place, [["/usr/bin/cat", str(readable)]])
    assert cat["drop"] and not cat["userns"], cat
    assert cat["code"] == 0 and cat["out"] == ["the runner's"], cat
