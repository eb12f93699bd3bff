"""Where a trial's final workspace is kept for a regrade, and the one copy that puts it there.

A store ``runs.db`` keeps its trials' workspaces under ``runs.db.kept/t<id>/``; the trial row says
which (``trials.kept``). What the agent left is hostile: the copy takes folders and regular files
only, never follows a link (a link out of the workspace is not copied, nor what it points at),
never opens a FIFO or a device (``O_NONBLOCK``, then a regular file is checked on the open file),
and stops at ``limit_bytes`` (the suite's ``regrade_keep_mb``): a workspace past it is not kept
at all, rather than kept in part.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

MAX_ENTRIES = 200_000  # files and folders: a workspace of a million empty files is not kept
MAX_DEPTH = 64
CHUNK = 1 << 20


def kept_root(db: str | Path) -> Path:
    db = Path(db)
    return db.with_name(db.name + ".kept")


def kept_folder(db: str | Path, name: str) -> Path:
    return kept_root(db) / name


class TooLarge(Exception):
    pass


Redact = Callable[[bytes], tuple[bytes, int]]  # a file's bytes -> them with secrets replaced, how many


@dataclass
class Copied:
    files: int = 0
    bytes: int = 0
    entries: int = 0
    skipped: int = 0  # links, FIFOs, sockets, devices: not copied
    redacted: int = 0  # secrets replaced in the copy (``redact.py``): no key is kept in the store's folder
    redact: Redact | None = None


def copy_workspace(source: Path, dest: Path, limit_bytes: int, redact: Redact | None = None) -> Copied:
    """Copy ``source`` to ``dest`` (made new) as the module says; raises TooLarge (``dest``
    removed) past the limits. ``redact``: each file's bytes pass it (a key the agent wrote into its
    workspace is a secret like one it printed). Blocking: call it off the event loop."""
    copied = Copied(redact=redact)
    dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # agents' files: the store's owner's only
    dest.mkdir(exist_ok=False)
    try:
        _copy_dir(source, dest, limit_bytes, copied, 0)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return copied


def _copy_dir(source: Path, dest: Path, limit: int, copied: Copied, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise TooLarge(f"folders nested deeper than {MAX_DEPTH}")
    with os.scandir(source) as entries:
        for entry in entries:
            copied.entries += 1
            if copied.entries > MAX_ENTRIES:
                raise TooLarge(f"more than {MAX_ENTRIES} files and folders")
            if entry.is_dir(follow_symlinks=False):
                (dest / entry.name).mkdir()
                _copy_dir(Path(entry.path), dest / entry.name, limit, copied, depth + 1)
            elif entry.is_file(follow_symlinks=False):
                _copy_file(Path(entry.path), dest / entry.name, limit, copied)
            else:
                copied.skipped += 1


def _copy_file(source: Path, dest: Path, limit: int, copied: Copied) -> None:
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:  # swapped for a link since the scan, or unreadable: not copied
        copied.skipped += 1
        return
    with os.fdopen(fd, "rb") as src:
        info = os.fstat(src.fileno())
        if not stat.S_ISREG(info.st_mode):
            copied.skipped += 1
            return
        with open(dest, "xb") as out:
            while chunk := src.read(CHUNK if copied.redact is None else limit - copied.bytes + 1):
                copied.bytes += len(chunk)
                if copied.bytes > limit:
                    raise TooLarge(f"more than {limit >> 20} MB")
                if copied.redact is not None:  # the whole file in one read: a key is never cut in two
                    chunk, found = copied.redact(chunk)
                    copied.redacted += found
                out.write(chunk)
        os.chmod(dest, stat.S_IMODE(info.st_mode) & 0o755)  # no setuid bit comes back with it
    copied.files += 1


async def keep_for_regrade(trial: Any, session: Any) -> None:
    """A judged trial's final workspace (``TrialRun``, after its final row), copied under the
    store's ``<db>.kept/`` for a later ``agentmeter regrade``; a line in the runner's log when it
    is not (too large, or the sandbox could not hand it over)."""
    from ..vocab import TrialStatus

    ctx = trial.ctx
    limit = ctx.suite.spec.suite.regrade_keep_mb << 20
    if not limit or trial.status not in (TrialStatus.PASSED, TrialStatus.FAILED) or \
            not type(ctx.sandbox).keeps_for_regrade:
        return
    name = f"t{trial.id}"
    dest = kept_folder(ctx.writer.store.path, name)
    staging = dest.with_name(name + ".part")  # a container's workspace is copied out there first
    try:
        source = await session.collect_workspace(staging)  # a local workspace: its own path, no copy
        await asyncio.to_thread(_keep, source, dest, staging, limit, ctx.redactor.data)  # one hop: a trivial trial's end stays cheap
    except Exception as exc:  # noqa: BLE001 - a workspace we cannot copy is only not regradable
        await asyncio.to_thread(shutil.rmtree, staging, True)
        ctx.log(f"trial {trial.id}: final workspace not kept for regrade: {exc}")
        return
    ctx.writer.update_trial(trial.id, {"kept": name})  # with the next batch of events: no transaction of its own


def _keep(source: Path, dest: Path, staging: Path, limit: int, redact: Redact) -> None:
    shutil.rmtree(dest, ignore_errors=True)  # a store made anew at the same path left its own
    try:
        copy_workspace(source, dest, limit, redact)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
