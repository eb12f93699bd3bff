"""The ssh sandbox against real sshd instances on 127.0.0.1 (two "hosts", 2 slots each): a
suite spreads over both, a runaway is killed on the host with no process left, losing a
host mid-run makes its trials infra-invalid and they finish on the other, and an unknown or
changed host key is refused with a message that says what to do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from agentmeter_tui.core import procs
from agentmeter_tui.core.sandboxes.ssh.conn import HostKeyError, SshTarget, accept_host_key
from agentmeter_tui.core.sandboxes.ssh.sandbox import SshSandbox
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.suites.load import load_suite
from tests.conftest import FIXTURES, agentmeter, need
from tests.core.sandbox_support import (
    RUNAWAY,
    SMOKE,
    assert_runaways_killed,
    assert_smoke_verdicts,
    suite_copy,
    unique_id,
)
from tests.core.sshd_support import SshdInstance, keygen, sshd_available
from tests.waiting import wait_for

pytestmark = pytest.mark.ssh


@pytest.fixture
def hosts(tmp_path):
    need(sshd_available(), "sshd and ssh-keygen are needed, as root")
    key = keygen(tmp_path / "client_ed25519")
    pair = [SshdInstance(tmp_path / name, client_key=key).start() for name in ("a", "b")]
    known = tmp_path / "known_hosts"
    for sshd in pair:
        sshd.trust(known)
    yield pair, known
    for sshd in pair:
        sshd.stop()


def sandbox_toml(pair, known: Path, *, slots: int = 2) -> str:
    return 'kind = "ssh"\nprobe_interval = 0.5\n\n' + "\n".join(
        sshd.host_toml(name, slots, known) for name, sshd in zip("ab", pair))


def run_suite(suite: Path, db: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agentmeter_tui.core.run.runner", "--suite", str(suite), "--db", str(db)],
                          capture_output=True, text=True, timeout=timeout, check=False)


def processes_of(token: str) -> list[psutil.Process]:
    return procs.alive(procs.processes_with_token(token))


def test_a_suite_spreads_over_two_hosts(tmp_path, db, hosts):
    pair, known = hosts
    suite_id = unique_id("ssh-smoke")
    suite = suite_copy(SMOKE, tmp_path / "suite", sandbox_toml(pair, known), suite_id=suite_id)
    result = run_suite(suite, db)
    assert result.returncode == 0, result.stderr
    trials = Store(db).trials(suite_id)
    assert len(trials) == 8 and {t["host"] for t in trials} == {"a", "b"}
    assert_smoke_verdicts(trials, "ssh")
    for trial in trials:
        assert trial["workspace"].startswith(str(pair[0 if trial["host"] == "a" else 1].work_root))
        assert processes_of(trial["proc_token"]) == []
    for sshd in pair:  # every trial folder was removed from its host
        assert list(sshd.work_root.iterdir()) == []


def test_runaways_are_killed_on_the_host(tmp_path, db, hosts):
    pair, known = hosts
    suite_id = unique_id("ssh-runaway")
    suite = suite_copy(RUNAWAY, tmp_path / "suite", sandbox_toml(pair, known), suite_id=suite_id)
    result = run_suite(suite, db)
    assert result.returncode == 0, result.stderr
    trials = assert_runaways_killed(Store(db), suite_id)
    for trial in trials.values():  # the burner's setsid'd `sleep 300` included
        assert processes_of(trial["proc_token"]) == [], trial["model"]


def test_a_flood_over_ssh_is_held_back_and_every_line_stored(tmp_path, db, hosts):
    """An agent printing as fast as it can on the remote host: the channel stops being read
    while the store writer is behind (SSH flow control holds the agent), and every numbered
    line arrives, in order, once."""
    from tests.core.test_flood import flood_accounting, flood_suite

    pair, known = hosts
    suite = flood_suite(tmp_path, 3)
    (suite / "suite.toml").write_text((suite / "suite.toml").read_text() + "\n[sandbox]\n"
                                      + sandbox_toml(pair[:1], known) + "\n")
    result = run_suite(suite, db)
    assert result.returncode == 0, result.stderr
    store = Store(db)
    (trial,) = store.trials("hostile")
    said, flood, _ = flood_accounting(store, trial["id"])
    assert trial["sandbox"] == "ssh" and said >= 4096
    assert flood == [b"flood %d" % n for n in range(said)]


def test_losing_a_host_mid_run_retries_its_trials_on_the_other(tmp_path, db, hosts):
    pair, known = hosts
    suite_id = unique_id("ssh-loss")
    suite = suite_copy(FIXTURES / "suites" / "slow", tmp_path / "suite", sandbox_toml(pair, known),
                       suite_id=suite_id, replace={"concurrency = 2": "concurrency = 4"})
    gate = tmp_path / "gate"  # the trials wait here (both hosts are this machine) until host a is gone
    for scenario in (suite / "scenarios").glob("*.toml"):
        scenario.write_text(scenario.read_text().replace("sleep 0.4", f"until [ -e {gate} ]; do sleep 0.05; done"))
    runner = subprocess.Popen([sys.executable, "-m", "agentmeter_tui.core.run.runner", "--suite", str(suite),
                               "--db", str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: db.exists() and [t for t in Store(db).trials(suite_id)
                                          if t["host"] == "a" and t["status"] == "running"], "a trial on host a")
        pair[0].crash()
        gate.touch()
        _, stderr = runner.communicate(timeout=600)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 0, stderr
    trials = Store(db).trials(suite_id)
    lost = [t for t in trials if t["status"] == "infra-invalid"]
    assert lost and all("host a: connection lost" in (t["reason"] or "") for t in lost), lost
    cells = {(t["task_id"], t["config_id"], t["trial_index"]) for t in trials}
    assert len(cells) == 6
    for cell in cells:  # every cell finished, the lost ones on the surviving host
        final = [t for t in trials if (t["task_id"], t["config_id"], t["trial_index"]) == cell
                 and t["status"] == "passed"]
        assert len(final) == 1, cell
    retried = {(t["task_id"], t["config_id"], t["trial_index"]) for t in lost}
    assert all(t["host"] == "b" for t in trials if t["status"] == "passed"
               and (t["task_id"], t["config_id"], t["trial_index"]) in retried)
    for trial in trials:  # what ran on the lost host was orphaned there; sweep it (it is this machine)
        procs.sweep(trial["proc_token"])


async def test_an_unknown_host_key_is_refused_with_what_to_do(tmp_path, hosts):
    pair, _ = hosts
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    suite = load_suite(suite_copy(SMOKE, tmp_path / "suite", sandbox_toml(pair[:1], empty)))
    sandbox = SshSandbox(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
    with pytest.raises(HostKeyError) as refused:
        await sandbox.preflight()
    message = str(refused.value)
    assert "unknown SSH host key" in message and "ssh-ed25519 SHA256:" in message
    assert f"agentmeter hosts accept root@127.0.0.1:{pair[0].port}" in message
    await sandbox.close()

    # Accepting it once records it; then the host is usable.
    target = SshTarget("127.0.0.1", pair[0].port, "root", str(pair[0].client_key), str(empty))
    fingerprint, added = await accept_host_key(target)
    assert added and fingerprint.startswith("ssh-ed25519 SHA256:")
    assert (await accept_host_key(target))[1] is False  # already known
    sandbox = SshSandbox(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
    await sandbox.preflight()
    await sandbox.close()

    # A host that comes back with another key on the same address is refused, accept or not.
    port = pair[0].port
    pair[0].stop()
    impostor = SshdInstance(tmp_path / "impostor", port=port, client_key=pair[0].client_key).start()
    try:
        sandbox = SshSandbox(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
        with pytest.raises(HostKeyError, match="differs from the one recorded"):
            await sandbox.preflight()
        await sandbox.close()
        with pytest.raises(HostKeyError, match="different key is recorded"):
            await accept_host_key(target)
    finally:
        impostor.stop()


def test_the_runner_says_why_it_cannot_start(tmp_path, db, hosts):
    pair, _ = hosts
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    suite = suite_copy(SMOKE, tmp_path / "suite", sandbox_toml(pair, empty), suite_id=unique_id("ssh-refused"))
    result = run_suite(suite, db, timeout=60)
    assert result.returncode != 0
    assert "unknown SSH host key" in result.stderr


def test_hosts_file_errors_name_file_line_and_field(tmp_path):
    from agentmeter_tui.core.tomlerrors import InputError

    suite = suite_copy(SMOKE, tmp_path / "suite", 'kind = "ssh"\nhosts_file = "hosts.toml"')
    (suite / "hosts.toml").write_text('[[hosts]]\naddress = "127.0.0.1"\nslots = 0\n')
    with pytest.raises(InputError) as bad:
        load_suite(suite)
    assert bad.value.path.endswith("hosts.toml") and bad.value.line == 3 and bad.value.field == "hosts[0].slots"
    (suite / "hosts.toml").write_text('[[hosts]]\naddress = "127.0.0.1"\nwork_root = "relative/path"\n')
    with pytest.raises(InputError, match="absolute path"):
        load_suite(suite)
    (suite / "hosts.toml").write_text('[[hosts]]\naddress = "10.0.0.1"\nkey = "keys/id"\nslots = 3\n')
    loaded = load_suite(suite)
    sandbox = SshSandbox(loaded, loaded.spec.sandbox.model_dump(exclude={"kind"}))
    (host,) = sandbox.hosts.values()
    assert host.key == str(suite / "keys" / "id") and sandbox.capacity() == 3


def test_hosts_accept_and_check_commands(tmp_path, hosts):
    pair, _ = hosts
    known = tmp_path / "accepted_known_hosts"
    target = f"root@127.0.0.1:{pair[0].port}"
    suite = suite_copy(SMOKE, tmp_path / "suite", sandbox_toml(pair[:1], known))
    refused = agentmeter("hosts", "check", str(suite))
    assert refused.returncode == 1
    assert "FAIL  ssh a: host key" in refused.stdout and "agentmeter hosts accept" in refused.stdout

    first = agentmeter("hosts", "accept", target, "--known-hosts", str(known), "--yes")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"[127.0.0.1]:{pair[0].port}: ssh-ed25519 SHA256:")
    assert "recorded in" in first.stdout and known.read_text().count("\n") == 1
    again = agentmeter("hosts", "accept", target, "--known-hosts", str(known), "--yes")
    assert "already in" in again.stdout and known.read_text().count("\n") == 1
    unasked = agentmeter("hosts", "accept", target, "--known-hosts", str(tmp_path / "other"))
    assert unasked.returncode == 1 and "--yes" in unasked.stderr  # never recorded without a decision

    checked = agentmeter("hosts", "check", str(suite))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for line in ("ok    ssh a: reachable", "ok    ssh a: host key", "ok    ssh a: CLIs", "ok    ssh a: disk"):
        assert line in checked.stdout, checked.stdout
