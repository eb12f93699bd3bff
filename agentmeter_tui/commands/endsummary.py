"""The table a headless run ends with, as Harbor and Inspect print one: per configuration
(model x CLI) its cells' passes, mean reward, tokens, USD and failures by reason, from the
store (each cell's last attempt: a rerun's new attempt replaces the old one in the grid), then
the command that opens the report."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

from ..core.inert import inert

FINAL = ("passed", "failed", "killed", "errored", "infra-invalid")
TOKENS = ("uncached_input", "cached_input", "cache_write", "output", "reasoning")


def last_attempts(trials: list[dict]) -> list[dict]:
    """Each cell's (task, model, CLI, trial index) last final attempt."""
    cells: dict[tuple, dict] = {}
    for trial in trials:
        if trial["status"] not in FINAL:
            continue
        key = (trial["task_id"], trial["model"], trial["cli"], trial["trial_index"])
        if key not in cells or (trial["attempt"] or 0, trial["id"]) >= (cells[key]["attempt"] or 0, cells[key]["id"]):
            cells[key] = trial
    return list(cells.values())


def failure(trial: dict) -> str:
    """A short reason: the status, and for a killed or broken trial the reason's first word."""
    if trial["status"] == "failed":
        return "failed"
    word = (trial.get("reason") or "").split(" ", 1)[0].rstrip(":;,")[:32]
    return f"{trial['status']}:{inert(word)}" if word else trial["status"]


def summary_lines(db: Path, suite_id: str) -> list[str]:
    """The table's lines; none for a store without this suite's trials (nothing to sum)."""
    from ..core.store import Store

    if not db.is_file():
        return []
    store = Store(db, readonly=True)
    try:
        cells = last_attempts(store.trials(suite_id))
    finally:
        store.close()
    if not cells:
        return []
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for trial in cells:
        groups[(trial["model"], trial["cli"])].append(trial)
    header = ("model", "cli", "trials", "passes", "mean reward", "tokens", "USD", "failures")
    rows = [_row(model, cli, trials) for (model, cli), trials in sorted(groups.items())]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [f"results of suite {suite_id}, per configuration (each cell's last attempt):"]
    for row in [header, *rows]:
        lines.append("  " + "  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())
    return lines


def _row(model: str, cli: str, trials: list[dict]) -> tuple:
    passed = sum(1 for t in trials if t["status"] == "passed")
    rewards = [t["quality"] for t in trials if t["quality"] is not None]
    mean = f"{sum(rewards) / len(rewards):.3f}" if rewards else "-"
    tokens = sum(sum(t[c] or 0 for c in TOKENS) for t in trials)
    costs = [t["cost_usd"] for t in trials if t["cost_usd"] is not None]
    usd = f"{sum(costs):.4f}" if costs else "unpriced"
    failures = Counter(failure(t) for t in trials if t["status"] != "passed")
    said = ", ".join(f"{n} {why}" for why, n in sorted(failures.items())) or "-"
    return (inert(model), inert(cli), len(trials), f"{passed}/{len(trials)}", mean, f"{tokens:,}", usd, said)
