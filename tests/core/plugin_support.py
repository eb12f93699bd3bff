"""Integrations added from outside the package: a module written into a test's folder and
importable by name for as long as the test runs."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def module_in(folder: Path, name: str, text: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``text`` as module ``name`` in ``folder``, on the import path; forgotten afterwards."""
    (folder / f"{name}.py").write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(folder))
    try:
        yield
    finally:
        sys.modules.pop(name, None)
