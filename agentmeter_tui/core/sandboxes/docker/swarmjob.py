"""Swarm jobs: one service that unpacks a trial's files, runs one command, and sends its exit
code and files back through its own logs (the swarm sandbox's agent runs and verifier runs).

The job's script prints ``<marker>-exit <code>`` on both streams after the command, then the
gzipped tar of workspace, home and scratch in base64 on stdout, then ``<marker>-end``; the
marker carries the trial's token so an agent printing such a line by accident changes nothing.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

from ...lines import LineSplitter
from ..base import OutputCallback
from ..common import ThreadOutput
from . import engine as engines
from . import fleet
from .containers import ROOT
from .limits import confined, service_limits
from .nodewall import job_networks

if TYPE_CHECKING:
    from ...suites.suite import Suite

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


class _JobSandbox(Protocol):
    suite: Suite
    walled: str | None  # the walled network (``nodewall.py``), when the suite keeps network = "walled"


class JobSession(Protocol):
    """What a job reads of its trial's session (:class:`~.swarm.SwarmSession`); named here so
    that this module does not import the one that imports it."""

    engine: engines.Engine
    config: Any  # the swarm sandbox's Settings
    sandbox: _JobSandbox
    trial_id: int
    token: str
    image: str
    user: str
    jobs: int
    task: Any  # the trial's Task (None before create)


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
        except engines.engine_errors():
            pass  # the service was removed (a kill) or the engine went away: the job decides
        finally:
            self.finished = True
            job.stream_done(self)

    def _feed(self, lines: list[bytes]) -> bool:
        """Hand output lines to the trial; True once this stream is complete."""
        marker = self.job.marker
        out: list[bytes] = []
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
            elif (at := line.find(marker + b"-exit ")) >= 0:
                # The marker follows the command's last byte: output that did not end with a
                # newline shares its line, and is the command's, not ours.
                if at:
                    out.append(line[:at])
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

    def __init__(self, session: JobSession, argv: list[str], env: dict[str, str], cwd: str,
                 on_output: OutputCallback | None):
        self.session, self.engine = session, session.engine
        self.argv, self.env, self.cwd = argv, env, cwd
        self.marker = f"@@agentmeter-{session.token}".encode()
        self.loop = asyncio.get_running_loop()
        self.output = ThreadOutput(on_output, self.loop) if on_output is not None else None
        self.done = self.loop.create_future()
        self.service_id: str | None = None
        self.config_id: str | None = None
        self.streams: list[JobStream] = []
        self.ended = threading.Event()  # both log streams complete, or the service removed
        self.collected: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        self.error: str | None = None
        self.node_id: str | None = None  # the node Swarm placed the job on, once it has

    def emit(self, stream: str, lines: list[bytes]) -> None:
        if not lines:
            return
        if self.output is not None:
            self.output.emit(stream, lines)
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
            resources=service_limits(Resources(cpu_reservation=int(config.cpus * 1e9),
                                               cpu_limit=int(config.cpus * 1e9), mem_reservation=memory,
                                               mem_limit=memory), config.pids),
            configs=[ConfigReference(created.id, name, filename="/agentmeter-in.tgz", uid="0", gid="0",
                                     mode=0o444)],
            mounts=[Mount(ROOT, None, type="tmpfs", tmpfs_mode=0o777, tmpfs_size=parse_bytes(config.workspace_size)),
                    Mount("/tmp", None, type="tmpfs", tmpfs_mode=0o777, tmpfs_size=parse_bytes(config.tmp_size))],
            read_only=True, **confined(session.task),
            networks=job_networks(config.network, session.sandbox.walled),
            stop_signal="SIGINT", stop_grace_period=int(config.stop_grace * 1e9))
        self.service_id = service.id
        fleet.pinned(session.image, service.attrs.get("Spec") or {})
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
            except engines.engine_errors() as exc:
                self.error = f"swarm manager lost: {exc}"
                return
            states = [t["Status"]["State"] for t in tasks]
            self.node_id = self.node_id or next((t["NodeID"] for t in tasks if t.get("NodeID")), None)
            if self.node_id and (lost := self.session.sandbox.nodes.lost(self.engine.client, self.node_id)):
                self.error = f"swarm node {lost.name} lost (state {lost.state}): the job there is gone"
                return
            if tasks and all(s in TERMINAL for s in states):
                status = tasks[0]["Status"]
                if status["State"] in ("rejected", "orphaned") or not status.get("ContainerStatus"):
                    self.error = f"swarm job {status['State']}: {status.get('Err') or status.get('Message')}"
                return
            waiting = not tasks or states == ["pending"]
            if waiting and time.monotonic() - started > self.session.config.start_timeout:
                self.error = "no swarm node took the job (insufficient CPU or memory for its reservations?)"
                return
            time.sleep(0.2)

    def placed(self) -> str | None:
        """Blocks until Swarm has put the job on a node (or it ended first); the node's name."""
        started = time.monotonic()
        while self.node_id is None and not self.ended.is_set():
            self.node_id = fleet.task_node(self.engine.client, self.service_id)
            if self.node_id is None:
                if time.monotonic() - started > self.session.config.start_timeout:
                    return None  # watch_state says why
                time.sleep(0.05)
        return self.session.sandbox.nodes.name(self.engine.client, self.node_id) if self.node_id else None

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
            with contextlib.suppress(*engines.engine_errors()):  # removed already
                remove()
        self._end()
