"""``agentmeter doctor``: a missing CLI is named with its install command (exit 1), a present
one runs a one-turn scenario parsed as served, a dead sandbox engine fails its row; and a
grid whose CLI is missing marks that CLI's trials infra-invalid with the hint while the rest
of the grid runs."""

from __future__ import annotations

import os
import tempfile
import textwrap
from pathlib import Path

import pytest

from agentmeter_tui.core.harnesses import get_adapter
from agentmeter_tui.core.paths import default_clis_root
from agentmeter_tui.core.store import Store
from tests.conftest import agentmeter, need

KIMI_HINT = "agentmeter install-clis --only kimi-cli@1.51.0"


def test_a_missing_cli_is_named_with_its_install_command(tmp_path):
    empty = tmp_path / "clis"
    empty.mkdir()
    result = agentmeter("doctor", "--only", "kimi-cli", "--only", "reference", "--db", str(tmp_path / "a.db"),
                        env={"AGENTMETER_CLIS_DIR": str(empty), "COLUMNS": "200"}, timeout=180)
    assert result.returncode == 1, result.stdout + result.stderr
    out = " ".join(result.stdout.split())
    assert f"kimi-cli: not installed in {empty} -> run: {KIMI_HINT}" in out
    assert "reference │ 0.1.0 │ 0.1.0 │ ok" in out  # the bundled agent ran its one turn
    assert "1 check(s) failed" in out


@pytest.mark.clis
@pytest.mark.slow
def test_present_cli_passes_beside_a_missing_one(tmp_path):
    real = default_clis_root()
    need(get_adapter("opencode").is_installed(real), "opencode is not installed (agentmeter install-clis)")
    clis = tmp_path / "clis"  # the npm CLIs, but no Kimi venv
    clis.mkdir()
    (clis / "node_modules").symlink_to(real / "node_modules")
    result = agentmeter("doctor", "--only", "opencode", "--only", "kimi-cli", "--db", str(tmp_path / "a.db"),
                        env={"AGENTMETER_CLIS_DIR": str(clis), "COLUMNS": "200"}, timeout=300)
    assert result.returncode == 1
    out = " ".join(result.stdout.split())
    assert "opencode │ 1.18.33 │ 1.18.33 │ ok │ 1 model call(s), 712 tokens parsed as served" in out, out
    assert f"kimi-cli: not installed in {clis} -> run: {KIMI_HINT}" in out


def write_suite(folder: Path, clis: list[str], sandbox: str = "", extra: str = "") -> Path:
    (folder / "task" / "tests").mkdir(parents=True)
    (folder / "scenarios").mkdir()
    cli_entries = "".join(f'[[clis]]\nadapter = "{name}"\n' for name in clis)
    (folder / "suite.toml").write_text(textwrap.dedent("""\
        [suite]
        id = "doctor-test"
        max_retries = 0
        {extra}
        [[models]]
        id = "mock"
        """).format(extra=extra) + cli_entries + sandbox)
    (folder / "scenarios" / "mock.toml").write_text(
        '[[turns]]\nshell = "echo hi > out.txt"\n[[turns]]\ntext = "Done."\n')
    (folder / "task" / "task.toml").write_text("[verifier]\ntimeout_sec = 30\n")
    (folder / "task" / "instruction.md").write_text("Create out.txt.\n")
    (folder / "task" / "tests" / "test.sh").write_text('#!/bin/sh\ngrep -qx hi "$AGENTMETER_WORKSPACE/out.txt"\n')
    return folder


def test_dead_docker_engine_fails_its_row_and_clean_finds_nothing(tmp_path):
    sandbox = '[sandbox]\nkind = "docker"\nengine = "unix:///nonexistent/docker.sock"\n'
    suite = write_suite(tmp_path / "suite", ["reference"], sandbox)
    result = agentmeter("doctor", str(suite), "--clean", "--db", str(tmp_path / "a.db"), env={"COLUMNS": "200"},
                        timeout=180)
    out = " ".join(result.stdout.split())
    assert result.returncode == 1, out + result.stderr
    assert "docker unix:///nonexistent/docker.sock: engine │ FAIL" in out and "start dockerd" in out
    assert "clean unix:///nonexistent/docker.sock │ skip │ no engine answering" in out
    assert "reference │ 0.1.0 │ 0.1.0 │ ok" in out


def test_bad_suite_exits_2(tmp_path):
    (tmp_path / "suite.toml").write_text("[suite]\nid = 'x'\n")
    result = agentmeter("doctor", str(tmp_path))
    assert result.returncode == 2 and "suite.toml" in result.stderr


def test_missing_cli_makes_its_trials_infra_invalid_and_the_grid_runs_on(tmp_path):
    suite = write_suite(tmp_path / "suite", ["reference", "kimi-cli"])
    empty = tmp_path / "clis"
    empty.mkdir()
    db = tmp_path / "grid.db"
    result = agentmeter("run", str(suite), "--headless", "--db", str(db),
                        env={"AGENTMETER_CLIS_DIR": str(empty)}, timeout=180)
    # the grid runs on; its exit says a cell has no result (issue 38: 8, not 0)
    assert result.returncode == 8 and "1 cell(s) ended infra-invalid" in result.stderr, result.stderr
    trials = {t["cli"]: t for t in Store(db).trials("doctor-test")}
    assert trials["reference"]["status"] == "passed"
    kimi = trials["kimi-cli"]
    assert kimi["status"] == "infra-invalid" and KIMI_HINT in kimi["reason"] and "not installed" in kimi["reason"]
    assert os.path.isdir(empty) and not any(empty.iterdir())  # nothing was installed behind our back


@pytest.mark.parametrize("sandbox, engines", [
    ("", [None]),  # a local suite: this machine's engine, once
    ('[sandbox]\nkind = "docker"\nengine = "tcp://127.0.0.1:9"\nclis = "image"\n', ["tcp://127.0.0.1:9"]),
    ('[sandbox]\nkind = "swarm"\nengine = "tcp://127.0.0.1:7"\n', ["tcp://127.0.0.1:7"]),
])
def test_clean_asks_each_kind_and_cleans_each_engine_once(tmp_path, monkeypatch, sandbox, engines):
    """``--clean`` goes through every registered kind; of the docker family, the suite's own
    kind cleans its engines, and this machine's engine is cleaned once when the suite has none."""
    from agentmeter_tui.core import doctor
    from agentmeter_tui.core.sandboxes.docker import leftovers
    from agentmeter_tui.core.suites.load import load_suite

    cleaned: list = []
    monkeypatch.setattr(leftovers, "clean_engines", lambda targets: cleaned.extend(targets) or [])
    doctor.clean_leftovers(load_suite(write_suite(tmp_path / "suite", ["reference"], sandbox)))
    assert [url for url, _key, _hosts in cleaned] == engines
    cleaned.clear()
    doctor.clean_leftovers(None)
    assert cleaned == [(None, None, None)]


def test_without_a_suite_the_oracle_is_not_checked():
    """The oracle runs a task's solution/solve.sh: with no suite there is no task, and doctor
    always failed it ("/solve.sh: No such file") (issue 24, item 11)."""
    from agentmeter_tui.core.doctor import plans_for

    names = [plan.adapter.name for plan in plans_for(None)]
    assert "oracle" not in names and "claude-code" in names


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root runner's trials have a uid of their own")
async def test_the_local_sandbox_says_how_its_trials_get_their_uid(tmp_path, monkeypatch):
    """doctor names the folder that keeps bwrap from setting the trials' uid itself (a CLIs' root
    under a 0700 folder), and says so when nothing does."""
    from agentmeter_tui.core.sandboxes import isolation
    from agentmeter_tui.core.sandboxes.local import LocalSandbox

    need(isolation.bwrap() is not None, "bwrap is not on PATH")
    need(isolation.pool_namespace(str(isolation.bwrap())) is not None, "no user namespace here")
    roots = Path(tempfile.mkdtemp(dir=os.environ["AGENTMETER_SANDBOX_ROOT"]))
    roots.chmod(0o711)
    private = roots / "private"
    (private / "clis").mkdir(parents=True)
    private.chmod(0o700)
    shared = roots / "shared" / "clis"
    shared.mkdir(parents=True)
    monkeypatch.setattr(isolation, "_python", lambda: ())  # this machine's own Python may sit under /root
    sandbox = LocalSandbox(None, {"root": str(roots)})
    sandbox.tool_roots = [str(private / "clis")]
    (blocked,) = await sandbox.check_hosts()
    assert blocked.ok is True and blocked.subject == "trials' uid", blocked
    assert f"holds {private / 'clis'}, and {private} lets no other user pass" in blocked.detail, blocked
    assert "unshare -G -S" in blocked.detail and "/usr" in blocked.fix, blocked
    sandbox.tool_roots = [str(shared)]
    (clear,) = await sandbox.check_hosts()
    assert clear.detail == "set by bwrap itself (no exec in the sandbox)", clear
    assert await LocalSandbox(None, {"root": str(roots), "isolation": "none"}).check_hosts() == []
