"""Differential test sides on an ssh trial's host: the agent's tool runs where the agent ran.

Each side gets a folder of its own on the trial's host, next to the trials' folders
(``<work_root>/difftest-<id>``: ``tool``, ``runner``, ``build-home``, ``tmp``, ``run``):

1. **build**: the tool folder is copied there over SFTP with the batch runner, and ``install``
   runs in it (``HOME=build-home``, ``{python}`` = the host's python);
2. **snapshot**: the installed folder is made read-only (``chmod -R a-w``): every case starts
   from it. A host has no image to commit: a tool that makes its folder writable again could
   change it for the later cases of its side; the cases' own workspaces, HOME and TMPDIR are
   fresh per case, as everywhere;
3. **cases**: a batch is one command on the host running the batch runner (the same one the
   docker sides run), under ``unshare -rn`` (a user and network namespace: no network) when
   the host allows unprivileged namespaces, which ``create`` probes once per host.

``close`` removes the folder. The host's python must be 3.8+ (the runner's only need).
"""

from __future__ import annotations

import asyncio
import json
import shlex
import uuid
from itertools import count
from pathlib import Path
from typing import Any

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

PATH = "/usr/local/bin:/usr/bin:/bin"
BATCH_MARGIN = 30.0


class SshSides:
    """Makes one side's executor (``factory(root, command)``) on an ssh trial's host."""

    def __init__(self, conn: Any, host: Any, isolate: bool):
        self.conn, self.host, self.isolate = conn, host, isolate
        self.cache_key = f"ssh:{host.display}:{host.python}:{isolate}"
        self.cpu_seconds = 0.0  # used by the cases' processes of every side made here (benchmarks)

    @classmethod
    async def for_session(cls, session: Any) -> SshSides:
        # Whether this host lets a user make a network namespace: then the cases get no network.
        probe = await session.conn.conn.run("unshare -rn true", check=False, timeout=30)
        return cls(session.conn, session.host, probe.exit_status == 0)

    def __call__(self, root: Path, command: ToolCommand) -> SshExecutor:
        return SshExecutor(self, command, f"{self.host.work_root}/difftest-{uuid.uuid4().hex[:12]}")


class SshExecutor(CaseExecutor):
    batch_size = 0  # a command over ssh costs a round trip: the evaluator splits the cases over its jobs

    def __init__(self, sides: SshSides, command: ToolCommand, folder: str):
        self.sides, self.command, self.folder = sides, command, folder
        self.tool, self.runner = f"{folder}/tool", f"{folder}/runner/batchrun.py"
        self.python = sides.host.python
        self.built = False
        self._batches = count()

    async def _run(self, command: str, timeout: float) -> Any:
        """The command's result, or None when it ran over ``timeout`` (asyncssh then closes its channel)."""
        import asyncssh

        try:
            return await self.sides.conn.conn.run(command, check=False, timeout=timeout, encoding=None)
        except asyncssh.TimeoutError:
            return None
        except (asyncssh.Error, OSError) as exc:
            raise SideError(f"host {self.sides.host.display}: {exc}") from None

    def _env(self, home: str) -> str:
        env = {**case_env(PATH, self.command.env), "HOME": home, "TMPDIR": f"{self.folder}/tmp"}
        return "env -i " + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())

    async def build(self, source: Path) -> BuildResult:
        if not source.is_dir():
            return BuildResult(ok=False, output=f"no tool folder: {source.name or source}")
        from .hosts import check_root

        await check_root(self.sides.conn.conn, self.sides.host)
        sftp = await self.sides.conn.sftp()
        for sub in ("", "/runner", "/build-home", "/tmp", "/run"):
            await sftp.makedirs(self.folder + sub, exist_ok=True)
        await sftp.chmod(self.folder, 0o700)
        await sftp.put(str(source), self.tool, recurse=True, preserve=True)
        async with sftp.open(self.runner, "wb") as handle:
            await handle.write(Path(batchrun.__file__).read_bytes())
        result = BuildResult(ok=True)
        if self.command.install:
            script = self.command.fill(self.command.install, Path(self.tool), self.python)
            line = f"cd {shlex.quote(self.tool)} && {self._env(self.folder + '/build-home')} sh -c {shlex.quote(script)}"
            done = await self._run(self._isolated(line), self.command.build_timeout)
            if done is None:
                return BuildResult(ok=False, output="install timed out", duration=self.command.build_timeout)
            code = done.exit_status if done.exit_status is not None else -1
            result = BuildResult(ok=code == 0, exit_code=code, output=((done.stdout or b"") + (done.stderr or b""))
                                 .decode("utf-8", "replace"))
        if result.ok:
            await self._run(f"chmod -R a-w {shlex.quote(self.tool)} {shlex.quote(self.runner)}", 60)
            self.built = True
        return result

    def _isolated(self, line: str) -> str:
        return f"unshare -rn sh -c {shlex.quote(line)}" if self.sides.isolate else line

    async def run(self, case: Case, files: list[FileSpec]) -> CaseRun:
        return (await self.run_batch([(case, files)]))[0]

    async def run_batch(self, items: list[tuple[Case, list[FileSpec]]]) -> list[CaseRun]:
        if not self.built:
            raise SideError("cases asked of a side that did not build")
        batch = f"{self.folder}/run/b{next(self._batches)}"
        spec = batch_spec(self.command, self.tool, self.python, PATH, batch, items)
        sftp = await self.sides.conn.sftp()
        await sftp.makedirs(batch, exist_ok=True)
        async with sftp.open(f"{batch}/spec.json", "wb") as handle:
            await handle.write(json.dumps(spec).encode())
        line = f"{shlex.quote(self.python)} -I -S {shlex.quote(self.runner)} {shlex.quote(batch + '/spec.json')}"
        budget = len(items) * (self.command.case_timeout + 1) + BATCH_MARGIN
        done = await self._run(self._isolated(line), budget)
        if done is None:
            raise SideError(f"a batch of {len(items)} cases took over {budget:g} s on {self.sides.host.display}")
        if done.exit_status != 0:
            raise SideError(f"the batch runner failed on {self.sides.host.display} (exit {done.exit_status}): "
                            f"{(done.stderr or b'').decode('utf-8', 'replace').strip()[-500:]}")
        runs, cpu = batch_results(done.stdout)
        self.sides.cpu_seconds += cpu
        return runs

    async def close(self) -> None:
        if self.sides.conn.lost:
            return  # the host's own cleanup of its work root is all that is left
        folder = shlex.quote(self.folder)
        await asyncio.shield(self.sides.conn.script(f"chmod -R u+w {folder}; rm -rf {folder}", timeout=60))

