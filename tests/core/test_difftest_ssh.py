"""The differential verifier's ssh sides against a real sshd on 127.0.0.1: an ssh trial's tool is
built and run in a folder of the trial's host (under a network namespace where the host allows
one) and judged exactly as on this machine; the sides' folders are gone afterwards."""

from __future__ import annotations

import pytest

from tests.conftest import need
from tests.core.sshd_support import SshdInstance, sshd_available
from tests.core.test_difftest_docker import judged_like_this_machine

pytestmark = [pytest.mark.ssh, pytest.mark.slow]


def test_cli_tools_on_an_ssh_host_judge_like_this_machine(tmp_path, db):
    need(sshd_available(), "sshd and ssh-keygen are needed, as root")
    sshd = SshdInstance(tmp_path / "host").start()
    try:
        judged_like_this_machine(tmp_path, db, sshd.sandbox_toml(), ("kv-store",), 4, "ssh")
        assert list(sshd.work_root.iterdir()) == []  # trial folders and both sides' folders removed
    finally:
        sshd.stop()
