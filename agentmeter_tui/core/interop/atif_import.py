"""ATIF files from any producer as trials (``agentmeter import atif``).

One file, one trial. A file we exported carries its trial (suite, task, status, quality, the
five classes) in ``extra.agentmeter`` and comes back as it was. Another producer's file has
no verdict: the trial is ``failed`` with reason ``unverified`` (quality 0) until a reviewer
scores it; its task is the Harbor trial folder it sits in (``TASK__ID/agent/``), else the file's
name. The key is the file's content hash: the same file twice adds nothing. A file is read
under its own folder (:mod:`.walls`): a link leaving it, a named pipe or a huge file is refused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..harbor.importer import cli_name
from ..vocab import FINAL_STATUSES
from .atif_read import events_from_trajectory, trajectory_totals
from .atif_schema import AtifError, Trajectory, parse_trajectory
from .trials import ImportedTrial, Skipped
from .walls import Refused, read_under

FINAL = frozenset(s.value for s in FINAL_STATUSES)


def read_files(paths: Iterable[Path], suite: str | None = None,
               known: set[str] | None = None) -> Iterator[ImportedTrial | Skipped | str]:
    for path in paths:
        try:
            data = read_under(path.parent, path)  # a link out, a pipe or a huge file is refused
        except Refused as exc:
            yield Skipped(exc.where, f"refused: {exc.why}")
            continue
        except OSError as exc:
            yield Skipped(str(path), exc.strerror or str(exc))
            continue
        key = "atif:" + hashlib.sha256(data).hexdigest()
        if known is not None and key in known:
            yield key
            continue
        try:
            trajectory = parse_trajectory(data, str(path))
        except AtifError as exc:
            yield Skipped(str(path), str(exc).removeprefix(f"{path}: "))
            continue
        trial = trial_from_trajectory(trajectory, path, key, suite)
        trial.origin = str(path)
        yield trial


def _task_of(path: Path, trajectory: Trajectory) -> str:
    for folder in path.resolve().parents:
        if "__" in folder.name:  # a Harbor trial folder: TASK__RANDOMID
            return folder.name.rsplit("__", 1)[0]
    return path.stem if path.stem != "trajectory" else (trajectory.session_id or path.parent.name)


def trial_from_trajectory(trajectory: Trajectory, path: Path, key: str, suite: str | None = None) -> ImportedTrial:
    ours = (trajectory.extra or {}).get("agentmeter")
    ours = ours if isinstance(ours, dict) else {}
    tokens, cost, source = trajectory_totals(trajectory)
    given = ours.get("status")
    status = given if isinstance(given, str) and given in FINAL else "failed"
    trial = ImportedTrial(
        "atif", key, suite or str(ours.get("suite_id") or "atif"), str(ours.get("task_id") or _task_of(path, trajectory)),
        str(ours.get("model") or trajectory.agent.model_name or "unknown"),
        str(ours.get("cli") or cli_name(trajectory.agent.name)), status, passed=bool(ours.get("passed")),
        quality=float(ours.get("quality") or 0.0), tokens=tokens, cli_version=trajectory.agent.version,
        reason=ours.get("reason") if ours else "unverified", usage_source=source,
        started_at=ours.get("started_at"), finished_at=ours.get("finished_at"), tier=ours.get("tier"),
        turns=int(ours.get("turns") or 0), tool_calls=int(ours.get("tool_calls") or 0),
        trial_index=ours.get("trial_index") if isinstance(ours.get("trial_index"), int) else None,
        attempt=int(ours.get("attempt") or 0))
    if ours:
        trial.cost_usd, trial.cost_source, trial.priced = ours.get("cost_usd"), ours.get("cost_source"), True
        trial.cost_actual_usd, trial.cost_actual_source = ours.get("cost_actual_usd"), ours.get("cost_actual_source")
    elif cost is not None:
        trial.cost_actual_usd, trial.cost_actual_source = cost, "atif"
    trial.events = events_from_trajectory(trajectory)
    steps = trajectory.steps
    if not trial.started_at and steps[0].timestamp:
        trial.started_at, trial.finished_at = steps[0].timestamp, steps[-1].timestamp
    trial.extra = {"atif": {"schema_version": trajectory.schema_version, "session_id": trajectory.session_id,
                            "agent": trajectory.agent.name, "file": path.name,
                            **({"unknown_fields": trajectory.unknown()} if trajectory.unknown() else {})}}
    trial.count_events()
    return trial
