"""A Harbor job folder (``harbor run -o jobs``) as trials of a suite.

Per trial folder (``TASK__ID/``): ``result.json`` gives task, agent, model, usage, cost,
rewards, exception and timings; the transcript is ``agent/trajectory.json`` (ATIF), else the
CLI's own log in ``agent/`` read through our adapter's parser; ``verifier/test-stdout.txt``
is the verifier's output. Multi-step trials keep theirs under ``steps/NAME/``.

Mapping (docs/import-export.md has the table):

- agent -> CLI: Harbor's names onto our adapters where one matches (``qwen-coder`` is our
  ``qwen-code``); other agents (``oracle``, ``terminus-2``, ...) keep their own name.
- reward -> quality (the ``reward`` key, else the mean of the named rewards; a reward that is
  not a number in [0, 1] refuses the trial, see ``results.Reward``); passed when it reaches the pass threshold of Harbor tasks run here (1.0).
- tokens: ``n_input_tokens`` includes the cache, so uncached = input - cache; Harbor records
  no cache writes and no reasoning count, so those stay 0 (reasoning inside output) unless
  the trial's ATIF trajectory states them and agrees with the totals.
- ``cost_usd`` -> the actual cost, source ``harbor``; the comparable cost comes from a price
  snapshot when one is given.
- exception -> status by type: environment, sandbox and provider failures, and any exception
  raised before the agent started, are ``infra-invalid``; a verifier that wrote no usable reward is ``failed``; an agent timeout
  is ``killed`` (budget:time, as a time budget here); anything else is ``errored``.
- a trial without a finished ``result.json`` is still running: left for a later import.

Every file is read through :class:`.walls.Walls` rooted at the job folder: a link leaving it, a
named pipe, a hard link or a huge file is refused and named, never read, and a step name that
is not a plain folder name (``../../x``) is refused. A trial is still imported without the
files refused; the import names them and exits 1.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ..harnesses import ADAPTERS
from ..interop.atif_read import ImportedEvent, events_from_trajectory, trajectory_totals
from ..interop.atif_schema import AtifError, parse_trajectory
from ..interop.cli_logs import has_parser, parse_log, total
from ..interop.trials import ImportedTrial, Skipped
from ..interop.walls import Walls
from ..usage import TokenUsage
from ..vocab import FINAL_STATUSES, EventKind
from .exporter import apply_ours
from .results import JobConfig, TrialResult

PASS_THRESHOLD = 1.0  # Harbor tasks run here pass at reward >= 1.0 unless the suite says otherwise
OUTPUT_LIMIT = 64 * 1024  # verifier output kept per trial (its head and tail)

INFRA_EXCEPTIONS = frozenset({
    # the environment, sandbox or harness failed before or around the agent
    "EnvironmentStartTimeoutError", "SandboxBuildFailedError", "AgentSetupTimeoutError", "HealthcheckError",
    "SandboxLikelyOutOfMemoryError", "MemoryLimitExceededError", "SSHAccessError", "GKEExecStreamClosedError",
    "GKEPodNotFoundError", "RuntimeRequestError", "AddTestsDirError", "DownloadVerifierDirError", "CancelledError",
    # the model provider failed (the SPEC: a trial stopped by a provider error is infra-invalid)
    "ApiError", "ApiRateLimitError", "ApiInternalServerError", "ApiOverloadedError", "ApiConnectionClosedError",
    "ApiResponseStalledError", "UnknownApiError", "NetworkConnectionError", "ApiConnectionError", "RateLimitError",
    "InternalServerError", "ServiceUnavailableError", "APIConnectionError", "Timeout",
})
VERIFIER_EXCEPTIONS = frozenset({"VerifierTimeoutError", "RewardFileNotFoundError", "RewardFileEmptyError",
                                 "VerifierOutputParseError"})
TIMEOUT_EXCEPTIONS = frozenset({"AgentTimeoutError"})
FINAL = frozenset(s.value for s in FINAL_STATUSES)


def cli_name(agent: str) -> str:
    """Our adapter's name for a Harbor agent name (each adapter names its own), else the name."""
    for name in ADAPTERS.names():
        if agent in ADAPTERS.get(name).harbor_names:
            return name
    return agent


def job_name(job_dir: Path) -> str:
    data = Walls(job_dir).read(job_dir / "config.json")
    try:
        config = JobConfig.model_validate_json(data or b"")
    except ValidationError:
        return job_dir.name
    return config.job_name or job_dir.name


def trial_dirs(job_dir: Path, walls: Walls | None = None) -> list[Path]:
    """Trial folders: every subfolder with a trial ``config.json`` or ``result.json`` (a link
    to a folder outside the job is refused)."""
    walls = walls or Walls(job_dir)
    return sorted(p for p in job_dir.iterdir() if (p / "config.json").exists() or (p / "result.json").exists()
                  if walls.folder(p))


def read_job(job_dir: Path, suite: str | None = None, threshold: float = PASS_THRESHOLD,
             known: set[str] | None = None) -> Iterator[ImportedTrial | Skipped | str | None]:
    """Each finished trial of the job, a :class:`Skipped` for a bad one, None for one still running,
    and the key of one imported before (in ``known``: not read again). Without ``suite``: the suite a
    job we exported names, else ``harbor-JOBNAME``."""
    given = suite
    suite = suite or f"harbor-{job_name(job_dir)}"
    walls = Walls(job_dir)
    for folder in trial_dirs(job_dir, walls):
        yield from walls.drain()
        path = folder / "result.json"
        if not os.path.lexists(path):
            yield None
            continue
        data = walls.read(path)
        if data is None:
            yield from walls.drain()
            continue
        try:
            result = TrialResult.model_validate_json(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "<root>"
            yield Skipped(str(path), f"field '{where}': {first['msg']}")
            continue
        if not result.finished_at:
            yield None
            continue
        key = f"harbor:{result.id or job_name(job_dir) + '/' + result.trial_name}"
        if known is not None and key in known:
            yield key
            continue
        try:
            trial = trial_from_result(result, folder, suite, key, threshold, walls)
            if apply_ours(trial, (result.model_extra or {}).get("agentmeter"), FINAL) and given:
                trial.suite = given  # --suite names the suite, whatever the export said
            trial.origin = str(path)
            yield trial
        except AtifError as exc:
            yield Skipped(exc.source, str(exc).removeprefix(exc.source + ": "))
        yield from walls.drain()
    yield from walls.drain()


def trial_from_result(result: TrialResult, folder: Path, suite: str, key: str, threshold: float,
                      walls: Walls | None = None) -> ImportedTrial:
    walls = walls or Walls(folder)
    cli = cli_name(result.agent_info.name)
    trial = ImportedTrial("harbor", key, suite, result.task_name, result.model_name or "none", cli, "failed",
                          cli_version=result.agent_info.version, started_at=result.started_at,
                          finished_at=result.finished_at)
    found = _transcript(folder, result, cli, walls)
    trial.events = found.events
    trial.tokens, trial.usage_source = _tokens(result, found.atif_total, trial.events)
    costs = [c.cost_usd for c in result.contexts() if c.cost_usd is not None]
    if costs:
        trial.cost_actual_usd, trial.cost_actual_source = sum(costs), "harbor"
    elif found.stated_cost is not None:  # result.json has none: what the agent's own files state
        trial.cost_actual_usd, trial.cost_actual_source = found.stated_cost, found.cost_source
    rewards = result.rewards()
    quality = None
    if rewards:
        quality = rewards["reward"] if "reward" in rewards else sum(rewards.values()) / len(rewards)
        trial.quality = min(1.0, max(0.0, quality))
    _status(trial, result, quality, threshold)
    trial.verifier_output = _verifier_output(folder, walls)
    trial.extra = {"harbor": {"trial_name": result.trial_name, "agent": result.agent_info.name,
                              "rewards": rewards, "source": result.source,
                              "timings": {name: t.model_dump() for name in ("environment_setup", "agent_setup",
                                                                             "agent_execution", "verifier")
                                          if (t := getattr(result, name)) is not None}}}
    if found.read:
        trial.extra["harbor"]["transcript_from"] = found.read  # the files the events, tokens and cost came from
    if found.not_read:
        trial.extra["harbor"]["not_read"] = found.not_read
    trial.count_events()
    return trial


def _status(trial: ImportedTrial, result: TrialResult, quality: float | None, threshold: float) -> None:
    exceptions = result.exceptions()
    first = exceptions[0] if exceptions else None
    if first is not None:
        trial.error = f"{first.exception_type}: {first.exception_message}"[:2000]
    if first is None or first.exception_type in VERIFIER_EXCEPTIONS:
        if quality is None:
            trial.status, trial.reason = "failed", first.exception_type if first else "no reward"
        else:
            trial.passed = quality >= threshold - 1e-9
            trial.status = "passed" if trial.passed else "failed"
    elif first.exception_type in TIMEOUT_EXCEPTIONS:
        trial.status, trial.reason = "killed", f"budget:time ({first.exception_type})"
    elif first.exception_type in INFRA_EXCEPTIONS or not (result.agent_execution and
                                                           result.agent_execution.started_at):
        # Also any exception before the agent started: the environment failed, not the agent
        # (Harbor 0.26 reports a failed image build as a plain RuntimeError).
        trial.status, trial.reason = "infra-invalid", first.exception_type
    else:
        trial.status, trial.reason = "errored", first.exception_type


def _tokens(result: TrialResult, atif: TokenUsage | None, events: list[ImportedEvent]) -> tuple[TokenUsage, str]:
    contexts = result.contexts()
    n_in = sum(c.n_input_tokens or 0 for c in contexts)
    n_cache = sum(c.n_cache_tokens or 0 for c in contexts)
    n_out = sum(c.n_output_tokens or 0 for c in contexts)
    recorded = any(c.n_input_tokens is not None or c.n_output_tokens is not None for c in contexts)
    harbor = TokenUsage(uncached_input=max(0, n_in - n_cache), cached_input=n_cache, output=n_out)
    if atif is not None and atif.raw == harbor.raw and atif.cached_input == harbor.cached_input:
        return atif, "harbor+atif"  # the trajectory agrees and may split cache writes and reasoning out
    if recorded:
        return harbor, "harbor"
    logged = total(events)
    if logged:
        return logged, "harbor:agent-log"
    return TokenUsage(), "harbor:none"


def _step_names(folder: Path, result: TrialResult, walls: Walls) -> list[str]:
    """The trial's step names that are plain folder names; any other is refused (noted)."""
    names = []
    for step in result.step_results or [] if result.agent_result is None else []:
        name = step.step_name
        if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
            walls.refuse(folder / "result.json", f"step name {name!r} is not a folder name")
        else:
            names.append(name)
    return names


@dataclass
class _Transcript:
    """What a trial's agent folders gave: events, the trajectory's totals, a cost the agent's
    own files state, the files read (relative to the trial) and those that could not be."""

    events: list[ImportedEvent] = field(default_factory=list)
    atif_total: TokenUsage | None = None
    stated_cost: float | None = None
    cost_source: str | None = None
    read: list[str] = field(default_factory=list)
    not_read: list[str] = field(default_factory=list)


def _transcript(folder: Path, result: TrialResult, cli: str, walls: Walls) -> _Transcript:
    steps = _step_names(folder, result, walls)
    agent_dirs = [(None, folder / "agent")] + [(name, folder / "steps" / name / "agent") for name in steps]
    found = _Transcript()
    for step, agent_dir in agent_dirs:
        start = len(found.events)
        if not _agent_events(agent_dir, folder, result, cli, walls, found):
            continue
        if step is not None:
            found.events.insert(start, ImportedEvent(EventKind.SYSTEM, f"step {step}"))
    return found


def _add_cost(found: _Transcript, cost: float | None, source: str) -> None:
    if cost is not None:
        found.stated_cost = (found.stated_cost or 0.0) + cost
        found.cost_source = source if found.cost_source in (None, source) else "harbor:agent-files"


def _agent_events(agent_dir: Path, folder: Path, result: TrialResult, cli: str, walls: Walls,
                  found: _Transcript) -> bool:
    """Read one agent folder into ``found``: its ATIF trajectory, else the CLI's own log, else
    the agent's plain output. A trajectory that is not ATIF (Terminus-2's legacy list of
    episodes, a truncated file) is named in ``not_read`` and the next source is read: the trial
    keeps result.json's verdict and tokens either way."""
    if not walls.folder(agent_dir):
        return False
    unread = False
    trajectory = agent_dir / "trajectory.json"
    if os.path.lexists(trajectory):
        data = walls.read(trajectory)
        if data is not None:
            try:
                parsed = parse_trajectory(data, str(trajectory))
            except AtifError as exc:
                why = str(exc).removeprefix(f"{trajectory}: ")
                found.not_read.append(f"{trajectory.relative_to(folder)}: {why}")
                found.events.append(ImportedEvent(EventKind.SYSTEM, f"not read: {found.not_read[-1]}"))
                unread = True
                walls.refused.append(Skipped(str(trajectory), f"not read ({why}); the trial is imported without it"))
            else:
                tokens, cost, _source = trajectory_totals(parsed)
                found.events.extend(events_from_trajectory(parsed))
                found.atif_total = tokens if found.atif_total is None else found.atif_total + tokens
                _add_cost(found, cost, "harbor:atif")
                found.read.append(str(trajectory.relative_to(folder)))
                return True
    for name in dict.fromkeys((f"{result.agent_info.name}.txt", f"{cli}.txt")):
        log = agent_dir / name
        if os.path.lexists(log) and has_parser(cli) and (data := walls.read(log)) is not None:
            events, parser = parse_log(cli, data.splitlines())
            found.events.extend(events)
            # e.g. Claude Code's ``result`` event: ``total_cost_usd``, the CLI's own figure
            reported = parser.reported_cost_usd
            _add_cost(found, float(reported) if reported is not None else None, "harbor:agent-log")
            found.read.append(str(log.relative_to(folder)))
            return True
    for log in sorted(agent_dir.glob("*.txt")):  # oracle.txt and the like: the agent's plain output
        data = walls.read(log)
        if data is None:
            continue
        text = data.decode("utf-8", "replace")
        found.events.append(ImportedEvent(EventKind.SYSTEM, f"{log.name}:\n{text[:OUTPUT_LIMIT]}"))
        found.read.append(str(log.relative_to(folder)))
        return True
    return unread


def _verifier_output(folder: Path, walls: Walls) -> str | None:
    """The verifier's output; a multi-step trial's, step by step."""
    parts = [_verifier_text(folder / "verifier", walls)]
    steps = folder / "steps"
    found = sorted(p for p in steps.iterdir() if walls.folder(p)) if walls.folder(steps) else []
    for step in (p / "verifier" for p in found):
        if not walls.folder(step):
            continue
        text = _verifier_text(step, walls)
        parts.append(f"step {step.parent.name}:\n{text}" if text else None)
    return "\n".join(p for p in parts if p) or None


def _verifier_text(verifier: Path, walls: Walls) -> str | None:
    parts: list[str] = []
    if not walls.folder(verifier):
        return None
    for name in ("test-stdout.txt", "reward.txt", "reward.json"):
        data = walls.read(verifier / name)
        if data is not None:
            text = data.decode("utf-8", "replace")
            if len(text) > OUTPUT_LIMIT:
                text = text[:OUTPUT_LIMIT // 2] + "\n[...]\n" + text[-OUTPUT_LIMIT // 2:]
            parts.append(text if name == "test-stdout.txt" else f"{name}: {text.strip()}")
    return "\n".join(parts) or None
