"""The runtime bundle: what the installed agent CLIs need to run inside any glibc image.

A task's image has no node, often no Python (or not the version a CLI needs), and no
network. ``agentmeter install-clis`` therefore assembles ``ROOT/runtime/`` from this
machine's own files, beside the CLIs it installed:

    lib/                   the dynamic loader and every shared library that the CLIs' ELF files
                           load (ldd's closure of node, the native CLIs, node addons, Python
                           and its extension modules)
    node/node              the node that npm used (Debian's is dynamically linked)
    python3.X/             each PyPI CLI's base interpreter: its binary and standard library
    boot/<adapter>.py      starts a PyPI CLI's console script with its venv's packages
    manifest.json          launcher (relative to ROOT) -> the command that replaces it

Every dynamically linked program is started through the bundled loader
(``lib/ld-linux-x86-64.so.2 --library-path lib PROGRAM``), so neither the image's libc nor
its loader cache is ever used, and nothing reaches the agent's own tools through the
environment: no LD_LIBRARY_PATH, no PYTHONHOME (Python runs with ``-I``, which also keeps an
image's PYTHONPATH out). The bundle is relocatable: the manifest names paths relative to
ROOT, and the sandbox substitutes where ROOT is mounted (``container_argv``). The price of
the explicit loader: node's ``process.execPath`` names the loader, so the CLIs must not
re-launch themselves (the adapters already set Gemini CLI's and Qwen Code's NO_RELAUNCH).
The venvs themselves are untouched: their shebangs and ``pyvenv.cfg`` keep naming this
machine's paths, which is what local trials run.
"""

from __future__ import annotations

import configparser
import contextlib
import fcntl
import hashlib
import json
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from ..sandboxes.docker.rootfs import shared_libraries, stdlib_dir, stdlib_files

FORMAT = 1
BUNDLE = "runtime"
MANIFEST = f"{BUNDLE}/manifest.json"
ROOT_MARK = "{root}"  # in a manifest's argv: where the CLIs root is, as the sandbox sees it
ELF_MAGIC = b"\x7fELF"
LOADER = "ld.so"  # this machine's dynamic loader, under one name whatever the architecture
# node addons of other platforms ship beside the ones node loads here; ldd rejects them anyway
ADDON_SKIP = ("darwin", "win32", "musl", "arm")


class BundleError(RuntimeError):
    """The bundle cannot be assembled (no node for the npm CLIs, a venv without its Python)."""


class Launcher(BaseModel):
    model_config = ConfigDict(extra="allow")

    argv: list[str]  # replaces the launcher's path; ROOT_MARK stands for the CLIs root


class Manifest(BaseModel):
    model_config = ConfigDict(extra="allow")

    format: int
    fingerprint: str
    launchers: dict[str, Launcher]


def load_manifest(root: Path) -> Manifest | None:
    """The bundle's manifest under ``root``; None when there is none (install-clis not run).
    A malformed one is an error naming the file, never a silent fallback to the image's node."""
    path = root / MANIFEST
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return Manifest.model_validate_json(text)
    except ValidationError as exc:
        raise BundleError(f"{path}: not a runtime manifest ({exc.errors()[0]['loc']}: "
                          f"{exc.errors()[0]['msg']}); run agentmeter install-clis again") from None


def container_argv(argv: list[str], sandbox_root: str, manifest: Manifest | None) -> list[str]:
    """``argv`` with a launcher under ``sandbox_root`` replaced by its bundled command."""
    if manifest is None or not argv or not argv[0].startswith(sandbox_root.rstrip("/") + "/"):
        return argv
    launcher = manifest.launchers.get(argv[0][len(sandbox_root.rstrip("/")) + 1:])
    if launcher is None:
        return argv
    return [part.replace(ROOT_MARK, sandbox_root.rstrip("/")) for part in launcher.argv] + argv[1:]


# -- assembling --------------------------------------------------------------------------------


def _is_elf(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(4) == ELF_MAGIC


def _is_dynamic(path: Path) -> bool:
    return bool(shared_libraries([path]))


def _under(path: Path, root: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


class _Plan:
    """What the bundle holds, worked out from the installed CLIs before anything is copied."""

    def __init__(self, root: Path):
        from .installer import targets

        self.root = root.resolve()
        self.launchers: dict[str, Launcher] = {}
        self.elves: list[Path] = []  # dynamically linked files whose libraries the bundle carries
        self.node: Path | None = None
        self.pythons: dict[str, tuple[Path, Path]] = {}  # "python3.13" -> (binary, stdlib)
        self.boots: dict[str, str] = {}  # boot file name -> its text
        self.inputs: list[Path] = []  # what the fingerprint covers
        found, _ = targets()
        for target in found:
            if target.spec.registry == "npm":
                self._npm(target)
            else:
                self._pypi(target)

    def libraries(self) -> list[Path]:
        """The shared libraries to carry: the closure of every ELF file the bundled commands run
        or load (node addons included), minus those inside ROOT (found there by their $ORIGIN)."""
        elves = list(self.elves)
        if self.node is not None:
            elves.append(self.node)
            elves.extend(p for p in sorted((self.root / "node_modules").rglob("*.node"))
                         if p.is_file() and not any(s in str(p) for s in ADDON_SKIP))
        return [p for p in shared_libraries(elves) if not _under(p, self.root)] if elves else []

    @staticmethod
    def _launch(program: str, *args: str) -> list[str]:
        return [f"{ROOT_MARK}/{BUNDLE}/lib/{LOADER}", "--library-path", f"{ROOT_MARK}/{BUNDLE}/lib", program, *args]

    def _npm(self, target) -> None:
        launcher = self.root / "node_modules" / ".bin" / target.spec.bin
        if not launcher.exists():
            return
        rel = str(launcher.relative_to(self.root))
        real = launcher.resolve()
        self.inputs.append(real)
        native = self.root / target.spec.native if target.spec.native else None
        if native is not None and native.is_file():
            self.inputs.append(native)
            self.launchers[rel] = Launcher(argv=[f"{ROOT_MARK}/{target.spec.native}"])
        elif _is_elf(real):
            program = f"{ROOT_MARK}/{real.relative_to(self.root)}"
            if _is_dynamic(real):
                self.elves.append(real)
                self.launchers[rel] = Launcher(argv=self._launch(program))
            else:
                self.launchers[rel] = Launcher(argv=[program])
        else:  # a node script
            if self.node is None:
                node = shutil.which("node")
                if node is None:
                    raise BundleError(f"{target.spec.package} is a node program and no node is on PATH")
                self.node = Path(node).resolve()
                self.inputs.append(self.node)
            self.launchers[rel] = Launcher(argv=self._launch(f"{ROOT_MARK}/{BUNDLE}/node/node",
                                                             f"{ROOT_MARK}/{real.relative_to(self.root)}"))

    def _pypi(self, target) -> None:
        venv = self.root / target.adapter
        if not (venv / "bin" / target.spec.bin).exists():
            return
        base = _venv_python(venv)
        stdlib = stdlib_dir(base)
        version = stdlib.name  # "python3.13"
        site = venv / "lib" / version / "site-packages"
        entry = _entry_point(site, target.spec.bin)
        if base not in [b for b, _ in self.pythons.values()]:
            self.pythons[version] = (base, stdlib)
            self.elves.append(base)
            self.elves.extend(path for rel, path in stdlib_files(stdlib) if path.suffix == ".so")
        self.elves.extend(sorted(site.rglob("*.so")))
        self.inputs.extend([base, venv / "pyvenv.cfg", *sorted(site.glob("*.dist-info"))])
        module, _, func = entry.partition(":")
        self.boots[f"{target.adapter}.py"] = BOOT.format(adapter=target.adapter, site=f"{target.adapter}/lib/"
                                                         f"{version}/site-packages", bin=target.spec.bin,
                                                         module=module, func=func or "main")
        # -I: the image's PYTHON* variables are ignored; -u: stdout unbuffered (-I drops PYTHONUNBUFFERED);
        # -B: the mount is read-only
        self.launchers[str((venv / "bin" / target.spec.bin).relative_to(self.root))] = Launcher(argv=self._launch(
            f"{ROOT_MARK}/{BUNDLE}/{version}/bin/{version}", "-I", "-u", "-B",
            f"{ROOT_MARK}/{BUNDLE}/boot/{target.adapter}.py"))

    def fingerprint(self) -> str:
        digest = hashlib.sha256(f"bundle-v{FORMAT}\n".encode())
        for path in self.inputs:
            with contextlib.suppress(OSError):
                stat = path.stat()
                digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
        return digest.hexdigest()[:16]


BOOT = '''"""Made by agentmeter install-clis: runs {adapter}'s console script `{bin}` on the bundled
Python with its venv's packages (the venv's own launcher names this machine's paths)."""
import os, site, sys
site.addsitedir(os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "{site}")))
sys.argv[0] = "{bin}"
from {module} import {func}
sys.exit({func}())
'''


def _venv_python(venv: Path) -> Path:
    """The base interpreter of ``venv``, from its ``pyvenv.cfg`` (``home`` is its folder)."""
    parser = configparser.ConfigParser()
    cfg = venv / "pyvenv.cfg"
    try:
        parser.read_string("[venv]\n" + cfg.read_text(encoding="utf-8"))
    except (OSError, configparser.Error) as exc:
        raise BundleError(f"{cfg}: unreadable ({exc}); reinstall with agentmeter install-clis") from None
    section = parser["venv"]
    candidates = [section.get("executable"), str(Path(section.get("home", "")) / f"python{section.get('version', '3')[:4]}"),
                  str((venv / "bin" / "python").resolve())]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and _is_elf(Path(candidate)):
            return Path(candidate).resolve()
    raise BundleError(f"{cfg}: the base Python it names (home = {section.get('home')}) is gone; reinstall with "
                      f"agentmeter install-clis")


class _CaseSensitiveParser(configparser.ConfigParser):
    """Console script names are case-sensitive; ConfigParser lowercases option names by default."""

    def optionxform(self, optionstr: str) -> str:
        return optionstr


def _entry_point(site: Path, name: str) -> str:
    """``module:function`` of the console script ``name`` (from its dist-info's entry points)."""
    for entry_points in sorted(site.glob("*.dist-info/entry_points.txt")):
        parser = _CaseSensitiveParser(delimiters=("=",))
        with contextlib.suppress(configparser.Error):
            parser.read_string(entry_points.read_text(encoding="utf-8"))
            if parser.has_option("console_scripts", name):
                return parser.get("console_scripts", name).strip()
    raise BundleError(f"{site}: no package declares the console script {name!r}")


def assemble(root: Path, *, log=print) -> Manifest | None:
    """Make (or keep, when its inputs are unchanged) the bundle under ``root``; None when no
    CLI is installed. Built beside and swapped in whole: a reader sees the old bundle or the
    new one, never half of one. Serialized by a lock file, since test sessions share ``root``."""
    if not root.is_dir():
        return None
    with (root / ".runtime.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        plan = _Plan(root)
        if not plan.launchers:
            return None
        current = load_manifest(root)
        fingerprint = plan.fingerprint()
        if current is not None and current.fingerprint == fingerprint and current.format == FORMAT:
            return current
        log(f"assembling the runtime bundle for containers under {root / BUNDLE}")
        part = root / f".{BUNDLE}.part"
        shutil.rmtree(part, ignore_errors=True)
        try:
            manifest = _write(plan, part, fingerprint)
        except BaseException:
            shutil.rmtree(part, ignore_errors=True)
            raise
        old = root / f".{BUNDLE}.old"
        shutil.rmtree(old, ignore_errors=True)
        if (root / BUNDLE).exists():
            (root / BUNDLE).rename(old)
        part.rename(root / BUNDLE)
        shutil.rmtree(old, ignore_errors=True)
        return manifest


def _write(plan: _Plan, dest: Path, fingerprint: str) -> Manifest:
    lib = dest / "lib"
    lib.mkdir(parents=True)
    for library in plan.libraries():
        name = LOADER if library.name.startswith(("ld-linux", "ld64")) else library.name
        shutil.copy2(library.resolve(), lib / name)
    if plan.node is not None:
        (dest / "node").mkdir()
        shutil.copy2(plan.node, dest / "node" / "node")
    for version, (binary, stdlib) in plan.pythons.items():
        (dest / version / "bin").mkdir(parents=True)
        shutil.copy2(binary, dest / version / "bin" / version)
        target = dest / version / "lib" / version
        for rel, path in stdlib_files(stdlib):
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target / rel)  # times kept: the copied .pyc files stay valid
    if plan.boots:
        (dest / "boot").mkdir()
        for name, text in plan.boots.items():
            (dest / "boot" / name).write_text(text, encoding="utf-8")
    manifest = Manifest(format=FORMAT, fingerprint=fingerprint, launchers=plan.launchers)
    (dest / "manifest.json").write_text(json.dumps(manifest.model_dump(), indent=2) + "\n", encoding="utf-8")
    return manifest

