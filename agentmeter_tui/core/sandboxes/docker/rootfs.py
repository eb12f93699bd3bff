"""A minimal root filesystem made of this machine's own files, for engines without a registry.

``busybox-static`` gives a shell and the usual tools (one static binary, applets as
symlinks); the host's ``python3`` with its standard library and the shared libraries it
links gives the reference agent and stdlib-only Python tasks an interpreter. The result is
a tar that a ``FROM scratch`` Dockerfile ``ADD``s, so an image is built with no pull at all.
Deterministic: entries are sorted and their times fixed, so the same host files give the
same tar and the image tag derived from its hash stays stable across runs.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from ..archive import TarWriter

AGENT_UID = 1000  # the non-root user trials run as; root stays available for our own probes
BUSYBOX_CANDIDATES = ("/bin/busybox", "/usr/bin/busybox")
# Parts of the standard library an agent never needs; skipping them halves the image.
STDLIB_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data",
               "site-packages", "dist-packages", "venv"}
DYNLOAD_SKIP = ("_test", "xx", "_ctypes_test", "_tkinter", "_curses", "readline", "nis", "ossaudiodev", "_dbm")
PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"


class RootfsError(RuntimeError):
    pass


def find_busybox() -> Path:
    for candidate in BUSYBOX_CANDIDATES:
        path = Path(candidate)
        if path.is_file() and _is_static(path):
            return path
    raise RootfsError("no static busybox found (Debian: apt-get install busybox-static)")


def find_python() -> Path:
    """The system python3 (a distribution build, which relocates cleanly), else this one."""
    for candidate in ("/usr/bin/python3", sys.executable):
        if candidate and Path(candidate).is_file():
            return Path(os.path.realpath(candidate))
    raise RootfsError("no python3 on this machine")


def _is_static(path: Path) -> bool:
    result = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=False)
    return result.returncode != 0 or "not a dynamic executable" in (result.stdout + result.stderr)


def shared_libraries(binaries: list[Path]) -> list[Path]:
    """The shared objects ``binaries`` load (per ``ldd``), the dynamic loader included."""
    found: set[str] = set()
    for binary in binaries:
        result = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
        for line in result.stdout.splitlines():
            parts = line.split()
            if "=>" in parts:
                target = parts[parts.index("=>") + 1]
                if target.startswith("/"):
                    found.add(target)
            elif parts and parts[0].startswith("/"):
                found.add(parts[0])  # the loader: /lib64/ld-linux-x86-64.so.2
    return [Path(p) for p in sorted(found)]


def stdlib_dir(python: Path) -> Path:
    out = subprocess.run([str(python), "-S", "-c", "import os; print(os.path.dirname(os.__file__))"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return Path(out)


def build_rootfs(dest: Path, *, python: bool = True, bash: bool = False, iptables: bool = False) -> Path:
    """Write the rootfs tar to ``dest`` (busybox, python3 unless ``python=False``, and with
    ``bash`` the host's bash and its libraries: Harbor runs ``bash /tests/test.sh``; with
    ``iptables`` the host's iptables and its extensions: the swarm nodes' wall, ``nodewall.py``)."""
    busybox = find_busybox()
    applets = subprocess.run([str(busybox), "--list-full"], capture_output=True, text=True, check=True).stdout.split()
    tmp = dest.with_name(dest.name + ".part")
    with tmp.open("wb") as handle:
        tar = TarWriter(handle)
        for name, mode in (("tmp", 0o1777), ("etc", 0o755), ("root", 0o700), ("dev", 0o755), ("proc", 0o755),
                           ("sys", 0o755), ("usr/local/bin", 0o755)):
            tar.folder(name, mode)
        tar.folder("home/agent", 0o755, AGENT_UID)
        tar.file("bin/busybox", busybox)
        for applet in sorted(set(applets)):
            if applet.strip("/") != "bin/busybox" and not (bash and applet.strip("/") == "bin/bash"):
                tar.link(applet, "/bin/busybox")
        tar.data("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n"
                 b"agent:x:%d:%d:agent:/home/agent:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"
                 % (AGENT_UID, AGENT_UID))
        tar.data("etc/group", b"root:x:0:\nagent:x:%d:\nnogroup:x:65534:\n" % AGENT_UID)
        tar.data("etc/hosts", b"127.0.0.1 localhost\n")
        libraries = _add_python(tar, find_python()) if python else set()
        if bash:
            _add_binary(tar, Path("/bin/bash"), "bin/bash", have=libraries)
        if iptables:
            _add_iptables(tar, libraries)
        tar.close()
    tmp.replace(dest)
    return dest


def _add_binary(tar: TarWriter, binary: Path, name: str, *, have: set[str]) -> None:
    """A dynamically linked binary and the libraries it loads (those python brought already
    are in the tar: adding them twice would make duplicate entries)."""
    real = Path(os.path.realpath(binary))
    if not real.is_file():
        raise RootfsError(f"no {binary} on this machine")
    tar.file(name, real)
    for library in shared_libraries([real]):
        if str(library) in have:
            continue
        resolved = Path(os.path.realpath(library))
        tar.file(str(resolved), resolved)
        if str(library) != str(resolved):
            tar.link(str(library), str(resolved))


def find_iptables() -> Path:
    """The multi-call binary behind this machine's ``iptables`` (nft or legacy, as the host uses)."""
    for candidate in ("/usr/sbin/iptables", "/sbin/iptables"):
        if Path(candidate).exists():
            return Path(os.path.realpath(candidate))
    raise RootfsError("no iptables on this machine (Debian: apt-get install iptables)")


def _add_iptables(tar: TarWriter, have: set[str]) -> None:
    """iptables and ip6tables (links to the host's multi-call binary), the match and target
    extensions it loads at run time (``xtables/*.so``, which ldd of the binary does not list)
    and the libraries of both."""
    binary = find_iptables()
    tar.file(f"usr/sbin/{binary.name}", binary)
    for name in ("iptables", "ip6tables"):
        tar.link(f"usr/sbin/{name}", binary.name)
    extensions = sorted(Path(p) for p in Path("/usr/lib").glob("*/xtables/*.so")) or \
        sorted(Path("/usr/lib/xtables").glob("*.so"))
    for extension in extensions:
        tar.file(str(extension), extension)
    for library in shared_libraries([binary, *extensions]):
        if str(library) in have:
            continue
        have.add(str(library))
        real = Path(os.path.realpath(library))
        tar.file(str(real), real)
        if str(library) != str(real):
            tar.link(str(library), str(real))
    if Path("/etc/protocols").is_file():
        tar.file("etc/protocols", Path("/etc/protocols"))


def stdlib_files(stdlib: Path) -> Iterator[tuple[Path, Path]]:
    """(path relative to ``stdlib``, path) of the standard library files an agent may need:
    sources, compiled files and extension modules, without tests, GUI kits and build files."""
    for folder, subdirs, files in os.walk(stdlib):
        rel = Path(folder).relative_to(stdlib)
        subdirs[:] = sorted(d for d in subdirs if not (rel == Path(".") and (d in STDLIB_SKIP or d.startswith("config-")))
                            and d not in ("test", "tests"))
        for name in sorted(files):
            path = Path(folder) / name
            if rel.parts[:1] == ("lib-dynload",) and name.startswith(DYNLOAD_SKIP):
                continue
            if name.endswith((".py", ".pyc", ".so")) and not path.is_symlink():
                yield rel / name, path


def _add_python(tar: TarWriter, python: Path) -> set[str]:
    stdlib = stdlib_dir(python)
    version = stdlib.name  # "python3.11"
    tar.file(f"usr/bin/{version}", python)
    tar.link("usr/bin/python3", version)
    tar.link("usr/bin/python", version)
    extensions: list[Path] = []
    for rel, path in stdlib_files(stdlib):
        if path.name.endswith(".so"):
            extensions.append(path)
        # A .py keeps its time: the host's __pycache__ records it, and with a time of 0 every
        # import in a read-only container would recompile (10x the start-up time of a tool).
        tar.file(f"usr/lib/{version}/{rel}", path, keep_mtime=path.name.endswith(".py"))
    libraries = shared_libraries([python, *extensions])
    for library in libraries:
        real = Path(os.path.realpath(library))
        tar.file(str(real), real)
        if str(library) != str(real):
            tar.link(str(library), str(real))
    return {str(p) for p in libraries}


def host_fingerprint(python: bool = True, bash: bool = False, iptables: bool = False) -> str:
    """A short hash of what the rootfs would contain (the binaries' identities), cheap to compute:
    it names the image, so an unchanged host reuses the image without building a tar."""
    digest = hashlib.sha256(b"rootfs-v2")
    parts = [find_busybox()] + ([find_python()] if python else []) + ([Path("/bin/bash")] if bash else []) + \
        ([find_iptables()] if iptables else [])
    for part in parts:
        stat = part.stat()
        digest.update(f"{part}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    if python:
        digest.update(str(stdlib_dir(find_python())).encode())
    return digest.hexdigest()[:12]
