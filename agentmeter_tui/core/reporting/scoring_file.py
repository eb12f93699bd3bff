"""Write a calibration into a suite's ``suite.toml`` ``[scoring]``, keeping the file's formatting.

tomlkit edits the document in place (comments, order and layout elsewhere survive). The
new text is validated as a whole suite file before it replaces the old one through a
rename, then the suite is loaded again; if that load fails the old file is put back, so
a suite is never left half-written.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from ..metrics.calibration import Calibration
from ..vocab import TIERS
from .files import write_text_atomically


def scoring_document(text: str, calibration: Calibration, *, write_tiers: bool = True) -> str:
    """``text`` (a suite.toml) with ``[scoring]`` grids, tau and (optionally) tiers replaced."""
    import tomlkit

    doc = tomlkit.parse(text)
    scoring = doc.get("scoring")
    if scoring is None:
        scoring = tomlkit.table()
        doc["scoring"] = scoring
    grids = tomlkit.table()
    taus = tomlkit.table()
    for tier in TIERS:
        budget = calibration.budgets[tier]
        grids[tier] = list(budget.grid)
        taus[tier] = budget.tau
    scoring["grids"] = grids
    scoring["tau"] = taus
    if write_tiers:
        tiers = tomlkit.table()
        for task in sorted(calibration.tiers):
            if calibration.tiers[task] is not None:
                tiers[task] = calibration.tiers[task]
        scoring["tiers"] = tiers
    return tomlkit.dumps(doc)


def scoring_snippet(calibration: Calibration, *, write_tiers: bool = True) -> str:
    """The ``[scoring]`` tables a write would set, as TOML text (what calibrate prints)."""
    return scoring_document("", calibration, write_tiers=write_tiers).strip() + "\n"


def write_scoring(suite_folder: str | Path, calibration: Calibration, *, write_tiers: bool = True) -> Path:
    """Replace the calibrated parts of ``[scoring]`` in the suite's suite.toml; return its path."""
    from ..suites.load import load_suite
    from ..suites.suitefile import SuiteFile
    from ..tomlerrors import validate

    folder = Path(suite_folder)
    path = folder / "suite.toml"
    old = path.read_text(encoding="utf-8")
    new = scoring_document(old, calibration, write_tiers=write_tiers)
    validate(SuiteFile, tomllib.loads(new), path, new)
    write_text_atomically(path, new)
    try:
        load_suite(folder)
    except Exception:
        write_text_atomically(path, old)
        raise
    return path

