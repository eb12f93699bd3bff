"""The product as people who do not clone it get it: the wheel and the sdist built from this
checkout, the wheel installed into a fresh venv outside the checkout, and the commands a new user
types first, run from an empty folder (no checkout on the path, no `.clis/`, an empty home).

The trials are checked in the store the commands wrote, not in their output: a demo that
printed "finished" over an empty grid would pass a test that read only stdout.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.ui.tmux import TmuxSession

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, f"{argv} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(ROOT)], cwd=ROOT)
    return out


@pytest.fixture(scope="module")
def installed(dist, tmp_path_factory) -> Path:
    """A fresh venv with the wheel alone (and its dependencies), outside the checkout."""
    env_dir = tmp_path_factory.mktemp("venv") / "v"
    venv.create(env_dir, with_pip=True)
    (wheel,) = dist.glob("*.whl")
    _run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          str(wheel)], cwd=env_dir)
    return env_dir / "bin" / "agentmeter"


@pytest.fixture
def user(tmp_path) -> tuple[Path, dict[str, str]]:
    """An empty folder and a new user's environment: nothing of this checkout reachable."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", ""), "TERM": "xterm-256color",
           "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local" / "share"),
           "LANG": "C.UTF-8"}
    return work, env


def _trials(db: Path) -> list[tuple[str, str, str, str]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("select task_id, model, cli, status from trials order by id").fetchall()
    finally:
        conn.close()


def test_both_files_pass_twine_check_and_carry_suites_and_themes(dist):
    files = sorted(str(p) for p in dist.iterdir())
    _run([sys.executable, "-m", "twine", "check", "--strict", *files], cwd=dist)
    (wheel,) = dist.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for suite in ("demo", "smoke", "grid-dry-run", "cli-tools"):
        assert f"agentmeter_tui/_builtin/suites/{suite}/suite.toml" in names
    assert "agentmeter_tui/_builtin/themes/agentmeter-dark.toml" in names
    assert "agentmeter_tui/_builtin/themes/agentmeter-light.toml" in names
    assert not any(n.startswith(("suites/", "themes/", "tests/")) for n in names)
    (sdist,) = dist.glob("*.tar.gz")
    listing = subprocess.run(["tar", "tzf", str(sdist)], capture_output=True, text=True, check=True).stdout
    assert "/suites/demo/suite.toml" in listing and "/themes/agentmeter-dark.toml" in listing


def test_version_demo_and_smoke_from_an_empty_folder(installed, user):
    work, env = user
    version = _run([str(installed), "--version"], cwd=work, env=env).stdout.strip()
    from agentmeter_tui import __version__

    assert version == f"agentmeter-tui {__version__}"

    _run([str(installed), "demo", "--headless", "--db", "demo.db"], cwd=work, env=env)
    demo = _trials(work / "demo.db")
    # 5 scripted models x the reference agent (no CLI installed for this user) x 3 tasks x 2 trials
    assert len(demo) == 30 and {cli for _, _, cli, _ in demo} == {"reference"}
    assert {status for *_, status in demo} <= {"passed", "failed", "killed", "errored"}
    assert any(status == "passed" for *_, status in demo)

    _run([str(installed), "run", "smoke", "--headless", "--db", "smoke.db"], cwd=work, env=env)
    smoke = _trials(work / "smoke.db")
    # 2 models x the reference agent x 2 tasks x 2 trials; the solver passes, the fumbler fails
    assert len(smoke) == 8
    assert {(model, status) for _, model, _, status in smoke} == {("solver", "passed"), ("fumbler", "failed")}

    copied = work / "my-suite"
    _run([str(installed), "suite", "copy", "demo", str(copied)], cwd=work, env=env)
    assert (copied / "suite.toml").is_file() and (copied / "scenarios").is_dir()
    report = _run([str(installed), "report", "--db", "smoke.db"], cwd=work, env=env).stdout
    assert f"agentmeter-tui {__version__}" in report
    assert not list(work.glob("**/.clis")), "nothing may be written beside the user's files"


def test_the_demo_from_the_wheel_opens_the_tui(installed, user):
    work, env = user
    tui = TmuxSession([str(installed), "demo", "--db", "tui.db"], env=env, cwd=work, size=(160, 48))
    try:
        tui.wait_for("Demo: 5 scripted models")
        screen = tui.wait_for("finished")  # the run bar, once the grid is done
        assert "reference" in screen
        tui.keys("q")
    finally:
        tui.close()
    assert len(_trials(work / "tui.db")) == 30
