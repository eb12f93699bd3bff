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
LOG_GRACE, LOST_GRACE = 30.0, 3.0  # seconds a job's log streams get after its task ended (finish_streams)
TERMINAL = {"complete", "failed", "rejected", "shutdown", "orphaned", "remove"}
STARTED = {"starting", "running"}  # a task past these has its network: no stale-network rejection comes after
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
kill -9 -1 2>/dev/null  # what the command left running ends with it, and frees the pids the archive needs
n=0  # ... once docker-init has reaped them (a zombie holds its pid): a bounded wait, no fork needed to test
while kill -0 -1 2>/dev/null && [ $n -lt 200 ]; do n=$((n+1)); sleep 0.05 2>/dev/null; done
(cd /agentmeter && tar -czf - workspace home scratch | base64)
echo "$m-end"
"""


class _JobSandbox(Protocol):
    # Read-only members: a sandbox's own attributes may be narrower than what a job reads.
    @property
    def suite(self) -> Suite: ...
    @property
    def nodes(self) -> fleet.NodeWatch: ...
    @property
    def walled(self) -> str | None: ...  # the walled network (``nodewall.py``), when the suite keeps network = "walled"


class JobSession(Protocol):
    """What a job reads of its trial's session (:class:`~.swarm.SwarmSession`); named here so
    that this module does not import the one that imports it."""

    engine: engines.Engine
    config: Any  # the swarm sandbox's Settings
    @property
    def sandbox(self) -> _JobSandbox: ...  # read-only: the session's own is a SwarmSandbox
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
        self.notes: list[str] = []  # for the transcript (a node shunned), said by the job's owner
        self.removed = False
        self.ended_as: str | None = None  # Swarm's word on a task that ended otherwise than complete

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
        with contextlib.suppress(RuntimeError):  # the loop is closed: no one waits any more
            self.loop.call_soon_threadsafe(self._resolve)

    def _resolve(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

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
            constraints=session.sandbox.nodes.avoid() or None,
            stop_signal="SIGINT", stop_grace_period=int(config.stop_grace * 1e9))
        self.service_id = service.id
        fleet.pinned(session.image, service.attrs.get("Spec") or {})
        self.streams = [JobStream(self, "stdout"), JobStream(self, "stderr")]
        for stream in self.streams:
            stream.start()

    def watch_state(self) -> None:
        """Blocks until the job's task is terminal, or its streams brought its exit code;
        records why when it never ran or its node was lost."""
        api = self.engine.client.api
        started = time.monotonic()
        while not self._over():
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
                if fleet.stale_network(status):
                    self._shun_node()
                if status["State"] in ("rejected", "orphaned") or not status.get("ContainerStatus"):
                    self.error = f"swarm job {status['State']}: {status.get('Err') or status.get('Message')}"
                elif status["State"] != "complete":
                    self.ended_as = f"{status['State']}: {status.get('Err') or status.get('Message')}"
                return
            waiting = not tasks or states == ["pending"]
            if waiting and time.monotonic() - started > self.session.config.start_timeout:
                self.error = "no swarm node took the job (insufficient CPU or memory for its reservations?)"
                return
            time.sleep(0.2)

    def _over(self) -> bool:
        """Whether the streams settled the job. Streams that ended without the exit code while
        the task still runs (a cut link breaks the manager's log relay seconds before Swarm
        calls the node down) do not: the watch goes on until the node is lost or the task ends."""
        return self.ended.is_set() and (self.exit_code is not None or self.removed or self.error is not None)

    def missing_exit(self) -> str:
        """Why the job has no exit code: its error, or what Swarm said of its task."""
        told = f" (its task {self.ended_as})" if self.ended_as else ""
        return self.error or f"the swarm job ended without reporting its exit code{told}"

    def _shun_node(self) -> None:
        """Blocking: the job's node rejected it for a stale network (it never ran): no later job
        of the run goes there. This attempt ends infra-invalid and the runner tries it again,
        elsewhere: making the service anew in place was tried and once lost a workspace."""
        if self.node_id and (note := self.session.sandbox.nodes.shun(self.engine.client, self.node_id)):
            self.notes.append(note)

    def placed(self) -> str | None:
        """Blocks until the job's container starts on a node (or its task ended first): that
        node's name. A node that rejects it for a stale network is shunned (``_shun_node``)."""
        started = time.monotonic()
        while self.service_id is not None:
            task = fleet.first_task(self.engine.client, self.service_id) or {}
            status = task.get("Status") or {}
            self.node_id = task.get("NodeID") or self.node_id  # the node to shun, if it rejects the job
            if fleet.stale_network(status):
                self._shun_node()
            if self.node_id and status.get("State") in STARTED | TERMINAL:
                break
            if time.monotonic() - started > self.session.config.start_timeout:
                break  # watch_state says why
            time.sleep(0.05)
        return self.session.sandbox.nodes.name(self.engine.client, self.node_id) if self.node_id else None

    async def finish_streams(self) -> None:
        """After the task ended, give the log streams time to reach their markers (a stream that
        never does ends when the service is removed). A task that ended by itself gets
        LOG_GRACE: Swarm relays a worker's logs through the manager, and on a loaded machine
        they trail the task's end by seconds; a verdict read before they arrive would be lost.
        A job whose node was lost or that never ran gets LOST_GRACE."""
        try:
            await asyncio.wait_for(asyncio.shield(self.done), LOST_GRACE if self.error else LOG_GRACE)
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
        self.removed = True
        self._remove(self.service_id, self.config_id)

    def _remove(self, service_id: str | None, config_id: str | None) -> None:
        client = self.engine.client
        for remove in (lambda: client.api.remove_service(service_id) if service_id else None,
                       lambda: client.api.remove_config(config_id) if config_id else None):
            with contextlib.suppress(*engines.engine_errors()):  # removed already
                remove()
        self._end()
