"""The ssh sandbox's files on a host, over SFTP, behind the walls of ``hostfs.py``: nothing the
agent planted in its trial folder is followed.

SFTP has no ``openat``, so each path is looked at one component at a time with ``lstat``
(or the listing of its folder, whose long names carry the link count) from the trial's
folder down, and:

- a write unlinks whatever stands where a file or folder of ours goes (a link, a pipe, another
  file) and creates the file afresh (``O_EXCL``): never into a link's target or a hard link's
  shared content;
- a read, a session file or the workspace fetched back for a runner-side verifier, takes only
  regular files with one link, up to a size, and never opens a pipe (it would hang the SFTP
  server's reply);
- each refusal is a note for the trial's transcript.

The agent runs as the SSH user, who could read those files anyway; what the walls keep is
the runner's side: its verdicts, its memory and its own disk.
"""

from __future__ import annotations

import posixpath
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..hostfs import WallError, kind_of

Note = Callable[[str], None]
CHUNK = 1 << 20


def _mode(attrs: Any) -> int:
    return attrs.permissions or 0


def _nlink(name: Any) -> int:
    """The link count in a listing's long name (``-rw-r--r--  2 user ...``); 1 when it has none."""
    fields = (name.longname.decode() if isinstance(name.longname, bytes) else name.longname or "").split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 1


def _parts(rel: str) -> list[str]:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise WallError(f"{rel}: '..' is refused in a path under a trial's folder")
    return parts


async def _lstat(sftp: Any, path: str) -> Any:
    import asyncssh

    try:
        return await sftp.lstat(path)
    except asyncssh.SFTPNoSuchFile:
        return None


async def _describe(sftp: Any, path: str, rel: str, attrs: Any, nlink: int = 1) -> str:
    mode = _mode(attrs)
    if stat.S_ISLNK(mode):
        try:
            return f"{rel} ({kind_of(mode)} to {await sftp.readlink(path)})"
        except Exception:  # noqa: BLE001 - gone meanwhile: the kind is enough
            return f"{rel} ({kind_of(mode)})"
    if stat.S_ISREG(mode) and nlink > 1:
        return f"{rel} (a hard link: {nlink} names share it)"
    return f"{rel} ({kind_of(mode)})"


async def write_files(sftp: Any, root: str, base: str, files: dict[str, bytes], note: Note) -> None:
    """Write ``files`` (relative path -> content) under ``root/base`` on the host."""
    checked: set[str] = set()  # folders already made sure of in this call
    for rel, data in files.items():
        parts = _parts(f"{base}/{rel}")
        folder = root
        for index, part in enumerate(parts[:-1]):
            folder = f"{folder}/{part}"
            if folder in checked:
                continue
            attrs = await _lstat(sftp, folder)
            if attrs is not None and not stat.S_ISDIR(_mode(attrs)):
                note(f"removed {await _describe(sftp, folder, '/'.join(parts[:index + 1]), attrs)} "
                     "where a folder of ours goes")
                await sftp.remove(folder)
                attrs = None
            if attrs is None:
                await sftp.mkdir(folder)
            checked.add(folder)
        target = f"{folder}/{parts[-1]}"
        attrs = await _lstat(sftp, target)
        if attrs is not None:
            if stat.S_ISDIR(_mode(attrs)):
                raise WallError(f"{'/'.join(parts)}: a folder stands where the runner writes a file")
            if not stat.S_ISREG(_mode(attrs)):
                note(f"removed {await _describe(sftp, target, '/'.join(parts), attrs)} where a file of ours goes")
            await sftp.remove(target)  # the name only: a hard link's shared content stays as it was
        async with sftp.open(target, "xb") as handle:
            await handle.write(data)


async def _folder(sftp: Any, root: str, parts: list[str], note: Note) -> str | None:
    """``root/parts...`` when each part is a real folder (a link is noted, not followed)."""
    path = root
    for index, part in enumerate(parts):
        path = f"{path}/{part}"
        attrs = await _lstat(sftp, path)
        if attrs is None:
            return None
        if not stat.S_ISDIR(_mode(attrs)):
            note(f"not followed: {await _describe(sftp, path, '/'.join(parts[:index + 1]), attrs)}")
            return None
    return path


async def _listing(sftp: Any, folder: str) -> dict[str, Any]:
    import asyncssh

    try:
        return {n.filename: n for n in await sftp.readdir(folder) if n.filename not in (".", "..")}
    except asyncssh.SFTPError:
        return {}


async def read_globs(sftp: Any, root: str, base: str, patterns: list[str], limit_bytes: int,
                     note: Note) -> dict[str, bytes]:
    """Regular files under ``root/base`` matching the glob patterns (relative path -> content)."""
    from fnmatch import fnmatchcase

    start = await _folder(sftp, root, _parts(base), note)
    if start is None:
        return {}
    found: dict[str, bytes] = {}
    total = 0
    for pattern in patterns:
        level = [(start, "")]
        parts = _parts(pattern)
        for depth, part in enumerate(parts):
            entries = []
            for folder, prefix in level:
                listing = await _listing(sftp, folder)
                names = sorted(n for n in listing if fnmatchcase(n, part))
                entries += [(folder, prefix + n, listing[n]) for n in names]
            if depth < len(parts) - 1:
                level = []
                for folder, rel, entry in entries:
                    if stat.S_ISDIR(_mode(entry.attrs)):
                        level.append((f"{folder}/{entry.filename}", rel + "/"))
                    elif stat.S_ISLNK(_mode(entry.attrs)):
                        note(f"not followed: {await _describe(sftp, f'{folder}/{entry.filename}', rel, entry.attrs)}")
                continue
            for folder, rel, entry in entries:
                mode, path = _mode(entry.attrs), f"{folder}/{entry.filename}"
                if rel in found or stat.S_ISDIR(mode):
                    continue
                if not stat.S_ISREG(mode) or _nlink(entry) > 1:
                    note(f"not read: {await _describe(sftp, path, rel, entry.attrs, _nlink(entry))}")
                    continue
                size = entry.attrs.size or 0
                if total + size > limit_bytes:
                    break
                found[rel] = await _read(sftp, path, size)
                total += len(found[rel])
    return found


async def _read(sftp: Any, path: str, size: int) -> bytes:
    async with sftp.open(path, "rb") as handle:
        return await handle.read(size)  # no more than the listing said, however it grew since


async def fetch_tree(sftp: Any, source: str, dest: Path, note: Note, limit_bytes: int) -> Path:
    """``source`` (a folder on the host) copied to ``dest/<its name>``: folders and regular files
    only, up to ``limit_bytes`` in all; links and special files are noted, not copied."""
    top = dest / posixpath.basename(source)
    top.mkdir(parents=True, exist_ok=True)
    pending, total = [(source, top, "")], 0
    while pending:  # a stack, not recursion: however deep the agent nested its folders
        folder, local, prefix = pending.pop()
        for name, entry in sorted((await _listing(sftp, folder)).items()):
            mode, rel, path = _mode(entry.attrs), prefix + name, f"{folder}/{name}"
            if stat.S_ISDIR(mode):
                (local / name).mkdir()
                pending.append((path, local / name, rel + "/"))
            elif not stat.S_ISREG(mode) or _nlink(entry) > 1:
                note(f"not copied: {await _describe(sftp, path, rel, entry.attrs, _nlink(entry))}")
            elif total + (entry.attrs.size or 0) > limit_bytes:
                note(f"not copied: {rel} (past {limit_bytes >> 20} MiB of files fetched)")
            else:
                data = await _read(sftp, path, entry.attrs.size or 0)
                (local / name).write_bytes(data)
                total += len(data)
    return top
