"""A suite of the store as Harbor job folders, the form a leaderboard takes (``agentmeter export
harbor-jobs``).

One submission folder per configuration, ``CLI__MODEL/`` (Terminal-Bench 2's leaderboard takes one
per agent and model), holding ``metadata.yaml`` (agent, model, versions and settings) and one Harbor
job folder with a trial folder per stored attempt:

    CLI__MODEL/metadata.yaml
    CLI__MODEL/JOB/config.json  result.json
    CLI__MODEL/JOB/TASK__amID/config.json  result.json  agent/trajectory.json  agent/CLI.txt
                              verifier/test-stdout.txt  verifier/reward.txt  artifacts/manifest.json

The files follow Harbor's own models (``harbor.models.job`` and ``harbor.models.trial``, 0.26): a
test loads every one of them there. What Harbor's result cannot say (cache writes and reasoning as
their own classes, the comparable cost, the pass verdict at our threshold, the trial's index and
tier) travels in the result's ``agentmeter`` key, the block our ATIF files carry, so that
``agentmeter import harbor`` gives back the trials exactly. Nothing is invented: a trial the
runner did not time-limit carries no timeout, and no override is ever written (a leaderboard
refuses them). ``metadata.yaml`` is written as JSON, which is YAML 1.2.
"""

from __future__ import annotations

import re
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson

from ... import __version__
from ..harnesses import ADAPTERS
from ..interop.atif import trial_trajectory
from ..interop.atif_steps import _iso
from ..metrics.trials import pass_at_k
from ..usage import TokenUsage

NAMESPACE = uuid.UUID("6f0c7a52-3a51-4c1e-9d0b-36a9a3c1e0a4")  # ids derived from the store: same store, same ids
AGENT_FIELDS: dict[str, Any] = {"import_path": None, "base_url": None, "model_api_key_name": None, "model_api_format": None,
                "skip_model_parsing": False, "n_concurrent": None, "concurrency_group": None, "skills": [],
                "override_timeout_sec": None, "override_setup_timeout_sec": None, "max_timeout_sec": None,
                "resume_trajectory": False, "load_trajectory": None, "extra_allowed_hosts": [], "kwargs": {},
                "mcp_servers": []}
ENVIRONMENT: dict[str, Any] = {"type": "docker", "import_path": None, "force_build": False, "delete": True, "stream": False,
               "cpu_enforcement_policy": "auto", "memory_enforcement_policy": "auto", "override_cpus": None,
               "override_memory_mb": None, "override_storage_mb": None, "override_gpus": None, "override_tpu": None,
               "mounts": None, "extra_docker_compose": [], "kwargs": {}, "extra_allowed_hosts": []}
VERIFIER = {"override_timeout_sec": None, "max_timeout_sec": None, "disable": False}
MULTIPLIERS = {"timeout_multiplier": 1.0, "agent_timeout_multiplier": None, "verifier_timeout_multiplier": None,
               "agent_setup_timeout_multiplier": None, "environment_build_timeout_multiplier": None}
# Our statuses as the exception Harbor would have recorded (our importer maps them back).
EXCEPTIONS = {"killed": "AgentTimeoutError", "errored": "NonZeroAgentExitCodeError",
              "infra-invalid": "EnvironmentStartTimeoutError"}
TRIAL_FIELDS = ("suite_id", "task_id", "tier", "model", "cli", "trial_index", "attempt", "status", "reason",
                "passed", "quality", "turns", "tool_calls", "cost_usd", "cost_source", "cost_actual_usd",
                "cost_actual_source", "started_at", "finished_at", "cli_version")


def harbor_agent(cli: str) -> str:
    """Harbor's name for our CLI, where Harbor has an agent for it; else ours."""
    try:
        names = ADAPTERS.get(cli).harbor_names
    except (KeyError, LookupError):
        names = ()
    return names[0] if names else cli


def safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "x"


def _id(*parts: Any) -> str:
    return str(uuid.uuid5(NAMESPACE, "/".join(str(p) for p in parts)))


def _write(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(obj, option=orjson.OPT_INDENT_2))


def _agent(cli: str, model: str) -> dict[str, Any]:
    return {"name": harbor_agent(cli), "model_name": model, **AGENT_FIELDS}


def export_jobs(store: Any, suite_id: str, out: Path, statuses: set[str]) -> list[Path]:
    """Write every final attempt of the suite (``statuses``) into ``out``; the submission folders."""
    suite = store.suite_row(suite_id) or {"id": suite_id}
    by_config: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in store.reports.final_trial_rows(suite_id, statuses):
        by_config[(row["model"], row["cli"])].append(row)
    folders = []
    for position, (model, cli) in enumerate(store.views.configuration_pairs(suite_id)):
        trials = by_config.get((model, cli))
        if not trials:
            continue
        folder = out / f"{position:03d}-{safe(harbor_agent(cli))}__{safe(model)}"
        job = folder / safe(f"{suite_id}__{cli}__{model}")
        job_id = _id(suite_id, model, cli)
        config = job_config(job.name, cli, model, trials, store.views.task_tiers(suite_id))
        _write(job / "config.json", config)
        results = [write_trial(store, job, job_id, row, suite.get("seed_hash")) for row in trials]
        _write(job / "result.json", job_result(job_id, cli, model, suite_id, results))
        _write(folder / "metadata.yaml", metadata(suite, cli, model, trials))
        folders.append(folder)
    return folders


def job_config(name: str, cli: str, model: str, trials: list[dict],
               tiers: dict[str, str | None]) -> dict[str, Any]:
    attempts = max((t["trial_index"] for t in trials), default=0) + 1
    return {"schema_version": 1, "job_name": name, "jobs_dir": ".", "n_attempts": attempts, "install_only": False,
            "skip_credential_checks": False, **MULTIPLIERS, "debug": False, "n_concurrent_trials": 1, "quiet": True,
            "override_error_policy": {}, "environment": ENVIRONMENT, "verifier": VERIFIER, "metrics": [],
            "agents": [_agent(cli, model)], "user_agent": None,
            "datasets": [{"path": "tasks", "name": None, "version": None, "ref": None, "registry_url": None,
                          "registry_path": None, "repo": None, "overwrite": False, "download_dir": None,
                          "task_names": list(tiers), "exclude_task_names": None, "n_tasks": None}],
            "tasks": [], "artifacts": [], "extra_instruction_paths": [], "extra_instructions": [], "source_jobs": []}


def trial_config(job: Path, job_id: str, trial_name: str, row: dict) -> dict[str, Any]:
    return {"schema_version": 1,
            "task": {"path": f"tasks/{row['task_id']}", "git_url": None, "git_commit_id": None, "name": None,
                     "ref": None, "overwrite": False, "download_dir": None, "source": "tasks"},
            "trial_name": trial_name, "trials_dir": job.name, "install_only": False, **MULTIPLIERS,
            "agent": _agent(row["cli"], row["model"]), "user_agent": None, "environment": ENVIRONMENT,
            "verifier": VERIFIER, "override_error_policy": {}, "artifacts": [], "extra_instruction_paths": [],
            "extra_instructions": [], "job_id": job_id, "source_trial": None}


def _when(value: Any) -> str | None:
    """Harbor's timestamps: ISO 8601 in UTC; ours may be epoch seconds or ISO text already."""
    if value is None or value == "":
        return None
    return _iso(value) if isinstance(value, (int, float)) else str(value)


def trial_result(job: Path, job_id: str, trial_name: str, row: dict, tasks_hash: str | None,
                 seed_hash: str | None = None) -> dict[str, Any]:
    tokens = TokenUsage.from_dict(row)
    cost = row["cost_actual_usd"] if row.get("cost_actual_usd") is not None else row.get("cost_usd")
    judged = row["status"] in ("passed", "failed", "killed")
    started, finished = _when(row.get("started_at")), _when(row.get("finished_at"))
    exception = None
    if row["status"] in EXCEPTIONS:
        exception = {"exception_type": EXCEPTIONS[row["status"]],
                     "exception_message": str(row.get("reason") or row.get("error") or row["status"])[:2000],
                     "exception_traceback": "", "occurred_at": finished or started or "1970-01-01T00:00:00Z"}
    provider, _, name = str(row["model"]).rpartition("/")
    ours = {k: row[k] for k in TRIAL_FIELDS if row.get(k) is not None}
    ours["passed"] = bool(row.get("passed"))  # the store keeps 0/1
    ours["tokens"] = tokens.as_dict()
    if seed_hash:
        ours["suite_seed_hash"] = seed_hash
    return {
        "schema_version": 1, "id": _id(job_id, row["id"]), "task_name": row["task_id"], "trial_name": trial_name,
        "trial_uri": f"{job.name}/{trial_name}", "task_id": {"path": f"tasks/{row['task_id']}"}, "source": "tasks",
        "task_checksum": tasks_hash or _id("task", row["suite_id"], row["task_id"]).replace("-", ""),
        "config": trial_config(job, job_id, trial_name, row),
        "agent_info": {"name": harbor_agent(row["cli"]), "version": str(row.get("cli_version") or "unknown"),
                       "model_info": {"name": name or row["model"], "provider": provider or None}},
        "agent_result": {"n_input_tokens": tokens.uncached_input + tokens.cached_input + tokens.cache_write,
                         "n_cache_tokens": tokens.cached_input, "n_output_tokens": tokens.output + tokens.reasoning,
                         "cost_usd": cost, "model_usage": None, "rollout_details": None, "metadata": None},
        "verifier_result": {"rewards": {"reward": float(row.get("quality") or 0.0)}} if judged else None,
        "exception_info": exception, "started_at": started, "finished_at": finished,
        "agent_execution": {"started_at": started, "finished_at": finished} if row["status"] != "infra-invalid"
        else None,
        "step_results": None, "agentmeter": ours,
    }


def write_trial(store: Any, job: Path, job_id: str, row: dict, seed_hash: str | None = None) -> dict[str, Any]:
    trial_name = f"{safe(row['task_id'])}__am{row['id']}"
    folder = job / trial_name
    _write(folder / "config.json", trial_config(job, job_id, trial_name, row))
    result = trial_result(job, job_id, trial_name, row, row.get("instruction_hash"), seed_hash)
    _write(folder / "result.json", result)
    agent = folder / "agent"
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "trajectory.json").write_bytes(trial_trajectory(store, row["id"]).to_json())
    lines = []
    for _seq, _ts, _kind, stream, text, data in store.events(row["id"]):
        if stream == "stdout" and data:  # the CLI's own output line, as Harbor keeps an agent's log
            lines.append(data if isinstance(data, bytes) else str(data).encode())
    (agent / f"{safe(harbor_agent(row['cli']))}.txt").write_bytes(b"\n".join(lines) + (b"\n" if lines else b""))
    verifier = folder / "verifier"
    verifier.mkdir(exist_ok=True)
    (verifier / "test-stdout.txt").write_text(row.get("verifier_output") or "", encoding="utf-8")
    if result["verifier_result"] is not None:
        (verifier / "reward.txt").write_text(f"{result['verifier_result']['rewards']['reward']:g}\n")
    _write(folder / "artifacts" / "manifest.json", [])
    return result


def job_result(job_id: str, cli: str, model: str, suite_id: str, results: list[dict]) -> dict[str, Any]:
    """Harbor's job ``result.json``: counts, the mean reward, rewards and exceptions by trial, pass@k."""
    rewards: dict[str, list[str]] = defaultdict(list)
    exceptions: dict[str, list[str]] = defaultdict(list)
    per_task: dict[str, list[bool]] = defaultdict(list)
    values = []
    for r in results:
        if r["verifier_result"] is not None:
            value = r["verifier_result"]["rewards"]["reward"]
            rewards[repr(value)].append(r["trial_name"])
            values.append(value)
        if r["exception_info"] is not None:
            exceptions[r["exception_info"]["exception_type"]].append(r["trial_name"])
        if r["agentmeter"]["status"] != "infra-invalid":
            per_task[r["task_name"]].append(bool(r["agentmeter"].get("passed")))
    fewest = min((len(v) for v in per_task.values()), default=0)
    pass_k = {str(k): sum(pass_at_k(len(v), sum(v), k) for v in per_task.values()) / len(per_task)
              for k in range(1, fewest + 1)} if per_task else {}
    times = sorted(t for r in results for t in (r["started_at"], r["finished_at"]) if t)
    key = f"{harbor_agent(cli)}__{model}__{suite_id}"
    return {"schema_version": 1, "id": job_id, "started_at": times[0] if times else None,
            "updated_at": times[-1] if times else None, "finished_at": times[-1] if times else None,
            "n_total_trials": len(results),
            "stats": {"n_completed_trials": len(results), "n_errored_trials": sum(len(v) for v in exceptions.values()),
                      "n_running_trials": 0, "n_pending_trials": 0, "n_cancelled_trials": 0, "n_retries": 0,
                      "evals": {key: {"n_trials": len(results), "n_errors": sum(len(v) for v in exceptions.values()),
                                      "metrics": [{"reward": sum(values) / len(values)}] if values else [],
                                      "pass_at_k": pass_k, "reward_stats": {"reward": dict(rewards)},
                                      "exception_stats": dict(exceptions)}},
                      "n_input_tokens": sum(r["agent_result"]["n_input_tokens"] for r in results),
                      "n_cache_tokens": sum(r["agent_result"]["n_cache_tokens"] for r in results),
                      "n_output_tokens": sum(r["agent_result"]["n_output_tokens"] for r in results),
                      "cost_usd": None if any(r["agent_result"]["cost_usd"] is None for r in results)
                      else sum(r["agent_result"]["cost_usd"] for r in results)}}


def metadata(suite: dict, cli: str, model: str, trials: list[dict]) -> dict[str, Any]:
    versions = sorted({str(t["cli_version"]) for t in trials if t.get("cli_version")})
    provider, _, name = model.rpartition("/")
    per_task: dict[str, int] = defaultdict(int)
    for t in trials:
        per_task[t["task_id"]] += t["status"] != "infra-invalid"
    return {
        "agent_display_name": harbor_agent(cli), "agent_name": harbor_agent(cli), "agent_version": versions,
        "agent_url": None, "agent_org_display_name": None,
        "models": [{"model_name": name or model, "model_provider": provider or None, "model_display_name": model,
                    "model_org_display_name": None}],
        "produced_by": f"agentmeter-tui {__version__}",
        "settings": {"suite": suite.get("id"), "seed_prompt_hash": suite.get("seed_hash"),
                     "trials_per_task": min(per_task.values(), default=0), "timeout_multiplier": 1.0,
                     "overrides": None, "attempts": len(trials)},
    }


# -- the way back ---------------------------------------------------------------------------------

def _typed(block: dict, key: str, types: tuple[type, ...]) -> Any:
    value = block.get(key)
    return value if isinstance(value, types) and not (isinstance(value, bool) and bool not in types) else None


def apply_ours(trial: Any, block: Any, finals: frozenset[str]) -> bool:
    """A result we exported: its ``agentmeter`` block gives back what Harbor's fields cannot hold
    (status at our threshold, the five token classes, comparable cost, trial index, tier). Each
    field is taken only with the type we wrote; True when the block was ours."""
    if not isinstance(block, dict) or block.get("status") not in finals:
        return False
    for key, attr in (("suite_id", "suite"), ("task_id", "task"), ("model", "model"), ("cli", "cli"),
                      ("reason", "reason"), ("tier", "tier"), ("cost_source", "cost_source"),
                      ("cost_actual_source", "cost_actual_source"), ("started_at", "started_at"),
                      ("finished_at", "finished_at"), ("cli_version", "cli_version"),
                      ("suite_seed_hash", "seed_hash")):
        if (value := _typed(block, key, (str,))) is not None:
            setattr(trial, attr, value)
    trial.status, trial.passed = block["status"], bool(_typed(block, "passed", (bool,)))
    quality = _typed(block, "quality", (int, float))
    trial.quality = float(quality) if quality is not None and 0.0 <= quality <= 1.0 else 0.0
    for key in ("turns", "tool_calls", "attempt", "trial_index"):
        if (value := _typed(block, key, (int,))) is not None and value >= 0:
            setattr(trial, key, value)
    trial.cost_usd = _typed(block, "cost_usd", (int, float))
    trial.cost_actual_usd = _typed(block, "cost_actual_usd", (int, float))
    trial.priced = True  # the comparable cost is the one we computed, unpriced (None) included
    tokens = block.get("tokens")
    if isinstance(tokens, dict) and all(isinstance(v, int) and not isinstance(v, bool) for v in tokens.values()):
        try:
            trial.tokens = TokenUsage.from_dict(tokens)
        except (TypeError, ValueError):
            pass
    return True


def _folders(folder: Path) -> list[Path]:
    return [c for c in folder.iterdir() if c.is_dir() and not c.is_symlink()]


def _is_trial(folder: Path) -> bool:
    """A trial folder: its own config.json or result.json, and no folder inside that has one (a job has)."""
    return ((folder / "result.json").exists() or (folder / "config.json").exists()) and not any(
        (g / "config.json").exists() or (g / "result.json").exists() for g in _folders(folder))


def _is_job(folder: Path) -> bool:
    """Trial folders inside (a job copied without its own config.json counts too)."""
    return any(_is_trial(c) for c in _folders(folder))


def job_folders(root: Path) -> list[Path]:
    """``root`` when it is a Harbor job folder, else the job folders in it or in its submission
    folders (``CLI__MODEL/JOB``), in name order."""
    if _is_job(root):
        return [root]
    found = []
    for child in sorted(_folders(root)):
        if _is_job(child):
            found.append(child)
        else:
            found += sorted(p for p in _folders(child) if _is_job(p))
    return found
