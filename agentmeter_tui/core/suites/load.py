"""Loading suites and task folders: ``suite.toml``, ``task.toml``, the checks across tables.

A task folder follows the Harbor / Terminal-Bench layout (``task.toml``, ``instruction.md``,
``environment/``, ``tests/``) plus an optional ``workspace/`` of seed files, so existing task
folders load unchanged. Every error names file, line and field (:class:`InputError`).
"""

from __future__ import annotations

from pathlib import Path

from ..harbor.taskfile import HARBOR, HarborTaskFile, is_harbor
from ..tomlerrors import InputError, load_toml, validate
from ..vocab import is_tier
from .suite import Suite, Task
from .suitefile import SuiteFile, SuiteSection
from .taskfiles import check_task_files, outside
from .taskfolders import TaskFile, task_folders


def load_task(folder: Path) -> Task:
    toml_path = folder / "task.toml"
    check_task_files(folder)  # before any file of it is read: no link out, no huge file
    data, text = load_toml(toml_path)
    spec: TaskFile = validate(HarborTaskFile if is_harbor(data) else TaskFile, data, toml_path, text)
    instruction_path = folder / "instruction.md"
    if not instruction_path.is_file():
        raise InputError(instruction_path, None, "instruction", "missing instruction file (instruction.md)")
    try:
        instruction = instruction_path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(instruction_path, None, "instruction", f"not UTF-8 text ({exc.reason})") from None
    if not instruction.strip():
        raise InputError(instruction_path, 1, "instruction", "the instruction is empty")
    tier = spec.task.tier
    difficulty = str(spec.metadata.get("difficulty", "")).lower()
    if tier is None and is_tier(difficulty):
        tier = difficulty
    _check_kind_settings(spec, toml_path, text)
    _check_judgeable(spec, folder, toml_path, text)
    return Task(id=spec.task.id or folder.name, path=folder, tier=tier, instruction=instruction, spec=spec)


def _check_kind_settings(spec: TaskFile, path: Path, text: str) -> None:
    from ..verifiers import VERIFIERS

    _check_settings(VERIFIERS, "verifier", spec.verifier.kind, spec.verifier.model_dump(), path, text)


def _check_judgeable(spec: TaskFile, folder: Path, path: Path, text: str) -> None:
    """A task whose verifier has nothing to run is refused here, not found out by every trial:
    each would run the agent (paid), end infra-invalid and be retried."""
    kind = spec.verifier.kind
    if kind not in ("command", HARBOR) or (folder / "tests" / "test.sh").is_file():
        return
    if kind == "command" and spec.verifier.command:
        return
    task = spec.task.id or folder.name
    fix = "add tests/test.sh" + (" or a [verifier] command (or kind = \"none\" to judge nothing)"
                                 if kind == "command" else "")
    raise InputError(path, _line(text, ("verifier",)), "verifier.command" if kind == "command" else "tests",
                     f"task '{task}' has no tests/test.sh and no verifier command: its trials would be paid for "
                     f"and could never be judged; {fix}")


def _check_settings(registry, table: str, kind: str, values: dict, path: Path, text: str,
                    context: dict | None = None) -> None:
    """A ``[verifier]`` or ``[sandbox]`` table's keys beyond ``kind`` are its kind's own
    ``Settings`` model (when the kind has one)."""
    from ..registry import UnknownName

    try:
        kind_cls = registry.get(kind)
    except UnknownName as exc:
        raise InputError(path, _line(text, (table, "kind")), f"{table}.kind", str(exc)) from None
    settings_model = getattr(kind_cls, "Settings", None)
    if settings_model is not None:
        settings = validate(settings_model, values, path, text, prefix=(table,), context=context)
        # The kind's path settings (a verifier's case file, oracle, tool folder) stay in their folder.
        for name, base in getattr(settings_model, "path_fields", {}).items():
            within = path.parent if base == "task" else None  # None: the workspace, not made yet
            what = "the task folder" if base == "task" else "the agent's workspace"
            if (why := outside(within, getattr(settings, name), what)) is not None:
                raise InputError(path, _line(text, (table, name)), f"{table}.{name}", why)


def _line(text: str, loc: tuple) -> int | None:
    from ..tomlerrors import locate

    return locate(text, loc)


def load_suite(folder: str | Path) -> Suite:
    """Load and validate a suite folder; raises :class:`InputError` on the first problem."""
    folder = Path(folder)
    if (folder / "suite.toml").is_file() is False and (folder.parent / "suites" / str(folder)).is_dir():
        folder = folder.parent / "suites" / str(folder)
    toml_path = folder / "suite.toml"
    data, text = load_toml(toml_path)
    spec: SuiteFile = validate(SuiteFile, data, toml_path, text)
    for index, model in enumerate(spec.models):
        if model.provider not in spec.providers:
            raise InputError(toml_path, _line(text, ("models", index, "provider")), f"models[{index}].provider",
                             f"no provider '{model.provider}' in [providers]")
    _check_adapters(spec, toml_path, text)
    _check_sandbox(spec, toml_path, text)
    tasks, skipped = _load_tasks(folder, spec.suite, toml_path, text)
    if not tasks:
        first = f": {skipped[0]}" if skipped else ""
        raise InputError(toml_path, None, "suite.tasks", f"the suite has no tasks{first}")
    ids = [t.id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise InputError(toml_path, None, "suite.tasks", f"task ids must be unique: {', '.join(dupes)}")
    calibrated = spec.scoring.tiers or {}
    for task in tasks:
        if task.id in calibrated:  # `agentmeter calibrate --write` outranks the task's own tier
            task.tier = calibrated[task.id]
    harbor = next((t for t in tasks if t.contract.needs_container), None)
    if harbor is not None and not _harbor_sandbox(spec.sandbox.kind):
        from ..sandboxes import harbor_kinds, kind_choice

        raise InputError(toml_path, _line(text, ("sandbox", "kind")), "sandbox.kind",
                         f"task '{harbor.id}' follows Harbor's contract (its tests write /logs/verifier/reward.*), "
                         f"which runs in a container: use [sandbox] {kind_choice(harbor_kinds())}")
    suite = Suite(path=folder, spec=spec, tasks=tasks, skipped=skipped)
    # Paths first: a scenario file is read (and checked) below, and must be the suite's own.
    _check_suite_paths(folder, spec, toml_path, text)
    _check_scenarios(suite, toml_path)
    if spec.suite.pricing and not (folder / spec.suite.pricing).is_file():
        raise InputError(toml_path, _line(text, ("suite", "pricing")), "suite.pricing",
                         f"price snapshot '{spec.suite.pricing}' not found")
    if spec.suite.pricing:  # checked now: a bad price must stop `run` here, not the runner mid-start
        from ..pricing import PriceSnapshot

        PriceSnapshot.load(folder / spec.suite.pricing)
    return suite


def _check_suite_paths(folder: Path, spec: SuiteFile, toml_path: Path, text: str) -> None:
    """The suite file's paths stay in the suite folder (``tasks_dir``, a dataset read in place,
    is the one that may lie elsewhere): a parse error would quote a line of whatever host file
    they name, and scenario files are sent to the agent as the model's replies."""
    named: list[tuple[tuple[str, ...], str | None]] = [(("suite", "pricing"), spec.suite.pricing)]
    named += [(("providers", name, "scenarios"), p.scenarios) for name, p in spec.providers.items()]
    if spec.suite.tasks_dir is None:
        named += [(("suite", "tasks"), task) for task in spec.suite.tasks or []]
    for loc, value in named:
        if value is not None and (why := outside(folder, value, "the suite folder")) is not None:
            raise InputError(toml_path, _line(text, loc), ".".join(loc), f"{why}: a suite's files live in it")


def _load_tasks(folder: Path, section: SuiteSection, toml_path: Path, text: str) -> tuple[list[Task], list[InputError]]:
    """The suite's tasks; a task folder outside the suite (``tasks_dir``, a dataset read in
    place) that fails to load is skipped with its error, so one broken task of a 90-task
    dataset does not stop the run; inside the suite folder every error stops it."""
    external = section.tasks_dir is not None
    root = folder
    if section.tasks_dir is not None:
        root = Path(section.tasks_dir).expanduser()
        root = (root if root.is_absolute() else folder / root).resolve()
        if not root.is_dir():
            raise InputError(toml_path, _line(text, ("suite", "tasks_dir")), "suite.tasks_dir",
                             f"no folder {section.tasks_dir}")
    if section.tasks is None:
        folders = task_folders(root, section.include, section.exclude)
    else:
        folders = [root / name for name in section.tasks]
        for name, task_folder in zip(section.tasks, folders, strict=True):
            if not (task_folder / "task.toml").is_file():
                raise InputError(toml_path, _line(text, ("suite", "tasks")), "suite.tasks",
                                 f"no task folder '{name}' with a task.toml")
    tasks, skipped = [], []
    for task_folder in folders:
        try:
            tasks.append(load_task(task_folder))
        except InputError as exc:
            if not external:
                raise
            skipped.append(exc)
    return tasks, skipped


def _check_scenarios(suite: Suite, toml_path: Path) -> None:
    """Every scripted model has a scenario for every task, and each scenario file is valid (a
    typo like ``outptu`` named with its file and line now, not as an HTTP 400 in every trial)."""
    from ..scripted.scenario import load_scenario

    spec = suite.spec
    for model in spec.models if _any_needs_model(spec) else []:
        for task in suite.tasks:
            if suite.provider(model).kind != "scripted":
                continue
            scenario = suite.scenario_for(model, task)
            if scenario is None:
                raise InputError(toml_path, None, f"models.{model.id}",
                                 f"scripted model '{model.id}' has no scenario for task '{task.id}' "
                                 f"(looked for {task.path.name}/scenarios/{model.id}.toml and "
                                 f"{spec.providers[model.provider].scenarios}/{model.id}[/{task.id}].toml)")
            load_scenario(scenario)  # raises InputError: file, line, field


def _any_needs_model(spec: SuiteFile) -> bool:
    """Whether some CLI of the suite talks to a model (the oracle does not)."""
    from ..harnesses import ADAPTERS

    return any(getattr(ADAPTERS.get(c.adapter), "needs_model", True) for c in spec.clis)


def _check_sandbox(spec: SuiteFile, path: Path, text: str) -> None:
    """The ``[sandbox]`` keys beyond ``kind`` are the sandbox kind's own ``Settings`` model."""
    from ..sandboxes import SANDBOXES

    _check_settings(SANDBOXES, "sandbox", spec.sandbox.kind, spec.sandbox.model_dump(exclude={"kind"}), path, text,
                    context={"base": path.parent})


def _harbor_sandbox(kind: str) -> bool:
    from ..sandboxes import SANDBOXES

    return SANDBOXES.get(kind).harbor_contract


def _check_adapters(spec: SuiteFile, path: Path, text: str) -> None:
    from ..harnesses import ADAPTERS

    seen: dict[str, int] = {}
    for index, cli in enumerate(spec.clis):
        if cli.adapter not in ADAPTERS:
            raise InputError(path, _line(text, ("clis", index, "adapter")), f"clis[{index}].adapter",
                             f"unknown adapter '{cli.adapter}'; known: {', '.join(ADAPTERS.names())}")
        if cli.name is not None and cli.name.partition(":")[0] != cli.adapter:
            raise InputError(path, _line(text, ("clis", index, "name")), f"clis[{index}].name",
                             f"'{cli.name}' must start with its adapter: '{cli.adapter}:VARIANT'")
        if cli.label in seen:
            field = "name" if cli.name else "adapter"
            raise InputError(path, _line(text, ("clis", index, field)), f"clis[{index}].{field}",
                             f"'{cli.label}' is already the CLI of clis[{seen[cli.label]}]; give one of them "
                             f"a name = '{cli.adapter}:VARIANT'")
        seen[cli.label] = index
