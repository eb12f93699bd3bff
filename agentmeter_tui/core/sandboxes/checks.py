"""One finding of a host check (``doctor``, ``hosts check``, a sandbox's ``check_hosts``): a leaf, so
that the sandbox base class can name it without importing the probes that make findings."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class HostCheck:
    subject: str
    ok: bool | None
    detail: str
    fix: str = ""
