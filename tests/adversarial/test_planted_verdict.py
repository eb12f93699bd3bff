"""A verdict comes only from the verifier (issue 23, item 2): an agent that plants the reward
the tests would write, lays a link where it would go, or leaves a job behind that writes it
while the tests run, gets no quality from it, in the project's own task contract (local,
docker with copy and bind, ssh, swarm) and in Harbor's (docker).

Each test's ``test.sh`` writes no reward and exits 1 (Harbor's: exits 0, no reward); it waits
a little (bounded) for a reward to appear first, so a job the agent left has its chance."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentmeter_tui.core.store import Store
from tests.conftest import agentmeter
from tests.core.harbor_support import harbor_suite
from tests.core.harbor_support import run as run_harbor
from tests.core.sandbox_support import (  # noqa: F401 - the fixtures
    docker_engine_fixture,
    leftovers,
    swarm_client,
    swarm_fixture,
    unique_id,
)
from tests.core.test_sandbox_ssh import hosts, run_suite, sandbox_toml  # noqa: F401 - hosts is a fixture

WAIT_FOR_A_REWARD = ('i=0; while [ $i -lt 40 ] && [ ! -s "{reward}" ]; do sleep 0.05; i=$((i+1)); done\n')
# What each scripted model's one shell turn does in its workspace (``../scratch`` is the
# trial's scratch folder in every sandbox of the own contract).
AGENTS = {
    "planter": "echo 1 > ../scratch/reward.txt",
    "linker": "echo 1 > ../home/one && ln -s ../home/one ../scratch/reward.txt",
    "lurker": ("sh -c 'while :; do for d in ../scratch ../scratch/*; do echo 1 > \"$d/reward.txt\"; done "
               "2>/dev/null; sleep 0.02; done' </dev/null >/dev/null 2>&1 &"),
}


def own_suite(tmp_path: Path, sandbox: str) -> tuple[Path, str]:
    """One task whose tests say no, and one scripted model per attack."""
    suite_id = unique_id("planted")
    suite = tmp_path / "planted"
    task = suite / "work"
    (task / "tests").mkdir(parents=True)
    (task / "workspace").mkdir()
    (task / "instruction.md").write_text("Do nothing useful.\n")
    (task / "task.toml").write_text('[task]\ntier = "easy"\n')
    wait = WAIT_FOR_A_REWARD.format(reward="$AGENTMETER_REWARD_FILE")
    (task / "tests" / "test.sh").write_text(f"#!/bin/sh\n{wait}echo 'the tests say no'\nexit 1\n")
    models = "".join(f'[[models]]\nid = "{name}"\n\n' for name in AGENTS)
    (suite / "suite.toml").write_text(
        f'[suite]\nid = "{suite_id}"\ntrials = 1\nconcurrency = 3\n\n{models}[[clis]]\nadapter = "reference"\n\n'
        f"[budgets.default]\nwall_seconds = 120\n\n[sandbox]\n{sandbox}\n")
    (suite / "scenarios").mkdir()
    for name, shell in AGENTS.items():
        (suite / "scenarios" / f"{name}.toml").write_text(
            f"[[turns]]\nshell = {toml_string(shell)}\nusage = {{ uncached_input = 100, output = 10 }}\n"
            '[[turns]]\ntext = "Done."\nusage = { uncached_input = 120, output = 5 }\n')
    return suite, suite_id


def toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def assert_no_planted_verdict(db: Path, suite_id: str) -> None:
    store = Store(db)
    try:
        trials = {t["model"]: t for t in store.trials(suite_id)}
    finally:
        store.close()
    assert set(trials) == set(AGENTS), trials
    for name, trial in trials.items():
        assert (trial["status"], trial["quality"]) == ("failed", 0.0), (name, trial)
        assert "the tests say no" in trial["verifier_output"], (name, trial)


def run_own(tmp_path: Path, db: Path, sandbox: str) -> str:
    suite, suite_id = own_suite(tmp_path, sandbox)
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    assert_no_planted_verdict(db, suite_id)
    return suite_id


def test_a_planted_reward_never_counts_locally(tmp_path, db):
    run_own(tmp_path, db, 'kind = "local"')


@pytest.mark.docker
@pytest.mark.parametrize("workspace", ["copy", "bind"])
def test_a_planted_reward_never_counts_in_docker(tmp_path, db, docker_engine, workspace):
    suite_id = run_own(tmp_path, db, f'kind = "docker"\nworkspace = "{workspace}"')
    assert leftovers(docker_engine, suite_id, db) == {}


@pytest.mark.docker
def test_a_planted_reward_never_counts_in_swarm(tmp_path, db, swarm):
    suite_id = run_own(tmp_path, db, 'kind = "swarm"\ncpus = 0.5\nmemory = "256m"')
    assert leftovers(swarm, suite_id, db) == {}


@pytest.mark.ssh
def test_a_planted_reward_never_counts_over_ssh(tmp_path, db, hosts):
    pair, known = hosts
    suite, suite_id = own_suite(tmp_path, sandbox_toml(pair, known))
    result = run_suite(suite, db)
    assert result.returncode == 0, result.stderr
    assert_no_planted_verdict(db, suite_id)


LURKER = ("sh -c 'while :; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; sleep 0.02; done' "
          "</dev/null >/dev/null 2>&1 &")


@pytest.mark.docker
@pytest.mark.parametrize("kind", ["docker", "swarm"])
def test_a_job_left_behind_cannot_write_a_harbor_reward(tmp_path, db, docker_engine, kind):
    """Harbor's contract: /logs/verifier is emptied before the tests, but a root job the agent
    left in its container wrote the reward again while they ran."""
    if kind == "swarm":
        swarm_client()
    suite, suite_id = harbor_suite(tmp_path, "agents")
    text = (suite / "suite.toml").read_text().replace('exclude = ["no-*"]', 'tasks = ["probe"]')
    text = text.replace('[[models]]\nid = "solver"\n\n', "").replace('kind = "docker"', f'kind = "{kind}"')
    (suite / "suite.toml").write_text(text)
    shutil.rmtree(suite / "scenarios" / "solver")
    (suite / "scenarios" / "wrong" / "probe.toml").write_text(
        f"[[turns]]\nshell = {toml_string('echo nothing > /app/probe.txt; ' + LURKER)}\n"
        "usage = { uncached_input = 600, output = 60 }\n"
        '[[turns]]\ntext = "Done."\nusage = { uncached_input = 650, output = 5 }\n')
    test_sh = tmp_path / "harbor" / "tasks" / "probe" / "tests" / "test.sh"
    lines = test_sh.read_text().split("\n", 1)
    test_sh.write_text(lines[0] + "\n" + WAIT_FOR_A_REWARD.format(reward="/logs/verifier/reward.txt") + lines[1])
    trials = run_harbor(suite, db)
    probe = trials[("probe", "wrong")]
    assert (probe["sandbox"], probe["status"], probe["quality"]) == (kind, "failed", 0.0), probe
    assert "wrote no /logs/verifier/reward.txt" in probe["reason"]
    assert leftovers(docker_engine, suite_id, db) == {}
