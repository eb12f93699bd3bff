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
import json
import os
import signal
import socket as socketlib
import sys
import time
from pathlib import Path
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from .. import cgroups
from ..paths import default_clis_root, lock_path, owner_only, socket_path
from ..procs import BACKGROUND, SWEEPER, become_subreaper, reap_orphans
from ..sandboxes import SANDBOXES, Sandbox
from ..store import SeedHashChanged, Store, utcnow
from ..store.writer import StoreWriter
from ..suites.suite import Suite
from ..suites.load import load_suite
from ..tomlerrors import InputError
from ..vocab import COUNTABLE_STATUSES, KillReason
from .context import RunContext, run_redactor
from .caps import CapLedger
from .clients import MAX_REQUEST, ControlDoor
from .control import BudgetReply, HoldReply, KillReply, PauseReply, Refused, Reply
from .feed import Feed
from .forecast import RunForecast
from .liveops import handle_scoped, set_node
from .requests import (BudgetChange, Hello, Hold, Kill, NodeChange, Pause, Request, RequestError, Rerun, Resume,
                       Status, Stop, parse_request)
from .rerun import rerun_live, rerun_plans
from .scheduler import Scheduler, pending_plans, plan_cells, recover_previous

if TYPE_CHECKING:  # both imported when a suite asks for them
    from ..proxy.server import MeteringProxy
    from .scripted_server import ScriptedServer


class Runner:
    def __init__(self, suite: Suite, db: Path, *, clis_root: Path | None = None, rerun: Rerun | None = None):
        self.suite, self.db = suite, db
        self.redactor = run_redactor(suite)  # the log quotes errors, builds and answers: no key in it either
        self.rerun, self.config_ids = rerun, None  # cells to run again by hand; the suite's configuration ids
        self.clis_root = clis_root or default_clis_root()
        self.scheduler: Scheduler | None = None
        self.feed = Feed(self)
        self.door = ControlDoor(self.handle, self.feed.subscribe)
        self.run_id: int | None = None
        self.mock: ScriptedServer | None = None
        self.proxy: MeteringProxy | None = None  # the metering proxy (suite.proxy), serving on this event loop
        self.started = time.time()
        self._stop_asked = False  # a stop that came before the schedule existed
        self.early: dict[str, Any] = {}  # a pause and the run's budgets asked for before it
        self.caps = CapLedger(suite)  # changeable from the socket's first answer on
        self.forecast = RunForecast()  # the bill and finish time projected from this run's finished trials

    def _preparing(self, text: str) -> None:
        """What the sandbox is preparing (an image built step by step, pushed to a fleet's
        registry): told to the clients and kept in the log. Called from any thread."""
        self.log(f"preparing: {text}")
        self._loop.call_soon_threadsafe(self.feed.prepare, text)

    def log(self, text: str) -> None:
        try:
            print(f"[{utcnow()}] {self.redactor.text(text)[0]}", file=sys.stderr, flush=True)
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
        call = lambda fn, *a: asyncio.wrap_future(writer.call(fn, *a))
        try:
            await call(Store.register_suite, self.suite)
        except SeedHashChanged as exc:
            self.log(str(exc))
            return 4
        # Before the store says which trials were lost: their processes go with the groups of
        # every runner (or meter) that is gone, found by the kernel's groups, not by environment.
        groups, killed = await asyncio.to_thread(cgroups.clean_leftovers)
        if groups:
            self.log(f"ended {killed} process(es) in {groups} group(s) left by runners that are gone")
        lost = await call(recover_previous, self.suite.id)
        # caps bound the whole bill
        self.caps.preload(await call(lambda s, *a: s.runs.spend_by_model(*a), self.suite.id))
        self.forecast.load(await call(lambda s, *a: s.runs.finished_costs(*a), self.suite.id), self.suite)
        if lost:
            self.log(f"{lost} trial(s) left running by a previous runner marked infra-invalid")
        self.run_id = await call(lambda s, *a: s.runs.insert_run(*a), {
            "suite_id": self.suite.id, "seed_hash": self.suite.seed_hash, "status": "running", "pid": os.getpid(),
            "host": socketlib.gethostname(), "socket": str(socket_path(self.db)), "started_at": utcnow()})
        # The socket answers from here on, also while the run prepares (task images can take
        # minutes to build): a client is told what is being done instead of waiting on silence.
        server = await self._serve()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        loop.add_signal_handler(signal.SIGHUP, lambda: None)
        try:
            return await self._prepare_and_run(writer, call)
        finally:
            server.close()
            socket_path(self.db).unlink(missing_ok=True)

    async def _prepare_and_run(self, writer: StoreWriter, call) -> int:
        suite = self.suite
        self.feed.prepare("starting the run's services and sandbox")
        try:
            sandbox = await self._start_services()
        except Exception as exc:  # a missing image, an unknown host key, a port in use...
            self.log(f"agentmeter: cannot start the run: {exc}")
            await self._stop_services(None)
            await call(lambda s, *a: s.runs.delete_run(*a), self.run_id)  # it never started: no run kept
            await self.feed.finish("failed", error=f"cannot start the run: {exc}")
            return 6
        if self._stop_asked:  # `stop` (or a signal) while it prepared: nothing has started
            await self._stop_services(sandbox)
            await call(lambda s, *a: s.runs.update_run(*a), self.run_id,
                       {"status": "stopped", "finished_at": utcnow()})
            await self.feed.finish("stopped")
            self.log(f"run {self.run_id} stopped before its first trial")
            return 0
        ctx = RunContext(suite, writer, sandbox, run_id=self.run_id, clis_root=self.clis_root,
                         mock_url=self.mock.base_url if self.mock else None, log=self.log, proxy=self.proxy,
                         sink=self.feed, caps=self.caps)
        ctx.scripted = self.mock
        plans = await self._plans(call)
        concurrency = min(suite.concurrency, sandbox.capacity())
        self.feed.done_before = await call(lambda s, *a: s.runs.count_trials(*a), suite.id, COUNTABLE_STATUSES)
        self.scheduler = scheduler = Scheduler(ctx, plans, concurrency=concurrency,
                                               max_retries=suite.spec.suite.max_retries)
        if writer.full:  # the disk filled up before the schedule existed
            scheduler.hold("disk", writer.full)
        if self.early.pop("paused", False):  # what the operator asked while the run prepared
            scheduler.pause()
        scheduler.set_default_budget(**self.early)
        ticker = asyncio.create_task(self.feed.run())
        reaper = asyncio.create_task(self._reap(scheduler))
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
            cgroups.remove_owner_folder()
            await self._stop_services(sandbox)
            await call(lambda s, *a: s.runs.update_run(*a), self.run_id,
                       {"status": status, "finished_at": utcnow()})
            await self.feed.finish(status)
        self.log(f"run {self.run_id} {status}")
        return 0

    async def _plans(self, call) -> list:
        """The trials to run: the suite's configurations made in the store, its pending cells,
        then (``agentmeter rerun`` on a finished store) the cells asked for again."""
        suite = self.suite
        self.config_ids = config_ids = await call(lambda store: {
            c.key: store.ensure_configuration(suite.id, c.model.id, c.cli.label) for c in suite.configurations()})
        plans = await call(lambda store: pending_plans(store, suite.id, plan_cells(suite, config_ids),
                                                       suite.spec.suite.max_retries))
        if self.rerun is not None:
            busy = {(p.task.id, p.config_id, p.trial_index) for p in plans}
            plans += await call(lambda store: rerun_plans(store, suite, config_ids, self.rerun, busy))
        return plans

    async def _start_services(self) -> Sandbox:
        """The scripted model server, the metering proxy and the sandbox, checked before any trial."""
        suite = self.suite
        if any(suite.provider(m).kind == "scripted" for m in suite.spec.models):
            from .scripted_server import ScriptedServer

            self.mock = ScriptedServer(self.log)
            await self.mock.start()
        if suite.uses_proxy:
            from ..proxy.server import MeteringProxy

            self.proxy = MeteringProxy(log=self.log)
            self.log(f"metering proxy on {await self.proxy.start()}")
        sandbox_cls = SANDBOXES.get(suite.spec.sandbox.kind)
        sandbox = sandbox_cls(suite, suite.spec.sandbox.model_dump(exclude={"kind"}))
        sandbox.tool_roots.append(str(self.clis_root))
        self._sandbox = sandbox
        sandbox.on_progress = self._preparing
        await sandbox.preflight()
        if removed := getattr(sandbox, "removed", None):
            self.log(f"removed {len(removed)} trial folder(s) of runners that are gone")
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

    async def _reap(self, scheduler: Scheduler) -> None:
        while True:
            await asyncio.sleep(1.0)
            running = {t.pid for t in scheduler.running.values() if t.pid}
            if self.mock and self.mock.pid:
                running.add(self.mock.pid)  # its exit code is the watch's to read
            reap_orphans(running)

    def _give_up(self, reason: str) -> None:
        self.log(f"agentmeter: the run stops: {reason}")
        self.stop()

    def stop(self) -> None:
        """Stop starting trials and stop the running ones; they become infra-invalid and
        run again when the suite is run again."""
        self._stop_asked = True
        scheduler = self.scheduler
        if scheduler is None or scheduler.stopping:
            return
        scheduler.stopping = True
        scheduler.resume()
        scheduler.holds.clear()
        scheduler.unheld.set()
        scheduler.wake()
        for trial in list(scheduler.running.values()):
            trial.request_kill(KillReason("shutdown"))

    async def _serve(self) -> asyncio.AbstractServer:
        path = socket_path(self.db)
        path.unlink(missing_ok=True)
        old_umask = os.umask(0o177)  # owner-only from the moment the socket exists
        try:
            server = await asyncio.start_unix_server(self.door.serve, str(path), limit=MAX_REQUEST)
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
        return server


    def handle(self, op: str | None, request: dict[str, Any]) -> Reply | Awaitable[Reply]:
        """One request's reply. The request is checked whole first (``requests``): a bad one
        is refused with a message and changes nothing."""
        try:
            parsed = parse_request(request)
        except RequestError as exc:
            return {"ok": False, "error": str(exc)}
        scheduler = self.scheduler
        scoped = handle_scoped(parsed, self.suite, self.caps, scheduler)  # caps; one model, CLI or cell
        if scoped is not None:
            return scoped
        if isinstance(parsed, Hello):
            return {"ok": True, "run_id": self.run_id, "suite": self.suite.id, "pid": os.getpid(),
                    "db": str(self.db), "preparing": None if scheduler else self.feed.preparing}
        if isinstance(parsed, Status):
            return {"ok": True, **self.feed.snapshot()}
        if isinstance(parsed, Stop):
            self.stop()
            return {"ok": True}
        if isinstance(parsed, NodeChange):
            return set_node(getattr(self, "_sandbox", None), parsed)  # answered once the sandbox made it
        if scheduler is None:  # still preparing: a pause and the run's budgets apply when it starts
            return self._early_request(parsed)
        if isinstance(parsed, Rerun):
            return rerun_live(self, parsed)
        if isinstance(parsed, Pause):
            scheduler.pause()
            return {"ok": True, "paused": True}
        if isinstance(parsed, Resume):
            scheduler.resume()
            return {"ok": True, "paused": False}
        if isinstance(parsed, BudgetChange) and parsed.trial is None:
            limits = parsed.limits()
            scheduler.set_default_budget(**limits)
            for trial in scheduler.running.values():
                trial.raise_budget(**limits)
            return {"ok": True, "budget": limits}
        if isinstance(parsed, (Kill, BudgetChange, Hold)):
            return _trial_request(scheduler, parsed)
        return {"ok": False, "error": f"{op} is not answered here"}  # subscribe turns a connection into a feed

    def _early_request(self, parsed: Request) -> Refused | PauseReply | BudgetReply:
        """A request before the schedule exists: a pause and the run's budgets are kept for it."""
        if isinstance(parsed, (Pause, Resume)):
            self.early["paused"] = isinstance(parsed, Pause)
            return {"ok": True, "paused": self.early["paused"]}
        if isinstance(parsed, BudgetChange) and parsed.trial is None:
            self.early.update(parsed.limits())
            return {"ok": True, "budget": parsed.limits()}
        return {"ok": False, "error": "no trial has started yet: the run is preparing"}


def _trial_request(scheduler: Scheduler, parsed: Kill | BudgetChange | Hold
                   ) -> Refused | KillReply | BudgetReply | HoldReply:
    """A request about one running trial: kill it, raise its budget, hold its budget kill."""
    trial = scheduler.trial(parsed.trial) if parsed.trial is not None else None  # None: run-wide, answered before
    if trial is None:
        return {"ok": False, "error": f"trial {parsed.trial} is not running"}
    if isinstance(parsed, Kill):
        trial.request_kill(KillReason(parsed.reason or "operator", parsed.detail or ""))
        return {"ok": True, "trial": trial.id}
    if isinstance(parsed, BudgetChange):
        trial.raise_budget(**parsed.limits())
        return {"ok": True, "trial": trial.id, "budget": trial.budget.model_dump()}
    # the TUI's budget dialog: hold this trial's budget kill while a raise is typed
    trial.hold_budget(parsed.seconds)
    return {"ok": True, "trial": trial.id, "held": trial.hold.remaining()}

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentmeter-runner")
    parser.add_argument("--suite", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--clis-root")
    parser.add_argument("--rerun", help="a rerun request (JSON, as the socket's op) for a finished store")
    args = parser.parse_args(argv)
    try:
        suite = load_suite(args.suite)
        rerun = parse_request(json.loads(args.rerun)) if args.rerun else None
    except (InputError, RequestError, ValueError) as exc:
        print(f"agentmeter: {exc}", file=sys.stderr)
        return 2
    runner = Runner(suite, Path(args.db), clis_root=Path(args.clis_root) if args.clis_root else None,
                    rerun=rerun if isinstance(rerun, Rerun) else None)
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


if __name__ == "__main__":
    sys.exit(main())
