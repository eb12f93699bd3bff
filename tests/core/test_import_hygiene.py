"""The package's shape holds: the core runs without a screen (importing it loads no Textual, rich,
docker or asyncssh), the layer contracts of pyproject.toml ([tool.importlinter]) are kept, the module
graph has no circle, imports under ``TYPE_CHECKING`` and inside functions included (walked with
``ast``), and no function is over 60 lines (a module is as long as its one concept). Tests on copies of the package with planted imports
prove the checks bite."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

CORE_MODULES = [
    "agentmeter_tui.core", "agentmeter_tui.core.run.runner", "agentmeter_tui.core.run.scheduler",
    "agentmeter_tui.core.store", "agentmeter_tui.core.suites.suite", "agentmeter_tui.core.suites.load",
    "agentmeter_tui.core.run.trial",
    "agentmeter_tui.core.pricing", "agentmeter_tui.core.reporting.records", "agentmeter_tui.core.harnesses",
    "agentmeter_tui.core.harnesses.reference", "agentmeter_tui.core.sandboxes",
    "agentmeter_tui.core.sandboxes.local", "agentmeter_tui.core.run.control",
]
FORBIDDEN = ("textual", "rich", "docker", "asyncssh")
CONTRACTS = ("core knows nothing of the UI or the CLI", "the UI never imports the CLI's commands",
             "sandboxes never import the run engine",
             "doctor, verifiers and difftest know sandbox kinds only through the registry",
             "the run engine is layered", "suites load through the registries that read them",
             "swarm sandboxes are layered", "the UI's palette does not import the app")

MAX_FUNCTION_LINES = 60  # the house limit for a function, docstring included (STYLE.md 12: size by function)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Every module of the package and the modules it imports, read with ``ast``: imports at
    module level, inside functions and under ``TYPE_CHECKING`` alike (a circle through any of
    them is a circle). ``from p import x`` depends on ``p.x`` when that is a module, else on ``p``."""
    modules: dict[str, tuple[Path, bool]] = {}
    for path in (root / "agentmeter_tui").rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, (path, is_package) in modules.items():
        package = module.split(".") if is_package else module.split(".")[:-1]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets |= {known(alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + [node.module or ""]).rstrip(".")
                for alias in node.names:
                    targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else known(base))
        graph[module] = {t for t in targets if t and t != module}
    return graph


def import_cycles(root: Path) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    graph = import_graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def _run(code_or_args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    # The checked tree comes first on the path, whatever is installed in the environment.
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([sys.executable, *code_or_args], capture_output=True, text=True, cwd=cwd, env=env)


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    return _run(["-c", "from importlinter.cli import lint_imports_command; lint_imports_command(['--no-cache'])"],
                root)


def test_core_imports_no_ui_or_sdk():
    code = (
        "import importlib, json, sys\n"
        f"for name in {CORE_MODULES!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = set(json.loads(out.stdout))
    assert not loaded & set(FORBIDDEN), f"core loaded {sorted(loaded & set(FORBIDDEN))}"


def test_import_linter_contracts():
    """The layer rules as static contracts over every module (pyproject.toml [tool.importlinter])."""
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    for name in CONTRACTS:
        assert f"{name} KEPT" in result.stdout, result.stdout
    assert f"{len(CONTRACTS)} kept, 0 broken" in result.stdout


def test_no_import_cycles():
    assert import_cycles(ROOT) == []


def test_the_checks_catch_a_planted_upward_import_and_a_planted_circle(tmp_path):
    shutil.copytree(ROOT / "agentmeter_tui", tmp_path / "agentmeter_tui",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    vocab = tmp_path / "agentmeter_tui" / "core" / "vocab.py"
    usage = tmp_path / "agentmeter_tui" / "core" / "usage.py"
    # upward: the core's vocabulary reaching for a UI module
    vocab.write_text(vocab.read_text() + "\nfrom ..ui import format as _planted_upward  # noqa: E402\n")
    # a circle: vocab imports usage (TokenUsage); usage now imports vocab back
    usage.write_text(usage.read_text() + "\nfrom . import vocab as _planted_circle  # noqa: E402\n")

    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert f"{CONTRACTS[0]} BROKEN" in result.stdout, result.stdout
    assert "agentmeter_tui.core.vocab -> agentmeter_tui.ui.format" in result.stdout, result.stdout
    assert ["agentmeter_tui.core.usage", "agentmeter_tui.core.vocab"] in import_cycles(tmp_path)


def test_circles_for_annotations_and_inside_functions_are_caught(tmp_path):
    shutil.copytree(ROOT / "agentmeter_tui", tmp_path / "agentmeter_tui",
                    ignore=shutil.ignore_patterns("__pycache__"))
    run = tmp_path / "agentmeter_tui" / "core" / "run"
    # annotations only: the run engine's leaf naming the trial back
    view = run / "trialview.py"
    planted = "if TYPE_CHECKING:\n    from .trial import TrialRun\n"
    view.write_text(view.read_text().replace("if TYPE_CHECKING:\n", planted, 1))
    # deferred: the feed reaching for the runner inside a function
    feed = run / "feed.py"
    feed.write_text(feed.read_text() + "\n\ndef _planted():\n    from .runner import Runner\n    return Runner\n")
    cycles = import_cycles(tmp_path)
    assert any({"agentmeter_tui.core.run.trial", "agentmeter_tui.core.run.trialview"} <= set(c) for c in cycles)
    assert any({"agentmeter_tui.core.run.feed", "agentmeter_tui.core.run.runner"} <= set(c) for c in cycles)


def function_lengths(root: Path) -> dict[str, int]:
    """Every function and method of the package over the cap: ``path:qualname`` -> lines."""
    long = {}
    for path in sorted((root / "agentmeter_tui").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):  # the parent's name makes methods unique
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = child.end_lineno - child.lineno + 1
                    owner = f"{node.name}." if isinstance(node, ast.ClassDef) else ""
                    if lines > MAX_FUNCTION_LINES:
                        long[f"{path.relative_to(root)}:{owner}{child.name}"] = lines
    return long


def test_every_function_is_at_most_60_lines():
    assert function_lengths(ROOT) == {}


def test_the_function_cap_bites(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(61))
    (tmp_path / "agentmeter_tui").mkdir()
    (tmp_path / "agentmeter_tui" / "planted.py").write_text(f"class C:\n  def long(self):\n{body}")
    assert function_lengths(tmp_path) == {"agentmeter_tui/planted.py:C.long": 62}
