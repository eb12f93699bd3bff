"""Shared fixtures: paths, a CLI runner, and the CI rule that integration tests never skip."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def need(condition: bool, reason: str) -> None:
    """Skip when a prerequisite is missing, except in CI, where it must be there."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


def agentmeter(*args: str, cwd: Path | None = None, timeout: float = 120, env: dict | None = None,
               check: bool = False) -> subprocess.CompletedProcess:
    """Run the real ``agentmeter`` command line in a subprocess. ``timeout`` is a fail-safe
    against a hang, never a speed limit: it is at least 15 minutes, whatever the caller says,
    so a loaded machine slows a test down instead of failing it."""
    result = subprocess.run([sys.executable, "-m", "agentmeter_tui", *args], cwd=cwd, capture_output=True,
                            text=True, timeout=max(timeout, 900), env={**os.environ, **(env or {})})
    if check and result.returncode != 0:
        raise AssertionError(f"agentmeter {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
    return result


def unwalled(suite: Path) -> Path:
    """``suite`` (a folder with no ``[sandbox]`` table) run locally without the walls. For tests
    whose agents wait on a file the test makes outside the trial (a gate in ``tmp_path``): the
    walled sandbox rightly hides it, and they test pausing, stopping or output, not the walls."""
    toml = suite / "suite.toml"
    toml.write_text(toml.read_text() + '\n[sandbox]\nkind = "local"\nisolation = "none"\n')
    return suite


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "agentmeter.db"


@pytest.fixture(scope="session")
def _sandboxes() -> Iterator[Path]:
    """Trials' workspaces, not in the shared system temp folder, and not under pytest's own
    (0700 above the test's folders): a folder trials' uids may pass, as the default one is,
    so that a root runner's bwrap becomes each trial's uid itself (sandboxes/userns.py)."""
    folder = Path(tempfile.mkdtemp(prefix="agentmeter-test-sandboxes-"))
    folder.chmod(0o711)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def _sandbox_root(_sandboxes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTMETER_SANDBOX_ROOT", str(_sandboxes))


# Real CLIs, Docker and ssh each take seconds a test: whatever is marked with one of them is
# slow too, so `-m "not slow"` is the quick loop without anyone remembering a second marker.
SLOW_BY_NATURE = ("clis", "docker", "ssh")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(name) for name in SLOW_BY_NATURE) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
