"""The six agent CLIs' own session stores as trials (``agentmeter import sessions``).

One reader per CLI, named by its adapter (``session_reader``) and imported when used. A session becomes one
trial of the suite ``sessions-CLI-HOST``: its project folder's name is the task, the transcript
and the five token classes come from the CLI's files, and the status is ``failed`` with reason
``unverified`` (a session has no verifier; a reviewer scores it 0-3), or ``errored`` when the
session ended on an API error. ``--since`` and ``--project`` filter; a session imported before
is not read again.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from ...harnesses import ADAPTERS
from ...registry import UnknownName, load
from ..trials import ImportedTrial, Skipped
from .base import BadSession, SessionReader, parse_ts

def session_clis() -> list[str]:
    """The adapters whose CLI keeps a session store we can read."""
    return [name for name in ADAPTERS.names() if ADAPTERS.get(name).session_reader]


def reader_class(cli: str) -> type[SessionReader]:
    target = ADAPTERS.get(cli).session_reader if cli in ADAPTERS else None
    if not target:
        raise UnknownName(f"no session reader for '{cli}'; known: {', '.join(session_clis())}")
    return load(target)


def default_path(cli: str, home: Path | None = None) -> Path:
    """The CLI's store under ``home`` (default: the user's home, or where the CLI's variable says)."""
    return reader_class(cli).default_root(home)


def default_suite(cli: str) -> str:
    return f"sessions-{cli}-{socket.gethostname().split('.')[0]}"


def read_sessions(cli: str, root: Path, suite: str | None = None, since: datetime | None = None,
                  project: str | None = None, known: set[str] | None = None
                  ) -> Iterator[ImportedTrial | Skipped | str]:
    reader = reader_class(cli)()
    suite = suite or default_suite(cli)
    wanted = str(Path(project).resolve()) if project else None
    cutoff = since.timestamp() if since else None
    try:
        sources = list(reader.sources(root))
    except BadSession as exc:
        yield Skipped(exc.where, exc.why)
        return
    for source in sources:
        key = f"session:{cli}:{source.id}"
        if known is not None and key in known:
            yield key
            continue
        try:
            trial = reader.trial(source, suite)
        except BadSession as exc:
            yield Skipped(exc.where, exc.why)
            continue
        except OSError as exc:
            yield Skipped(str(source.files[0]), exc.strerror or str(exc))
            continue
        if cutoff is not None and (parse_ts(trial.started_at) or 0) < cutoff:
            continue
        if wanted is not None and str(trial.extra["session"]["project"] or "").rstrip("/") != wanted:
            continue
        yield trial
