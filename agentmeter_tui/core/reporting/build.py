"""Build a :class:`Report` from runs, from trial records, or straight from a store.

The store path is the fast one: one SQL query reads every final trial of the suite into
light :class:`Attempt` objects (no pydantic, no per-row JSON), then the pure metrics do the
rest. Scoring settings (alpha, grids, tau, calibrated tiers) come from the suite's
``suite.toml`` ``[scoring]`` when the store knows the suite folder, else Table 1 defaults.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from ..metrics.ams import DEFAULT_ALPHA, TABLE1, TierBudget, delta_best, score_configuration
from ..metrics.intervals import DEFAULT_SEED, Intervals, bootstrap, task_table
from ..metrics.rubric import cell_medians, honesty_gate, standings, task_winners
from ..metrics.attempts import Config, Attempt, Selection, select_attempts
from ..metrics.validation import rank_validation
from ..tomlerrors import InputError, read_input
from ..vocab import TIERS
from .every_trial import trial_table
from .records import STATUSES, TrialRecord
from .report import Report, RubricTable


def resolve_budgets(scoring: Any | None) -> tuple[dict[str, TierBudget], str]:
    """Per-tier budgets from a ``Scoring`` section, Table 1 for every tier it leaves out."""
    grids = (scoring.grids or {}) if scoring is not None else {}
    taus = (scoring.tau or {}) if scoring is not None else {}
    budgets = {}
    for tier in TIERS:
        grid = grids.get(tier)
        if grid is not None and not grid:
            raise ValueError(f"[scoring] grids.{tier} is empty: a budget grid needs at least one point")
        default = TABLE1[tier]
        budgets[tier] = TierBudget(tuple(grid) if grid else default.grid, taus.get(tier, default.tau))
    if not grids and not taus:
        source = "Table 1 of the AgentMeter paper (defaults)"
    elif all(t in grids for t in TIERS) and all(t in taus for t in TIERS):
        source = "the suite's [scoring] section"
    else:
        source = "the suite's [scoring] section, Table 1 defaults for the rest"
    return budgets, source


def _ordered_configs(configs: Iterable[Config]) -> list[Config]:
    """Grouped by model like Table 2; models and CLIs each in order of first appearance."""
    unique = list(dict.fromkeys(configs))
    model_pos = {m: i for i, m in enumerate(dict.fromkeys(m for m, _ in unique))}
    cli_pos = {c: i for i, c in enumerate(dict.fromkeys(c for _, c in unique))}
    return sorted(unique, key=lambda mc: (model_pos[mc[0]], cli_pos[mc[1]]))


def build_report(runs: Sequence[Attempt], *, suite: str, task_tiers: Mapping[str, str | None] | None = None,
                 configs: Sequence[Config] | None = None, scoring: Any | None = None, own: str | None = None,
                 selection: Selection = "latest", seed_prompt_hash: str | None = None,
                 scores: Mapping[int, float] | None = None, subset: Sequence[str] | None = None,
                 subset_source: str | None = None, resamples: int = 0, seed: int = DEFAULT_SEED,
                 defer_intervals: bool = False) -> Report:
    """The whole report.

    ``task_tiers``: the suite's tasks in order -> tier (default: the tasks seen in ``runs``,
    untiered). ``scoring``: a ``suites.Scoring`` (alpha, grids, tau, tiers) or None for the
    defaults. ``scores``: trial id -> latest rubric score, to add the rubric table (runs need
    ids; a float where reviewers' median falls between two points). ``subset``: task ids for rank validation against the full set.
    ``resamples``: with a positive count, bootstrap intervals over tasks (seeded by ``seed``);
    ``defer_intervals``: computed by :meth:`Report.settle`, not here.
    """
    tiers: dict[str, str | None] = dict(task_tiers) if task_tiers is not None else {}
    for run in runs:
        tiers.setdefault(run.task, None)
    if scoring is not None and scoring.tiers:
        tiers.update({t: g for t, g in scoring.tiers.items() if t in tiers})
    alpha = scoring.alpha if scoring is not None else DEFAULT_ALPHA
    budgets, source = resolve_budgets(scoring)
    ordered = _ordered_configs(list(configs or []) + [r.config for r in runs])

    attempts: dict[Config, list[Attempt]] = defaultdict(list)
    for run in runs:
        attempts[run.config].append(run)
    selected: dict[Config, dict[str, Attempt]] = defaultdict(dict)
    for (config, task), run in select_attempts(runs, selection).items():
        selected[config][task] = run
    rows = [score_configuration(c, attempts[c], selected[c], tiers, budgets, alpha) for c in ordered]
    gaps = delta_best({r.config: r.ams for r in rows})
    for row in rows:
        row.delta_best = gaps[row.config]

    sizes = {t: sum(1 for g in tiers.values() if g == t) for t in TIERS}
    sizes["none"] = sum(1 for g in tiers.values() if g is None)
    report = Report(suite=suite, seed_prompt_hash=seed_prompt_hash, selection=selection, alpha=alpha,
                    budgets=budgets, budgets_source=source, tier_sizes=sizes, configurations=rows, own=own,
                    notes=_notes(rows, sizes), trials=trial_table(ordered, attempts, list(tiers)))
    if scores is not None:
        report.rubric = _rubric(runs, scores, list(tiers), ordered, own)
        winrates = {c: s.winrate for c, s in report.rubric.standings.items()}
        for row in rows:
            row.rubric_winrate = winrates.get(row.config)
    if resamples > 0:
        report.pending = partial(_intervals, ordered, attempts, tiers, budgets, alpha, resamples, seed)
        if not defer_intervals:
            report.settle()
    if subset is not None:
        _check_subset(subset, tiers, subset_source)
        part = {t: tiers[t] for t in dict.fromkeys(subset)}
        sub_ams = {c: score_configuration(c, attempts[c], selected[c], part, budgets, alpha).ams for c in ordered}
        report.validation = rank_validation({r.config: r.ams for r in rows}, sub_ams)
        report.validation_source = f"{subset_source or 'subset'} ({len(part)} of {len(tiers)} tasks)"
    return report


def _intervals(ordered: list[Config], attempts: Any, tiers: dict[str, str | None],
               budgets: dict[str, TierBudget], alpha: float, resamples: int, seed: int) -> Intervals:
    """The bootstrap: numpy loads with it (deferred, in a site's parent after its workers start)."""
    return bootstrap(ordered, task_table(ordered, attempts, tiers, budgets, alpha), resamples, seed)


def _notes(rows: list, sizes: dict[str, int]) -> list[str]:
    notes = []
    if sizes["none"]:
        notes.append(f"{sizes['none']} task(s) have no tier and are outside the tier scores and AMS; "
                     "run `agentmeter calibrate` to assign tiers")
    empty = [t for t in TIERS if not sizes[t]]
    if empty and len(empty) < len(TIERS):
        notes.append(f"no {'/'.join(empty)} tasks: AMS is the mean of the other tier scores")
    unpriced = [(r, r.unpriced_attempts) for r in rows if r.unpriced_attempts]
    if unpriced:
        total = sum(n for _, n in unpriced)
        notes.append(f"{total} attempt(s) have no price (unknown cost, never counted as $0): USD/Pass is null "
                     f"for {len(unpriced)} configuration(s); such runs fit no budget point and are not counted "
                     "as expensive failures")
    invalid = sum(r.invalid_attempts for r in rows)
    if invalid:
        notes.append(f"{invalid} infra-invalid attempt(s): outside pass and tier scores, inside token and cost sums")
    missing = sum(r.missing_tasks for r in rows)
    if missing:
        notes.append(f"{missing} (task, configuration) cell(s) have no valid run and count zero")
    return notes


def _rubric(runs: Sequence[Attempt], scores: Mapping[int, float], tasks: list[str], configs: list[Config],
            own: str | None) -> RubricTable:
    scored, ignored = [], 0
    for run in runs:
        if run.id is None or run.id not in scores:
            continue
        if run.valid:
            scored.append((run.config, run.task, scores[run.id]))
        else:
            ignored += 1
    medians = cell_medians(scored)
    table = standings(medians)
    gate = honesty_gate(own, table, configs) if own else None
    return RubricTable(tasks=tasks, configs=configs, medians=medians, winners=task_winners(medians),
                       standings=table, trials_scored=len(scored), gate=gate, ignored_scores=ignored)


# -- sources ----------------------------------------------------------------------------------

def attempt_from_record(record: TrialRecord) -> Attempt:
    return Attempt(record.task, record.model, record.cli, record.trial, record.status, record.passed, record.quality,
               record.tokens.raw, record.cost_usd, int(record.extra.get("attempt") or 0), record.turns,
               record.tool_calls, record.finished_at, record.id)


def report_from_records(records: Sequence[TrialRecord], *, scoring: Any | None = None, own: str | None = None,
                        selection: Selection = "latest", **kwargs: Any) -> Report:
    """A report from exported trial records (tiers as the records carry them, unless ``scoring`` says)."""
    tiers: dict[str, str | None] = {}
    for record in records:
        if tiers.get(record.task) is None:
            tiers[record.task] = record.tier
    suites = sorted({r.suite for r in records})
    return build_report([attempt_from_record(r) for r in records], suite=", ".join(suites) or "-", task_tiers=tiers,
                        scoring=scoring, own=own, selection=selection, **kwargs)


def attempts_from_store(store: Any, suite_id: str) -> list[Attempt]:
    """Every final trial of a suite, in one query."""
    return [Attempt(t, m, c, i, s, bool(p), q, raw, cost, a, turns, tools, fin, pk)
            for t, m, c, i, s, p, q, raw, cost, a, turns, tools, fin, pk in store.reports.run_tuples(suite_id, STATUSES)]


def cost_notes(checks: Mapping[str, Any]) -> list[str]:
    """Notes on the costs beside the comparable one: provider-charged totals and divergences."""
    notes = []
    if checks["charged_trials"]:
        comparable = checks["comparable_of_charged_usd"]
        versus = f" (comparable cost of the same trials: ${comparable:.4f})" if comparable is not None else ""
        notes.append(f"{checks['charged_trials']} trial(s) carry the provider's own charge "
                     f"(cost_actual_source = provider): ${checks['charged_usd']:.4f}{versus}")
    if checks["divergent"]:
        notes.append(f"{checks['divergent']} trial(s) flagged cost-divergence: comparable, CLI-reported and "
                     "provider-charged cost differ by more than 2 % (see review)")
    return notes


def regrade_notes(regraded: Sequence[Mapping[str, Any]], listed: int = 20) -> list[str]:
    """The report's marker for regraded verdicts (``agentmeter regrade``): how many, and which,
    with the original verdict the tables no longer count (it stays in the store)."""
    if not regraded:
        return []
    shown = "; ".join(f"trial {r['trial_id']} ({r['task']}, {r['model']}, {r['cli']}) {r['original']} -> "
                      f"{r['regraded']} at {r['at']} (verifier {r['verifier_hash'][:12]})" for r in regraded[:listed])
    more = f"; and {len(regraded) - listed} more" if len(regraded) > listed else ""
    return [f"regraded: {len(regraded)} trial verdict(s) come from a regrade (the latest counts, the "
            f"original is kept): {shown}{more}"]


def suite_settings(row: Mapping[str, Any]) -> tuple[Any | None, str | None, Path | None]:
    """(Scoring, own, suite.toml path) for a store's suite row; Scoring None when unknown."""
    from ..suites.suitefile import Scoring
    from ..tomlerrors import load_toml, validate

    own = row.get("own")
    folder = row.get("path")
    toml_path = Path(folder) / "suite.toml" if folder else None
    if toml_path is None or not toml_path.is_file():
        return None, own, None
    data, text = load_toml(toml_path)
    scoring = validate(Scoring, data.get("scoring", {}), toml_path, text, prefix=("scoring",))
    return scoring, own or data.get("suite", {}).get("own"), toml_path


def report_from_store(store: Any, suite_id: str | None = None, *, selection: Selection = "latest",
                      rubric: bool = False, subset: Sequence[str] | None = None, subset_source: str | None = None,
                      scoring: Any | None = None, agreement: bool = False, resamples: int = 0,
                      seed: int = DEFAULT_SEED, defer_intervals: bool = False) -> Report:
    """A report on a suite of a store (the latest suite when ``suite_id`` is None)."""
    row = store.suite_row(suite_id)
    if row is None:
        known = ", ".join(store.suite_ids()) or "none"
        raise LookupError(f"no suite '{suite_id}' in {store.path} (suites: {known})" if suite_id
                          else f"no suite in {store.path}")
    suite_id = row["id"]
    own = row.get("own")
    notes = []
    if scoring is None:
        scoring, own, _ = suite_settings(row)
        if scoring is None and row.get("path"):
            notes.append(f"suite folder {row['path']} not found: Table 1 defaults, task tiers as stored")
    tiers = store.views.task_tiers(suite_id)
    configs = store.views.configuration_pairs(suite_id)
    runs = attempts_from_store(store, suite_id)
    scores = None
    if rubric:
        from ..review.reviewing import agreed_scores

        # Several reviewers: a trial's score is its adjudicated one, else the median of its reviewers.
        scores = agreed_scores(store, suite_id)
    report = build_report(runs, suite=suite_id, task_tiers=tiers, configs=configs, scoring=scoring, own=own,
                          selection=selection, seed_prompt_hash=row.get("seed_hash"), scores=scores,
                          subset=subset, subset_source=subset_source, resamples=resamples, seed=seed,
                          defer_intervals=defer_intervals)
    report.notes[:0] = notes
    report.notes += cost_notes(store.reports.cost_checks(suite_id))
    report.notes += regrade_notes(store.regrades.regraded_verdicts(suite_id))
    sources = store.imports.source_counts(suite_id, STATUSES)
    if set(sources) - {"agentmeter"}:  # imported trials: say how many of each source the report counts
        report.notes.append("trials by source: " + ", ".join(f"{name} {n}" for name, n in sources.items()))
    if agreement:
        from ..review.reviewing import agreement_from_store

        report.agreement = agreement_from_store(store, suite_id)
    if store.reports.has_differential(suite_id):
        from ..difftest.summary import funnel_rows
        from .records import records_from_store

        report.funnel = [r.as_dict() for r in funnel_rows(records_from_store(store, suite_id))]
    return report


class TaskList(list):
    """Task ids read from a file, remembering the line of each (for error messages)."""

    def __init__(self, tasks: Iterable[str], path: str | Path, lines: Mapping[str, int]):
        super().__init__(tasks)
        self.path, self.lines = Path(path), dict(lines)


def _check_subset(subset: Sequence[str], known: Mapping[str, Any], source: str | None) -> None:
    unknown = [t for t in subset if t not in known]
    if not unknown:
        return
    shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
    if isinstance(subset, TaskList):
        raise InputError(subset.path, subset.lines.get(unknown[0]), "task", f"not a task of the suite: {shown}")
    raise ValueError(f"{source or 'subset'}: not a task of the suite: {shown}")


def read_task_list(path: str | Path) -> TaskList:
    """Task ids, one per line; blank lines and ``#`` comments ignored. Errors name file and line."""
    path = Path(path)
    text = read_input(path)
    tasks: list[str] = []
    seen: dict[str, int] = {}  # task id -> the line it was listed on
    for number, line in enumerate(text.splitlines(), start=1):
        task = line.split("#", 1)[0].strip()
        if not task:
            continue
        if " " in task or "\t" in task:
            raise InputError(path, number, "task", f"one task id per line, got {task!r}")
        if task in seen:
            raise InputError(path, number, "task", f"task '{task}' already listed on line {seen[task]}")
        seen[task] = number
        tasks.append(task)
    if not tasks:
        raise InputError(path, None, "task", "the task list is empty")
    return TaskList(tasks, path, seen)
