"""``agentmeter calibrate SUITE``: derive task tiers, budget grids and tau from the suite's trials.

Tiers follow seed 000 Eq. 1 over every valid trial in the store; grids are rounded cost
quantiles per tier and tau the rounded P90 cost of failed runs per tier. Without
``--write`` it only prints what it would write; with it, it updates ``[scoring]`` in the
suite's suite.toml (formatting kept, validated, never half-written).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import add_db_argument

EXIT_MISSING, EXIT_BAD_INPUT = 1, 2


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("calibrate", help="derive tiers, budget grids and tau from a suite's trials")
    parser.add_argument("suite", help="suite folder (or the name of one under suites/)")
    add_db_argument(parser)
    parser.add_argument("--write", action="store_true", help="write the result into the suite's [scoring]")
    parser.add_argument("--keep-tiers", action="store_true",
                        help="keep the current task tiers; derive only grids and tau")
    parser.add_argument("--quantiles", default="0.1,0.25,0.5,0.75,0.9", metavar="Q,...",
                        help="cost quantiles of each tier's budget grid (default 0.1,0.25,0.5,0.75,0.9)")
    parser.add_argument("--tasks", action="store_true", help="list every task's effort score and tier")
    parser.set_defaults(handler=calibrate_command)


def _quantiles(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ValueError(f"--quantiles: expected numbers separated by commas, got {text!r}") from None
    if not values or any(not 0 <= v <= 1 for v in values):
        raise ValueError("--quantiles: every quantile must lie within [0, 1]")
    return values


def calibrate_command(args: argparse.Namespace) -> int:
    from ..core.metrics.calibration import calibrate
    from ..core.reporting import attempts_from_store
    from ..core.reporting.scoring_file import scoring_snippet, write_scoring
    from ..core.store import Store
    from ..core.suites.load import load_suite
    from ..core.tomlerrors import InputError
    from .run import resolve_suite_path

    db = Path(args.db)
    if not db.is_file() and not db.is_dir():
        print(f"agentmeter calibrate: no store at {db}", file=sys.stderr)
        return EXIT_MISSING
    store = Store.for_reading(db)  # a store that cannot be read is named before anything else
    try:
        quantiles = _quantiles(args.quantiles)
        suite = load_suite(resolve_suite_path(args.suite))
    except (InputError, ValueError) as exc:
        store.close()
        print(f"agentmeter calibrate: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        runs = attempts_from_store(store, suite.id)
    finally:
        store.close()
    if not runs:
        print(f"agentmeter calibrate: no finished trials of suite '{suite.id}' in {db}", file=sys.stderr)
        return EXIT_MISSING
    scoring = suite.spec.scoring
    current = {t.id: (scoring.tiers or {}).get(t.id, t.tier) for t in suite.tasks}
    try:
        result = calibrate(runs, current, derive_tiers=not args.keep_tiers, quantiles=quantiles)
    except ValueError as exc:
        print(f"agentmeter calibrate: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(_summary(suite.id, runs, current, result, show_tasks=args.tasks))
    snippet = scoring_snippet(result, write_tiers=not args.keep_tiers)
    if not args.write:
        print(f"Would write into {suite.path / 'suite.toml'} (run again with --write):\n")
        print(snippet)
        return 0
    try:
        path = write_scoring(suite.path, result, write_tiers=not args.keep_tiers)
    except InputError as exc:
        print(f"agentmeter calibrate: the calibrated suite would not load, nothing written: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"Wrote [scoring] grids, tau{'' if args.keep_tiers else ' and tiers'} into {path}")
    return 0


def _summary(suite_id: str, runs: list, current: dict, result, *, show_tasks: bool) -> str:
    from ..core.vocab import TIERS

    valid = sum(r.valid for r in runs)
    lines = [f"Calibration of suite '{suite_id}' from {valid} valid trial(s) ({len(runs) - valid} infra-invalid "
             f"left out) on {len(result.efforts)} task(s).", ""]
    changed = [t for t in current if current[t] != result.tiers.get(t)]
    counts = {t: sum(1 for g in result.tiers.values() if g == t) for t in TIERS}
    lines.append("Tiers: " + ", ".join(f"{counts[t]} {t}" for t in TIERS)
                 + f"; {len(changed)} task(s) change tier.")
    lines.append("")
    lines.append(f"{'tier':<8} {'budget grid (USD)':<40} {'tau (USD)':>10}")
    for tier in TIERS:
        budget = result.budgets[tier]
        grid_derived, tau_derived = result.derived[tier]
        grid = ", ".join(f"{b:g}" for b in budget.grid) + ("" if grid_derived else " (default)")
        lines.append(f"{tier:<8} {grid:<40} {budget.tau:>10g}{'' if tau_derived else ' (default)'}")
    if show_tasks:
        lines += ["", f"{'task':<28} {'runs':>5} {'pass':>5} {'reward':>6} {'tokens':>9} {'turns':>6} "
                      f"{'tools':>6} {'E':>6}  tier"]
        for e in sorted(result.efforts, key=lambda e: e.effort):
            old, new = current.get(e.task), result.tiers.get(e.task)
            move = new if old == new else f"{new} (was {old or 'none'})"
            lines.append(f"{e.task:<28} {e.runs:>5} {e.pass_rate:>5.2f} {e.mean_reward:>6.2f} "
                         f"{e.median_tokens:>9.0f} {e.median_turns:>6.1f} {e.median_footprint:>6.1f} "
                         f"{e.effort:>6.3f}  {move}")
    if result.notes:
        lines += ["", *(f"note: {n}" for n in result.notes)]
    return "\n".join(lines) + "\n"
