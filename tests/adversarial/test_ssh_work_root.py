"""The ssh sandbox's work root on the host (issue 37, the class of item 6): ``/tmp/agentmeter-remote``
by default, in a folder every user of the host shares. It was made with ``exist_ok`` and never
checked: another user of the host who made it first holds every trial's folder (reads the
workspace, swaps a trial's folder for a link of theirs). Now it is made 0700 and checked on every
trial: a folder of another owner, or a link, is refused with its path named. A real sshd on
127.0.0.1 (root); "another user" is uid 65534."""

from __future__ import annotations

import os
import stat

import pytest

from agentmeter_tui.core.sandboxes.ssh.sandbox import SshSandbox
from agentmeter_tui.core.suites.load import load_suite
from tests.conftest import need
from tests.core.sandbox_support import SMOKE, suite_copy
from tests.core.sshd_support import SshdInstance, sshd_available

pytestmark = pytest.mark.ssh

OTHER = 65534


@pytest.fixture
def sshd(tmp_path):
    need(sshd_available(), "sshd and ssh-keygen are needed, as root")
    instance = SshdInstance(tmp_path / "host").start()
    yield instance
    instance.stop()


async def _open(tmp_path, sshd):
    folder = tmp_path / "suite"
    suite = load_suite(folder if folder.is_dir() else suite_copy(SMOKE, folder, sshd.sandbox_toml(slots=1)))
    sandbox = SshSandbox(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
    try:
        session = await sandbox.open(suite.task("count-lines"), 1, "workroot0000000001")
        await session.cleanup()
    finally:
        await sandbox.close()


async def test_a_work_root_another_user_made_is_refused(tmp_path, sshd):
    os.chown(sshd.work_root, OTHER, OTHER)
    os.chmod(sshd.work_root, 0o777)
    with pytest.raises(RuntimeError) as refused:
        await _open(tmp_path, sshd)
    message = str(refused.value)
    assert str(sshd.work_root) in message and f"uid {OTHER}" in message, message
    assert list(sshd.work_root.iterdir()) == []  # nothing of the trial went into it


async def test_a_work_root_that_is_a_link_is_refused(tmp_path, sshd):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    sshd.work_root.rmdir()
    sshd.work_root.symlink_to(elsewhere)
    with pytest.raises(RuntimeError, match="is a link") as refused:
        await _open(tmp_path, sshd)
    assert str(sshd.work_root) in str(refused.value)
    assert list(elsewhere.iterdir()) == []


async def test_our_own_work_root_is_made_and_kept_0700(tmp_path, sshd):
    sshd.work_root.rmdir()
    await _open(tmp_path, sshd)
    assert stat.S_IMODE(sshd.work_root.stat().st_mode) == 0o700
    os.chmod(sshd.work_root, 0o755)  # made by an older version: ours, open to others
    await _open(tmp_path, sshd)
    assert stat.S_IMODE(sshd.work_root.stat().st_mode) == 0o700
