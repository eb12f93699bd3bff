"""Host-side file operations in a folder an agent could write to: no link is followed out of it.

The runner writes the verifier's tests and the CLIs' config into a trial's folders and reads
its reward and session files back, as the runner's user (root, on a CI machine). Where those
folders are on this machine (the local sandbox, docker's ``workspace = "bind"``, the swarm
sandbox's mirror of a job's files), the agent may have planted, before it stopped, a symbolic
link (``scratch/tests -> /etc``, ``reward.txt -> /root/secret``), a hard link to a file it can
see, a named pipe (a read would block the runner) or a file of many gigabytes. So every path
is resolved here one component at a time from the trial's root, each folder opened with
``O_NOFOLLOW`` relative to its parent's descriptor (``openat``), and:

- a write never follows a link and never writes into an existing file: whatever stands where
  a file or folder of ours goes (a link, a pipe, a hard link) is unlinked, never its target,
  and the file is created afresh (``O_EXCL``);
- a read takes only regular files with one link, opened with ``O_NOFOLLOW | O_NONBLOCK``
  and checked with ``fstat`` before any byte is read, and reads no more than its limit;
- whatever is refused or removed is named in a note, which the session passes to the trial's
  transcript (:attr:`SandboxSession.notes`).
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import stat
from collections.abc import Iterator
from pathlib import Path

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_WRITE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_LINKED = (errno.ELOOP, errno.ENOTDIR)
FETCH_LIMIT = 1 << 30  # a workspace copied back to this machine (runner-side verifiers, kept workspaces)  # O_NOFOLLOW met a link, or a component is no folder


class WallError(Exception):
    """A host-side file operation refused: the message names the path and why."""


def kind_of(mode: int) -> str:
    """What a file is, in words, for a note."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "a file"


def describe(parent: int, name: str, rel: str) -> str:
    """``rel`` as the agent left it: what it is and, for a link, where it points."""
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return f"{rel} (gone)"
    if stat.S_ISLNK(info.st_mode):
        with contextlib.suppress(OSError):
            return f"{rel} ({kind_of(info.st_mode)} to {os.readlink(name, dir_fd=parent)})"
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        return f"{rel} (a hard link: {info.st_nlink} names share it)"
    return f"{rel} ({kind_of(info.st_mode)})"


def _parts(rel: str) -> list[str]:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise WallError(f"{rel}: '..' is refused in a path under a trial's folder")
    return parts


def _open_dir(parent: int, name: str, rel: str, notes: list[str], *, create: bool,
              owner: int | None = None) -> int | None:
    """The folder ``name`` in ``parent``, never through a link. ``create``: made when missing
    (given to ``owner``), and whatever else stands there (a link, a pipe, a file) is removed
    first, with a note. Without ``create``: None when missing or not a real folder."""
    made = False
    for _ in range(3):  # the agent's leftovers may race us: each round removes one obstacle
        try:
            fd = os.open(name, _DIR, dir_fd=parent)
            if made:
                _give(fd, owner)
            return fd
        except FileNotFoundError:
            if not create:
                return None
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o755, dir_fd=parent)
                made = True
        except OSError as exc:
            if exc.errno not in _LINKED:
                raise
            if not create:
                notes.append(f"not followed: {describe(parent, name, rel)}")
                return None
            notes.append(f"removed {describe(parent, name, rel)} where a folder of ours goes")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=parent)
    raise WallError(f"{rel}: kept being replaced while the runner made it a folder")


def _give(fd: int, owner: int | None) -> None:
    """A file or folder the runner made, given to the agent's user (docker's bind mode)."""
    if owner is not None and owner != 0 and os.geteuid() == 0:
        os.fchown(fd, owner, owner)


def _walk_to(root: Path, parts: list[str], notes: list[str], *, create: bool,
             owner: int | None = None) -> int | None:
    """A descriptor of ``root/parts...``, resolved one folder at a time (see :func:`_open_dir`)."""
    try:
        fd = os.open(root, _DIR)
    except OSError as exc:  # a copied-out folder that was a link in its container
        if create or exc.errno not in _LINKED:
            raise
        notes.append(f"not followed: {root.name} (not a folder)")
        return None
    for index, part in enumerate(parts):
        try:
            child = _open_dir(fd, part, "/".join(parts[:index + 1]), notes, create=create, owner=owner)
        finally:
            os.close(fd)
        if child is None:
            return None
        fd = child
    return fd


def write_files(root: Path, base: str, files: dict[str, bytes], owner: int | None = None) -> list[str]:
    """Write ``files`` (relative path -> content) under ``root/base``; return the notes.
    ``owner``: the uid the files and folders made here are given to (only what was made: a
    walk that chowns a whole tree would follow what the agent planted in it)."""
    notes: list[str] = []
    for rel, data in files.items():
        parts = _parts(f"{base}/{rel}")
        if not parts:
            raise WallError(f"{rel}: not a file name")
        fd = _walk_to(root, parts[:-1], notes, create=True, owner=owner)
        assert fd is not None  # noqa: S101 - create=True always gives a folder or raises
        try:
            _write(fd, parts[-1], "/".join(parts), data, notes, owner)
        finally:
            os.close(fd)
    return notes


def _write(parent: int, name: str, rel: str, data: bytes, notes: list[str], owner: int | None) -> None:
    with contextlib.suppress(FileNotFoundError):
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            raise WallError(f"{rel}: a folder stands where the runner writes a file")
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            notes.append(f"removed {describe(parent, name, rel)} where a file of ours goes")
        os.unlink(name, dir_fd=parent)  # the name only: a link's target or a hard link's file stays as it was
    fd = os.open(name, _WRITE, 0o644, dir_fd=parent)
    try:
        _give(fd, owner)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def read_globs(root: Path, base: str, patterns: list[str], limit_bytes: int) -> tuple[dict[str, bytes], list[str]]:
    """Regular files under ``root/base`` matching the glob patterns (relative path -> content),
    up to ``limit_bytes`` in all, and the notes on what was refused."""
    notes: list[str] = []
    found: dict[str, bytes] = {}
    base_parts = _parts(base)
    total = 0
    for pattern in patterns:
        fd = _walk_to(root, base_parts, notes, create=False)
        if fd is None:
            break
        try:
            for parent, name, rel in _matches(fd, _parts(pattern), "", notes):
                if rel in found:
                    continue
                try:
                    data = read_file(parent, name, f"{base}/{rel}".lstrip("/"), limit_bytes - total, notes)
                except PastLimit:
                    break
                if data is None:
                    continue
                found[rel] = data
                total += len(data)
        finally:
            os.close(fd)
    return found, notes


def _matches(fd: int, parts: list[str], prefix: str, notes: list[str]) -> Iterator[tuple[int, str, str]]:
    """(folder descriptor, name, relative path) of the entries matching ``parts`` under ``fd``,
    in name order; folders are entered only when they are real folders."""
    head, rest = parts[0], parts[1:]
    if any(c in head for c in "*?["):
        try:
            names = sorted(n for n in os.listdir(fd) if fnmatch.fnmatchcase(n, head))
        except OSError:
            return
    else:
        names = [head]
    for name in names:
        rel = f"{prefix}{name}"
        if not rest:
            yield fd, name, rel
            continue
        child = _open_dir(fd, name, rel, notes, create=False)
        if child is None:
            continue
        try:
            yield from _matches(child, rest, rel + "/", notes)
        finally:
            os.close(child)


class PastLimit(Exception):
    """The file would take a read past its limit (the caller stops reading there)."""


def read_file(parent: int, name: str, rel: str, limit: int, notes: list[str]) -> bytes | None:
    """A regular file's content, never through a link, never blocking; None when it is missing,
    a folder, or refused (with a note); :class:`PastLimit` when it is larger than ``limit``."""
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(info.st_mode):
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        notes.append(f"not read: {describe(parent, name, rel)}")
        return None
    if info.st_size > limit:
        raise PastLimit(rel)
    try:
        fd = os.open(name, _READ, dir_fd=parent)
    except OSError as exc:
        if exc.errno in _LINKED:  # replaced by a link since the stat
            notes.append(f"not read: {describe(parent, name, rel)}")
            return None
        raise
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or opened.st_nlink > 1 or opened.st_ino != info.st_ino:
            notes.append(f"not read: {rel} (replaced while the runner read it)")
            return None
        chunks, left = [], min(opened.st_size, limit)
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def blocks_under(root: Path) -> int:
    """The bytes of the blocks everything under ``root`` takes, following no link and entering no
    other mount, however deep the agent nested its folders: a stack, not os.walk's recursion
    (RecursionError at a thousand levels), and each folder opened from a descriptor of an
    ancestor less than a path's length away (a path beyond PATH_MAX cannot be opened whole, and
    what lies under it must count too)."""
    top = os.open(root, _DIR)
    device, total = os.fstat(top).st_dev, 0
    users = {top: 1}  # an open folder -> the entries of the stack that name a folder from it
    stack: list[tuple[int, str]] = [(top, ".")]
    try:
        while stack:
            base, rel = stack.pop()
            with contextlib.suppress(OSError):
                fd = os.open(rel, _DIR, dir_fd=base)
                users[fd] = 0
                total += _count_folder(fd, device, users, stack, rel if len(rel) < 2048 else None, base)
                if not users[fd]:
                    del users[fd]
                    os.close(fd)
            users[base] -= 1
            if not users[base]:
                del users[base]
                os.close(base)
    finally:
        for fd in users:
            os.close(fd)
    return total


def _count_folder(fd: int, device: int, users: dict[int, int], stack: list[tuple[int, str]],
                  rel: str | None, base: int) -> int:
    """The blocks of one folder's entries; its subfolders on the same device go on ``stack``,
    named from ``base`` while their path stays short (``rel`` is this folder's), else from
    ``fd`` itself, which then stays open until they are counted."""
    total = 0
    with os.scandir(fd) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if info.st_dev != device:
                    continue
                total += info.st_blocks * 512
                if stat.S_ISDIR(info.st_mode):
                    parent, name = (base, f"{rel}/{entry.name}") if rel is not None else (fd, entry.name)
                    users[parent] += 1
                    stack.append((parent, name))
    return total


def remove_tree(root: Path) -> None:
    """Remove ``root`` and everything under it, following no link, however deep the agent nested
    its folders (``shutil.rmtree`` recurses once per level and gave up at a thousand, leaving the
    trial's folder behind): each folder's subfolders are first moved up beside it (``renameat``),
    so there is no recursion, no long path and never more than two descriptors open."""
    try:
        top = os.open(root, _DIR)
    except FileNotFoundError:
        return
    moved = 0
    try:
        while names := os.listdir(top):
            for name in names:
                if not stat.S_ISDIR(os.stat(name, dir_fd=top, follow_symlinks=False).st_mode):
                    os.unlink(name, dir_fd=top)
                    continue
                fd = os.open(name, _DIR, dir_fd=top)
                try:
                    for sub in os.listdir(fd):
                        if not stat.S_ISDIR(os.stat(sub, dir_fd=fd, follow_symlinks=False).st_mode):
                            os.unlink(sub, dir_fd=fd)
                            continue
                        while True:  # a free name beside the others (the agent's may look like ours)
                            moved += 1
                            try:
                                os.rename(sub, f".agentmeter-rm-{moved}", src_dir_fd=fd, dst_dir_fd=top)
                                break
                            except OSError as exc:
                                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                                    raise
                finally:
                    os.close(fd)
                os.rmdir(name, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(root)
