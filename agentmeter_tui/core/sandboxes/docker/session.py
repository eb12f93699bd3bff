"""A trial in one running container: what a session does once its container exists, whoever
made it (the docker sandbox's ``docker create``, or a swarm service's task on this node).

The agent runs through an exec whose output streams back line by line; the verifier's
commands are execs as root; files go in and out as tar archives; a kill is the signal ladder
inside the container, then the container killed (``exec.py``). A task that follows Harbor's
contract (``core/harbor/contract.py``) runs in its image's WORKDIR with its ENV, as root unless the suite
says otherwise, and its verifier (``core/harbor/verifier.py``) runs here, in the agent's container.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tarfile
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ...harbor.contract import ImageContract, agent_env, harbor_home
from ...install.clisbundle import Manifest, container_argv
from ...paths import shared_tmp
from ..archive import TarWriter, extract
from ..base import AgentHandle, ExecResult, KillPolicy, LaunchSpec, OutputCallback, SandboxSession, TrialSlot
from ..common import map_argv, shipped_files, trial_env
from ..hostfs import FETCH_LIMIT, read_globs
from ..local import LocalSession, remove_root
from . import engine as engines
from .containers import ROOT
from .exec import RECORD_PID, DockerAgent, ExecStream, end_agent, run_exec, run_ladder
from .limits import DiskWatch, sized_rootfs, written_folder, written_rootfs

if TYPE_CHECKING:
    from ...suites.suite import Suite, Task


class ContainerSession(SandboxSession):
    """Subclasses make ``self.container`` (and set ``contract`` for Harbor tasks) in their
    ``create`` and remove it in ``cleanup``."""

    mount_clis = True  # the CLIs are the runner's .clis mounted read-only, started on their runtime bundle

    def __init__(self, engine: engines.Engine, token: str, trial_id: int, *, python: str, clis_root: str,
                 uid: int, slot: TrialSlot):
        self.engine, self.token, self.trial_id = engine, token, trial_id
        self.workspace, self.home, self.scratch = f"{ROOT}/workspace", f"{ROOT}/home", f"{ROOT}/scratch"
        self.tmp = f"{ROOT}/tmp"
        self.python, self.clis_root, self.uid, self.slot = python, clis_root, uid, slot
        self.container: str | None = None
        self.agent: DockerAgent | None = None
        self.image: str | None = None  # the task's image: the differential verifier's sides start from it
        self.host_files: LocalSession | None = None  # bind mode: the folder mounted at /agentmeter
        self.contract: ImageContract | None = None  # a Harbor task: its image's WORKDIR and ENV
        self.run_user = "0:0"  # who the agent runs as (set by ``create``)
        self.notes: list[str] = []
        self.storage_mb: int | None = None  # a Harbor task's [environment] storage_mb
        self.disk_watch: DiskWatch | None = None  # a writable place without a size limit (``limits.py``)

    # -- hooks of the sandbox that made the container ---------------------------------------------

    def bundle(self) -> Manifest | None:
        """The mounted CLIs' runtime manifest (None: start the launchers as they are)."""
        return None

    def engine_lost(self, exc: BaseException) -> None:
        """The agent's exec stream broke: the engine may be down."""

    # -- the contract --------------------------------------------------------------------------

    @property
    def harbor(self) -> bool:
        """Whether this trial runs under Harbor's contract (its verifier checks)."""
        return self.contract is not None

    def adopt(self, contract: ImageContract | None, run_user: str) -> None:
        """Take a Harbor task's contract: its WORKDIR is the agent's folder; a root agent's HOME
        is the image's (``harbor.harbor_home``)."""
        self.contract, self.run_user = contract, run_user
        self.uid = int(run_user.split(":")[0])
        if contract is not None:
            self.workspace = contract.workdir
            self.home = harbor_home(contract, self.uid) or self.home

    def seed_tar(self, task: Task, prefix: str = "") -> bytes:
        """The trial's own folders under /agentmeter (``prefix`` "agentmeter/" when the archive
        goes to /), the shipped tools, and our own tasks' workspace seed."""
        return self._seed(task, prefix).getvalue()

    def _seed(self, task: Task, prefix: str) -> TarWriter:
        tar = TarWriter(uid=self.uid)
        if prefix:
            tar.folder(prefix.rstrip("/"), uid=0)
        for folder in ("workspace", "home", "scratch"):
            tar.folder(prefix + folder)
        tar.folder(prefix + "tmp", 0o1777)
        if task.workspace_seed is not None and self.contract is None:
            tar.tree(prefix + "workspace", task.workspace_seed)
        tar.folder(prefix + "tools", uid=0)  # ours, read-only to the agent
        tar.files(prefix, shipped_files(), uid=0)
        return tar

    def root_tar(self, task: Task) -> bytes:
        """Everything the container is seeded with, as one archive for / (one engine round trip
        rather than three: a Harbor trial's start is mostly round trips): /agentmeter as
        :meth:`seed_tar` makes it and, for a Harbor task, its HOME and its workspace seed."""
        tar = self._seed(task, ROOT.strip("/") + "/")
        self._contract_entries(tar, task)
        self.storage_mb = task.spec.environment.storage_mb
        return tar.getvalue()

    async def seed_contract(self, task: Task) -> None:
        """A Harbor task's workspace seed into its WORKDIR, and its HOME made (the container's
        root filesystem is writable: both stay in the container)."""
        if self.contract is None:
            return
        tar = TarWriter(uid=self.uid)
        if self._contract_entries(tar, task):
            await self.engine.call(self.engine.client.api.put_archive, self.container, "/", tar.getvalue())

    def _contract_entries(self, tar: TarWriter, task: Task) -> bool:
        """A Harbor task's HOME and workspace seed into ``tar`` (an archive for /); whether any."""
        if self.contract is None:
            return False
        wrote = False
        if self.home != f"{ROOT}/home":
            tar.folder(self.home.strip("/"), 0o700)
            wrote = True
        if task.workspace_seed is not None:
            tar.present(self.workspace)  # the image's WORKDIR keeps its owner and mode
            tar.tree(self.workspace.strip("/"), task.workspace_seed)
            wrote = True
        return wrote

    def environment(self, extra: dict[str, str], cwd: str | None = None) -> dict[str, str]:
        if self.contract is not None:
            return agent_env(self.contract, extra, home=self.home, cwd=cwd or self.workspace, token=self.token)
        env = trial_env(home=self.home, workspace=cwd or self.workspace, tmp=self.tmp, token=self.token,
                        user="root" if self.uid == 0 else "agent", extra=extra)
        env["PWD"] = cwd or self.workspace
        return env

    # -- processes -----------------------------------------------------------------------------

    async def start(self, spec: LaunchSpec, on_output: OutputCallback) -> AgentHandle:
        api = self.engine.client.api
        cwd = spec.cwd or self.workspace
        argv = [*RECORD_PID, *self._native(map_argv(spec.argv, ROOT))]
        exec_id = (await self.engine.call(api.exec_create, self.container, argv,
                                          environment=self.environment(spec.env, cwd), workdir=cwd,
                                          user=self.run_user))["Id"]
        stream = ExecStream(self.engine, exec_id, on_output, asyncio.get_running_loop())
        stream.start()
        self.agent = DockerAgent(self.engine, exec_id, stream, on_lost=self.engine_lost)
        self._watch_disk()
        with contextlib.suppress(*engines.engine_errors()):  # the pid is for display only
            self.agent.pid = (await self.engine.call(api.exec_inspect, exec_id)).get("Pid") or None
        return self.agent

    def _watch_disk(self) -> None:
        """Bind mode's folder, or a Harbor task's writable root on an engine that cannot limit its
        size, watched while the agent runs (``limits.py``); the suite's ``workspace_size`` or the
        task's ``storage_mb`` is the limit."""
        from docker.utils import parse_bytes

        if self.disk_watch is not None or self.container is None:
            return
        limit = parse_bytes(getattr(getattr(self, "config", None), "workspace_size", "2g"))
        if self.host_files is not None:
            self.disk_watch = DiskWatch("the workspace folder (bind mode)", written_folder(str(self.host_files.root)),
                                        limit)
        elif self.contract is not None and not sized_rootfs(self.engine.info):
            limit = self.storage_mb << 20 if self.storage_mb else limit
            self.disk_watch = DiskWatch("the root filesystem", written_rootfs(self.engine.client.api, self.container),
                                        limit)
        if self.disk_watch is not None:
            self.breach = self.disk_watch.start()

    def _native(self, argv: list[str]) -> list[str]:
        """A mounted CLI's launcher becomes the command that runs it on the runtime bundle
        (``clisbundle.py``): the image needs no node, no Python, and its libc is not used."""
        if not self.mount_clis:
            return argv
        return container_argv(argv, self.clis_root, self.bundle())

    async def exec(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
                   timeout: float | None = None) -> ExecResult:
        run = self.engine.call(run_exec, self.engine, self.container, map_argv(argv, ROOT),
                               env=self.environment(env or {}, cwd), cwd=cwd or self.workspace, user="0")
        task = asyncio.ensure_future(run)
        try:
            return await asyncio.wait_for(asyncio.shield(task), timeout)
        except TimeoutError:
            # Everything but docker-init and the keep-alive: a plain ``kill -1`` took the
            # keep-alive too and stopped the container, so nothing could run after a verifier's
            # timeout (found by the sandbox conformance checklist).
            with contextlib.suppress(*engines.engine_errors()):
                await self.engine.call(end_agent, self.engine, self.container)
            result = await task
            result.timed_out = True
            return result

    async def kill(self, policy: KillPolicy) -> None:
        """The signal ladder inside the container (``run_ladder``): every process but the
        keep-alive ends and the container stays (its tmpfs volume with it) until cleanup; the
        container itself is killed only when the ladder could not run."""
        if self.container is None:
            return
        if self.disk_watch is not None:
            await self.disk_watch.stop()
        if self.agent is None or not await self.engine.call(run_ladder, self.engine, self.container,
                                                             policy.int_grace, policy.grace):
            await self._kill_container()

    async def end_agent(self) -> None:
        if self.container is not None:
            await self.engine.call(end_agent, self.engine, self.container)

    async def _kill_container(self) -> None:
        api = self.engine.client.api
        with contextlib.suppress(*engines.engine_errors()):  # already stopped, or gone
            await self.engine.call(api.kill, self.container)
            await self.engine.call(api.wait, self.container, timeout=10, condition="not-running")

    async def remove_container(self) -> None:
        """SIGKILL and remove at once (no stop timeout), with its anonymous volume."""
        if self.disk_watch is not None:
            await self.disk_watch.stop()
        if self.container is None:
            return
        try:
            await self.engine.call(self.engine.client.api.remove_container, self.container, force=True, v=True)
        except engines.engine_errors() as exc:
            if "No such container" not in str(exc) and "already in progress" not in str(exc):
                raise

    async def keep_workspace(self) -> None:
        """``keep_workspaces``: the workspace copied out before the container goes."""
        if self.container is None or self.host_files is not None:
            return
        kept = shared_tmp("agentmeter-kept") / f"t{self.trial_id}-{self.token}"
        with contextlib.suppress(*engines.engine_errors(), tarfile.TarError, RuntimeError):
            await self.collect_workspace(kept)

    # -- files ---------------------------------------------------------------------------------

    def _path(self, base: str) -> str:
        """A base name ("home", "workspace", "scratch") or an absolute path in the container."""
        if base.startswith("/"):
            return base.rstrip("/") or "/"
        return {"workspace": self.workspace, "home": self.home}.get(base, f"{ROOT}/{base}")

    def _bound(self, base: str) -> LocalSession | None:
        """The bind-mounted folder of this machine, when ``base`` is in it (bind mode)."""
        if base in ("home", "workspace", "scratch") and self._path(base).startswith(ROOT + "/"):
            return self.host_files
        return None

    async def write_files(self, base: str, files: dict[str, bytes]) -> None:
        if (bound := self._bound(base)) is not None:  # whatever the agent planted there (hostfs.py); what is made is given to it
            await bound.write_files(base, files)
            return
        path = self._path(base)
        tar = TarWriter(uid=self.uid)
        if base.startswith("/"):  # made with its parents: /solution, /tests need not exist yet
            tar.files(path.lstrip("/"), files)
            path = "/"
        else:
            tar.files("", files)
        await self.engine.call(self.engine.client.api.put_archive, self.container, path, tar.getvalue())

    async def write_solution(self, files: dict[str, bytes]) -> str:
        if self.contract is None:
            return await super().write_solution(files)
        await self.write_files("/solution", files)  # where Harbor puts it: solve.sh may `cd /solution`
        return "/solution"

    async def _copy_out(self, path: str, dest: Path, limit_bytes: int | None = None) -> Path:
        """``path`` of the container copied to ``dest/<its name>``, which is returned."""
        def fetch() -> Path:
            chunks, _ = self.engine.client.api.get_archive(self.container, path)
            return extract(chunks, dest, limit_bytes)

        await self.engine.call(fetch)
        return dest / os.path.basename(path)

    async def fetch_files(self, base: str, patterns: list[str], limit_bytes: int = 64 << 20) -> dict[str, bytes]:
        if (bound := self._bound(base)) is not None:
            return await bound.fetch_files(base, patterns, limit_bytes)
        from docker.errors import NotFound

        # Only the folder the patterns share is copied out: a Harbor task's HOME is the image's
        # /root, which may hold far more than the CLI's session files.
        prefix = literal_prefix(patterns)
        path = self._path(base) + (f"/{prefix}" if prefix else "")
        tmp = Path(tempfile.mkdtemp(prefix="agentmeter-fetch-"))
        try:
            try:
                folder = await self._copy_out(path, tmp, limit_bytes)
            except NotFound:  # e.g. /logs/verifier of a task whose tests removed it
                return {}
            found, notes = await asyncio.to_thread(
                read_globs, folder, "", [p[len(prefix) + 1:] if prefix else p for p in patterns], limit_bytes)
        finally:  # whatever depth the agent nested its folders to (rmtree recurses per level)
            await asyncio.to_thread(remove_root, tmp)
        for text in notes:
            self.note(text)
        return {f"{prefix}/{rel}" if prefix else rel: data for rel, data in found.items()}

    async def collect_workspace(self, dest: Path) -> Path:
        if (bound := self._bound("workspace")) is not None:
            return Path(bound.workspace)
        if self.workspace == "/":
            raise RuntimeError("the task's working folder is /: not copied out whole")
        return await self._copy_out(self.workspace, dest, FETCH_LIMIT)


def check_bundle(suite: Suite, clis_root: str, manifest: Manifest | None) -> None:
    """Refuse a run whose installed CLIs (npm, PyPI) the mounted runtime bundle cannot start
    (task images have no node or Python of their own), before any trial."""
    from ...harnesses import ADAPTERS
    from ...paths import default_clis_root

    launchers = manifest.launchers if manifest is not None else {}
    missing = []
    for entry in suite.spec.clis:
        adapter = ADAPTERS.get(entry.adapter)
        if adapter.install.registry in ("npm", "pypi") and \
                adapter().executable(clis_root)[len(clis_root) + 1:] not in launchers:
            missing.append(entry.adapter)
    if missing:
        raise engines.EngineError(f"{', '.join(missing)}: no runtime bundle under {default_clis_root()} starts it "
                                  f"inside a container (task images have no node or Python of their own); run: "
                                  f"agentmeter install-clis")


def literal_prefix(patterns: list[str]) -> str:
    """The folders every glob pattern starts with, before any wildcard (``.codex/sessions``)."""
    split = [p.split("/")[:-1] for p in patterns]  # the last part names files, never a folder to copy
    common: list[str] = []
    for parts in zip(*split) if split else ():
        if len(set(parts)) != 1 or any(c in parts[0] for c in "*?[") or parts[0] in ("", ".", ".."):
            break
        common.append(parts[0])
    return "/".join(common)


def chown_tree(root: Path, uid: int) -> None:
    """Give the agent's user the folders it works in (bind mode; only root may chown)."""
    if os.geteuid() != 0 or uid == 0:
        return
    os.chown(root, uid, uid)
    for folder, subdirs, files in os.walk(root):
        for name in subdirs + files:
            os.lchown(os.path.join(folder, name), uid, uid)


__all__ = ["ContainerSession", "chown_tree"]
