"""Secrets never stored: every text that enters the store passes :class:`Redactor` first.

A CLI that holds a real provider key (the default without the metering proxy) and an agent
that prints it would put the key into the store, and from there into ``export atif``,
``export-trials`` and the HTML site, blind or not. So at ingest, before the store (the run's
``TrialRun.emit`` and final row, the importers' ``add_imported``), two kinds of secret are
replaced by a marker ``[redacted:NAME]``:

- **values the runner holds**: the keys of the suite's providers (``api_key_env``), the values
  of the CLIs' ``env`` whose names look like secrets, and every variable of the runner's
  environment whose name does (:data:`SECRET_NAME`: ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``,
  ``*PASSWORD*``, ...). NAME is the variable's name. Values shorter than
  :data:`MIN_VALUE` are left alone: a 3-character "secret" would blank every word it spells.
- **common key shapes** (:data:`SHAPES`), whoever's key it is, NAME being the shape: Anthropic
  (``sk-ant-...``) and OpenAI (``sk-...``, ``sk-proj-...``) keys, Google API keys (``AIza`` and
  35 more), GitHub tokens (``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_`` and 36 more,
  ``github_pat_...``), Slack tokens (``xoxb-``...), AWS access key ids (``AKIA`` + 16), JWTs
  (three base64url parts, the first two ``eyJ``) and the token after ``Bearer``. Each shape
  starts with its own prefix, at the start of a word, so hex digests (sha256 of a file, a git
  commit) and words like ``risk-assessment`` never match; ``sk-`` needs a digit in 20 or more
  characters (a kebab-case name has none).

The count of replacements is kept per trial (the trial's ``extra.redactions``, shown in
review). A key split by the agent into pieces shorter than a shape, or encoded (base64,
reversed), is not found: redaction catches what a careless or curious agent prints, it is no
wall against one that wants the key out (that is the proxy's job: the CLI never holds it).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    from .rows import EventRow

MIN_VALUE = 8
SECRET_NAME = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE_KEY|ACCESS_KEY)",
                         re.IGNORECASE)
_WORD = r"(?<![A-Za-z0-9_-])"
SHAPES: dict[str, str] = {
    "anthropic-key": r"sk-ant-[A-Za-z0-9_-]{20,}",
    "openai-key": r"sk-(?=[A-Za-z0-9_-]{0,200}[0-9])[A-Za-z0-9_-]{20,}",
    "google-key": r"AIza[0-9A-Za-z_-]{35}",
    "github-token": r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    "slack-token": r"xox[abposr]-[A-Za-z0-9-]{10,}",
    "aws-key-id": r"(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])",
    "jwt": r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
}
_BEARER = r"(?<=[Bb]earer )[A-Za-z0-9._~+/-]{20,}=*"
# What every shape starts with: most lines have none, and are passed by one quick search.
_TRIGGERS = "sk-|AIza|gh[pousr]_|github_pat_|xox|AKIA|ASIA|eyJ|earer "


class Redactor:
    """Replaces the values it was given and the key shapes in text and bytes."""

    def __init__(self, named: Mapping[str, str] | Iterable[tuple[str, str]] = ()):
        values: dict[str, str] = {}
        for name, value in dict(named).items():
            if value and len(value) >= MIN_VALUE:
                values.setdefault(value, name)
                escaped = json.dumps(value)[1:-1]  # as it reads inside a JSON string (a tool call's arguments)
                values.setdefault(escaped, name)
        self._names = values
        alternatives = [re.escape(v) for v in sorted(values, key=len, reverse=True)]
        alternatives += [f"{_WORD}(?P<{name.replace('-', '_')}>{shape})" for name, shape in SHAPES.items()]
        alternatives.append(f"(?P<bearer>{_BEARER})")
        self._text = re.compile("|".join(alternatives))
        self._bytes = re.compile(self._text.pattern.encode())
        self._values = tuple(values)
        self._values_b = tuple(v.encode() for v in values)
        self._trigger = re.compile(_TRIGGERS)
        self._trigger_b = re.compile(_TRIGGERS.encode())

    @classmethod
    def for_run(cls, environ: Mapping[str, str] = os.environ, more: Iterable[tuple[str, str]] = ()) -> Redactor:
        """The runner's: its environment's secret-looking variables plus ``more`` (a provider's
        key under its variable's name, a CLI's ``env`` entries)."""
        named = {name: value for name, value in environ.items() if SECRET_NAME.search(name)}
        for name, value in more:
            named.setdefault(name, value)
        return cls(named)

    def _marker(self, match: re.Match) -> str:
        found = match.group(0)
        name = self._names.get(found if isinstance(found, str) else found.decode(errors="replace"))
        if name is None:
            name = next(k for k, v in match.groupdict().items() if v is not None).replace("_", "-")
        return f"[redacted:{name}]"

    @overload
    def text(self, value: str) -> tuple[str, int]: ...
    @overload
    def text(self, value: str | None) -> tuple[str | None, int]: ...

    def text(self, value: str | None) -> tuple[str | None, int]:
        """``value`` with its secrets replaced, and how many were."""
        if not value or not (self._trigger.search(value) or any(v in value for v in self._values)):
            return value, 0
        return self._text.subn(self._marker, value)

    def data(self, value: bytes | None) -> tuple[bytes | None, int]:
        if not value or not (self._trigger_b.search(value) or any(v in value for v in self._values_b)):
            return value, 0
        return self._bytes.subn(lambda m: self._marker(m).encode(), value)

    def rows(self, rows: list[EventRow]) -> tuple[list[EventRow], int]:
        """Event rows with their text and data redacted, and the count."""
        total, out = 0, []
        for row in rows:
            text, n = self.text(row[5])
            data, m = self.data(row[6])
            if n or m:
                total += n + m
                row = (*row[:5], text, data)
            out.append(row)
        return out, total

    def fields(self, fields: dict, names: Iterable[str]) -> int:
        """Redact the string ``fields`` named (in place); how many secrets were replaced."""
        total = 0
        for name in names:
            if isinstance(fields.get(name), str):
                fields[name], n = self.text(fields[name])
                total += n
        return total
