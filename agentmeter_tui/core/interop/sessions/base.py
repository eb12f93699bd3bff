"""What every session-store reader shares: finding a CLI's session files, reading their lines
safely, and turning one session into one trial.

Tokens are never counted here: the adapter's own ``recover`` (the code that reads the same
files after a killed run) gives the session's five classes, so a record the CLI wrote twice
is counted once exactly as it is for a killed trial. The transcript's usage events come from
the same records (one per call, the largest copy of a repeated one); where they do not add
up to the adapter's total, one last usage event says what the total adds.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import orjson

from ...harnesses import get_adapter
from ...usage import TokenUsage
from ...vocab import EventKind
from ..atif_read import ImportedEvent
from ..trials import ImportedTrial

LINE_LIMIT = 8 * 1024 * 1024  # bytes; a longer line is refused (named), never read whole into memory


class BadSession(ValueError):
    """A session file that cannot be read as text lines: named with its line."""

    def __init__(self, where: str, why: str):
        self.where, self.why = where, why
        super().__init__(f"{where}: {why}")


@dataclass
class SessionSource:
    id: str
    files: list[Path]  # the main file first, then its subagents' files
    root: Path
    data: dict[Path, bytes] = field(default_factory=dict)  # files as read, for the adapter's recovery


@dataclass
class CliSession:
    """One session as read: its transcript and what it says about itself."""

    events: list[ImportedEvent] = field(default_factory=list)
    project: str | None = None
    model: str | None = None
    version: str | None = None
    started: float | None = None  # epoch seconds
    finished: float | None = None
    errors: list[str] = field(default_factory=list)
    cost_usd: float | None = None  # what the CLI itself recorded, if it does (opencode)
    _calls: dict[str, TokenUsage] = field(default_factory=dict)

    def seen(self, ts: float | None) -> None:
        if ts is None:
            return
        self.started = ts if self.started is None else min(self.started, ts)
        self.finished = ts if self.finished is None else max(self.finished, ts)

    def add(self, kind: EventKind, text: str, ts: float | None = None, meta: dict | None = None,
            model: str | None = None) -> None:
        self.events.append(ImportedEvent(kind, text, ts, meta, model=model))

    def call(self, call_id: str, usage: TokenUsage, ts: float | None, model: str | None) -> None:
        """A model call's usage; a repeated record of the same call adds only its growth."""
        seen = self._calls.get(call_id)
        if seen is None:
            self._calls[call_id] = usage
            self.events.append(ImportedEvent(EventKind.USAGE, usage.text(), ts, usage=usage, model=model))
        elif usage.raw > seen.raw:
            self._calls[call_id] = usage
            delta = usage - seen
            self.events.append(ImportedEvent(EventKind.USAGE, delta.text(), ts, usage=delta, model=model))


def parse_ts(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) / 1000 if value > 1e11 else float(value)  # milliseconds or seconds
    if isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return None
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    return None


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    try:
        return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")
    except (ValueError, OverflowError, OSError):
        raise ValueError(f"field 'timestamp': {ts!r} is not a date") from None


def read_lines(path: Path, keep: dict[Path, bytes] | None = None) -> Iterator[tuple[int, bytes, dict | None]]:
    """``(line number, raw line, object or None)``; :class:`BadSession` names the first line that
    is not UTF-8 or is longer than :data:`LINE_LIMIT`. A line that is not a JSON object gives None
    (kept as a raw event: a killed CLI's last line is often cut short). The file is read once;
    with ``keep`` its bytes are left there for the adapter's recovery to read, and bytes already
    there (read through the import's walls, :mod:`..walls`) are not read again."""
    data = keep[path] if keep is not None and path in keep else path.read_bytes()
    if keep is not None:
        keep[path] = data
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad_line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        raise BadSession(f"{path}:{bad_line}", f"not UTF-8 (byte {column} of the line)") from None
    loads, decode_error = orjson.loads, orjson.JSONDecodeError
    for number, line in enumerate(data.split(b"\n"), start=1):
        if len(line) > LINE_LIMIT:
            raise BadSession(f"{path}:{number}", f"line longer than {LINE_LIMIT // (1024 * 1024)} MiB")
        if not line or line.isspace():
            continue
        try:
            value = loads(line)
        except decode_error:
            value = None
        yield number, line, value if type(value) is dict else None


class SessionReader(ABC):
    cli: ClassVar[str]
    home_path: ClassVar[str]  # the store under the user's home
    layout: ClassVar[str]  # where the session files sit under the store, as the CLI lays them out
    reads_files: ClassVar[bool] = True  # its sessions are files read whole (opencode's is a database)

    @classmethod
    def default_root(cls, home: Path | None = None) -> Path:
        """Where the store is when no path is given: under ``home`` (default: the user's)."""
        return (home or Path.home()) / cls.home_path

    @abstractmethod
    def sources(self, root: Path) -> Iterator[SessionSource]: ...

    @abstractmethod
    def read(self, source: SessionSource) -> CliSession: ...

    def file_bytes(self, source: SessionSource) -> dict[str, bytes]:
        """The session's files as the adapter's ``recover`` takes them (name -> bytes)."""
        return {str(p.relative_to(source.root)): source.data[p] if p in source.data else p.read_bytes()
                for p in source.files}

    def totals(self, source: SessionSource, session: CliSession) -> tuple[TokenUsage, int]:
        recovery = get_adapter(self.cli).recover(self.file_bytes(source))
        return (recovery.usage, recovery.turns) if recovery is not None else (TokenUsage(), 0)

    def trial(self, source: SessionSource, suite: str) -> ImportedTrial:
        session = self.read(source)
        tokens, turns = self.totals(source, session)
        source.data.clear()  # the files' bytes are not needed past this point
        shown = sum((e.usage for e in session.events if e.usage is not None), TokenUsage())
        if shown != tokens:
            delta = tokens - shown
            session.events.append(ImportedEvent(EventKind.USAGE, f"{delta.text()} (session total)",
                                                session.finished, usage=delta, model=session.model))
        project = session.project or ""
        trial = ImportedTrial(
            f"session:{self.cli}", f"session:{self.cli}:{source.id}", suite, Path(project).name or "(no project)",
            session.model or "unknown", self.cli, "errored" if session.errors else "failed", tokens=tokens,
            turns=turns, reason="; ".join(session.errors)[:500] if session.errors else "unverified",
            started_at=iso(session.started), finished_at=iso(session.finished), cli_version=session.version,
            usage_source=f"session:{self.cli}", events=session.events,
            extra={"session": {"id": source.id, "project": project, "files": [str(p.relative_to(source.root))
                                                                             for p in source.files]}})
        if session.cost_usd is not None:
            trial.cost_actual_usd, trial.cost_actual_source = session.cost_usd, f"session:{self.cli}"
        trial.origin = str(source.files[0])
        trial.count_events()
        return trial
