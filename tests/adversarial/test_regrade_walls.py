"""A regrade runs the verifier on what the agent left (issue 35): a kept workspace holding a planted
reward file, a fake tests/ folder, links out of the workspace and a FIFO must not fool the regrade
nor hang it; and neither must a FIFO, a link or a reward planted in the kept folder itself later.

The agent (the reference agent, one shell turn) plants them all and does not do the task; the
task's test, fixed after the run, still says no: the regrade must say failed, quality 0."""

from __future__ import annotations

import os

from agentmeter_tui.core.store import Store
from tests.conftest import agentmeter
from tests.core.test_regrade import WANTS, fixable_suite

PLANT = ("echo 1 > reward.txt; mkdir -p tests scratch; printf '#!/bin/sh\\nexit 0\\n' > tests/test.sh; "
         "echo 1 > scratch/reward.txt; ln -s / escape; ln -s /etc/passwd passwd; ln -s ../scratch up; "
         "mkfifo pipe; echo 40 > answer.txt")


def test_planted_rewards_links_and_fifos_neither_fool_nor_hang_a_regrade(tmp_path, db):
    suite, suite_id = fixable_suite(tmp_path, 'kind = "local"', shell=PLANT)
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    store = Store(db)
    (trial,) = store.trials(suite_id)
    store.close()
    assert trial["status"] == "failed" and trial["kept"], trial
    kept = db.parent / f"{db.name}.kept" / trial["kept"]
    # Folders and regular files only: no link, no FIFO, nothing a link pointed at.
    assert sorted(p.name for p in kept.iterdir()) == ["README", "answer.txt", "reward.txt", "scratch", "tests"]
    assert not any(p.is_symlink() for p in kept.rglob("*"))
    # Planted in the kept folder afterwards, by whoever can write there.
    os.mkfifo(kept / "later-pipe")
    (kept / "later-link").symlink_to("/etc/hostname")
    (kept / "tests" / "reward.txt").write_text("1\n")

    (suite / "answer" / "tests" / "test.sh").write_text(
        "#!/bin/sh\nls -a \"$AGENTMETER_WORKSPACE\"\n" + WANTS.format(answer=42).removeprefix("#!/bin/sh\n"))
    result = agentmeter("regrade", "--db", str(db), timeout=600)  # a hang ends at the fail-safe: a failure
    assert result.returncode == 0, result.stderr + result.stdout
    assert f"trial {trial['id']}: failed -> failed" in result.stdout
    store = Store(db)
    (regrade,) = store.regrades.regrades_of([trial["id"]])[trial["id"]]
    store.close()
    assert (regrade.status, regrade.passed, regrade.quality) == ("failed", False, 0.0)
    listing = set(regrade.verifier_output.split())
    assert {"answer.txt", "reward.txt", "tests"} <= listing
    assert not listing & {"pipe", "escape", "passwd", "up", "later-pipe", "later-link"}, listing


def test_a_kept_workspace_past_the_limit_is_not_kept_at_all(tmp_path, db):
    suite, suite_id = fixable_suite(tmp_path, 'kind = "local"',
                                    shell="head -c 2000000 /dev/zero > big.bin; echo 42 > answer.txt")
    toml = suite / "suite.toml"
    toml.write_text(toml.read_text().replace("trials = 1\n", "trials = 1\nregrade_keep_mb = 1\n"))
    result = agentmeter("run", str(suite), "--headless", "--db", str(db), timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    store = Store(db)
    (trial,) = store.trials(suite_id)
    store.close()
    assert trial["kept"] is None
    kept_root = db.parent / f"{db.name}.kept"
    assert not kept_root.exists() or list(kept_root.iterdir()) == []
    result = agentmeter("regrade", "--db", str(db))
    assert result.returncode == 1 and "its final workspace was not kept" in result.stderr
