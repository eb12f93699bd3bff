"""A schedule a cap holds with nothing running: what ``run --headless`` says before it returns.

A headless follower is a script's (cron, CI, ``nohup``): it cannot wait for an operator to
raise a cap, so once nothing runs and a cap holds the rest, it names the cap, the trials held
and the exact command that raises it, and exits with ``EXIT_HELD``. The runner stays, held and
spending nothing, so the raise applies at once and ``agentmeter run`` follows it again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core.run.control import Progress

EXIT_HELD = 7  # `run --headless`: a cap holds the schedule and nothing runs (docs/runner.md)


def held_by_cap(progress: Progress) -> str | None:
    """Why a cap holds the schedule, when it does and nothing runs or could end to free it."""
    why = progress.get("cap_held")
    if not why or progress.get("running") or not progress.get("queued") or progress.get("stopping"):
        return None
    return why


def _held_cap(why: str, caps: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The cap a hold's text is about: ``run: ...``, ``cap reached: provider P: ...``."""
    text = why.removeprefix("cap reached: ")
    for cap in caps:
        name = "run" if cap["scope"] == "run" else f"{cap['scope']} {cap['name']}"
        if text.startswith(f"{name}:"):
            return cap
    return None


def raise_command(cap: dict[str, Any], why: str, db: str) -> str:
    """``agentmeter budget --run-usd 10 --db D``: the held measure at twice its cap."""
    measure = "tokens" if (" tokens " in why or not cap.get("usd")) and cap.get("tokens") else "usd"
    limit = cap.get(measure) or 0
    more = f"{limit * 2:g}" if measure == "usd" else str(int(limit) * 2)
    option = f"--run-{measure} {more}" if cap["scope"] == "run" else \
        f"--{cap['scope']} {cap['name']} --cap-{measure} {more}"
    return f"agentmeter budget {option} --db {db}"


def held_lines(progress: Progress, why: str, suite: str, db: str) -> list[str]:
    cap = _held_cap(why, progress.get("caps") or [])
    how = (f"raise it (any figure above the cap; twice it here): {raise_command(cap, why, db)}"
           if cap else f"raise the cap with `agentmeter budget --db {db}` (see agentmeter budget --help)")
    return [f"held: {why}",
            f"nothing is running and {progress.get('queued', 0)} trial(s) wait; the runner stays, held, spending "
            "nothing",
            how,
            f"then follow the run again: agentmeter run {suite} --headless --db {db} "
            f"(or end it: agentmeter stop --db {db})"]
