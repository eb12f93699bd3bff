"""Differential test sides in Docker containers: the agent's tool never runs on the runner's machine.

Each side (oracle, candidate) is built and run the same way, from the trial's image, with the
docker sandbox's CPU, memory and pids limits, as its non-root user, with **no network**:

1. **build**: a container from the image (writable, so the install can be kept) gets the tool
   folder at ``/agentmeter/tool`` and the batch runner (``batchrun.py``) at ``/agentmeter/runner``;
   ``install`` runs in the tool folder with ``HOME=/agentmeter/build-home``;
2. **snapshot**: the installed container is committed to an image (labelled like every object
   we make, so ``doctor --clean`` and the tests find it) and removed;
3. **cases**: one container from that image, its root filesystem read-only (every case starts
   from the installed state; a tool cannot change itself or anything else between cases), a
   tmpfs ``/tmp``, and one writable volume ``/agentmeter/run`` where the case folders live.
   A batch of cases is one ``docker exec`` of the batch runner, which runs them one after
   another exactly as :class:`...difftest.executor.LocalExecutor` runs one, and returns each case's exit
   code, stdout, stderr, wall time and workspace snapshots; the evaluator runs several
   batches at once.

``close`` removes the container and the committed image. :class:`DockerSides` makes the
executors of both sides on one engine and image (a docker trial's engine, or a swarm's
manager: a swarm trial's sides run there, not as services); its ``cache_key`` names the image (by id)
and the limits, so the oracle's cached results are never reused for another image.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import uuid
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...difftest import batchrun
from ...difftest.cases import Case, FileSpec
from ...difftest.executor import (
    BuildResult,
    CaseExecutor,
    CaseRun,
    SideError,
    ToolCommand,
    batch_results,
    batch_spec,
    case_env,
)
from ..archive import TarWriter
from .containers import KEEPALIVE
from .engine import DIFFTEST as SIDE_LABEL
from .engine import MANAGED, TRIAL, TRIAL_ID, engine_errors, runner_label, trial_labels
from .engine import RUNNER as RUNNER_LABEL
from .exec import run_exec
from .rootfs import PATH

if TYPE_CHECKING:
    from .engine import Engine

BASE = "/agentmeter"
TOOL, RUN, RUNNER = f"{BASE}/tool", f"{BASE}/run", f"{BASE}/runner/batchrun.py"
IMAGE_REPOSITORY = "agentmeter-difftest"
BATCH_MARGIN = 30.0  # seconds a batch may take beyond its cases' timeouts before we give up on it


@dataclass(frozen=True)
class Limits:
    """What both sides share besides the image: the sandbox's limits and its user and python."""

    cpus: float | None = 2.0
    memory: str | None = "4g"
    pids: int | None = 1024
    uid: int = 1000
    python: str = "python3"


class DockerSides:
    """Makes one side's executor (``factory(root, command)``) on ``engine`` from ``image``."""

    def __init__(self, engine: Engine, image: str, image_id: str, limits: Limits, labels: dict[str, str]):
        self.engine, self.image, self.image_id, self.limits = engine, image, image_id, limits
        self.labels = {**labels, MANAGED: "1", RUNNER_LABEL: runner_label()}
        self.cache_key = f"docker:{engine.name}:{image_id}:{limits}"
        self._sides = count()
        self.cpu_seconds = 0.0  # used by the cases' processes of every side made here (benchmarks)

    @classmethod
    async def create(cls, engine: Engine, image: str, limits: Limits, labels: dict[str, str]) -> DockerSides:
        image_id = (await engine.call(engine.client.api.inspect_image, image))["Id"]
        return cls(engine, image, image_id, limits, labels)

    @classmethod
    async def for_session(cls, session: Any) -> DockerSides:
        """The sides of a docker (or swarm) trial: its engine (a swarm's manager), its image,
        its sandbox's limits and labels."""
        config = session.config
        uid = 0 if config.user == "root" else int(config.user.split(":")[0])
        limits = Limits(cpus=config.cpus, memory=config.memory, pids=getattr(config, "pids", None) or 1024,
                        uid=uid, python=config.python)
        labels = trial_labels(session.sandbox.suite.id, session.trial_id, session.token)
        return await cls.create(session.engine, session.image, limits, labels)

    def __call__(self, root: Path, command: ToolCommand) -> DockerExecutor:
        return DockerExecutor(self, command, f"s{next(self._sides)}-{uuid.uuid4().hex[:8]}", self.labels)

    def shared(self, root: Path, command: ToolCommand) -> DockerExecutor:
        """A side other trials' evaluations share (the oracle): it outlives the trial that made
        it, so it must not carry that trial's labels, or the trial's cleanup (a swarm session
        removes every container labelled with its token) would pull it from under the others."""
        labels = {k: v for k, v in self.labels.items() if k not in (TRIAL, TRIAL_ID)}
        return DockerExecutor(self, command, f"s{next(self._sides)}-{uuid.uuid4().hex[:8]}", labels)



class DockerExecutor(CaseExecutor):
    batch_size = 0  # an exec costs tens of ms: the evaluator splits the cases over its jobs

    def __init__(self, sides: DockerSides, command: ToolCommand, name: str, labels: dict[str, str]):
        self.sides, self.command, self.name = sides, command, name
        self.labels = {**labels, SIDE_LABEL: name}
        self.engine, self.limits = sides.engine, sides.limits
        self.container: str | None = None  # the build container, then the cases' container
        self.snapshot_image: str | None = None
        self._batches = count()

    # -- build --------------------------------------------------------------------------------

    def _host_config(self, *, read_only: bool, volume: bool, labels: dict[str, str]) -> Any:
        from docker.types import Mount

        limits = self.limits
        return self.engine.client.api.create_host_config(
            init=True, network_mode="none", read_only=read_only, security_opt=["no-new-privileges"],
            nano_cpus=int(limits.cpus * 1e9) if limits.cpus else None, mem_limit=limits.memory,
            pids_limit=limits.pids, tmpfs={"/tmp": "rw,nosuid,nodev,size=256m,mode=1777"} if read_only else None,
            mounts=[Mount(RUN, None, type="volume", labels=labels)] if volume else [])

    def _create(self, image: str, *, read_only: bool, volume: bool) -> str:
        """Blocking. A started container running the keep-alive; execs run as the side's user."""
        labels = self.labels
        api = self.engine.client.api
        container = api.create_container(image, command=KEEPALIVE, labels=labels, user="0:0",
                                         working_dir=BASE, network_disabled=True,
                                         host_config=self._host_config(read_only=read_only, volume=volume,
                                                                       labels=labels))["Id"]
        return container

    def _seed(self, source: Path) -> bytes:
        tar = TarWriter(uid=self.limits.uid)
        tar.folder(BASE.strip("/"), uid=0)
        tar.tree(TOOL.strip("/"), source)
        for folder in ("run", "build-home", "tmp"):
            tar.folder(f"{BASE.strip('/')}/{folder}")
        tar.data(RUNNER.strip("/"), Path(batchrun.__file__).read_bytes(), uid=0)
        return tar.getvalue()

    def _env(self, home: str) -> dict[str, str]:
        return {**case_env(PATH, self.command.env), "HOME": home, "TMPDIR": f"{BASE}/tmp"}

    async def build(self, source: Path) -> BuildResult:
        if not source.is_dir():
            return BuildResult(ok=False, output=f"no tool folder: {source.name or source}")
        api, call = self.engine.client.api, self.engine.call
        self.container = await self._made(self._create, self.sides.image, read_only=False, volume=False)
        await call(api.put_archive, self.container, "/", await asyncio.to_thread(self._seed, source))
        await call(api.start, self.container)
        result = BuildResult(ok=True)
        if self.command.install:
            script = self.command.fill(self.command.install, Path(TOOL), self.limits.python)
            run = self.engine.call(run_exec, self.engine, self.container, ["/bin/sh", "-c", script],
                                   env=self._env(f"{BASE}/build-home"), cwd=TOOL, user=str(self.limits.uid))
            try:
                done = await asyncio.wait_for(run, self.command.build_timeout)
            except TimeoutError:
                await self._remove_container()  # ends the install's exec too
                return BuildResult(ok=False, output="install timed out", duration=self.command.build_timeout)
            result = BuildResult(ok=done.exit_code == 0, exit_code=done.exit_code,
                                 output=(done.stdout + done.stderr).decode("utf-8", "replace"),
                                 duration=done.duration)
        if result.ok:
            await self._freeze()
        return result

    async def _freeze(self) -> None:
        """Commit the installed container to an image and start the cases' container from it."""
        api, call = self.engine.client.api, self.engine.call
        tag = self.name
        committed = await self._made(api.commit, self.container, repository=IMAGE_REPOSITORY, tag=tag,
                                     message="agentmeter differential side after install")
        self.snapshot_image = committed["Id"]
        await self._remove_container()
        self.container = await self._made(self._create, self.snapshot_image, read_only=True, volume=True)
        await call(api.start, self.container)

    # -- cases --------------------------------------------------------------------------------

    async def run(self, case: Case, files: list[FileSpec]) -> CaseRun:
        return (await self.run_batch([(case, files)]))[0]

    async def run_batch(self, items: list[tuple[Case, list[FileSpec]]]) -> list[CaseRun]:
        if self.container is None or self.snapshot_image is None:
            raise SideError("cases asked of a side that did not build")
        folder = f"b{next(self._batches)}"
        spec = batch_spec(self.command, TOOL, self.limits.python, PATH, f"{RUN}/{folder}", items)
        tar = TarWriter(uid=self.limits.uid)
        tar.data(f"{folder}/spec.json", json.dumps(spec).encode())
        api, call = self.engine.client.api, self.engine.call
        await call(api.put_archive, self.container, RUN, tar.getvalue())
        argv = [self.limits.python, "-I", "-S", RUNNER, f"{RUN}/{folder}/spec.json"]
        run = asyncio.ensure_future(call(run_exec, self.engine, self.container, argv, cwd=RUN,
                                         user=str(self.limits.uid), env={"PATH": PATH}))
        budget = len(items) * (self.command.case_timeout + 1) + BATCH_MARGIN
        try:
            done = await asyncio.wait_for(asyncio.shield(run), budget)
        except TimeoutError:
            raise SideError(f"a batch of {len(items)} cases took over {budget:g} s in its container") from None
        if done.exit_code != 0:
            raise SideError(f"the batch runner failed in its container (exit {done.exit_code}): "
                            f"{done.stderr.decode('utf-8', 'replace').strip()[-500:]}")
        runs, cpu = batch_results(done.stdout)
        self.sides.cpu_seconds += cpu
        return runs

    # -- cleanup ------------------------------------------------------------------------------

    async def _made(self, make: Any, *args: Any, **kwargs: Any) -> Any:
        """``make`` (a container or an image) on the engine's pool. Cancelled while the engine is at
        it (the evaluation timed out), the object is still made: it is removed once it exists."""
        call = asyncio.ensure_future(self.engine.call(make, *args, **kwargs))
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            call.add_done_callback(self._remove_orphan)
            raise

    def _remove_orphan(self, made: asyncio.Future) -> None:
        if made.cancelled() or made.exception() is not None:
            return
        api = self.engine.client.api
        result = made.result()
        if isinstance(result, dict):  # a commit: {"Id": image}
            remove = functools.partial(api.remove_image, result["Id"], force=True)
        else:
            remove = functools.partial(api.remove_container, result, force=True, v=True)
        asyncio.ensure_future(self.engine.call(_quietly, remove))

    async def _remove_container(self) -> None:
        container, self.container = self.container, None
        if container is None:
            return
        with contextlib.suppress(*engine_errors()):  # gone already
            await self.engine.call(self.engine.client.api.remove_container, container, force=True, v=True)

    async def close(self) -> None:
        await self._remove_container()
        image, self.snapshot_image = self.snapshot_image, None
        if image is not None:
            with contextlib.suppress(*engine_errors()):
                await self.engine.call(self.engine.client.api.remove_image, image, force=True)



def _quietly(action: Any) -> None:
    with contextlib.suppress(*engine_errors()):
        action()
