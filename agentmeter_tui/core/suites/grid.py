"""The suite a command line implies (``agentmeter run DIR -m PROVIDER/MODEL -a CLI -k 3 ...``).

A run from the command line is a suite like any other: its suite.toml is written into a folder
beside the store (``STORE.suites/ID/``) and its text into the store, so the same command resumes
it, ``agentmeter suite show`` prints it, and a suite.toml with that text runs the same grid. The
suite id is a hash of the options (the same command names the same suite), unless ``--suite-id``
names it. With a suite.toml, the same options override its grid.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..tomlerrors import InputError
from .suitefile import provider_kind_names

NO_LINE = 0


class GridError(ValueError):
    """A command-line option that cannot make a suite: ``option`` names it."""

    def __init__(self, option: str, message: str):
        super().__init__(f"{option}: {message}")
        self.option = option


@dataclass
class GridOptions:
    """The grid options of ``agentmeter run`` (None or empty: not given)."""

    models: list[str] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    attempts: int | None = None
    concurrency: int | None = None
    sandbox: str | None = None
    budget_usd: float | None = None
    scenarios: Path | None = None
    prices: Path | None = None
    suite_id: str | None = None

    def given(self) -> bool:
        return bool(self.models or self.agents or self.include or self.exclude or self.attempts
                    or self.concurrency or self.sandbox or self.budget_usd or self.suite_id)


def split_model(ref: str) -> tuple[str, str]:
    """``provider/model`` -> (provider kind, model id); the provider must be a known kind."""
    provider, slash, model = ref.partition("/")
    if not slash or not provider or not model:
        raise GridError("-m/--model", f"'{ref}' has no provider: give PROVIDER/MODEL "
                                      f"(providers: {', '.join(provider_kind_names())})")
    if provider not in provider_kind_names():
        raise GridError("-m/--model", f"'{ref}': unknown provider '{provider}'; known: "
                                      f"{', '.join(provider_kind_names())}")
    return provider, model


def check_agents(agents: list[str]) -> None:
    from ..harnesses import ADAPTERS

    known = ADAPTERS.names()
    for agent in agents:
        if agent.partition(":")[0] not in known:
            raise GridError("-a/--agent", f"unknown agent CLI '{agent}'; known: {', '.join(known)}")


def grid_suite(tasks_dir: Path, options: GridOptions, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The suite.toml (as a dict) over ``tasks_dir``, or ``base`` (a suite file's dict, its paths
    already absolute) with the options overriding its grid."""
    from .taskfolders import task_folders

    # The suite.toml's raw dict, as the loader reads it (SuiteFile validates it there): nested tables
    data: dict[str, Any] = json.loads(json.dumps(base)) if base else {"suite": {"tasks_dir": str(tasks_dir)}}
    suite: dict[str, Any] = data.setdefault("suite", {})
    if options.include:
        suite["include"] = list(options.include)
    if options.exclude:
        suite["exclude"] = list(options.exclude)
    folders = task_folders(tasks_dir, suite.get("include", []), suite.get("exclude", []))
    for pattern in options.include:  # a glob that matches nothing is a typo, never an empty grid
        if not task_folders(tasks_dir, [pattern], []):
            raise GridError("-t/--task", f"'{pattern}' matches no task folder under {tasks_dir}")
    if not folders:
        raise GridError("PATH", f"no task folder (with a task.toml) under {tasks_dir}")
    if options.models:
        _set_models(data, options)
    elif base is None:
        raise GridError("-m/--model", "give at least one model (PROVIDER/MODEL) for a run without a suite.toml")
    if options.agents:
        check_agents(options.agents)
        data["clis"] = [{"adapter": a} if ":" not in a else {"adapter": a.partition(":")[0], "name": a}
                        for a in options.agents]
    elif base is None:
        raise GridError("-a/--agent", "give at least one agent CLI for a run without a suite.toml")
    if options.attempts is not None:
        suite["trials"] = options.attempts
    if options.concurrency is not None:
        suite["concurrency"] = options.concurrency
    if options.budget_usd is not None:
        data.setdefault("budgets", {})["run"] = {**data.get("budgets", {}).get("run", {}), "usd": options.budget_usd}
    data.setdefault("sandbox", {})["kind"] = options.sandbox or data.get("sandbox", {}).get("kind") \
        or default_sandbox(folders)
    suite["id"] = options.suite_id or _grid_id(tasks_dir, data, base)
    return data


def _set_models(data: dict[str, Any], options: GridOptions) -> None:
    providers = dict(data.get("providers") or {})
    models = []
    for ref in options.models:
        provider, model = split_model(ref)
        models.append({"id": model, "provider": provider, "price_key": ref})
        entry = providers.setdefault(provider, {"kind": provider})
        if provider == "scripted" and options.scenarios is not None:
            entry["scenarios"] = str(options.scenarios.resolve())
        elif provider not in ("scripted", "none"):
            from ..wire import provider_kinds

            protocol = provider_kinds().get(provider)
            if protocol is not None and protocol.key_env and "api_key_env" not in entry:
                entry["api_key_env"] = protocol.key_env[0]  # where the key is read from; never stored
    data["models"] = models
    data["providers"] = providers


def default_sandbox(folders: list[Path]) -> str:
    """docker when a task follows Harbor's contract (it needs a container), local otherwise."""
    from ..harbor.taskfile import is_harbor
    from ..tomlerrors import load_toml

    for folder in folders:
        try:
            if is_harbor(load_toml(folder / "task.toml")[0]):
                return "docker"
        except InputError:
            continue  # named when the suite loads
    return "local"


def _grid_id(tasks_dir: Path, data: dict[str, Any], base: dict[str, Any] | None) -> str:
    """The same options over the same folder name the same suite (so the command resumes it)."""
    body = json.dumps({k: v for k, v in data.items() if k != "suite"} | {"suite": {
        k: v for k, v in data["suite"].items() if k != "id"}}, sort_keys=True, default=str)
    digest = hashlib.sha256(body.encode()).hexdigest()[:10]
    stem = (base or {}).get("suite", {}).get("id") or _slug(tasks_dir.name) or "tasks"
    return f"{stem}-{digest}"


def _slug(name: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:40]


def absolute_paths(data: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A suite file's dict with its folder-relative paths made absolute: the implied suite is
    written elsewhere (beside the store) and must find the same tasks, scenarios and prices."""
    suite = data.setdefault("suite", {})
    suite["tasks_dir"] = str((folder / suite.get("tasks_dir", ".")).resolve())
    if suite.get("pricing"):
        suite["pricing"] = str((folder / suite["pricing"]).resolve())
    providers = data.setdefault("providers", {"scripted": {}})
    for entry in providers.values():
        if isinstance(entry, dict) and entry.get("kind", "scripted") == "scripted":
            entry["scenarios"] = str((folder / entry.get("scenarios", "scenarios")).resolve())
    return data


def _copy_in(data: dict[str, Any], folder: Path) -> None:
    """A suite's own files live in its folder (the loader refuses paths out of it): a base
    suite's price snapshot (once: a resumed run prices as the first did) and scripted scenarios
    (each time: they are the scripted models' replies) are copied into the implied suite's."""
    import shutil

    pricing = data["suite"].get("pricing")
    if pricing and Path(pricing).is_absolute():
        if not (folder / "prices.toml").exists():
            shutil.copyfile(pricing, folder / "prices.toml.part")
            (folder / "prices.toml.part").replace(folder / "prices.toml")
        data["suite"]["pricing"] = "prices.toml"
    for name, entry in (data.get("providers") or {}).items():
        scenarios = entry.get("scenarios") if isinstance(entry, dict) else None
        if not scenarios or not Path(scenarios).is_absolute():
            continue
        local = "scenarios" if name == "scripted" else f"scenarios-{_slug(name)}"
        partial = folder / f"{local}.part"
        shutil.rmtree(partial, ignore_errors=True)
        if Path(scenarios).is_dir():
            shutil.copytree(scenarios, partial)
        else:
            partial.mkdir()
        shutil.rmtree(folder / local, ignore_errors=True)
        partial.rename(folder / local)
        entry["scenarios"] = local


def write_grid_suite(data: dict[str, Any], root: Path, prices: Path | None) -> Path:
    """Write the implied suite's folder under ``root``. Its price snapshot is written once (from
    ``--prices``, else drafted from genai-prices for today's date for the models with a real
    provider): a resumed run prices as the first did. Returns the folder."""
    import tomli_w

    folder = root / data["suite"]["id"]
    folder.mkdir(parents=True, exist_ok=True)
    _copy_in(data, folder)
    snapshot = folder / "prices.toml"
    if not data["suite"].get("pricing"):
        refs = [m["price_key"] for m in data["models"] if m.get("provider") not in ("scripted", "none")]
        if not snapshot.exists() and (prices is not None or refs):
            if prices is not None:
                text = prices.read_text(encoding="utf-8")
            else:
                from ..pricing import draft_snapshot, now_utc

                text = draft_snapshot(refs, now_utc())[0]
            snapshot.with_suffix(".part").write_text(text, encoding="utf-8")
            snapshot.with_suffix(".part").replace(snapshot)
        if snapshot.exists():
            data["suite"]["pricing"] = "prices.toml"
    text = "# The suite implied by an `agentmeter run` command line (agentmeter suite show prints it).\n" \
           + tomli_w.dumps(data)
    partial = folder / "suite.toml.part"
    partial.write_text(text, encoding="utf-8")
    partial.replace(folder / "suite.toml")  # never a half-written suite file
    return folder
