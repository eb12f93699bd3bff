"""Checking a folder of Harbor jobs against a leaderboard's rules (``agentmeter submission check``).

``terminal-bench-2`` (the Terminal-Bench 2 leaderboard's README, docs/import-export.md): every
submission folder has a ``metadata.yaml`` naming its agent and model; no timeout or resource
override anywhere (``timeout_multiplier`` 1.0, every other multiplier and every ``override_*`` /
``max_timeout_sec`` unset, in the job's and in each trial's config); every trial complete (a
``result.json`` that parses, has finished, has a reward, and an ATIF ``agent/trajectory.json``);
at least 5 complete trials per task for each agent and model. Each violation is one line naming
the file and what is wrong; reading never follows a link out of the folder.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..interop.walls import Walls

MIN_TRIALS = 5
RULES = ("terminal-bench-2",)
MULTIPLIERS = ("agent_timeout_multiplier", "verifier_timeout_multiplier", "agent_setup_timeout_multiplier",
               "environment_build_timeout_multiplier")
OVERRIDES = {"agent": ("override_timeout_sec", "override_setup_timeout_sec", "max_timeout_sec"),
             "environment": ("override_cpus", "override_memory_mb", "override_storage_mb", "override_gpus",
                             "override_tpu"),
             "verifier": ("override_timeout_sec", "max_timeout_sec")}


@dataclass(frozen=True)
class Violation:
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


@dataclass
class CheckResult:
    violations: list[Violation]
    jobs: int
    trials: int


def _json(walls: Walls, path: Path) -> tuple[Any, str | None]:
    if not os.path.lexists(path):
        return None, "missing"
    data = walls.read(path)
    if data is None:
        return None, "refused: " + "; ".join(r.why for r in walls.drain())
    try:
        return orjson.loads(data), None
    except orjson.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc})"


def _overrides(config: Any) -> Iterator[str]:
    """Each timeout or resource override a job's or a trial's config sets."""
    if not isinstance(config, dict):
        yield "not a JSON object"
        return
    if config.get("timeout_multiplier", 1.0) != 1.0:
        yield f"timeout_multiplier is {config.get('timeout_multiplier')!r}, must be 1.0"
    for key in MULTIPLIERS:
        if config.get(key) is not None:
            yield f"{key} is set ({config[key]!r})"
    listed = config.get("agents")
    agents: list[Any] = listed if isinstance(listed, list) else [config.get("agent")]
    sections = [("agent", a) for a in agents] + [("environment", config.get("environment")),
                                                  ("verifier", config.get("verifier"))]
    for name, section in sections:
        if not isinstance(section, dict):
            continue
        for key in OVERRIDES[name]:
            if section.get(key) is not None:
                yield f"{name}.{key} is set ({section[key]!r})"


def _trial(walls: Walls, folder: Path, violations: list[Violation]) -> tuple[str, str, str] | None:
    """(agent, model, task) of a complete trial; None (with the violations) for an incomplete one."""
    config, why = _json(walls, folder / "config.json")
    if why:
        violations.append(Violation(str(folder / "config.json"), why))
    else:
        violations += [Violation(str(folder / "config.json"), w) for w in _overrides(config)]
    result, why = _json(walls, folder / "result.json")
    if why or not isinstance(result, dict):
        violations.append(Violation(str(folder / "result.json"), why or "not a JSON object"))
        return None
    problems = []
    if not result.get("finished_at"):
        problems.append("the trial has not finished")
    rewards = (result.get("verifier_result") or {}).get("rewards") if isinstance(result.get("verifier_result"),
                                                                                 dict) else None
    if not rewards:
        exception = (result.get("exception_info") or {}).get("exception_type", "no exception recorded") \
            if isinstance(result.get("exception_info"), dict) else "no exception recorded"
        problems.append(f"no reward (incomplete trial: {exception})")
    if walls.read(folder / "agent" / "trajectory.json") is None:  # a link out of the folder is no trajectory
        refused = walls.drain()
        problems.append("no ATIF trajectory (agent/trajectory.json)" + (f": refused, {refused[0].why}" if refused
                                                                         else ""))
    violations += [Violation(str(folder / "result.json"), p) for p in problems]
    if problems:
        return None
    agent = result.get("agent_info") or {}
    model = ((result.get("config") or {}).get("agent") or {}).get("model_name")
    return str(agent.get("name")), str(model), str(result.get("task_name"))


def check_submission(root: Path, rules: str = "terminal-bench-2") -> CheckResult:
    from .exporter import job_folders

    if rules not in RULES:
        raise ValueError(f"unknown rules {rules!r}; known: {', '.join(RULES)}")
    walls = Walls(root)
    violations: list[Violation] = []
    jobs = job_folders(root)
    if not jobs:
        return CheckResult([Violation(str(root), "no Harbor job folder (config.json with trial folders)")], 0, 0)
    submissions = {job.parent for job in jobs if job != root} or {root}
    for folder in sorted(submissions):
        meta, why = _json(walls, folder / "metadata.yaml")
        if why:
            violations.append(Violation(str(folder / "metadata.yaml"), why + " (agent and model details)"))
        elif not (isinstance(meta, dict) and meta.get("agent_display_name") and meta.get("models")):
            violations.append(Violation(str(folder / "metadata.yaml"), "names no agent_display_name and models"))
    complete: dict[tuple[str, str, str], int] = defaultdict(int)
    tasks: dict[tuple[str, str], set[str]] = defaultdict(set)
    trials = 0
    for job in jobs:
        config, why = _json(walls, job / "config.json")
        violations += [Violation(str(job / "config.json"), w) for w in ([why] if why else _overrides(config))]
        for folder in sorted(p for p in job.iterdir() if p.is_dir() and (p / "config.json").exists()):
            trials += 1
            found = _trial(walls, folder, violations)
            if found is not None:
                complete[found] += 1
                tasks[found[:2]].add(found[2])
            elif (result := _json(walls, folder / "result.json")[0]) and isinstance(result, dict):
                agent = (result.get("agent_info") or {}).get("name")
                model = ((result.get("config") or {}).get("agent") or {}).get("model_name")
                tasks[(str(agent), str(model))].add(str(result.get("task_name")))
    for (agent, model), names in sorted(tasks.items()):
        for task in sorted(names):
            if (n := complete.get((agent, model, task), 0)) < MIN_TRIALS:
                violations.append(Violation(f"{agent} / {model} / {task}",
                                            f"{n} complete trial(s), at least {MIN_TRIALS} needed"))
    return CheckResult(violations, len(jobs), trials)
