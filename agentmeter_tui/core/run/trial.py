"""One trial, from a fresh sandbox to its final row: launch, meter, budget, kill, verify.

:class:`TrialRun` is driven by the scheduler. Output lines arrive in batches from the
sandbox; each is parsed by the adapter into events. Every event of the trial (the CLI's, the
metering proxy's, the runner's own notes) leaves through :meth:`TrialRun.emit`, which stamps
and numbers it once and hands the same rows to the store writer and to the run's sink (the
live feed). Usage deltas update the meter and the cost, and the budgets are checked. Whatever
ends the trial (the agent, a budget, the operator, the thrash detector, a crash on our side),
the final row is committed before the trial counts as done, with every token seen so far.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import orjson

from ..harnesses import AgentOutcome, TaskUnfit, get_adapter
from ..regrade.keep import keep_for_regrade
from ..rows import EventRow, UsageRow
from ..sandboxes.base import KillPolicy, LaunchSpec, SandboxSession
from ..scanners.scan import queue_scan
from ..store import utcnow
from ..usage import TokenUsage
from ..verifiers import VERIFIERS
from ..vocab import EventKind, KillReason, ParsedEvent, TrialStatus
from . import record
from .budget_hold import BudgetHold, BudgetWatch
from .control import Meter
from .lifecycle import IllegalTransition, TrialLifecycle, TrialOutcome
from .provider_errors import ProviderErrors
from .trialview import TrialPlan

if TYPE_CHECKING:
    from ..proxy.calls import ProxyCall, Route
    from ..suites.budget import Budget
    from .context import RunContext

class TrialRun:
    def __init__(self, ctx: RunContext, plan: TrialPlan):
        self.ctx, self.plan = ctx, plan
        self.adapter = get_adapter(plan.config.cli.adapter)
        self.parser = self.adapter.new_parser()
        self.token = secrets.token_hex(8)
        self.retryable = True  # False: what ended it ends any attempt the same way (a task image that fails to build)
        self.id: int | None = None
        self.lifecycle = TrialLifecycle()  # its status, end reason and the kill asked of it
        self.budget: Budget = ctx.suite.budget_for(plan.task)
        self.usage = TokenUsage()
        self.cost: Decimal | None = Decimal(0)
        self.turns = 0
        self.tool_calls = 0
        self.flags: set[str] = set()
        self.seq = 0
        self.redactions = 0  # secrets replaced in what this trial stored (core/redact.py)
        self.started_at: str | None = None
        self.finished_at: str | None = None
        self.node: str | None = None  # where a fleet placed it
        self._tool_counts: Counter[str] = Counter()
        self.session: SandboxSession | None = None
        self.scripted_key: str | None = None
        self.scripted_url: str | None = None  # the scripted model server it talks to
        self.proxy_route: Route | None = None  # set when the trial's model calls go through the metering proxy
        self.provider_errors = ProviderErrors()  # 429/529/5xx/mid-stream errors seen at the wire
        self.pid: int | None = None
        self._reserved: dict[int, list] = {}  # proxy call number -> the capped scopes it counts in
        self._session_usage = False  # usage came from the session files while the CLI ran
        self.watch = BudgetWatch(self)  # its budgets, the time budget's timer, the operator's hold

    @property
    def status(self) -> TrialStatus:
        return self.lifecycle.status

    @property
    def reason(self) -> str | None:
        return self.lifecycle.reason

    @property
    def kill_reason(self) -> KillReason | None:
        return self.lifecycle.kill_reason

    @property
    def started(self) -> float:
        """time.monotonic() when it was made."""
        return self.lifecycle.made

    @property
    def hold(self) -> BudgetHold:
        return self.watch.hold

    # -- control -----------------------------------------------------------------------------

    def request_kill(self, reason: KillReason) -> None:
        if not self.hold.defer(reason):  # a budget kill waits while the operator types a raise
            self.lifecycle.ask_kill(reason)

    def hold_budget(self, seconds: float) -> None:
        """Hold the budget kill ``seconds`` (0: release it now)."""
        self.watch.hold_for(seconds)

    def raise_budget(self, **limits: float | None) -> None:
        from ..suites.budget import Budget

        self.budget = self.budget.merged(Budget.model_validate({k: v for k, v in limits.items() if v is not None}))
        self.hold.end()  # the raise the hold waited for; budgets are checked against it now

    def meter(self) -> Meter:
        return record.meter(self)

    def cap_reached(self) -> KillReason | None:
        return self.ctx.caps.reached(self.plan.config.model)  # the run's, provider's or model's cap

    def hold_changed(self) -> None:
        self.ctx.sink.trial_changed(self)  # the pane shows the hold

    # -- output handling (event loop, hot path) ------------------------------------------------

    def emit(self, stream: str, events: list[tuple[ParsedEvent, bytes | None]],
             usage: Sequence[UsageRow] = ()) -> list[EventRow]:
        """Every event of the trial goes out here: one time stamp for the batch, the next seq
        numbers, and the same rows (:data:`~..rows.EventRow`) to the store writer and to the
        sink. ``data`` is the raw line an event came from, if any;
        ``usage``, the usage rows of the calls among the events, stored with them."""
        ts = time.time()
        trial_id, seq = self.id, self.seq
        rows: list[EventRow] = [(trial_id, (seq := seq + 1), ts, event.kind, stream, event.text, data)
                                for event, data in events]
        self.seq = seq
        rows, redacted = self.ctx.redactor.rows(rows)  # before the store and the live feed: no key leaves
        self.redactions += redacted
        self.ctx.writer.add_events(rows, usage)
        self.ctx.sink.trial_events(self, rows)
        return rows

    def on_output(self, stream: str, lines: list[bytes]) -> asyncio.Future | None:
        """Parse, store and meter a batch of output lines. Returns None, or (when the store
        writer is behind) a future the sandbox waits for before it reads more output."""
        feed = self.parser.feed
        events: list[tuple[ParsedEvent, bytes | None]] = []
        metered: list[int] = []  # indexes of events that carry usage or a tool call
        for line in lines:
            data: bytes | None = line
            for event in feed(stream, line):
                if event.usage is not None or event.tool_key is not None:
                    metered.append(len(events))
                events.append((event, data))
                data = None  # the raw line is stored once, with the first event it produced
        first = self.seq + 1  # the seq emit gives the first event
        usage = [row for index in metered if (row := self._meter(events[index][0], first + index))]
        self.emit(stream, events, usage)
        for index in metered:  # after the batch: a thrash notes it in the transcript
            self._count_tool(events[index][0])
        self.watch.check()
        return self.ctx.writer.room()

    def _meter(self, event: ParsedEvent, seq: int) -> UsageRow | None:
        """Count the event's call; its usage row (``seq``: the event's), if it carries usage."""
        if event.usage is None:
            return None
        self.turns += event.turns
        cost = self.ctx.price(self.plan.config.model, event.usage)
        if self.proxy_route is None:  # behind the proxy it meters; the CLI's figures are kept beside
            self._add_usage(event.usage, cost)
        return UsageRow.of(self.id, seq, "stdout", event.model, event.usage, _float(cost),
                           _float(event.reported_cost_usd), event.usage.cache_write_1h)

    def _count_tool(self, event: ParsedEvent) -> None:
        if event.tool_key is not None:
            self.tool_calls += 1
            self._tool_counts[event.tool_key] += 1
            if self._tool_counts[event.tool_key] >= self.ctx.suite.spec.suite.thrash_repeats and \
                    "thrash" not in self.flags:
                self.flags.add("thrash")
                self.note(f"thrashing: the same tool call repeated {self._tool_counts[event.tool_key]} times")
                if self.ctx.suite.spec.suite.kill_on_thrash:
                    self.request_kill(KillReason("thrash", event.tool_key[:200]))

    def _add_usage(self, usage: TokenUsage, cost: Decimal | None) -> None:
        self.usage = self.usage + usage
        if cost is None:
            self.flags.add("unpriced")
            self.cost = None
        elif self.cost is not None:
            self.cost += cost
        self.ctx.caps.add(self.plan.config.model, usage, cost)

    # -- the metering proxy's calls (on the event loop; see proxy.calls.CallSink) ---------------

    def admit_call(self) -> str | None:
        if self.kill_reason is not None:
            return f"the trial is being stopped: {self.kill_reason}"
        reason = None if self.hold.active else self.watch.over()  # held: the raise is being typed
        if reason is not None:  # e.g. a cap that another trial's call reached: this trial ends too
            self.request_kill(reason)
        return None if reason is None else f"the trial is over its budget: {reason}"

    async def reserve_call(self, call: ProxyCall) -> None:
        """Wait until the caps over this trial's model let one more call be in flight."""
        self._reserved[call.number] = await self.ctx.caps.reserve(self.plan.config.model)

    def on_proxy_usage(self, call: ProxyCall, delta: TokenUsage) -> None:
        self._add_usage(delta, self.ctx.price(self.plan.config.model, delta))
        self.watch.check()
        self.ctx.sink.trial_changed(self)

    def on_proxy_wait(self, call: ProxyCall, seconds: float) -> None:
        self.note(f"waiting {seconds:.1f} s for the provider's rate limit (calls per minute)")
        self._rate_limited(True)

    def _rate_limited(self, waiting: bool) -> None:
        """The live pane's `rate-limited` flag: set while the trial waits on a provider's limit
        (the suite's cap, or a 429 the CLI is sitting out), cleared by its next good call."""
        if waiting != ("rate-limited" in self.flags):
            (self.flags.add if waiting else self.flags.discard)("rate-limited")
            self.ctx.sink.trial_changed(self)

    def on_proxy_call(self, call: ProxyCall) -> None:
        if (scopes := self._reserved.pop(call.number, None)) is not None:
            self.ctx.caps.settle(scopes, call.usage, self.ctx.price(self.plan.config.model, call.usage))
        if call.outcome != "refused" and self.provider_errors.record(call.error) and call.error:
            wait = call.error.get("retry_after")
            self.note(f"provider error {call.error.get('status')} {call.error.get('type')}"
                      + (f": rate-limited, retry after {wait:g} s" if wait is not None else ""), EventKind.ERROR)
        self._rate_limited(call.status == 429)
        kind = EventKind.USAGE if call.usage else EventKind.ERROR if call.outcome != "completed" or \
            call.status >= 400 else EventKind.SYSTEM
        usage: list[UsageRow] = []
        if call.usage:
            cost = self.ctx.price(self.plan.config.model, call.usage)
            usage.append(UsageRow.of(self.id, self.seq + 1, "proxy", call.model, call.usage, _float(cost), None,
                                     call.usage.cache_write_1h))
        self.emit("proxy", [(ParsedEvent(kind, call.summary()), orjson.dumps(call.as_dict()))], usage)

    def note(self, text: str, kind: EventKind = EventKind.STATUS) -> None:
        """A runner-side event in the transcript (state changes, kills, flags)."""
        self.emit("runner", [(ParsedEvent(kind, text), None)])

    # -- lifecycle ---------------------------------------------------------------------------

    async def execute(self) -> TrialStatus:
        ctx = self.ctx
        self.started_at = utcnow()
        self.id = await ctx.call(lambda s, row: s.runs.insert_trial(row), self._row(
            status=TrialStatus.STARTING, started_at=self.started_at, queued_at=self.started_at))
        self.lifecycle.move(TrialStatus.STARTING)  # the row was made with it: only the sink is told
        ctx.sink.trial_changed(self)
        try:
            outcome = await self._run()
        except Exception as exc:  # our side failed: never lose the trial, record why
            ctx.log(f"trial {self.id} infra error: {exc!r}\n{traceback.format_exc()}")
            self.retryable = not getattr(exc, "final", False)
            outcome = TrialOutcome(TrialStatus.INFRA_INVALID, f"infra: {ctx.scripted_lost(self) or exc}")
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # this trial's own task was cancelled
            # Something the trial awaited was cancelled under it (a pool shut down by another
            # trial's cleanup): our side failed. Uncaught, the trial's row stayed "running" forever
            # while its cell counted as done.
            ctx.log(f"trial {self.id} infra error: a call was cancelled under it\n{traceback.format_exc()}")
            outcome = TrialOutcome(TrialStatus.INFRA_INVALID, "infra: a call of the runner's was cancelled under it")
        await self._finish(outcome)
        return outcome.status

    async def _run(self) -> TrialOutcome:
        plan, ctx = self.plan, self.ctx
        if not self.adapter.is_installed(ctx.clis_root):
            self.retryable = False  # a retry finds it missing too
            return TrialOutcome(TrialStatus.INFRA_INVALID, f"infra: {self.adapter.name} is not installed; "
                                f"run: {self.adapter.install.hint}")
        try:
            solution = self.adapter.solution_files(plan.task.path)
        except TaskUnfit as exc:  # the task, not the agent or our side: a failed trial, the run goes on
            return TrialOutcome(TrialStatus.FAILED, str(exc))
        assert self.id is not None  # execute made the row first
        self.session = session = await ctx.sandbox.open(plan.task, self.id, self.token)
        session.notes_to(self.note)
        agent = await self._start_agent(session, solution)
        exit_code, killed = await self._agent_ended(session, agent)
        await self._recover_usage(session, killed)
        outcome: AgentOutcome = self.parser.outcome(exit_code, killed)
        self._exit_code = exit_code
        if killed:  # infra-invalid when our side failed under it or the run was stopped
            return self.lifecycle.killed()
        if (lost := ctx.scripted_lost(self)) is not None:  # the agent ended on our server's death
            return TrialOutcome(TrialStatus.INFRA_INVALID, f"infra: {lost}")
        if self.provider_errors.gave_up:  # the agent's run ended on the provider's error, not its own
            return TrialOutcome(TrialStatus.INFRA_INVALID, f"infra: provider errors: {self.provider_errors.summary()}")
        if outcome.errored:
            return TrialOutcome(TrialStatus.ERRORED, outcome.error)
        return await self._verified(session)

    async def _start_agent(self, session: SandboxSession, solution):
        """The agent's files in place and its command started in the sandbox: the trial runs."""
        solution_dir = await session.write_solution(solution) if solution else ""
        launch = await self.ctx.launch_context(self, session, solution_dir)
        if home_files := self.adapter.home_files(launch):  # none: no hop to a thread for nothing
            await session.write_files("home", home_files)
        spec = LaunchSpec(self.adapter.command(launch), {**self.adapter.environment(launch),
                                                         **self.plan.config.cli.env})
        agent = await session.start(spec, self.on_output)
        self.pid, self.node = agent.pid, session.slot.node
        self._set_status(TrialStatus.RUNNING, pid=agent.pid, sandbox=session.slot.sandbox, host=session.slot.host,
                         node=self.node, workspace=session.workspace)
        return agent

    async def _agent_ended(self, session: SandboxSession, agent) -> tuple[int, bool]:
        """Until the agent exits, or a kill (asked, a budget, a disk limit) ends it: its exit code
        and whether it was killed."""
        wait_task = asyncio.ensure_future(agent.wait())
        kill_task = asyncio.ensure_future(self.lifecycle.kill_asked())
        self.watch.start_clock()
        poll = self.adapter.live_session_poll if self.proxy_route is None else None  # the proxy sees every call
        watcher = asyncio.ensure_future(self._watch_sessions(session, poll)) \
            if poll and self.adapter.session_globs else None
        breach = session.breach
        await asyncio.wait({wait_task, kill_task} | ({breach} if breach is not None else set()),
                           return_when=asyncio.FIRST_COMPLETED)
        if breach is not None and breach.done() and not wait_task.done():
            self.request_kill(KillReason("limit:disk", breach.result()))
        self.watch.stop_clock()  # the agent ended: no time budget left to enforce
        if watcher:
            watcher.cancel()
        killed = self.kill_reason is not None
        if killed:
            self.note(f"killing: {self.kill_reason}")
            await session.kill(KillPolicy(grace=self.ctx.suite.spec.suite.kill_grace))
        try:
            return await wait_task, killed
        finally:
            kill_task.cancel()

    async def _verified(self, session: SandboxSession) -> TrialOutcome:
        """The task's verifier on what the agent left: the trial's outcome."""
        plan = self.plan
        self._set_status(TrialStatus.VERIFYING)
        verifier = VERIFIERS.get(plan.task.verifier.kind)(plan.task,
                                                          pass_threshold=self.ctx.suite.spec.suite.pass_threshold)
        if plan.task.contract.reads_transcript:  # Harbor's LLM-judge verifiers
            from ..harbor.verifier import trajectory_of

            verifier.trajectory = await trajectory_of(self)
        verdict = await self._verify_unless_killed(verifier.verify(session), session)
        if verdict is None:  # the operator (or the runner's shutdown) stopped it while the verifier ran
            return self.lifecycle.killed()
        if verdict.infra_error:
            return TrialOutcome(TrialStatus.INFRA_INVALID, f"infra: {verdict.infra_error}", verdict)
        if verdict.passed:
            return TrialOutcome(TrialStatus.PASSED, None, verdict)
        return TrialOutcome(TrialStatus.FAILED, verdict.reason, verdict)

    async def _verify_unless_killed(self, verifying, session: SandboxSession):
        """The verifier's verdict, or None when a kill arrives while it runs: then it is stopped
        like the agent (the signal ladder on every process of the trial) and gives no verdict;
        a kill the runner acknowledged must never end in a pass."""
        verify = asyncio.ensure_future(verifying)
        kill = asyncio.ensure_future(self.lifecycle.kill_asked())
        try:
            await asyncio.wait({verify, kill}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            kill.cancel()
        if verify.done():
            return verify.result()
        self.note(f"killing: {self.kill_reason}")
        await session.kill(KillPolicy(grace=self.ctx.suite.spec.suite.kill_grace))
        with contextlib.suppress(Exception):  # its processes are gone: what it returns is no verdict
            await verify
        return None

    async def _recover_usage(self, session: SandboxSession, killed: bool) -> None:
        """After a kill, or when the stream had no final record or no usage (or, for CLIs whose
        stdout never tells the number of calls, always), read the CLI's session files."""
        if not self.adapter.session_globs:
            return
        if self.parser.final_seen and not killed and self.parser.usage and not self.adapter.live_session_poll:
            return
        if await self._read_sessions(session) or (self._session_usage and not self.parser.final_seen):
            self.flags.add("usage-recovered")

    async def _watch_sessions(self, session: SandboxSession, interval: float) -> None:
        """While the CLI runs, read its session files every ``interval`` seconds: for CLIs whose
        stdout carries no per-call usage, the meter and the token budget see every call."""
        while True:
            await asyncio.sleep(interval)
            if await self._read_sessions(session):
                self._session_usage = True
                self.watch.check()

    async def _read_sessions(self, session: SandboxSession) -> bool:
        """Take the usage in the CLI's session files where it shows more than the stream did."""
        try:
            files = await session.fetch_files("home", self.adapter.session_globs)
            # off the loop: a long session is megabytes of JSON, read twice a second while it runs
            recovery = await asyncio.to_thread(self.adapter.recover, files) if files else None
        except Exception as exc:
            self.note(f"usage recovery failed: {exc!r}", EventKind.ERROR)
            return False
        event = self.parser.absorb(recovery) if recovery is not None else None
        if event is None:
            return False
        row = self._meter(event, self.seq + 1)
        self.emit("runner", [(ParsedEvent(EventKind.USAGE, event.text), None)], [row] if row else [])
        self._count_tool(event)
        return bool(event.usage)

    def _set_status(self, status: TrialStatus, **fields: Any) -> None:
        self.lifecycle.move(status)
        assert self.id is not None  # execute made the row before any status change
        self.ctx.writer.update_trial(self.id, {"status": status.value, **fields})
        self.ctx.sink.trial_changed(self)

    async def _finish(self, outcome: TrialOutcome) -> None:
        ctx = self.ctx
        assert self.id is not None  # execute made the row first
        status, reason = outcome.status, outcome.reason
        self.watch.stop_clock()  # stopped when the agent ended, unless our side failed before
        try:
            self.lifecycle.end(outcome)
        except IllegalTransition as exc:  # a bug on our side must not cost the trial its final row
            ctx.log(f"trial {self.id}: {exc}")
            self.lifecycle.force_end(outcome)
        self.finished_at = utcnow()
        try:
            fields = await self._final_fields(outcome)
        except Exception as exc:  # whatever failed, the trial must still end with its tokens
            ctx.log(f"trial {self.id}: final details failed: {exc!r}\n{traceback.format_exc()}")
            fields = {"status": status.value, "reason": reason, "error": f"final details failed: {exc!r}"}
        self.redactions += ctx.redactor.fields(fields, ("reason", "verifier_output", "extra", "error"))
        fields = record.with_redactions(fields, self.redactions)
        if reason:
            self.note(f"{status.value}: {reason}")
        row = self._row(finished_at=self.finished_at, exit_code=getattr(self, "_exit_code", None), **fields)
        # committed before anyone sees the trial as done
        await ctx.call(lambda s, *a: s.runs.update_trial(*a), self.id, row)
        ctx.sink.trial_changed(self)
        queue_scan(ctx, self.id)  # its triage flags, off the loop (scanners/scan.py)
        if self.session is not None:
            await keep_for_regrade(self, self.session)  # its final workspace (regrade/keep.py)
            try:
                await self.session.cleanup(keep=ctx.suite.spec.suite.keep_workspaces)
            except Exception as exc:
                ctx.log(f"trial {self.id} cleanup failed: {exc!r}")

    async def _final_fields(self, outcome: TrialOutcome) -> dict[str, Any]:
        await self.ctx.release_proxy(self)  # its last calls recorded before the meter is final
        return record.final_fields(self, outcome, await self.ctx.scripted_served(self))

    def cost_fields(self) -> dict[str, Any]:
        return record.cost_fields(self)

    def _row(self, **fields: Any) -> dict[str, Any]:
        return record.trial_row(self, **fields)


def _float(value: Decimal | None) -> float | None:
    return None if value is None else float(value)
