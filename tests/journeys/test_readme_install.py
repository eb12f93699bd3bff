"""The README's commands on the README's own installs (issue 38), run one by one and each
checked: its exit code and what it prints.

- **base**: the checkout installed without extras into a fresh venv (`pip install CHECKOUT`,
  what the README's first command does minus `-e`), run from an empty folder in a fresh home;
- **pipx-like**: a wheel built from the checkout, installed with `python -m venv` + pip into a
  fresh HOME (pipx itself is not installable offline here; this is what pipx does).

Both installs use pip's configured index and cache, no other network. No command runs with a
terminal (that is what cron and CI see): the runs follow headless. Two README commands are not
run here: `bash scripts/test.sh` (the test suite this file is part of) and `install-clis`
(it downloads from npm); the TUI commands (`review`, `attach` with a terminal) have their own
journeys (tests/journeys/test_reviewer.py, test_operator.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("readme-install")]


def _pip(python: Path, *args: str) -> None:
    done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """The checkout without extras in a fresh venv: the path of its `agentmeter`."""
    env_dir = tmp_path_factory.mktemp("base") / "venv"
    venv.create(env_dir, with_pip=True)
    _pip(env_dir / "bin" / "python", str(ROOT))
    return env_dir / "bin" / "agentmeter"


class User:
    """A fresh home and an empty folder; `run` types one command there."""

    def __init__(self, root: Path, agentmeter: Path):
        self.home, self.work = root / "home", root / "work"
        self.home.mkdir()
        self.work.mkdir()
        self.bin = agentmeter.parent
        self.env = {"HOME": str(self.home), "PATH": f"{self.bin}:/usr/bin:/bin", "LANG": "C.UTF-8",
                    "XDG_CONFIG_HOME": str(self.home / ".config"), "XDG_DATA_HOME": str(self.home / ".local/share"),
                    "COLUMNS": "200"}

    def run(self, line: str, code: int = 0, shows: str = "") -> subprocess.CompletedProcess:
        done = subprocess.run(["bash", "-c", line], cwd=self.work, env=self.env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=900, start_new_session=True)
        said = done.stdout + done.stderr
        assert done.returncode == code, (line, done.returncode, said[-3000:])
        assert shows in said, (line, shows, said[-3000:])
        assert "Traceback" not in said and "ModuleNotFoundError" not in said, (line, said[-3000:])
        return done


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _running(user: User, db: str) -> list[dict]:
    return json.loads(user.run(f"agentmeter status --json --db {db}").stdout).get("running") or []


def test_the_readme_commands_on_the_base_install(base, tmp_path):
    user = User(tmp_path, base)
    run = user.run
    # the first command's last part, with no terminal: headless progress and the run's exit code
    demo = run("agentmeter demo", shows="30/30 done")
    assert re.search(r"The demo's store is (\S+);", demo.stdout), demo.stdout  # where to read it again
    run("agentmeter --version", shows="agentmeter-tui ")
    run("agentmeter suite list", shows="docker-hello")
    run("agentmeter suite copy demo ./my-suite", shows="demo")
    run('eval "$(agentmeter completion bash)" && complete -p agentmeter', shows="_agentmeter")
    run("agentmeter run smoke --headless --db smoke.db", shows="8/8 done")
    run("agentmeter run ./my-suite -m scripted/ace -a reference -k 2 -n 4 --headless --db grid.db",
        shows="open the report: agentmeter report --db grid.db")
    run("agentmeter suite show --db grid.db", shows='id = "ace"')
    # a live run, driven from the shell
    run("agentmeter run demo --detach --db live.db", shows="runner started for suite demo")
    try:
        run("agentmeter status --db live.db", shows="suite demo")
        run("agentmeter pause --db live.db", shows="paused")
        run("agentmeter resume --db live.db", shows="resumed")
        trial = wait_for(lambda: _running(user, "live.db"), "a running trial")[0]["id"]
        run(f"agentmeter budget --trial {trial} --tokens 2000000 --db live.db", shows=f"trial {trial}: budget now")
        run("agentmeter budget --run-usd 0.0001 --db live.db", shows="run cap now $0.0001")
        run("agentmeter status --wait-cap --db live.db", code=4, shows="cap hit")
        run("agentmeter budget --run-usd 50 --db live.db", shows="run cap now $50")
        run("agentmeter status --json --db live.db", shows='"caps"')
        trial = wait_for(lambda: _running(user, "live.db"), "a running trial")[0]["id"]
        done = subprocess.run(["bash", "-c", f"agentmeter kill {trial} --db live.db"], cwd=user.work, env=user.env,
                              capture_output=True, text=True, timeout=900)
        # demo trials last seconds: the one picked may have ended between status and kill, which kill says
        assert (done.returncode, done.stdout.strip()) == (0, f"trial {trial}: killing (operator)") or \
            (done.returncode, done.stderr.strip()) == (1, f"agentmeter kill: trial {trial} is not running"), done
    finally:
        run("agentmeter stop --db live.db", shows="stopping")
    wait_for(lambda: "no runner is running" in user.run("agentmeter status --db live.db").stdout, "the runner to end")
    run("agentmeter attach --db live.db", code=1, shows="no runner is running for live.db")
    run("agentmeter rerun --status infra-invalid,errored --db smoke.db", shows="")
    run("agentmeter regrade --task count-lines --db smoke.db", shows="regraded 4 trial(s)")
    run("agentmeter export-trials --out trials.jsonl --db smoke.db")
    assert len((user.work / "trials.jsonl").read_text().splitlines()) == 8
    run("agentmeter import-trials trials.jsonl --db other.db")
    shutil.copytree(FIXTURES / "harbor-jobs" / "jobs" / "oracle-mixed", user.work / "jobs" / "JOB")
    run("agentmeter import harbor jobs/JOB --db runs.db")
    run("agentmeter import sessions --cli codex --db runs.db", code=2, shows="the codex session store")  # none here
    run("agentmeter export atif --suite smoke --db smoke.db --out atif/")
    assert list((user.work / "atif").rglob("*.json"))
    run("agentmeter prices draft --as-of 2026-11-01 anthropic/claude-sonnet-4-6", shows='input = "3"')
    _mockllm(user)
    shutil.copy(ROOT / "suites" / "smoke" / "prices.toml", user.work / "P.toml")
    run("agentmeter meter --prices P.toml --budget-usd 2 --json -- sh -c 'exit 0'", shows='"exit_code":0')
    run('agentmeter score 1 2 --note "one retry" --by ana --db smoke.db', shows="")
    for fmt in ("md", "csv", "json"):
        run(f"agentmeter report --format {fmt} --rubric --intervals --charts charts --db smoke.db")
    (user.work / "core30.txt").write_text("count-lines\nwrite-greeting\n")
    run("agentmeter report --validate core30.txt --db smoke.db")
    run("agentmeter report --format html --out site/ --blind --db smoke.db")
    assert (user.work / "site" / "index.html").is_file()
    run("agentmeter calibrate smoke --db smoke.db", code=2,  # the smoke suite's two tasks are too few to calibrate
        shows="tier calibration needs valid runs on at least 3 tasks")
    run("agentmeter doctor", code=1, shows="agentmeter install-clis")
    stream = FIXTURES / "streams" / "codex" / "cache-heavy.stdout.jsonl"
    run(f"agentmeter transcript parse --cli codex {stream}", shows="final record seen")
    schema = ROOT / "suites" / "cli-tools" / "kv-store" / "tests" / "schema.toml"
    run(f"agentmeter difftest gen {schema} --out cases.json", shows="cases")
    # the extras the base install leaves out: one line each, naming the extra and the command
    run("agentmeter hosts accept 127.0.0.1:2222", code=1, shows="pip install 'agentmeter-tui[ssh]'")
    run("agentmeter images build docker-hello", code=1, shows="pip install 'agentmeter-tui[docker]'")


def _mockllm(user: User) -> None:
    """`agentmeter mockllm serve --scenario FILE --port N` answers on its port until stopped."""
    port = _free_port()
    scenario = ROOT / "suites" / "smoke" / "scenarios" / "solver" / "count-lines.toml"
    server = subprocess.Popen([str(user.bin / "agentmeter"), "mockllm", "serve", "--scenario", str(scenario),
                               "--port", str(port)], cwd=user.work, env=user.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        def answers() -> bool:
            with socket.socket() as probe:
                return probe.connect_ex(("127.0.0.1", port)) == 0
        wait_for(answers, "the scripted model server to listen")
    finally:
        server.terminate()
        server.wait(timeout=900)


@pytest.fixture(scope="module")
def pipx_like(tmp_path_factory) -> Path:
    """`python -m venv` + pip install of a wheel built from the checkout, in a fresh HOME."""
    dist = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--disable-pip-version-check",
                           "-w", str(dist), str(ROOT)], capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stderr
    (wheel,) = dist.glob("*.whl")
    home = tmp_path_factory.mktemp("pipx-home")
    env_dir = home / ".local" / "pipx" / "venvs" / "agentmeter-tui"
    venv.create(env_dir, with_pip=True)
    _pip(env_dir / "bin" / "python", str(wheel))
    return env_dir / "bin" / "agentmeter"


def test_the_readme_pipx_line_in_a_fresh_home(pipx_like, tmp_path):
    user = User(tmp_path, pipx_like)
    user.env.pop("PATH")
    user.env["PATH"] = f"{user.bin}:/usr/bin:/bin"
    user.run("agentmeter demo", shows="30/30 done")
    user.run("agentmeter run smoke --headless --db smoke.db", shows="8/8 done")
    user.run("agentmeter report --format html --out site/ --db smoke.db")
    assert (user.work / "site" / "index.html").is_file()
    assert not os.path.exists(user.work / ".clis")
