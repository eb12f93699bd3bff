"""Tar archives to and from sandboxes: the docker engine's archive API, SFTP-less bulk copies,
and swarm configs all move files as tars.

:class:`TarWriter` writes entries with fixed times and a chosen owner (so a non-root agent
owns its workspace inside a container, and equal inputs give equal bytes); :func:`extract`
unpacks with the stdlib's ``data`` filter, so an archive from a sandbox can never write
outside the destination (absolute names, ``..`` and links pointing out are skipped).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import tarfile
from collections.abc import Iterable
from pathlib import Path
from stat import S_ISREG


class TarWriter:
    """A tar being written; parent folders are added (once) before their entries."""

    def __init__(self, fileobj: io.IOBase | None = None, *, uid: int = 0, gid: int | None = None,
                 gzip: bool = False):
        self.buffer = fileobj if fileobj is not None else io.BytesIO()
        # Closed by getvalue() or close(): the writer lives across many calls.
        self.tar = tarfile.open(fileobj=self.buffer, mode="w:gz" if gzip else "w",  # noqa: SIM115
                                format=tarfile.PAX_FORMAT)
        self.uid, self.gid = uid, uid if gid is None else gid
        self.dirs: set[str] = set()

    def _info(self, name: str, kind: bytes, mode: int, uid: int | None = None) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name.strip("/"))
        info.type, info.mode, info.mtime = kind, mode, 0
        info.uid = self.uid if uid is None else uid
        info.gid = self.gid if uid is None else uid
        return info

    def folder(self, name: str, mode: int = 0o755, uid: int | None = None) -> None:
        name = name.strip("/")
        if not name or name in self.dirs:
            return
        self.folder(os.path.dirname(name))
        self.dirs.add(name)
        self.tar.addfile(self._info(name, tarfile.DIRTYPE, mode, uid))

    def present(self, name: str) -> None:
        """``name`` and its parents are folders the destination has already: entries go inside
        them without an entry of their own, which would change their owner and mode."""
        name = name.strip("/")
        while name and name not in self.dirs:
            self.dirs.add(name)
            name = os.path.dirname(name)

    def data(self, name: str, data: bytes, mode: int = 0o644, uid: int | None = None) -> None:
        self.folder(os.path.dirname(name.strip("/")))
        info = self._info(name, tarfile.REGTYPE, mode, uid)
        info.size = len(data)
        self.tar.addfile(info, io.BytesIO(data))

    def file(self, name: str, source: Path, *, keep_mtime: bool = False, nofollow: bool = False) -> None:
        """``keep_mtime``: the source's own time instead of 0 (a Python source must keep it, or
        its cached bytecode, which records it, is stale and recompiled at every import).
        ``nofollow``: ``source`` was listed in a folder an agent had (:meth:`tree`): a link or a
        pipe put in its place since is left out, never followed or waited on."""
        flags = os.O_RDONLY | os.O_CLOEXEC | (os.O_NOFOLLOW | os.O_NONBLOCK if nofollow else 0)
        try:
            fd = os.open(source, flags)
        except OSError as exc:
            if nofollow and exc.errno == errno.ELOOP:
                return
            raise
        with os.fdopen(fd, "rb") as handle:
            stat = os.fstat(fd)
            if nofollow and not S_ISREG(stat.st_mode):
                return
            self.folder(os.path.dirname(name.strip("/")))
            info = self._info(name, tarfile.REGTYPE, stat.st_mode & 0o7777)
            info.size = stat.st_size
            if keep_mtime:
                info.mtime = int(stat.st_mtime)
            self.tar.addfile(info, handle)

    def link(self, name: str, target: str) -> None:
        self.folder(os.path.dirname(name.strip("/")))
        info = self._info(name, tarfile.SYMTYPE, 0o777)
        info.linkname = target
        self.tar.addfile(info)

    def tree(self, prefix: str, source: Path) -> None:
        """``source``'s contents under ``prefix`` (symlinks kept as links, like copytree). A
        stack, not os.walk's recursion: a workspace an agent nested a thousand levels deep
        must still reach the verifier."""
        self.folder(prefix)
        pending = [Path()]
        while pending:
            rel = pending.pop()
            with os.scandir(source / rel) as scan:
                entries = sorted(scan, key=lambda e: e.name)
            for entry in entries:  # folders first, so each one's entry precedes its contents
                path, name = Path(entry.path), f"{prefix}/{rel / entry.name}"
                if entry.is_symlink():
                    self.link(name, os.readlink(path))
                elif entry.is_dir(follow_symlinks=False):
                    self.folder(name, entry.stat(follow_symlinks=False).st_mode & 0o777)
                    pending.append(rel / entry.name)
            for entry in entries:
                if not entry.is_symlink() and entry.is_file(follow_symlinks=False):
                    self.file(f"{prefix}/{rel / entry.name}", Path(entry.path), nofollow=True)

    def files(self, prefix: str, files: dict[str, bytes], uid: int | None = None) -> None:
        for rel, data in files.items():
            self.data(f"{prefix}/{rel}", data, uid=uid)

    def getvalue(self) -> bytes:
        self.tar.close()
        if not isinstance(self.buffer, io.BytesIO):  # the caller's file: its bytes are there
            raise TypeError("getvalue() is for a tar written to memory; this one went to the caller's file")
        return self.buffer.getvalue()

    def close(self) -> None:
        self.tar.close()


def extract(chunks: Iterable[bytes] | bytes, dest: Path, limit_bytes: int | None = None) -> Path:
    """Unpack a tar (bytes or a stream of chunks, e.g. ``get_archive``) into ``dest``, safely.

    The archive is read as a stream, member by member, never whole into memory; with
    ``limit_bytes``, reading stops at the first file past the limit, so a sandbox that filled
    its disk (a reward file of many gigabytes) can neither fill the runner's memory nor its disk.
    """
    dest.mkdir(parents=True, exist_ok=True)
    source = io.BytesIO(chunks) if isinstance(chunks, bytes) else _Chunks(chunks)
    total = 0
    with tarfile.open(fileobj=source, mode="r|*") as tar:
        for member in tar:
            if member.isfile():
                total += member.size
                if limit_bytes is not None and total > limit_bytes:
                    break
            # A folder's mode is not applied: a read-only folder would stop its own entries.
            with contextlib.suppress(OSError):  # a name too long for this machine: that entry only
                tar.extract(member, dest, set_attrs=not member.isdir(), filter=_inside)
    return dest


class _Chunks(io.RawIOBase):
    """An iterable of byte chunks as a file to read, one chunk in memory at a time."""

    def __init__(self, chunks: Iterable[bytes]):
        self.chunks, self.rest = iter(chunks), b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # noqa: ANN001 - a writable buffer
        while not self.rest:
            chunk = next(self.chunks, None)
            if chunk is None:
                return 0
            self.rest = chunk
        size = min(len(buffer), len(self.rest))
        buffer[:size], self.rest = self.rest[:size], self.rest[size:]
        return size


def _inside(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """The ``data`` filter, skipping what it refuses instead of failing the whole archive: a
    CLI's HOME holds absolute symlinks of its own (Codex's ``tmp/arg0-linux/*/apply_patch``),
    and one of them must not cost the session files beside it (live usage, recovery)."""
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None
