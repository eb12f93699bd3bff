"""Verification time per cli-tools trial: the local executor against the docker sides.

    python benchmarks/difftest_verify.py [--tasks kv-store] [--models builder] [--executors local,docker]
                                         [--rounds 1] [--jobs N]

For each task and scripted candidate (the tool its scenario writes), the differential verifier
judges it with each executor twice: *cold* (the oracle is built and run too, as for a task's
first trial) and *warm* (the oracle's results come from the cache, as for every later trial).
Printed per row: the wall time, the cases, the time per case, the CPU seconds the cases'
processes used (the tools, their snapshots and the batch runner; steady when the wall time is
not), the load average when it ran (this machine is shared; figures taken under load say so),
and whether every executor gave the same funnel. Before issue 18 a docker trial's tool was
judged by the local executor, on the runner's machine: the *local* rows are that "before".

Reading the wall times: with cgroup v1 (``docker info``: CgroupVersion 1) every container of the
engine shares one CPU weight (the ``/docker`` group, ``cpu.shares`` 1024), while this machine's
own processes each compete on their own. On an idle machine the two executors' CPU seconds are
what decides; on a busy shared one the containers get a smaller slice and their wall times
stretch while their CPU seconds stay put.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentmeter_tui.core.difftest.executor import LocalExecutor
from agentmeter_tui.core.difftest.oracle import clear_oracle_cache
from agentmeter_tui.core.scripted.scenario import load_scenario
from agentmeter_tui.core.suites.load import load_task
from agentmeter_tui.core.verifiers.differential import DifferentialVerifier

SUITE = ROOT / "suites" / "cli-tools"


async def docker_sides():
    from agentmeter_tui.core.sandboxes.docker.difftest import DockerSides, Limits
    from agentmeter_tui.core.sandboxes.docker.engine import Engine, connect
    from agentmeter_tui.core.sandboxes.docker.images import ensure_host_image

    client = await asyncio.to_thread(connect)
    engine = Engine("local", None, client, True)
    image = await asyncio.to_thread(ensure_host_image, client)
    return await DockerSides.create(engine, image, Limits(), {"agentmeter.suite": f"bench-difftest-{os.getpid()}"})


def cpu_seconds(executor) -> float:
    """CPU time of the cases' processes so far: this process's children, or the batch runners'."""
    if hasattr(executor, "cpu_seconds"):
        return executor.cpu_seconds
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def candidate(task: str, model: str, into: Path) -> Path:
    scenario = load_scenario(SUITE / task / "scenarios" / f"{model}.toml")
    into.mkdir(parents=True)
    subprocess.run(["/bin/sh", "-c", scenario.turns[0].shell], cwd=into, check=True)
    return into


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="kv-store")
    parser.add_argument("--models", default="builder")
    parser.add_argument("--executors", default="local,docker")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--jobs", type=int)
    args = parser.parse_args()
    executors = {"local": LocalExecutor}
    if "docker" in args.executors.split(","):
        executors["docker"] = await docker_sides()
    executors = {name: executors[name] for name in args.executors.split(",")}
    print(f"{'task':<13} {'model':<8} {'executor':<7} {'oracle':<5} {'wall s':>7} {'cases':>5} "
          f"{'ms/case':>7} {'cpu s':>6} {'load':>5}  funnel")
    with tempfile.TemporaryDirectory(prefix="bench-difftest-") as tmp:
        for _ in range(args.rounds):
            for task in args.tasks.split(","):
                verifier = DifferentialVerifier(load_task(SUITE / task))
                settings = verifier.settings
                if args.jobs:
                    settings = settings.model_copy(update={"jobs": args.jobs})
                for model in args.models.split(","):
                    tool = candidate(task, model, Path(tmp) / f"{task}-{model}-{time.monotonic_ns()}")
                    funnels = set()
                    for name, executor in executors.items():
                        clear_oracle_cache()
                        for oracle in ("cold", "warm"):
                            started, cpu = time.perf_counter(), cpu_seconds(executor)
                            result = await verifier.judge_folder(tool, settings, executor)
                            took = time.perf_counter() - started
                            cpu = cpu_seconds(executor) - cpu
                            cases = len(result.details.get("cases", []))
                            funnels.add(repr((result.details["scores"], result.details["classes"])))
                            print(f"{task:<13} {model:<8} {name:<7} {oracle:<5} {took:7.1f} {cases:5d} "
                                  f"{1000 * took / max(cases, 1):7.1f} {cpu:6.1f} {os.getloadavg()[0]:5.1f}  "
                                  f"fuzzy {result.details['scores']['fuzzy']:.3f}", flush=True)
                    print(f"{'':<13} {'':<8} same funnel on every executor: {len(funnels) == 1}")
    clear_oracle_cache()


if __name__ == "__main__":
    asyncio.run(main())
