"""Readable text for a differential funnel, made from the JSON-able details alone.

The verifier stores this text as its ``output`` and the details beside it; the review screen
and ``agentmeter difftest run`` render from the details with the same functions, so what a
reviewer reads is what was stored.
"""

from __future__ import annotations

from typing import Any

from .funnel import FUNNEL, METRIC_LABELS


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def funnel_lines(details: dict[str, Any]) -> list[str]:
    scores = details["scores"]
    build = details["build"]["candidate"]
    lines = [f"Build    {'ok' if build['ok'] else 'FAILED'}"
             + ("" if build["ok"] else f" (install exit {build['exit_code']})")]
    for metric in FUNNEL:
        marker = "  <- R" if metric == details["metric"] else ""
        shown = "off" if metric == "semantic" and scores[metric] is None else _pct(scores[metric])
        lines.append(f"{METRIC_LABELS[metric]:<8} {shown:>6}{marker}")
    if scores.get("reject") is not None:
        lines.append(f"{'Reject':<8} {_pct(scores['reject']):>6}  (negative cases, outside the funnel)")
    return lines


def class_table(details: dict[str, Any]) -> list[str]:
    header = f"{'class':<28} {'pos':>4} {'neg':>4} " + " ".join(f"{METRIC_LABELS[m]:>8}" for m in
                                                              (*FUNNEL, "reject"))
    rows = [header]
    for cls in details["classes"]:
        rates = cls["rates"]
        rows.append(f"{cls['class'][:28]:<28} {cls['positives']:>4} {cls['negatives']:>4} "
                    + " ".join(f"{_pct(rates[m]):>8}" for m in (*FUNNEL, "reject")))
    return rows


def failing_cases(details: dict[str, Any]) -> list[dict[str, Any]]:
    """Cases that fail the chosen metric (positive) or Reject (negative), in file order."""
    metric = details["metric"]
    failing = []
    for case in details["cases"]:
        checks = case["checks"]
        key = metric if case["kind"] == "positive" else "reject"
        if checks.get(key) is False:
            failing.append(case)
    return failing


def first_failed_check(case: dict[str, Any]) -> str:
    if case["kind"] == "negative":
        return "Reject"
    for metric in FUNNEL:
        if case["checks"].get(metric) is False:
            return METRIC_LABELS[metric]
    return "-"


def case_lines(case: dict[str, Any], width: int = 200) -> list[str]:
    oracle, candidate = case["oracle"], case["candidate"] or {}
    lines = [f"{case['id']}  [{first_failed_check(case)}]  argv: {' '.join(case['argv'])}"[:width],
             (f"  exit    oracle {oracle['exit_code']}  candidate {candidate.get('exit_code')}"
             f"  similarity {case['similarity']:.2f}")]
    for side, run in (("oracle", oracle), ("candidate", candidate)):
        effects = run.get("side_effects") or {}
        changed = ([f"+{p}" for p in effects.get("created", {})] + [f"~{p}" for p in effects.get("modified", {})]
                   + [f"-{p}" for p in effects.get("deleted", [])])
        if "stdout" not in run:
            continue  # a clean case keeps no outputs
        stdout = (run.get("stdout") or "").strip().replace("\n", "\\n")
        lines.append(f"  {side:<9} stdout: {stdout[:width - 20]!s}")
        lines.append(f"  {side:<9} effects: {' '.join(changed) if changed else '(none)'}"[:width])
    if case.get("judge_note"):
        lines.append(f"  judge: {case['judge_note']}")
    return lines


def render_text(details: dict[str, Any], max_failing: int = 8) -> str:
    runtime = details["runtime"]
    parts = funnel_lines(details)
    parts.append("")
    parts.extend(class_table(details))
    if runtime.get("ratio") is not None:
        parts.append("")
        parts.append(f"Runtime  oracle {runtime['oracle_ms']:.1f} ms/case, candidate "
                     f"{runtime['candidate_ms']:.1f} ms/case, ratio {runtime['ratio']:.2f}x "
                     f"over {runtime['cases']} cases")
    if details.get("oracle_drift"):
        parts.append(f"Oracle drift: {len(details['oracle_drift'])} cases did not do what the case file "
                     f"recorded (first: {details['oracle_drift'][0]})")
    failing = failing_cases(details)
    if failing:
        parts.append("")
        parts.append(f"Failing cases: {len(failing)} (first {min(max_failing, len(failing))})")
        for case in failing[:max_failing]:
            parts.extend(case_lines(case))
    return "\n".join(parts) + "\n"
