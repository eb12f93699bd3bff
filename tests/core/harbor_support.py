"""Helpers of the Harbor task tests (docker, remote docker, swarm): the fixture tree copied
with a fresh suite id, a headless run, and a trial's transcript."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import orjson

from agentmeter_tui.core.interop.atif import parse_trajectory
from agentmeter_tui.core.store import Store
from tests.conftest import FIXTURES, agentmeter
from tests.core.sandbox_support import unique_id
from tests.interop.support import harbor_validate

HARBOR = FIXTURES / "harbor"


def harbor_suite(tmp_path: Path, name: str) -> tuple[Path, str]:
    """The fixture tree copied (tasks stay outside the suite folder) with a fresh suite id."""
    shutil.copytree(HARBOR, tmp_path / "harbor")
    suite = tmp_path / "harbor" / name
    suite_id = unique_id(f"harbor-{name}")
    text = (suite / "suite.toml").read_text()
    (suite / "suite.toml").write_text(re.sub(r'(?m)^id = "[^"]*"', f'id = "{suite_id}"', text, count=1))
    return suite, suite_id


def run(suite: Path, db: Path) -> dict[tuple[str, str], dict]:
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    store = Store(db)
    try:
        return {(t["task_id"], t["model"] if t["cli"] != "oracle" else "oracle"): t for t in store.trials()}
    finally:
        store.close()


def events_text(db: Path, trial_id: int) -> str:
    store = Store(db)
    try:
        return "\n".join(row[4] or "" for row in store.events(trial_id))
    finally:
        store.close()


def assert_agent_verdicts(trials: dict[tuple[str, str], dict], db: Path, tmp_path: Path, sandbox: str) -> None:
    """The verdicts of the fixture's ``agents`` suite (the reference agent, the solver and the
    wrong model on the three Harbor tasks), whichever container sandbox ran it."""
    assert len(trials) == 6 and all(t["sandbox"] == sandbox and t["workspace"] == "/app" for t in trials.values())

    # A right answer passes with quality 1 (reward.txt says 1).
    greet = trials[("greet", "solver")]
    assert (greet["status"], greet["quality"], greet["passed"]) == ("passed", 1.0, 1), greet
    assert "greeting is right" in greet["verifier_output"]
    # A wrong one fails although test.sh exits 0: Terminal-Bench 2's scripts always do.
    wrong = trials[("greet", "wrong")]
    assert (wrong["status"], wrong["quality"], wrong["verifier_exit"]) == ("failed", 0.0, 0), wrong
    assert "goodbye" in wrong["verifier_output"] and "reward 0" in wrong["reason"]

    # reward.json with several named rewards: all kept; "reward" 0.5 is the quality, under the threshold.
    count = trials[("count", "wrong")]
    assert (count["status"], count["quality"]) == ("failed", 0.5), count
    verifier = orjson.loads(count["extra"])["verifier"]
    assert verifier["rewards"] == {"reward": 0.5, "exact": 0.0, "format": 1.0}
    assert verifier["reward_file"] == "reward.json"
    assert trials[("count", "solver")]["status"] == "passed"

    # The agent starts in the image's WORKDIR, as root, sees the image's ENV and HOME, writes /app
    # and the root filesystem, and /tests does not exist while it runs (what it printed, from the
    # transcript); the tests then read its /app/probe.txt: the verifier ran in its container.
    probe = trials[("probe", "solver")]
    assert probe["status"] == "passed", probe
    seen = events_text(db, probe["id"])
    for line in ("pwd=/app", "uid=0", "mark=from-the-image", "home=/root", "tests=absent", "rootfs=writable"):
        assert line in seen, seen
    # Before the tests ran, the transcript was at /logs/agent/trajectory.json as ATIF (test.sh printed it).
    printed = probe["verifier_output"].split("--- trajectory ---\n", 1)[1].split("--- end ---", 1)[0]
    trajectory = parse_trajectory(orjson.loads(printed))
    assert trajectory.schema_version.startswith("ATIF-v") and trajectory.agent.name == "reference"
    assert any("pwd=/app" in str(r.content) for s in trajectory.steps if s.observation
               for r in s.observation.results)
    (tmp_path / "trajectory.json").write_text(printed)
    assert harbor_validate([tmp_path / "trajectory.json"]) == {str(tmp_path / "trajectory.json"): None}
    # A reward file (and a test.sh) the agent planted are emptied away before the real tests run.
    planted = trials[("probe", "wrong")]
    assert "planted" in events_text(db, planted["id"])
    assert planted["status"] == "failed" and planted["quality"] == 0.0, planted
    assert "wrote no /logs/verifier/reward.txt" in planted["reason"]
