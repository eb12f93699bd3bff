"""``agentmeter install-clis`` with stand-in ``npm`` and ``python`` programs that record how they
were called and lay out what the real ones would: one npm install for every npm CLI, a venv
per PyPI CLI, nothing at all when everything is in place, clear errors otherwise."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from agentmeter_tui.core.install import installer
from agentmeter_tui.core.harnesses import ADAPTERS
from tests.conftest import agentmeter

TARGETS, _ = installer.targets()
NPM = [t for t in TARGETS if t.spec.registry == "npm"]
PYPI = [t for t in TARGETS if t.spec.registry == "pypi"]

FAKE_NPM = """\
import json, sys
from pathlib import Path
args = sys.argv[1:]
with open(LOG, "a") as log:
    log.write(json.dumps(["npm", *args]) + "\\n")
root = Path(args[args.index("--prefix") + 1])
for spec in [a for a in args[1:] if not a.startswith("--") and a != str(root)]:
    name, _, version = spec.rpartition("@")
    package = root / "node_modules" / name
    package.mkdir(parents=True, exist_ok=True)
    (package / "package.json").write_text(json.dumps({"name": name, "version": version}))
    bins = root / "node_modules" / ".bin"
    bins.mkdir(parents=True, exist_ok=True)
    (bins / BINS[name]).write_text("")
"""

# Answers the version probe, makes a "venv" whose python is this same script, and "installs"
# a package into it by writing its entry point and dist-info.
FAKE_PYTHON = """\
import json, sys
from pathlib import Path
args = sys.argv[1:]
with open(LOG, "a") as log:
    log.write(json.dumps([sys.argv[0], *args]) + "\\n")
if args[0] == "-c":
    print(VERSION)
elif args[:2] == ["-m", "venv"]:
    bin_dir = Path(args[2]) / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(Path(__file__).read_text())
    (bin_dir / "python").chmod(0o755)
elif args[:3] == ["-m", "pip", "install"]:
    name, _, version = args[-1].partition("==")
    venv = Path(sys.argv[0]).parent.parent
    (venv / "bin" / BINS[name]).write_text("")
    (venv / "lib" / "python3.13" / "site-packages" / f"{name.replace('-', '_')}-{version}.dist-info").mkdir(parents=True)
"""


def fake_program(path: Path, body: str, log: Path, **constants) -> Path:
    bins = {t.spec.package: t.spec.bin for t in TARGETS}
    header = f"#!{sys.executable}\nLOG = {str(log)!r}\nBINS = {bins!r}\n" + "".join(
        f"{k} = {v!r}\n" for k, v in constants.items())
    path.write_text(header + textwrap.dedent(body))
    path.chmod(0o755)
    return path


@pytest.fixture
def tools(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.jsonl"
    fake_program(bin_dir / "npm", FAKE_NPM, log)
    python = fake_program(tmp_path / "python3.13", FAKE_PYTHON, log, VERSION="3.13")
    env = {"PATH": str(bin_dir), "PYENV_ROOT": str(tmp_path / "no-pyenv")}
    return env, log, python


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_installs_everything_then_does_nothing(tools, tmp_path):
    env, log, python = tools
    root = tmp_path / "clis"
    result = agentmeter("install-clis", "--dir", str(root), "--python", str(python), env=env)
    assert result.returncode == 0, result.stderr
    npm_calls = [c for c in calls(log) if c[0] == "npm"]
    assert len(npm_calls) == 1  # one npm install for all of them
    assert npm_calls[0][:6] == ["npm", "install", "--prefix", str(root), "--no-audit", "--no-fund"]
    assert {f"{t.spec.package}@{t.spec.version}" for t in NPM} <= set(npm_calls[0])
    pips = [c for c in calls(log) if c[1:4] == ["-m", "pip", "install"]]
    assert [c[-1] for c in pips] == [f"{t.spec.package}=={t.spec.version}" for t in PYPI]
    for target in PYPI:
        assert (root / target.adapter / "bin" / target.spec.bin).exists()
    for target in TARGETS:
        assert installer.installed_version(root, target) == target.spec.version
        assert ADAPTERS.get(target.adapter)().is_installed(root)

    log.unlink()
    again = agentmeter("install-clis", "--dir", str(root), env={"PATH": "/nonexistent"})  # not even npm needed
    assert again.returncode == 0 and f"all {len(TARGETS)} CLI(s) in place" in again.stdout
    assert calls(log) == []  # nothing ran: no npm, no pip


def test_only_one_package_at_a_version(tools, tmp_path):
    env, log, _ = tools
    root = tmp_path / "clis"
    target = NPM[0]
    result = agentmeter("install-clis", "--dir", str(root), "--only", f"{target.spec.package}@9.9.9", env=env)
    assert result.returncode == 0, result.stderr
    (call,) = calls(log)
    assert call[-1] == f"{target.spec.package}@9.9.9" and len([a for a in call if "@" in a]) == 1


def test_check_reports_without_installing(tools, tmp_path):
    env, log, _ = tools
    result = agentmeter("install-clis", "--dir", str(tmp_path / "clis"), "--check", env=env)
    assert result.returncode == 1 and "missing" in result.stdout and calls(log) == []


def test_bad_input(tools, tmp_path):
    env, log, _ = tools
    unknown = agentmeter("install-clis", "--dir", str(tmp_path), "--only", "left-pad@1.0.0", env=env)
    assert unknown.returncode == 2 and "no registered CLI has that package" in unknown.stderr
    stub = agentmeter("install-clis", "--dir", str(tmp_path), "--only", "kimi-cli@1.52.0", env=env)
    assert stub.returncode == 2 and "refusing kimi-cli==1.52.0" in stub.stderr
    assert calls(log) == []


def test_missing_npm_and_old_python_are_clear_errors(tmp_path):
    log = tmp_path / "calls.jsonl"
    old = fake_program(tmp_path / "python3.11", FAKE_PYTHON, log, VERSION="3.11")
    no_npm = agentmeter("install-clis", "--dir", str(tmp_path / "clis"), "--only", NPM[0].spec.package,
                        env={"PATH": str(tmp_path / "empty")})
    assert no_npm.returncode == 1 and "npm is not on PATH" in no_npm.stderr
    if PYPI:
        too_old = agentmeter("install-clis", "--dir", str(tmp_path / "clis"), "--only", PYPI[0].adapter,
                             "--python", str(old), env={"PATH": str(tmp_path / "empty")})
        assert too_old.returncode == 1 and "needs Python >=" in too_old.stderr


def test_find_python_skips_interpreters_too_old_or_broken(tmp_path, monkeypatch):
    log = tmp_path / "calls.jsonl"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_program(bin_dir / "python3.12", FAKE_PYTHON, log, VERSION="3.11")  # a shim that lies about its name
    fake_program(bin_dir / "python3.13", FAKE_PYTHON, log, VERSION="3.13")
    (bin_dir / "python3.14").write_text("#!/bin/sh\nexit 127\n")  # a pyenv shim for an inactive version
    (bin_dir / "python3.14").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    path, version = installer.find_python("3.12")
    assert (Path(path).name, version) == ("python3.13", "3.13")
    with pytest.raises(installer.InstallError, match="no Python >= 3.15"):
        installer.find_python("3.15")
