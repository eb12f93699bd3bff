"""The swarm sandbox: each trial is a one-shot Docker Swarm service that Swarm places on its nodes.

A trial's files live on the runner (a local mirror of the job's ``/agentmeter``: workspace,
home, tmp, scratch, tools). A job gets them as a gzipped tar in a swarm config, unpacks
them into a tmpfs, runs its command as the non-root user with CPU and memory reserved, and
after the command exits prints a marker with its exit code and the tar of its files back on
stdout, base64, so the runner can collect the workspace from any node through the service
logs, which it streams line by line meanwhile. The agent is one job; a verifier's command
(``exec``) is another job on the collected files. Kill = remove the service: Swarm sends
the stop signal (SIGINT) and SIGKILL after ``stop_grace`` seconds; never a 10 s timeout.

Limits: a config holds at most 500 KB, so a workspace must compress below that (bake
bigger ones into the task's image); containers of finished jobs on other nodes are removed
by Swarm, those on this node by the runner.
"""

from __future__ import annotations

import asyncio
import base64
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from ..lines import LineSplitter
from . import engine as engines
from .archive import TarWriter, extract
from .base import AgentHandle, ExecResult, KillPolicy, LaunchSpec, OutputCallback, Sandbox, SandboxSession, TrialSlot
from .common import HostWatch, Settings, load_settings, map_argv, resolve_path, shipped_files, trial_env
from .images import HOST_IMAGE, ImageResolver
from .local import LocalSession
from .placement import Host, Placement
from .relay import RelayPool, is_loopback
from .rootfs import AGENT_UID

if TYPE_CHECKING:
    from ..suites import Task

ROOT = "/agentmeter"
CONFIG_LIMIT = 500 * 1024
TERMINAL = {"complete", "failed", "rejected", "shutdown", "orphaned", "remove"}
# $1: marker; the rest: the command. Unpack, run, report the exit code, send the files back.
JOB_SCRIPT = r"""m=$1; shift
fail() { echo "$m-infra $1" >&2; echo "$m-infra $1"; exit 125; }
tar -xzf /agentmeter-in.tgz -C /agentmeter || fail "cannot unpack the trial's files into /agentmeter"
cd "$AGENTMETER_CWD" || fail "no folder $AGENTMETER_CWD" 
"$@" </dev/null &
pid=$!
trap 'kill -INT $pid 2>/dev/null' INT
trap 'kill -TERM $pid 2>/dev/null' TERM
wait $pid; rc=$?
while kill -0 $pid 2>/dev/null; do wait $pid; rc=$?; done
echo "$m-exit $rc" >&2
echo "$m-exit $rc"
(cd /agentmeter && tar -czf - workspace home scratch | base64)
echo "$m-end"
"""


class SwarmSettings(Settings):
    engine: str | None = None  # a manager's URL; default DOCKER_HOST or the local socket
    key: str | None = None
    known_hosts: str | None = None
    slots: int = Field(8, ge=1, le=4096)  # jobs at once; Swarm decides where each one runs
    image: str = HOST_IMAGE
    pull: bool = False
    network: str = "host"  # "host": jobs on this node reach our loopback; else an attachable network
    relay_address: str | None = None  # an address of this machine every node reaches (multi-node)
    cpus: float = Field(1.0, gt=0)
    memory: str = Field("1g", pattern=r"^\d+[bkmgBKMG]?$")
    user: str = Field(f"{AGENT_UID}:{AGENT_UID}", pattern=r"^(root|\d+(:\d+)?)$")
    python: str = "python3"
    clis_root: str = "/opt/agentmeter/clis"  # where the image has the CLIs
    stop_grace: float = Field(2.0, gt=0)
    start_timeout: float = Field(120.0, gt=0)  # a job no node takes in this long is infra-invalid

    _paths = field_validator("key", "known_hosts")(resolve_path)


class SwarmSandbox(Sandbox):
    name = "swarm"
    Settings = SwarmSettings

    def __init__(self, suite: Any, settings: dict[str, Any] | None = None):
        super().__init__(suite, settings)
        self.config = load_settings(SwarmSettings, suite, self.settings)
        self.host_name = f"swarm:{self.config.engine or 'local'}"
        self.placement = Placement([Host(self.host_name, self.config.slots)])
        self.images = ImageResolver(self.config.image, pull=self.config.pull)
        self.relays = RelayPool()
        self.engine: engines.Engine | None = None
        self.watch = HostWatch(self.placement, self._probe, 10.0)
        self._lock = asyncio.Lock()

    def capacity(self) -> int:
        return self.config.slots

    async def connect(self) -> engines.Engine:
        async with self._lock:
            if self.engine is None:
                config = self.config
                client = await asyncio.to_thread(engines.connect, config.engine, key=config.key,
                                                 known_hosts=config.known_hosts)
                info = await asyncio.to_thread(client.info)
                swarm = info.get("Swarm") or {}
                if not swarm.get("ControlAvailable"):
                    raise engines.EngineError(
                        f"docker engine {config.engine or 'local'} is not a swarm manager (swarm state "
                        f"{swarm.get('LocalNodeState', '?')}); run `docker swarm init` there or name a manager")
                self.engine = engines.Engine(self.host_name, config.engine, client,
                                             engines.is_local_url(config.engine), info=info)
            return self.engine

    async def _probe(self, name: str) -> None:
        engine = await self.connect()
        await engine.call(engine.client.ping)

    async def preflight(self) -> None:
        engine = await self.connect()
        for task in self.suite.tasks:
            await engine.call(self.images.resolve, engine.client, self.host_name, self.suite.id, task)

    def translate_url(self, url: str) -> str:
        if not is_loopback(url):
            return url
        if self.config.relay_address:
            return self.relays.translate(url, self.config.relay_address)
        if self.config.network == "host":
            return url
        raise RuntimeError(f"the model at {url} is on this machine's loopback: jobs reach it only with "
                           f"network = \"host\" (on this node) or a relay_address every node reaches")

    async def open(self, task: Task, trial_id: int, token: str) -> SwarmSession:
        engine = await self.connect()
        image = await engine.call(self.images.resolve, engine.client, self.host_name, self.suite.id, task)
        session = SwarmSession(self, engine, image, trial_id, token)
        await session.create(task)
        return session

    async def close(self) -> None:
        await self.watch.close()
        await self.relays.close()
        if self.engine is not None:
            self.engine.close()


class JobStream(threading.Thread):
    """Follows one stream (stdout or stderr) of a job's logs until the job's end marker."""

    def __init__(self, job: Job, stream: str):
        super().__init__(name=f"job-{stream}", daemon=True)
        self.job, self.stream = job, stream
        self.splitter = LineSplitter(max_line=8 << 20)
        self.payload: list[bytes] = []  # base64 lines of the files tar (stdout, after the exit marker)
        self.exit_code: int | None = None
        self.finished = False

    def run(self) -> None:
        job = self.job
        api = job.engine.client.api
        try:
            logs = api.service_logs(job.service_id, follow=True, stdout=self.stream == "stdout",
                                    stderr=self.stream == "stderr")
            for chunk in logs:
                if self._feed(self.splitter.feed(chunk)):
                    break
        except Exception:
            pass  # the service was removed (a kill) or the engine went away: the job decides
        finally:
            self.finished = True
            job.stream_done(self)

    def _feed(self, lines: list[bytes]) -> bool:
        """Hand output lines to the trial; True once this stream is complete."""
        marker = self.job.marker
        out = []
        for line in lines:
            if self.exit_code is not None:
                if line == marker + b"-end":
                    self.job.emit(self.stream, out)
                    return True
                self.payload.append(line)
            elif line.startswith(marker + b"-infra "):
                self.job.error = line[len(marker) + 7:].decode(errors="replace")
                self.job.emit(self.stream, out)
                return True
            elif line.startswith(marker + b"-exit "):
                self.exit_code = int(line.split()[-1])
                if self.stream == "stderr":
                    self.job.emit(self.stream, out)
                    return True
            else:
                out.append(line)
        self.job.emit(self.stream, out)
        return False


class Job:
    """One service: created from a config of files, followed, and removed."""

    def __init__(self, session: SwarmSession, argv: list[str], env: dict[str, str], cwd: str,
                 on_output: OutputCallback | None):
        self.session, self.engine = session, session.engine
        self.argv, self.env, self.cwd, self.on_output = argv, env, cwd, on_output
        self.marker = f"@@agentmeter-{session.token}".encode()
        self.loop = asyncio.get_running_loop()
        self.done = self.loop.create_future()
        self.service_id: str | None = None
        self.config_id: str | None = None
        self.streams: list[JobStream] = []
        self.ended = threading.Event()  # both log streams complete, or the service removed
        self.collected: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        self.error: str | None = None

    def emit(self, stream: str, lines: list[bytes]) -> None:
        if not lines:
            return
        if self.on_output is not None:
            self.loop.call_soon_threadsafe(self.on_output, stream, lines)
        else:
            self.collected[stream].extend(lines)

    def stream_done(self, stream: JobStream) -> None:
        if all(s.finished for s in self.streams):
            self._end()

    def _end(self) -> None:
        self.ended.set()
        self.loop.call_soon_threadsafe(lambda: self.done.done() or self.done.set_result(None))

    def submit(self, files: bytes) -> None:
        """Create the config and the service, start following its logs (blocking)."""
        from docker.types import ConfigReference, Mount, Resources, RestartPolicy, ServiceMode
        from docker.utils import parse_bytes

        session, config = self.session, self.session.config
        client = self.engine.client
        if len(files) > CONFIG_LIMIT:
            raise RuntimeError(f"the trial's files compress to {len(files) // 1024} KB; a swarm config holds "
                               f"at most {CONFIG_LIMIT // 1024} KB: bake the workspace into the task's image")
        labels = engines.trial_labels(session.sandbox.suite.id, session.trial_id, session.token)
        name = f"agentmeter-t{session.trial_id}-{session.token[:8]}-{session.jobs}"
        session.jobs += 1
        created = client.configs.create(name=name, data=files, labels=labels)
        self.config_id = created.id
        memory = parse_bytes(config.memory)
        service = client.services.create(
            session.image, command=["sh", "-c", JOB_SCRIPT, "job", self.marker.decode(), *self.argv],
            name=name, env=[f"{k}={v}" for k, v in {**self.env, "AGENTMETER_CWD": self.cwd}.items()],
            user=session.user, labels=labels, container_labels=labels, init=True,
            # A replicated service that never restarts, not a `replicated-job`: Docker 20.10 does not
            # stop a job's container when its service is removed, and removal is how we kill.
            mode=ServiceMode("replicated", replicas=1), restart_policy=RestartPolicy("none"),
            resources=Resources(cpu_reservation=int(config.cpus * 1e9), cpu_limit=int(config.cpus * 1e9),
                                mem_reservation=memory, mem_limit=memory),
            configs=[ConfigReference(created.id, name, filename="/agentmeter-in.tgz", uid="0", gid="0",
                                     mode=0o444)],
            mounts=[Mount(ROOT, None, type="tmpfs", tmpfs_mode=0o777),
                    Mount("/tmp", None, type="tmpfs", tmpfs_mode=0o777)], read_only=True,
            networks=[config.network] if config.network != "bridge" else None,
            stop_signal="SIGINT", stop_grace_period=int(config.stop_grace * 1e9))
        self.service_id = service.id
        self.streams = [JobStream(self, "stdout"), JobStream(self, "stderr")]
        for stream in self.streams:
            stream.start()

    def watch_state(self) -> None:
        """Blocks until the job's task is terminal; records why when it never ran."""
        api = self.engine.client.api
        started = time.monotonic()
        while not self.ended.is_set():
            try:
                tasks = api.tasks(filters={"service": self.service_id})
            except Exception as exc:
                self.error = f"swarm manager lost: {exc}"
                return
            states = [t["Status"]["State"] for t in tasks]
            if tasks and all(s in TERMINAL for s in states):
                status = tasks[0]["Status"]
                if status["State"] in ("rejected", "orphaned") or not status.get("ContainerStatus"):
                    self.error = f"swarm job {status['State']}: {status.get('Err') or status.get('Message')}"
                return
            if not tasks or states == ["pending"]:
                if time.monotonic() - started > self.session.config.start_timeout:
                    self.error = "no swarm node took the job (insufficient CPU or memory for its reservations?)"
                    return
            time.sleep(0.2)

    async def finish_streams(self, grace: float = 3.0) -> None:
        """After the task ended, give the log streams ``grace`` seconds to reach their markers
        (a stream that never does ends when the service is removed)."""
        try:
            await asyncio.wait_for(asyncio.shield(self.done), grace)
        except TimeoutError:
            pass

    @property
    def exit_code(self) -> int | None:
        return self.streams[0].exit_code if self.streams else None

    def files(self) -> bytes | None:
        if not self.streams or self.streams[0].exit_code is None or not self.streams[0].finished:
            return None
        return base64.b64decode(b"".join(self.streams[0].payload))

    def remove(self) -> None:
        """Remove the service (the stop signal, SIGKILL after stop_grace), its config, and its
        stopped container on this node."""
        client = self.engine.client
        for remove in (lambda: client.api.remove_service(self.service_id) if self.service_id else None,
                       lambda: client.api.remove_config(self.config_id) if self.config_id else None):
            try:
                remove()
            except Exception:
                pass
        self._end()


class SwarmAgent(AgentHandle):
    def __init__(self, session: SwarmSession, job: Job):
        self.session, self.job = session, job
        self.pid: int | None = None

    async def wait(self) -> int:
        job = self.job
        await self.session.engine.call(job.watch_state)
        await job.finish_streams()
        if job.exit_code is None:
            if self.session.killed:
                return -1
            raise ConnectionError(job.error or "the swarm job ended without reporting its exit code")
        await self.session.absorb(job)
        return job.exit_code


class SwarmSession(SandboxSession):
    def __init__(self, sandbox: SwarmSandbox, engine: engines.Engine, image: str, trial_id: int, token: str):
        self.sandbox, self.engine, self.image = sandbox, engine, image
        self.config, self.trial_id, self.token = sandbox.config, trial_id, token
        self.workspace, self.home, self.scratch, self.tmp = (f"{ROOT}/{d}" for d in ("workspace", "home", "scratch",
                                                                                     "tmp"))
        self.python, self.clis_root = self.config.python, self.config.clis_root
        self.user = "0:0" if self.config.user == "root" else self.config.user
        self.slot = TrialSlot("swarm", sandbox.host_name)
        self.mirror = Path(tempfile.mkdtemp(prefix=f"agentmeter-swarm-t{trial_id}-"))
        self.files = LocalSession(self.mirror, token)  # the runner's copy of the job's /agentmeter
        self.jobs = 0
        self.agent_job: Job | None = None
        self.killed = False

    async def create(self, task: Task) -> None:
        def prepare() -> None:
            for folder in ("workspace", "home", "tmp", "scratch"):
                (self.mirror / folder).mkdir(exist_ok=True)
            if task.workspace_seed is not None:
                shutil.rmtree(self.mirror / "workspace")
                shutil.copytree(task.workspace_seed, self.mirror / "workspace", symlinks=True)
            for rel, data in shipped_files().items():
                (self.mirror / rel).parent.mkdir(parents=True, exist_ok=True)
                (self.mirror / rel).write_bytes(data)

        await asyncio.to_thread(prepare)

    def translate_url(self, url: str) -> str:
        return self.sandbox.translate_url(url)

    def _files_tar(self) -> bytes:
        tar = TarWriter(uid=0 if self.user == "0:0" else int(self.user.split(":")[0]), gzip=True)
        for folder in ("workspace", "home", "tmp", "scratch", "tools"):
            if (self.mirror / folder).is_dir():
                tar.tree(folder, self.mirror / folder)
        return tar.getvalue()

    async def absorb(self, job: Job) -> None:
        """Take the job's files back into the mirror (the workspace the verifier sees)."""
        data = job.files()
        if data is None:
            return

        def replace() -> None:
            for folder in ("workspace", "home", "scratch"):
                shutil.rmtree(self.mirror / folder, ignore_errors=True)
            extract(data, self.mirror)

        await asyncio.to_thread(replace)

    async def _submit(self, argv: list[str], env: dict[str, str] | None, cwd: str | None,
                      on_output: OutputCallback | None) -> Job:
        cwd = cwd or self.workspace
        environment = trial_env(home=self.home, workspace=cwd, tmp=self.tmp, token=self.token,
                                user="root" if self.user == "0:0" else "agent", extra=env)
        job = Job(self, map_argv(argv, ROOT), environment, cwd, on_output)
        await self.engine.call(job.submit, await asyncio.to_thread(self._files_tar))
        return job

    async def start(self, spec: LaunchSpec, on_output: OutputCallback) -> SwarmAgent:
        self.agent_job = await self._submit(spec.argv, spec.env, spec.cwd, on_output)
        return SwarmAgent(self, self.agent_job)

    async def exec(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
                   timeout: float | None = None) -> ExecResult:
        started = time.monotonic()
        job = await self._submit(argv, env, cwd, None)
        timed_out = False
        try:
            await asyncio.wait_for(self.engine.call(job.watch_state), timeout)
            await job.finish_streams()
            await self.absorb(job)
        except TimeoutError:
            timed_out = True
        finally:
            await self.engine.call(job.remove)
        if job.exit_code is None and not timed_out and job.error:
            raise ConnectionError(job.error)
        code = job.exit_code if job.exit_code is not None else -1
        out, err = (b"".join(line + b"\n" for line in job.collected[name]) for name in ("stdout", "stderr"))
        return ExecResult(code, out, err, time.monotonic() - started, timed_out)

    async def kill(self, policy: KillPolicy) -> None:
        """SIGINT, then SIGKILL after ``int_grace``, straight to the job's container when it runs on
        this node (Swarm relays a removal to its node in one to five seconds); then remove the
        service, which stops the container wherever it runs (the stop signal, SIGKILL after
        ``stop_grace``), and wait (bounded) until no container of the trial runs here."""
        self.killed = True
        job = self.agent_job
        if job is None:
            return
        if await self.engine.call(self._signal_here, "SIGINT"):
            if not await self.engine.call(self._wait_stopped, policy.int_grace):
                await self.engine.call(self._signal_here, "SIGKILL")
        await self.engine.call(job.remove)
        await self.engine.call(self._wait_stopped, self.config.stop_grace + 5)
        await self.engine.call(self._remove_containers)

    def _containers(self, *, all: bool = False) -> list[Any]:
        selector = {"label": f"{engines.TRIAL}={self.token}"}
        try:
            return self.engine.client.containers.list(all=all, filters=selector)
        except Exception:
            return []

    def _signal_here(self, signal: str) -> bool:
        running = self._containers()
        for container in running:
            try:
                container.kill(signal)
            except Exception:
                pass
        return bool(running)

    def _wait_stopped(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self._containers():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def _remove_containers(self) -> None:
        for container in self._containers(all=True):
            try:  # stopped containers of removed services linger; on this node they are ours to remove
                container.remove(force=True)
            except Exception:
                pass

    async def write_files(self, base: str, files: dict[str, bytes]) -> None:
        await self.files.write_files(base, files)

    async def fetch_files(self, base: str, patterns: list[str], limit_bytes: int = 64 << 20) -> dict[str, bytes]:
        return await self.files.fetch_files(base, patterns, limit_bytes)

    async def collect_workspace(self, dest: Path) -> Path:
        return Path(self.files.workspace)

    async def cleanup(self, keep: bool = False) -> None:
        if self.agent_job is not None:
            await self.engine.call(self.agent_job.remove)
        await self.engine.call(self._remove_containers)
        if not keep:
            await asyncio.to_thread(shutil.rmtree, self.mirror, True)


__all__ = ["SwarmSandbox", "SwarmSession", "SwarmSettings"]
