"""The case file: command classes, each with its test cases, and the workspaces they start from.

Written by ``agentmeter difftest gen`` (or by hand) as JSON, read by the differential verifier.
A case is an argv (appended to the task's ``run`` command), an optional stdin, and the files
placed in a fresh workspace before it runs: a named fixture from the file's ``fixtures`` plus
the case's own ``files``. Whether a case is positive or negative is decided when it runs, by
the oracle's exit code; ``oracle_exit`` records what the oracle did when the file was made.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..tomlerrors import InputError, validate
from . import batchrun

FORMAT: Final = "agentmeter-difftest-cases/1"  # Final: its Literal type, the field's
Intent = Literal["common", "boundary", "error", "manual"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FileSpec(Strict):
    """A file placed in the case workspace; ``age_days`` back-dates its modification time."""

    path: str = Field(min_length=1)
    text: str = ""
    age_days: float | None = Field(None, ge=0)
    executable: bool = False


class Case(Strict):
    id: str
    argv: list[str]
    stdin: str | None = None
    fixture: str | None = None
    files: list[FileSpec] = []
    intent: Intent = "manual"
    oracle_exit: int | None = None  # what the oracle did when the file was generated


class CommandClass(Strict):
    id: str
    command: list[str] = []  # the subcommand words
    flags: list[str] = []  # the optional flags that make this class (required ones are implied)
    cases: list[Case]


class CaseFile(Strict):
    format: Literal["agentmeter-difftest-cases/1"] = FORMAT
    tool: str = ""
    schema_sha256: str | None = None
    oracle_checked: bool = False
    fixtures: dict[str, list[FileSpec]] = {}
    classes: list[CommandClass]

    def case_count(self) -> int:
        return sum(len(c.cases) for c in self.classes)

    def files_for(self, case: Case) -> list[FileSpec]:
        return [*self.fixtures.get(case.fixture or "", []), *case.files]


MAX_CASES_BYTES = 64 << 20  # a case file is read whole: past this it is refused, not read


def load_cases(path: Path, root: Path | None = None) -> CaseFile:
    """Read and validate a case file (under ``root``, its task folder; default its own folder);
    errors name the file and the field. Only a regular file is read, bounded, without following
    a link out or waiting on a pipe (``interop.walls.read_under``)."""
    from ..interop.walls import read_under

    try:
        data = json.loads(read_under(root or path.parent, path, limit=MAX_CASES_BYTES).decode("utf-8"))
    except FileNotFoundError:
        raise InputError(path, None, None, "case file not found") from None
    except OSError as exc:  # refused (a pipe, a device, a link out, too big) or unreadable
        raise InputError(path, None, None, f"case file not read: {getattr(exc, 'why', None) or exc.strerror or exc}") \
            from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        raise InputError(path, line, None, f"not a JSON case file: {exc}") from None
    cases: CaseFile = validate(CaseFile, data, path, "")  # JSON: the field, no line
    for cls in cases.classes:
        for case in cls.cases:
            if case.fixture and case.fixture not in cases.fixtures:
                raise InputError(path, None, f"classes.{cls.id}.{case.id}.fixture",
                                 f"no fixture '{case.fixture}' in fixtures")
    ids = [case.id for cls in cases.classes for case in cls.cases]
    if len(ids) != len(set(ids)):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise InputError(path, None, "classes", f"case ids must be unique: {', '.join(dupes[:5])}")
    return cases


def save_cases(cases: CaseFile, path: Path) -> None:
    """Write atomically: a half-written case file must never be read by a verifier."""
    text = json.dumps(cases.model_dump(exclude_defaults=False), indent=1, ensure_ascii=False) + "\n"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def place_files(root: Path, files: list[FileSpec], now: float | None = None) -> None:
    """Write ``files`` under ``root``; a path that leaves ``root`` is refused."""
    batchrun.place_files(root, [spec.model_dump() for spec in files], now)
