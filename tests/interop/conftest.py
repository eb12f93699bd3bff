from __future__ import annotations

from pathlib import Path

import pytest

from tests.interop.support import HARBOR_JOBS


@pytest.fixture
def harbor_jobs() -> Path:
    """Job folders written by a real `harbor run` (scripts/harbor_fixtures.sh)."""
    return HARBOR_JOBS
