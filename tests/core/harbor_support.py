"""Helpers of the Harbor task tests (docker, remote docker, swarm): the fixture tree copied
with a fresh suite id, a headless run, and a trial's transcript."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from agentmeter_tui.core.store import Store
from tests.conftest import FIXTURES, agentmeter
from tests.core.sandbox_support import unique_id

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
