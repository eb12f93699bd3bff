"""Regrade: the task's current verifier, run again on each selected trial's kept final workspace.

A trial's final workspace was kept when it ended (:mod:`.keep`). A regrade opens a fresh session
of the suite's sandbox kind (the one the trial ran in, walled as a trial is) whose workspace seed
is a copy of the kept one (made by the same copy, so a link, a FIFO or a device planted there
since is not carried in), runs the task's verifier as it is now, and appends the verdict with its
time and the verifier's hash (``store.regrades.add_regrade``). The trial's own verdict is never changed.
The verifier writes its reward in a folder drawn after the session opened, as in a trial
(``verifiers/command.py``): a reward file left in the workspace is just a file.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import orjson

from ..suites.suite import Suite, Task
from . import keep

DEFAULT_STATUSES = ("passed", "failed")


class KeptTask(Task):
    """The task as it is now, seeded with a trial's kept workspace instead of its own seed."""

    def __init__(self, task: Task, seed: Path):
        super().__init__(**{f.name: getattr(task, f.name) for f in fields(task)})
        self._seed = seed

    @property
    def workspace_seed(self) -> Path | None:
        return self._seed


@dataclass
class Regraded:
    trial_id: int
    original: str
    status: str  # passed, failed, or infra-invalid (the verifier failed on our side: no verdict)
    quality: float | None
    reason: str | None
    verifier_hash: str

    def line(self) -> str:
        why = f" ({self.reason})" if self.reason and self.status != "passed" else ""
        return f"trial {self.trial_id}: {self.original} -> {self.status}{why} [verifier {self.verifier_hash[:12]}]"


def verifier_hash(task: Task) -> str:
    """The verifier as it is now: its ``[verifier]`` settings and every file of ``tests/``."""
    digest = hashlib.sha256(orjson.dumps(task.verifier.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS))
    tests = task.tests_dir
    if tests is not None:
        for path in sorted(tests.rglob("*")):
            if path.is_file() and not path.is_symlink():
                digest.update(b"\0" + str(path.relative_to(tests)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def select_trials(store: Any, suite_id: str, *, task: str | None = None, model: str | None = None,
                  cli: str | None = None, statuses: Sequence[str] = DEFAULT_STATUSES) -> list[dict]:
    """The suite's trials the filters pick (native ones and imported), by id."""
    clauses, args = [f"status in ({', '.join('?' * len(statuses))})"], list(statuses)
    for column, value in (("task_id", task), ("model", model), ("cli", cli)):
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    return store.trials(suite_id, where=" and ".join(clauses), params=args)


def why_not_regradable(row: dict, suite: Suite, db: Path) -> str | None:
    """Why a trial cannot be regraded here (one line), or None."""
    kind = suite.spec.sandbox.kind
    if not row.get("kept") and row.get("imported"):
        return "imported: its source kept no final workspace to run the verifier on"
    if not row.get("kept"):
        return "its final workspace was not kept (run before regrades, past regrade_keep_mb, or not judged)"
    if not keep.kept_folder(db, row["kept"]).is_dir():
        return f"its kept workspace {row['kept']} is gone (cleaned)"
    if row.get("sandbox") and row["sandbox"] != kind:
        return f"it ran in a {row['sandbox']} sandbox and the suite now runs in {kind}"
    if row["task_id"] not in {t.id for t in suite.tasks}:
        return f"the suite has no task '{row['task_id']}' now"
    return None


async def regrade_trials(store: Any, suite: Suite, rows: Sequence[dict],
                         on_result: Callable[[Regraded], None]) -> None:
    """Regrade each of ``rows`` (all regradable) in the suite's sandbox, one at a time."""
    from ..procs import BACKGROUND
    from ..sandboxes import SANDBOXES

    sandbox = SANDBOXES.get(suite.spec.sandbox.kind)(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
    await sandbox.preflight()
    try:
        for row in rows:
            on_result(await _regrade(store, suite, sandbox, row))
    finally:
        await sandbox.close()
        await BACKGROUND.drain()  # the sessions' folders removed before the command ends


async def _regrade(store: Any, suite: Suite, sandbox: Any, row: dict) -> Regraded:
    from ..verifiers import VERIFIERS

    task = suite.task(row["task_id"])
    digest = verifier_hash(task)
    staging = Path(tempfile.mkdtemp(prefix="agentmeter-regrade-"))
    session = None
    reason: str | None  # why the trial is not passed: the staging's failure, else the verifier's
    try:
        seed = staging / "workspace"
        await asyncio.to_thread(keep.copy_workspace, keep.kept_folder(store.path, row["kept"]), seed,
                                max(suite.spec.suite.regrade_keep_mb, 1) << 20)
        session = await sandbox.open(KeptTask(task, seed), int(row["id"]), secrets.token_hex(8))
        verifier = VERIFIERS.get(task.verifier.kind)(task, pass_threshold=suite.spec.suite.pass_threshold)
        if task.contract.reads_transcript:  # Harbor's LLM-judge verifiers
            from ..interop.atif import trial_trajectory

            verifier.trajectory = trial_trajectory(store, int(row["id"])).to_json()
        result = await verifier.verify(session)
    except (keep.TooLarge, OSError) as exc:
        result = None
        reason = f"the kept workspace could not be staged: {exc}"
    finally:
        if session is not None:
            await session.cleanup(keep=False)
        await asyncio.to_thread(shutil.rmtree, staging, True)
    if result is None:
        status, passed, quality, exit_code, output = "infra-invalid", False, None, None, None
    else:
        reason = result.infra_error or result.reason
        status = "infra-invalid" if result.infra_error else "passed" if result.passed else "failed"
        passed, quality, exit_code, output = result.passed, result.quality, result.exit_code, result.output
    store.regrades.add_regrade(int(row["id"]), status, passed and status == "passed", quality, reason=reason,
                      verifier_exit=exit_code, verifier_output=output, verifier_hash=digest,
                      sandbox=suite.spec.sandbox.kind)
    return Regraded(int(row["id"]), str(row["status"]), status, quality, reason, digest)
