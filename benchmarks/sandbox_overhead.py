"""Per-trial sandbox overhead for a trivial agent: local, docker, ssh, and a Harbor task in
docker (and, with ``--kinds swarm-harbor``, in the swarm sandbox: a service per trial;
``swarm-harbor-closed``: the same task with ``allow_internet = false``, on the closed network).

    python benchmarks/sandbox_overhead.py [--trials 20] [--kinds local,docker,ssh,harbor,swarm-harbor]

For each trial: *start* is from ``open`` (fresh workspace, container or remote folder) until
the agent's first output line arrives (``start`` included, so the time to a running agent);
*verified* is from the agent's exit until the task's verifier returned its verdict (the reward
read: our command verifier, or for ``harbor`` Harbor's: /tests and /logs/verifier emptied,
tests uploaded, ``bash /tests/test.sh`` run, reward.txt read back); *end* is from the agent's
exit until ``cleanup`` returned (container and volume removed, remote folder gone), the
verifier included. The agent is ``sh -c 'echo ready'``. Trials run one after another. The
``harbor`` kind is the docker sandbox with a Harbor-format task (``version = "2.0"``, an
environment/Dockerfile ``FROM agentmeter/host-bash`` with ``WORKDIR /app``): writable root,
image WORKDIR and ENV, root.
*kill* is from ``kill`` until the agent is gone and no process of the trial is left, for an
agent whose child sleeps (SIGINT ends it; the kill ladder of each sandbox, KillPolicy()).
Beside them, the floor the same way: ``docker run --rm`` of the same image (Harbor needs
15.4 s per sequential trial on this kind of machine, 10.7 s of it a stop timeout).

The ssh kind needs an sshd on 127.0.0.1: the script starts one with generated keys
(``tests/core/sshd_support.py``) when ``sshd`` is installed and it runs as root.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentmeter_tui.core.sandboxes import SANDBOXES
from agentmeter_tui.core.sandboxes.base import KillPolicy, LaunchSpec
from agentmeter_tui.core.suites.load import load_suite
from agentmeter_tui.core.verifiers import VERIFIERS

SUITE = """
[suite]
id = "overhead"
[[models]]
id = "solver"
[[clis]]
adapter = "reference"
[sandbox]
{sandbox}
"""
TASK = '[task]\ntier = "easy"\n'
HARBOR_TASK = 'version = "2.0"\n[metadata]\ndifficulty = "easy"\n[verifier]\ntimeout_sec = 60.0\n'
TESTS = {"agentmeter": '#!/bin/sh\necho 1 > "$AGENTMETER_REWARD_FILE"\n',
         "harbor": "#!/bin/bash\nmkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt\n"}


def make_suite(folder: Path, sandbox: str, harbor: bool = False, closed: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "suite.toml").write_text(SUITE.format(sandbox=sandbox))
    task = folder / "trivial"
    (task / "tests").mkdir(parents=True, exist_ok=True)
    (task / "tests" / "test.sh").write_text(TESTS["harbor" if harbor else "agentmeter"])
    (task / "instruction.md").write_text("Say ready.\n")
    if harbor:
        (task / "task.toml").write_text(HARBOR_TASK + ("[environment]\nallow_internet = false\n" if closed else ""))
        (task / "environment").mkdir(exist_ok=True)
        (task / "environment" / "Dockerfile").write_text("FROM agentmeter/host-bash\nWORKDIR /app\n"
                                                         "COPY README.md /app/README.md\n")
        (task / "environment" / "README.md").write_text("a file baked in\n")
    else:
        (task / "workspace").mkdir(exist_ok=True)
        (task / "task.toml").write_text(TASK)
        (task / "workspace" / "README.md").write_text("a file to copy in\n")
    (folder / "scenarios").mkdir(exist_ok=True)
    (folder / "scenarios" / "solver.toml").write_text('[[turns]]\ntext = "ready"\n')
    return folder


async def one_trial(sandbox, task, index: int, command: str = "echo ready") -> tuple[float, ...]:
    """(open -> first output line, agent exit -> verdict, agent exit -> cleaned up); with a
    command that keeps running, (open -> first line, kill -> agent gone and no process left)."""
    token = f"bench{index:04d}{int(time.time() * 1000) % 100000:05d}"
    first_line = asyncio.get_running_loop().create_future()

    def on_output(stream: str, lines: list[bytes]) -> None:
        if not first_line.done():
            first_line.set_result(time.perf_counter())

    started = time.perf_counter()
    session = await sandbox.open(task, index, token)
    agent = await session.start(LaunchSpec(["sh", "-c", command], {}), on_output)
    running = await first_line
    if command != "echo ready":
        killing = time.perf_counter()
        await session.kill(KillPolicy(int_grace=1.0, grace=5.0))
        await agent.wait()
        killed = time.perf_counter() - killing
        await session.cleanup()
        return running - started, killed
    await agent.wait()
    exited = time.perf_counter()
    verdict = await VERIFIERS.get(task.verifier.kind)(task).verify(session)
    verified = time.perf_counter()
    assert verdict.passed and verdict.quality == 1.0, verdict
    await session.cleanup()
    return running - started, verified - exited, time.perf_counter() - exited


async def measure(kind: str, sandbox_toml: str, trials: int, tmp: Path) -> tuple[list[float], ...]:
    suite = load_suite(make_suite(tmp / kind, sandbox_toml, harbor="harbor" in kind,
                                  closed=kind.endswith("-closed")))
    sandbox = SANDBOXES.get(suite.spec.sandbox.kind)(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
    await sandbox.preflight()
    task = suite.tasks[0]
    starts, verifies, ends, kills = [], [], [], []
    try:
        await one_trial(sandbox, task, 0)  # warm-up: image resolution, first connection
        for index in range(1, trials + 1):
            start, verify, end = await one_trial(sandbox, task, index)
            starts.append(start)
            verifies.append(verify)
            ends.append(end)
        for index in range(trials + 1, trials + 1 + max(3, trials // 4)):
            kills.append((await one_trial(sandbox, task, index, "echo ready; sleep 300 & wait"))[1])
    finally:
        await sandbox.close()
    return starts, verifies, ends, kills


def docker_run_floor(image: str, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(["docker", "run", "--rm", "--network", "none", image, "sh", "-c", "echo ready"],
                       check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return times


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:7.1f} ms" if values else "      -   "


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--kinds", default="local,docker,ssh,harbor")
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    rows = []
    with tempfile.TemporaryDirectory(prefix="agentmeter-overhead-") as tmp_name:
        tmp = Path(tmp_name)
        configs = {"local": 'kind = "local"', "docker": 'kind = "docker"', "harbor": 'kind = "docker"',
                   "swarm-harbor": 'kind = "swarm"', "swarm-harbor-closed": 'kind = "swarm"'}
        sshd = None
        if "ssh" in kinds:
            sys.path.insert(0, str(ROOT / "tests" / "core"))
            from sshd_support import SshdInstance, sshd_available

            if sshd_available():
                sshd = SshdInstance(tmp / "sshd")
                sshd.start()
                configs["ssh"] = sshd.sandbox_toml(slots=2)
        for kind in kinds:
            if kind not in configs:
                print(f"{kind}: skipped (not available here)")
                continue
            rows.append((kind, *asyncio.run(measure(kind, configs[kind], args.trials, tmp))))
        if sshd is not None:
            sshd.stop()
        floor = None
        if "docker" in kinds:
            from agentmeter_tui.core.sandboxes.docker.engine import connect
            from agentmeter_tui.core.sandboxes.docker.images import ensure_host_image

            floor = docker_run_floor(ensure_host_image(connect()), min(args.trials, 10))
    print(f"median per trial over {args.trials} sequential trials (trivial agent: sh -c 'echo ready')")
    print(f"{'sandbox':12}  {'start -> agent running':>22}  {'agent exit -> reward read':>25}  "
          f"{'agent exit -> cleaned up':>24}  {'total':>10}  {'kill -> no process':>18}")
    for kind, starts, verifies, ends, kills in rows:
        total = [a + b for a, b in zip(starts, ends, strict=True)]
        print(f"{kind:12}  {ms(starts):>22}  {ms(verifies):>25}  {ms(ends):>24}  {ms(total):>10}  {ms(kills):>18}")
    if floor:
        print(f"floor: docker run --rm (same image, start to exit to removed): {ms(floor).strip()}")
        print("peer: Harbor 15.4 s per sequential docker trial (10.7 s of it a stop timeout); target <= 1 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
