"""The fixed-seed subset of the fault matrix (benchmarks/fault_matrix.py --ci): burners killed
by the operator and by each budget, in the local sandbox and in docker, ssh and swarm (real
engine, real sshd on 127.0.0.1), two real CLIs behind the metering proxy (Claude Code stopped
by a token budget, Codex by the operator), the runner SIGKILLed mid-run and restarted, the
scripted model server SIGKILLed mid-run, the store's disk filled up (a tmpfs: the test runs as
root under CI), and the provider resetting a stream behind the proxy; every cell must survive
with nothing lost. dockerd's restart is a benchmark cell only: it would restart the engine
other tests share."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT, need
from tests.core.sandbox_support import swarm_client
from tests.core.sshd_support import sshd_available
from tests.e2e.harness import require_cli

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.ssh, pytest.mark.clis]

CELLS = ["local/reference/kill:operator", "local/reference/kill:budget:time", "docker/reference/kill:budget:tokens",
         "ssh/reference/kill:operator", "swarm/reference/kill:budget:usd", "local/claude-code/kill:budget:tokens",
         "local/codex/kill:operator", "local/reference/runner:kill-9", "local/reference/server:dies",
         "local/reference/store:disk-full", "local/reference/proxy:upstream-reset"]


def test_fixed_seed_fault_matrix_loses_nothing():
    swarm_client().close()  # the engine is a swarm manager (else skip, or fail under CI=true)
    need(sshd_available(), "sshd and ssh-keygen are needed, as root")  # root also mounts the tmpfs
    for cli in ("claude-code", "codex"):
        require_cli(cli)
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fault_matrix.py"), "--ci"],
                            capture_output=True, text=True, timeout=1800, check=False)
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stdout + result.stderr
    cells = [line for line in lines[1:] if not line.startswith("total")]
    assert [line.split()[0] for line in cells] == CELLS, result.stdout
    assert all(" · lost 0 · " in line and "(" not in line for line in cells), result.stdout
    total = lines[-1].split()
    assert total[0] == "total" and total[2] == total[5] and total[8] == "0", result.stdout
    assert int(total[2]) >= len(CELLS), result.stdout
