"""The package's shape holds: the core runs without a screen (importing it loads no Textual, rich,
docker or asyncssh), the layer contracts of pyproject.toml ([tool.importlinter]) are kept, and no
two modules import each other (imports under ``TYPE_CHECKING`` are for annotations and do not
count). The last test proves the checks bite, on a copy of the package with a planted upward
import and a planted circle."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

CORE_MODULES = [
    "agentmeter_tui.core", "agentmeter_tui.core.run.runner", "agentmeter_tui.core.run.scheduler",
    "agentmeter_tui.core.store", "agentmeter_tui.core.suites.suite", "agentmeter_tui.core.run.trial",
    "agentmeter_tui.core.pricing", "agentmeter_tui.core.reporting.records", "agentmeter_tui.core.harnesses",
    "agentmeter_tui.core.harnesses.reference", "agentmeter_tui.core.sandboxes",
    "agentmeter_tui.core.sandboxes.local", "agentmeter_tui.core.run.control",
]
FORBIDDEN = ("textual", "rich", "docker", "asyncssh")
CONTRACTS = ("core knows nothing of the UI or the CLI", "the UI never imports the CLI's commands",
             "sandboxes never import the run engine",
             "doctor, verifiers and difftest know sandbox kinds only through the registry")

# Strongly connected components of the module graph (Tarjan), printed as JSON lists.
CYCLES = """
import json, sys
import grimp
graph = grimp.build_graph("agentmeter_tui", exclude_type_checking_imports=True, cache_dir=None)
index, low, stack, on_stack, found = {}, {}, [], set(), []
sys.setrecursionlimit(10000)
def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on_stack.add(v)
    for w in sorted(graph.find_modules_directly_imported_by(v)):
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
for module in sorted(graph.modules):
    if module not in index:
        visit(module)
print(json.dumps(found))
"""


def _run(code_or_args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    # The checked tree comes first on the path, whatever is installed in the environment.
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([sys.executable, *code_or_args], capture_output=True, text=True, cwd=cwd, env=env)


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    return _run(["-c", "from importlinter.cli import lint_imports_command; lint_imports_command(['--no-cache'])"],
                root)


def import_cycles(root: Path) -> list[list[str]]:
    result = _run(["-c", CYCLES], root)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


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
