"""``agentmeter report --format html --out DIR``: a static site from one store.

It works from ``file://`` with no server and no network: every page, the stylesheet, the small
sorting script and the charts (inline SVG) are files in DIR, linked relatively. The index holds
the Table-2 view with bootstrap intervals, the AMS heatmap, pass against cost with the Pareto
front, passes by tier, the rubric with winners and ties, the reviewers' agreement and the
methodology; each configuration and each trial has a page, and each trial its ATIF file beside it.
The index opens on a leaderboard (``leaderboard``); a trial page is a transcript viewer (search,
first error, verifier output beside, tokens and cost per call). ``report --compare A B --format
html``: B's site, with ``compare.html`` (the comparison against A) and A's flips on the index.
``blind``: no model or CLI name anywhere in the site (labels instead; free text masked as in the
TUI's blind review).

The site is written into a folder beside DIR and renamed into place: a reader never sees half a
site, and a failed build leaves the previous one.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ...metrics.intervals import MIN_TASKS
from ...usage import TOKEN_CLASSES
from ...vocab import TIERS
from ..charts import heatmap_data, scatter_data
from ..compare import RunComparison
from ..formats import FolderFormat
from ..render import fmt_score, fmt_usd
from ..report import Report
from . import leaderboard, model, pages, svg

ASSETS = ("site.css", "site.js")


@dataclass(frozen=True)
class SiteSummary:
    folder: Path
    pages: int
    trials: int


def _prices(report_row: dict[str, Any]) -> Any | None:
    """The suite's price snapshot, when its folder is on this machine."""
    from ...pricing import PriceSnapshot
    from ..build import suite_settings

    try:
        _scoring, _own, toml_path = suite_settings(report_row)
        if toml_path is None:
            return None
        from ...tomlerrors import load_toml

        data, _text = load_toml(toml_path)
        pricing = (data.get("suite") or {}).get("pricing")
        return PriceSnapshot.load(toml_path.parent / pricing) if pricing else None
    except (OSError, ValueError):
        return None


def _extra(trial: dict[str, Any]) -> dict[str, Any]:
    try:
        value = orjson.loads(trial["extra"]) if trial.get("extra") else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def build_site(store: Any, report: Report, out: Path, *, blind: bool = False,
               comparison: RunComparison | None = None) -> SiteSummary:
    """Write the site of ``report`` (built from ``store``) into ``out``; with ``comparison`` (this
    run as its B side) also ``compare.html``, and the index's per-task map marks its flips."""
    from ...review.reviewing import masker_for

    suite_id = report.suite
    trials = store.trials(suite_id)
    for trial in trials:
        trial["image"] = _extra(trial).get("image")
    scores_by_trial: dict[int, list[Any]] = {}
    for score in store.reviews.score_rows(suite_id):
        scores_by_trial.setdefault(score.trial_id, []).append(score)
    notes_by_trial = {t["id"]: store.views.notes(t["id"]) for t in trials}
    names = model.Names.for_report(report, blind, masker_for(store, suite_id) if blind else None)
    out = Path(out)
    partial = out.with_name(out.name + ".part")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "config").mkdir(parents=True)
    (partial / "trial").mkdir()
    for asset in ASSETS:
        shutil.copyfile(pages.TEMPLATES / asset, partial / asset)
    # Blind: versions are masked like every other identity (a CLI's version can equal ours).
    common = {"suite": names.suite(suite_id), "blind": blind, "version": names.text(report.tool_version)}
    site = _OwnPages(report, names, pages.environment(), common, partial, trials, scores_by_trial,
                     {} if blind else store.flags.flags_of([t["id"] for t in trials]),  # hidden as blind review hides them
                     {r.config: n + 1 for n, r in enumerate(report.configurations)}, comparison,
                     store.suite_row(suite_id) or {"id": suite_id}, _checksum(trials, scores_by_trial, notes_by_trial))
    pages.write_trials(Path(store.path), partial, trials, pages.Shared(
        common, names, site.config_index, scores_by_trial, notes_by_trial, site.flags), site.write)
    _replace(partial, out)
    return SiteSummary(out, 1 + (comparison is not None) + len(report.configurations) + len(trials), len(trials))


def _checksum(trials: list[dict[str, Any]], scores_by_trial: dict[int, list[Any]],
              notes_by_trial: dict[int, list[dict[str, Any]]]) -> str:
    """The methodology's checksum of what the tables are computed from: trials, scores, notes."""
    return model.data_checksum(
        [*((t["id"], t["status"], t["passed"], t["quality"], t["cost_usd"], *(t[c] for c in TOKEN_CLASSES))
           for t in trials),
         *((s.trial_id, s.score, s.reviewer, s.note, s.created_at) for rows in scores_by_trial.values() for s in rows),
         *((n["id"], n["trial_id"], n["text"]) for rows in notes_by_trial.values() for n in rows)])


def _replace(partial: Path, out: Path) -> None:
    """The finished folder in place of the old one: a reader never sees half a site."""
    if out.exists():
        old = out.with_name(out.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
        partial.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        partial.rename(out)


@dataclass
class _OwnPages:
    """The index, the comparison and the configuration pages: written while the workers write
    the trials' pages."""

    report: Report
    names: Any
    env: Any
    common: dict[str, Any]
    partial: Path
    trials: list[dict[str, Any]]
    scores_by_trial: dict[int, list[Any]]
    flags: dict[int, Any]
    config_index: dict[Any, int]
    comparison: RunComparison | None
    suite_row: dict[str, Any]
    checksum: str

    def write(self) -> None:
        self.report.settle()  # the intervals, if deferred: only the index shows them
        self._index()
        if self.comparison is not None:
            text = self.env.get_template("compare.html").render(
                **self.common, root="", title="Runs compared", cmp=leaderboard.comparison_view(self.comparison,
                                                                                              self.names))
            (self.partial / "compare.html").write_text(text, encoding="utf-8")
        self._configs()

    def _index(self) -> None:
        report, names, trials = self.report, self.names, self.trials
        scatter = scatter_data(report)
        agreement = None
        if report.agreement is not None:
            a = report.agreement
            agreement = {"n_trials": a.n_trials, "alpha": fmt_score(a.alpha_ordinal),
                         "pairs": [{"a": names.text(p.a), "b": names.text(p.b), "n": p.n,
                                    "kappa": fmt_score(p.kappa_quadratic), "exact": fmt_score(p.exact)} for p in a.pairs]}
        index = self.env.get_template("index.html").render(
            **self.common, root="", title=f"AgentMeter report: {self.common['suite']}", configs=len(report.configurations),
            leaderboard=leaderboard.leaderboard_rows(report, names, self.config_index), min_tasks=MIN_TASKS,
            tasks_map=leaderboard.task_heatmap(report, names, self.comparison), compare=self.comparison is not None,
            tasks=report.n_tasks, trials=len(trials), selection=report.selection,
            header=model.table_header(report), rows=model.table_rows(report, names),
            heatmap=svg.heatmap(heatmap_data(report), names), scatter=svg.scatter(scatter, names),
            left_out=[names.text(n) if not self.common["blind"] else "[hidden]" for n in scatter.left_out],
            tier_names=TIERS, tier_sizes=report.tier_sizes,
            tier_rows=[{"name": f"{names(r.model)} / {names(r.cli)}", "passes": [r.passes_by_tier[t] for t in TIERS]}
                       for r in report.configurations],
            rubric=model.rubric_view(report, names), agreement=agreement,
            methodology=model.methodology(report, self.suite_row, trials, names, self.checksum, _prices(self.suite_row)),
            notes=[names.text(n) for n in report.notes])
        (self.partial / "index.html").write_text(index, encoding="utf-8")

    def _configs(self) -> None:
        names = self.names
        by_config: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for trial in self.trials:
            by_config.setdefault((trial["model"], trial["cli"]), []).append(trial)
        config_page = self.env.get_template("config.html")
        for row in self.report.configurations:
            rows = [pages.trial_line(t, self.scores_by_trial.get(t["id"], []), names, self.flags.get(t["id"], []))
                    for t in by_config.get(row.config, [])]
            text = config_page.render(
                **self.common, root="../", title=f"{names(row.model)} / {names(row.cli)}",
                name=f"{names(row.model)} / {names(row.cli)}",
                summary=f"{row.passes}/{row.n_tasks} passed · AMS {fmt_score(row.ams)} · USD/pass {fmt_usd(row.usd_per_pass)}"
                        f" · {len(rows)} trials", trials=rows)
            (self.partial / "config" / f"{self.config_index[row.config]}.html").write_text(text, encoding="utf-8")


class SiteFormat(FolderFormat):
    """``--format html``: the static site."""

    name = "html"
    defers_intervals = True  # build_site settles them in the parent while the workers write trials

    def write(self, store: Any, report: Report, out: Path, *, blind: bool = False,
              comparison: RunComparison | None = None) -> str:
        summary = build_site(store, report, out, blind=blind, comparison=comparison)
        return (f"wrote {summary.folder}/index.html: {summary.pages} pages, {summary.trials} trials"
                f"{' (blind)' if blind else ''}; open it from file://, no server needed")
