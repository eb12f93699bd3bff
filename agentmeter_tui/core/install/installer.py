"""Installing the agent CLIs at their pinned versions into a project-local folder.

The specs come from the registered adapters' ``install`` attributes, so a new adapter module
is covered without touching this file. npm packages go into ``ROOT/node_modules`` with one
``npm install --prefix ROOT``; each PyPI package gets its own venv ``ROOT/<adapter name>/``
made with a Python new enough for it (found on PATH or under pyenv). What is already there at
the pinned version is left alone, so a second run only reads a few small files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from ..harnesses import ADAPTERS, InstallSpec

class InstallError(RuntimeError):
    """Something the user must fix (a bad ``--only``, no npm, no suitable Python, a failed install)."""


@dataclass(frozen=True)
class Target:
    adapter: str
    spec: InstallSpec


def targets(only: list[str] | None = None) -> tuple[list[Target], list[str]]:
    """Installable CLIs of the registered adapters, and the adapters skipped (module missing).
    ``only``: ``PKG``, ``PKG@VERSION`` or an adapter name, to install just those."""
    found, skipped = [], []
    for name in ADAPTERS.names():
        try:
            spec = ADAPTERS.get(name).install
        except ImportError as exc:  # an adapter whose module is not written yet
            skipped.append(f"{name} ({exc})")
            continue
        if spec.registry in ("npm", "pypi"):
            found.append(Target(name, spec))
    if only:
        found = [_select(found, wanted) for wanted in only]
    for target in found:
        why = ADAPTERS.get(target.adapter).blocked_versions.get(target.spec.version)
        if why:
            raise InstallError(f"refusing {target.spec.package}=={target.spec.version}: {why}")
    return found, skipped


def _select(available: list[Target], wanted: str) -> Target:
    package, _, version = wanted.rpartition("@") if wanted.rfind("@") > 0 else (wanted, "", "")
    for target in available:
        if package in (target.spec.package, target.adapter):
            return Target(target.adapter, replace(target.spec, version=version)) if version else target
    known = ", ".join(f"{t.spec.package}@{t.spec.version}" for t in available)
    raise InstallError(f"--only {wanted}: no registered CLI has that package; known: {known}")


def installed_version(root: Path, target: Target) -> str | None:
    """The version installed under ``root``, from the package's own metadata (nothing is run);
    None when the package or its executable is missing."""
    spec = target.spec
    if spec.registry == "npm":
        manifest = root / "node_modules" / spec.package / "package.json"
        if not (root / "node_modules" / ".bin" / spec.bin).exists():
            return None
        try:
            return str(json.loads(manifest.read_text(encoding="utf-8")).get("version")) or None
        except (OSError, ValueError):
            return None
    venv = root / target.adapter
    if not (venv / "bin" / spec.bin).exists():
        return None
    normalized = re.sub(r"[-_.]+", "_", spec.package).lower()
    for dist in sorted(venv.glob(f"lib/python*/site-packages/{normalized}-*.dist-info")):
        return dist.name[len(normalized) + 1:-len(".dist-info")]
    return None


def npm_install(root: Path, wanted: list[Target]) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError("npm is not on PATH: install Node.js 20 or newer (it brings npm), then run again")
    root.mkdir(parents=True, exist_ok=True)
    command = [npm, "install", "--prefix", str(root), "--no-audit", "--no-fund", "--save-exact",
               *(f"{t.spec.package}@{t.spec.version}" for t in wanted)]
    print("running: " + " ".join(command[1:]), file=sys.stderr, flush=True)
    result = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=sys.stderr, check=False)
    if result.returncode != 0:
        raise InstallError(f"npm install failed (exit {result.returncode}); its messages are above")


def find_python(minimum: str, explicit: str | None = None) -> tuple[str, str]:
    """(path, "3.x") of a Python at least ``minimum``: ``explicit`` if given, else the exact
    version first, then newer ones, from PATH and from pyenv's versions folder."""
    want = _version_tuple(minimum)
    if explicit:
        version = _probe(explicit)
        if version is None or _version_tuple(version) < want:
            raise InstallError(f"--python {explicit}: {'not a working Python' if version is None else version}, "
                               f"needs Python >= {minimum}")
        return explicit, version
    tried = []
    for candidate in _candidates(want):
        tried.append(candidate)
        version = _probe(candidate)
        if version is not None and _version_tuple(version) >= want:
            return candidate, version
    raise InstallError(f"no Python >= {minimum} found (tried {', '.join(tried) or 'nothing'}); install one "
                       f"(e.g. pyenv install {minimum}) or pass --python PATH")


def _candidates(want: tuple[int, int]) -> list[str]:
    minors = list(range(want[1], 20))
    found: list[str] = []
    for minor in minors:
        on_path = shutil.which(f"python{want[0]}.{minor}")
        if on_path:
            found.append(on_path)
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    for minor in minors:
        for version_dir in sorted(Path(pyenv_root, "versions").glob(f"{want[0]}.{minor}.*"), reverse=True):
            python = version_dir / "bin" / f"python{want[0]}.{minor}"
            if python.exists():
                found.append(str(python))
    return list(dict.fromkeys(found))


def _probe(python: str) -> str | None:
    try:
        result = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None  # a pyenv shim for a version that is not active fails here, as it should
    return result.stdout.strip() if result.returncode == 0 else None


def _version_tuple(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    return int(major), int(minor.partition(".")[0] or 0)


def pypi_install(root: Path, target: Target, python: str) -> None:
    """A fresh venv ``root/<adapter>`` with exactly ``package==version`` (the package's own
    command is never run here: one stub release runs a remote script when started bare)."""
    venv = root / target.adapter
    if venv.exists():
        shutil.rmtree(venv)
    root.mkdir(parents=True, exist_ok=True)
    print(f"running: {python} -m venv {venv}", file=sys.stderr, flush=True)
    made = subprocess.run([python, "-m", "venv", str(venv)], stdin=subprocess.DEVNULL, stdout=sys.stderr,
                          check=False)
    if made.returncode != 0:
        raise InstallError(f"{python} -m venv {venv} failed (exit {made.returncode})")
    pin = f"{target.spec.package}=={target.spec.version}"
    print(f"running: pip install {pin}", file=sys.stderr, flush=True)
    result = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
                             "--no-input", pin], stdin=subprocess.DEVNULL, stdout=sys.stderr, check=False)
    if result.returncode != 0:
        raise InstallError(f"pip install {pin} failed (exit {result.returncode}); its messages are above")
