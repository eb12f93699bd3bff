"""The runner: the process that owns a run's schedule and the store writer.

It outlives its clients. ``agentmeter run`` starts it in its own session; the headless
progress printer and the TUI are clients on its control socket, so quitting or crashing
either never stops paid trials. ``python -m agentmeter_tui.core.run.runner --suite S --db D``.

Exit codes: 0 schedule finished, 2 bad suite, 4 seed-prompt hash changed, 5 another runner
holds the store, 6 the run could not start (a sandbox or service failed its preflight).
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import signal
import socket as socketlib
import struct
import sys
import time
from pathlib import Path
from typing import Any

from ..paths import default_clis_root, lock_path, owner_only, socket_path
from ..procs import BACKGROUND, SWEEPER, become_subreaper, reap_orphans
from ..sandboxes import SANDBOXES, Sandbox
from ..store import SeedHashChanged, Store, utcnow
from ..store.writer import StoreWriter
from ..suites import Suite, load_suite
from ..tomlerrors import InputError
from ..vocab import COUNTABLE_STATUSES, KillReason
from .budget_hold import hold_seconds
from .context import RunContext
from .control import encode
from .feed import Feed
from .scheduler import Scheduler, pending_plans, plan_cells, recover_previous


class Runner:
    def __init__(self, suite: Suite, db: Path, *, clis_root: Path | None = None):
        self.suite, self.db = suite, db
        self.clis_root = clis_root or default_clis_root()
        self.scheduler: Scheduler | None = None
        self.feed = Feed(self)
        self.run_id: int | None = None
        self.mock = None
        self.proxy = None  # the metering proxy (suite.proxy), serving on this event loop
        self.started = time.time()

    def log(self, text: str) -> None:
        try:
            print(f"[{utcnow()}] {text}", file=sys.stderr, flush=True)
        except OSError:  # the log shares the store's disk, which may be full: the run goes on
            pass

    def _disk(self, full: bool, why: str) -> None:
        """The store writer's news of a full disk (on its thread): hold or release the schedule."""
        self._loop.call_soon_threadsafe(self._disk_changed, full, why)

    def _disk_changed(self, full: bool, why: str) -> None:
        if full:
            self._full = (time.monotonic(), why)
            self.log(f"agentmeter: {why}: no new trial starts until it has room; the running ones go on, "
                     "their events kept in memory until they can be written")
            if self.scheduler is not None:
                self.scheduler.hold("disk", why)
            return
        since, was = getattr(self, "_full", (time.monotonic(), "the store's disk was full"))
        self.log(f"agentmeter: the store's disk has room again after {time.monotonic() - since:.1f} s "
                 f"({was}); everything held was written, the schedule resumes")
        if self.scheduler is not None:
            self.scheduler.release("disk")

    async def main(self) -> int:
        owner_only(lock_path(self.db))
        lock = open(lock_path(self.db), "w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.log(f"another runner is using {self.db}")
            return 5
        become_subreaper()
        self._loop = asyncio.get_running_loop()
        writer = StoreWriter(self.db, on_full=self._disk)
        try:
            return await self._run(writer)
        finally:
            writer.close()
            lock.close()

    async def _run(self, writer: StoreWriter) -> int:
        suite = self.suite
        call = lambda fn, *a: asyncio.wrap_future(writer.call(fn, *a))
        try:
            await call(Store.register_suite, suite)
        except SeedHashChanged as exc:
            self.log(str(exc))
            return 4
        try:
            sandbox = await self._start_services()
        except Exception as exc:  # a missing image, an unknown host key, a port in use...
            self.log(f"agentmeter: cannot start the run: {exc}")
            await self._stop_services(None)
            return 6
        lost = await call(recover_previous, suite.id)
        if lost:
            self.log(f"{lost} trial(s) left running by a previous runner marked infra-invalid")
        self.run_id = await call(Store.insert_run, {
            "suite_id": suite.id, "seed_hash": suite.seed_hash, "status": "running", "pid": os.getpid(),
            "host": socketlib.gethostname(), "socket": str(socket_path(self.db)), "started_at": utcnow()})
        config_ids = await call(lambda store: {
            c.key: store.ensure_configuration(suite.id, c.model.id, c.cli.label) for c in suite.configurations()})
        ctx = RunContext(suite, writer, sandbox, run_id=self.run_id, clis_root=self.clis_root,
                         mock_url=self.mock.base_url if self.mock else None, log=self.log, proxy=self.proxy,
                         sink=self.feed)
        ctx.scripted = self.mock
        plans = await call(lambda store: pending_plans(store, ctx, plan_cells(ctx, config_ids),
                                                       suite.spec.suite.max_retries))
        concurrency = min(suite.concurrency, sandbox.capacity())
        self.scheduler = scheduler = Scheduler(ctx, plans, concurrency=concurrency,
                                               max_retries=suite.spec.suite.max_retries)
        if writer.full:  # the disk filled up before the schedule existed
            scheduler.hold("disk", writer.full)
        done_before = await call(Store.count_trials, suite.id, COUNTABLE_STATUSES)
        self.feed.done_before = done_before
        server = await self._serve()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        loop.add_signal_handler(signal.SIGHUP, lambda: None)
        ticker = asyncio.create_task(self.feed.run())
        reaper = asyncio.create_task(self._reap())
        sweeper = asyncio.create_task(SWEEPER.run())
        watch = asyncio.create_task(self.mock.watch(scheduler, ctx, self._give_up)) if self.mock else None
        self.log(f"run {self.run_id}: {len(plans)} trial(s) to go, concurrency {concurrency}")
        try:
            await scheduler.run()
        finally:
            status = "stopped" if scheduler.stopping else "finished"
            ticker.cancel()
            reaper.cancel()
            sweeper.cancel()
            if watch:
                watch.cancel()
            # Everything is cleaned up (processes, containers, services) before any client is
            # told the run finished, so "finished" means nothing of the run is left.
            await BACKGROUND.drain()
            await asyncio.to_thread(SWEEPER.final)
            await self._stop_services(sandbox)
            await call(Store.update_run, self.run_id, {"status": status, "finished_at": utcnow()})
            await self.feed.finish(status)
            server.close()
            socket_path(self.db).unlink(missing_ok=True)
        self.log(f"run {self.run_id} {status}")
        return 0

    async def _start_services(self) -> Sandbox:
        """The scripted model server, the metering proxy and the sandbox, checked before any trial."""
        suite = self.suite
        if any(suite.provider(m).kind == "scripted" for m in suite.spec.models):
            from .modelserver import ScriptedServer

            self.mock = ScriptedServer(self.log)
            await self.mock.start()
        if suite.spec.suite.proxy:
            from ..proxy.server import MeteringProxy

            self.proxy = MeteringProxy(log=self.log)
            self.log(f"metering proxy on {await self.proxy.start()}")
        sandbox_cls = SANDBOXES.get(suite.spec.sandbox.kind)
        sandbox = sandbox_cls(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
        self._sandbox = sandbox
        await sandbox.preflight()
        for skipped in suite.skipped:  # one broken task of a dataset; the others run
            self.log(f"agentmeter: task skipped: {skipped}")
        for problem in getattr(sandbox, "problems", []):
            self.log(f"agentmeter: {problem} (its trials end infra-invalid with this reason)")
        return sandbox

    async def _stop_services(self, sandbox: Sandbox | None) -> None:
        sandbox = sandbox or getattr(self, "_sandbox", None)
        if sandbox is not None:
            try:
                await sandbox.close()
            except Exception as exc:
                self.log(f"sandbox cleanup failed: {exc!r}")
        if self.proxy:
            await self.proxy.close()
        if self.mock:
            await self.mock.stop()

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            running = {t.pid for t in self.scheduler.running.values() if t.pid}
            if self.mock and self.mock.pid:
                running.add(self.mock.pid)  # its exit code is the watch's to read
            reap_orphans(running)

    def _give_up(self, reason: str) -> None:
        self.log(f"agentmeter: the run stops: {reason}")
        self.stop()

    def stop(self) -> None:
        """Stop starting trials and stop the running ones; they become infra-invalid and
        run again when the suite is run again."""
        scheduler = self.scheduler
        if scheduler is None or scheduler.stopping:
            return
        scheduler.stopping = True
        scheduler.resume()
        scheduler.holds.clear()
        scheduler.unheld.set()
        for trial in list(scheduler.running.values()):
            trial.request_kill(KillReason("shutdown"))

    async def _serve(self) -> asyncio.AbstractServer:
        path = socket_path(self.db)
        path.unlink(missing_ok=True)
        old_umask = os.umask(0o177)  # owner-only from the moment the socket exists
        try:
            server = await asyncio.start_unix_server(self._client, str(path), limit=1 << 20)
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
        return server

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import orjson

        if not _same_user(writer):  # the socket is 0600 already; this holds if its mode is ever widened
            writer.write(encode({"ok": False, "error": "this runner answers the user who started it only"}))
            writer.close()
            return
        try:
            while line := await reader.readline():
                try:
                    request = orjson.loads(line)
                    op = request.get("op")
                except (orjson.JSONDecodeError, AttributeError):
                    writer.write(encode({"ok": False, "error": "requests are JSON objects, one per line"}))
                    continue
                if op == "subscribe":
                    await self.feed.subscribe(reader, writer, request)
                    return
                writer.write(encode(self.handle(op, request)))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def handle(self, op: str | None, request: dict[str, Any]) -> dict[str, Any]:
        scheduler = self.scheduler
        if op == "hello":
            return {"ok": True, "run_id": self.run_id, "suite": self.suite.id, "pid": os.getpid(),
                    "db": str(self.db)}
        if op == "status":
            return {"ok": True, **self.feed.snapshot()}
        if op == "kill":
            trial = scheduler.trial(int(request.get("trial", -1)))
            if trial is None:
                return {"ok": False, "error": f"trial {request.get('trial')} is not running"}
            trial.request_kill(KillReason(request.get("reason") or "operator", request.get("detail") or ""))
            return {"ok": True, "trial": trial.id}
        if op == "pause":
            scheduler.pause()
            return {"ok": True, "paused": True}
        if op == "resume":
            scheduler.resume()
            return {"ok": True, "paused": False}
        if op == "budget":
            limits = {k: request.get(k) for k in ("wall_seconds", "tokens", "usd")}
            if request.get("trial") is not None:
                trial = scheduler.trial(int(request["trial"]))
                if trial is None:
                    return {"ok": False, "error": f"trial {request['trial']} is not running"}
                trial.raise_budget(**limits)
                return {"ok": True, "trial": trial.id, "budget": trial.budget.model_dump()}
            scheduler.set_default_budget(**limits)
            for trial in scheduler.running.values():
                trial.raise_budget(**limits)
            return {"ok": True}
        if op == "hold":  # the TUI's budget dialog: hold this trial's budget kill while a raise is typed
            trial = scheduler.trial(request["trial"]) if isinstance(request.get("trial"), int) else None
            seconds = hold_seconds(request)
            if trial is None:
                return {"ok": False, "error": f"trial {request.get('trial')!r} is not running"}
            if isinstance(seconds, str):
                return {"ok": False, "error": seconds}
            trial.hold_budget(seconds)
            return {"ok": True, "trial": trial.id, "held": trial.hold.remaining()}
        if op == "stop":
            self.stop()
            return {"ok": True}
        return {"ok": False, "error": f"unknown op {op!r}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentmeter-runner")
    parser.add_argument("--suite", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--clis-root")
    args = parser.parse_args(argv)
    try:
        suite = load_suite(args.suite)
    except InputError as exc:
        print(f"agentmeter: {exc}", file=sys.stderr)
        return 2
    runner = Runner(suite, Path(args.db), clis_root=Path(args.clis_root) if args.clis_root else None)
    use_pidfd_watcher()
    return asyncio.run(runner.main())


def use_pidfd_watcher() -> None:
    """Python 3.11 waits for each child in a thread of its own; a pidfd in the event loop does
    the same without a thread per agent (3.12 and later do this by default)."""
    if sys.version_info < (3, 12) and hasattr(os, "pidfd_open"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            asyncio.set_child_watcher(asyncio.PidfdChildWatcher())


def _same_user(writer: asyncio.StreamWriter) -> bool:
    """Whether the peer of a control connection runs as this runner's user (or root)."""
    sock = writer.get_extra_info("socket")
    try:
        _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socketlib.SOL_SOCKET, socketlib.SO_PEERCRED,
                                                              struct.calcsize("3i")))
    except (AttributeError, OSError):  # no peer credentials on this platform: the file mode decides
        return True
    return uid in (os.getuid(), 0)


if __name__ == "__main__":
    sys.exit(main())
