"""Health checks behind ``agentmeter doctor``: are the agent CLIs a suite uses installed at
their pinned versions, does each one run a one-turn scenario against the scripted model
server and come out parsed (the tokens it reports equal what was served), is the store
readable; and ``--clean``, removing what crashed runners left in each kind of sandbox. The suite's
sandbox hosts are checked by :mod:`.sandboxes.hostcheck`.

A CLI smoke run happens in a local sandbox session (fresh HOME and workspace, the adapter's
own command, environment and HOME files), whatever sandbox the suite uses: it checks the CLI
and its adapter, while the host checks look at the suite's engines and hosts.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import sys
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from . import cgroups
from .harnesses import ADAPTERS, HarnessAdapter, LaunchContext, get_adapter
from .sandboxes.base import KillPolicy, LaunchSpec
from .sandboxes.hostcheck import HostCheck
from .sandboxes.local import LocalSession
from .sandboxes.rootpool import FOLDERS
from .usage import TokenUsage
from .wire import fold

if TYPE_CHECKING:
    from .scripted.client import ServerProcess
    from .suites.suite import Suite

ONE_TURN = """description = "agentmeter doctor: one text answer, no tool call"
[[turns]]
text = "Hello from the scripted model."
usage = { uncached_input = 500, cached_input = 200, output = 12 }
"""
INSTRUCTION = "Say hello."
DEFAULT_MODEL = "agentmeter-doctor"
VERSION = re.compile(r"\d+\.\d+\.\d+")


@dataclass
class CliCheck:
    """One CLI's row in the doctor's table; ``ok`` is None for a check that was skipped."""

    name: str
    pinned: str
    installed: bool = False
    version: str | None = None
    ok: bool | None = None
    detail: str = ""
    fix: str = ""


@dataclass
class CliPlan:
    """What to check for one CLI: the model name it gets, and the suite's args and env for it."""

    adapter: HarnessAdapter
    model_name: str = DEFAULT_MODEL
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


def plans_for(suite: Suite | None) -> list[CliPlan]:
    """The suite's CLIs (with the model name the suite gives each), or every registered one."""
    if suite is None:
        adapters = [get_adapter(name) for name in ADAPTERS.names()]
        return [CliPlan(adapter, adapter.probe_model or DEFAULT_MODEL) for adapter in adapters if adapter.checked_alone]
    plans = []
    for cli in suite.spec.clis:
        name = cli.adapter
        named = [m.cli_names[name] for m in suite.spec.models if name in m.cli_names]
        adapter = get_adapter(name)
        plans.append(CliPlan(adapter, named[0] if named else adapter.probe_model or DEFAULT_MODEL,
                             tuple(cli.args), tuple(cli.env.items())))
    return plans


async def check_clis(plans: list[CliPlan], clis_root: Path, server: ServerProcess, *, timeout: float = 180,
                     parallel: int = 2, work_root: Path | None = None) -> list[CliCheck]:
    """Install, version and smoke checks for each plan, ``parallel`` smoke runs at a time."""
    gate = asyncio.Semaphore(parallel)
    work_root = work_root or Path(tempfile.gettempdir())

    async def one(plan: CliPlan) -> CliCheck:
        async with gate:
            return await check_cli(plan, clis_root, server, timeout=timeout, work_root=work_root)

    checks = list(await asyncio.gather(*(one(plan) for plan in plans)))
    cgroups.remove_owner_folder()
    return checks


async def check_cli(plan: CliPlan, clis_root: Path, server: ServerProcess, *, timeout: float,
                    work_root: Path) -> CliCheck:
    adapter = plan.adapter
    check = CliCheck(adapter.name, adapter.version)
    if not adapter.is_installed(clis_root):
        check.ok, check.detail = False, f"not installed in {clis_root}"
        check.fix = f"run: {adapter.install.hint}"
        return check
    check.installed = True
    root = Path(tempfile.mkdtemp(prefix=f"doctor-{adapter.name}-", dir=work_root))
    for name in FOLDERS:
        (root / name).mkdir()
    token = secrets.token_hex(8)
    session = LocalSession(root, token, cgroups.new_group(token))
    try:
        ctx = await _launch_context(plan, session, clis_root, server, root)
        check.version = await _version(adapter, session, ctx)
        if adapter.install.registry != "bundled" and check.version != adapter.version:
            check.ok = False
            check.detail = f"version {check.version or 'unknown'} installed, {adapter.version} pinned"
            check.fix = f"run: {adapter.install.hint}"
            return check
        check.ok, check.detail = await _smoke(plan, session, ctx, server, timeout)
        if not check.ok:
            check.fix = "see the detail; `agentmeter run` would mark its trials errored or infra-invalid"
    except Exception as exc:  # noqa: BLE001 - a broken adapter or CLI is a finding, not a crash
        check.ok, check.detail = False, f"{type(exc).__name__}: {exc}"
        check.fix = "check its [[clis]] entry in the suite" if adapter.install.registry == "bundled" \
            else f"reinstall it: {adapter.install.hint}"
    finally:
        await session.cleanup()
        if session.group is not None:  # no runner's sweeper here: the group goes now
            await asyncio.to_thread(session.group.remove)
    return check


async def _launch_context(plan: CliPlan, session: LocalSession, clis_root: Path, server: ServerProcess,
                          root: Path) -> LaunchContext:
    from .scripted.client import register_session

    scenario = root / "scratch" / "one-turn.toml"
    scenario.write_text(ONE_TURN, encoding="utf-8")
    api_key = "doctor-" + secrets.token_urlsafe(24)  # not its token: that one is in the CLI's environment
    await asyncio.to_thread(partial(register_session, control=server.control_key), server.base_url, api_key,
                            str(scenario), f"doctor-{plan.adapter.name}")
    ctx = LaunchContext(model_name=plan.model_name, instruction=INSTRUCTION, workspace=session.workspace,
                        home=session.home, base_url=server.base_url, api_key=api_key, clis_root=str(clis_root),
                        python=sys.executable, extra_args=list(plan.args),
                        price={"input": "3", "cached_input": "0.3", "cache_write": "3.75", "output": "15"})
    await session.write_files("home", plan.adapter.home_files(ctx))
    return ctx


async def _version(adapter: HarnessAdapter, session: LocalSession, ctx: LaunchContext) -> str | None:
    if adapter.install.registry == "bundled":
        return adapter.version
    result = await session.exec([adapter.executable(ctx.clis_root), "--version"],
                                env=adapter.environment(ctx), timeout=60)
    found = VERSION.search((result.stdout + result.stderr).decode("utf-8", "replace"))
    return found.group(0) if found else None


async def _smoke(plan: CliPlan, session: LocalSession, ctx: LaunchContext, server: ServerProcess,
                 timeout: float) -> tuple[bool, str]:
    """Run the one-turn scenario; pass when the adapter sees no error and the tokens it
    parsed equal what the server served (side calls the CLI never reports left out)."""
    from .scripted.client import forget_session, session_info

    adapter = plan.adapter
    parser = adapter.new_parser()
    tail: list[str] = []

    def on_output(stream: str, lines: list[bytes]) -> None:
        for line in lines:
            parser.feed(stream, line)
            tail.append(line.decode("utf-8", "replace").strip()[:200])
        del tail[:-5]

    spec = LaunchSpec(adapter.command(ctx), {**adapter.environment(ctx), **dict(plan.env)})
    agent = await session.start(spec, on_output)
    try:
        code: int | None = await asyncio.wait_for(asyncio.shield(agent.wait()), timeout)
        timed_out = False
    except TimeoutError:
        await session.kill(KillPolicy(grace=2.0))
        code, timed_out = await agent.wait(), True
    if adapter.session_globs:
        recovery = adapter.recover(await session.fetch_files("home", adapter.session_globs))
        if recovery is not None:
            parser.absorb(recovery)
    info = await asyncio.to_thread(partial(session_info, control=server.control_key), server.base_url, ctx.api_key)
    await asyncio.to_thread(partial(forget_session, control=server.control_key), server.base_url, ctx.api_key)
    if timed_out:
        return False, f"no end within {timeout:g} s; last output: {' | '.join(tail) or '(none)'}"
    outcome = parser.outcome(code, False)
    if outcome.errored:
        return False, f"the run failed (exit {code}): {outcome.error}"
    if not adapter.needs_model:  # nop and the like: calling no model is what they are for
        return True, f"calls no model by design; it started and ended (exit {code})"
    served = sum((TokenUsage.from_dict(call["usage"]) for call in info["served"]
                  if call.get("completed") and call.get("answer") != "side call"), TokenUsage())
    if not info["served"]:
        return False, f"it never called the model (exit {code}); last output: {' | '.join(tail) or '(none)'}"
    merged = adapter.merged_classes
    if fold(parser.usage, merged) != fold(served, merged):
        return False, f"parsed {_tokens(parser.usage)} but {_tokens(served)} was served"
    calls = sum(1 for call in info["served"] if call.get("answer") != "side call")
    return True, f"{calls} model call(s), {parser.usage.raw} tokens parsed as served"


def _tokens(usage: TokenUsage) -> str:
    return "/".join(str(v) for v in usage.as_tuple()) + " (in/cached/write/out/reasoning)"


# -- leftovers and the store ---------------------------------------------------

def clean_leftovers(suite: Suite | None) -> list[HostCheck]:
    """Each registered sandbox kind removes what runners that are gone left in it: on the
    suite's hosts when the suite uses that kind, on this machine otherwise. Blocking."""
    from .sandboxes import SANDBOXES

    return [check for kind in SANDBOXES.names() for check in SANDBOXES.get(kind).clean_leftovers(suite)]


def check_store(db: Path) -> HostCheck:
    """Readable, schema current, and whether a runner holds it now."""
    from .run.control import runner_alive
    from .store import Store
    from .store.migrations import MIGRATIONS
    from .vocab import ACTIVE_STATUSES

    if not db.exists():
        return HostCheck(f"store {db}", True, "not created yet (the first run creates it)")
    try:
        store = Store(db, readonly=True)
        try:
            health = store.views.health(ACTIVE_STATUSES)
            pending = [m.__name__ for m in MIGRATIONS if m.__name__ not in health["applied"]]
            trials, running = health["trials"], health["active"]
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001 - any failure to read it is the finding
        return HostCheck(f"store {db}", False, f"unreadable: {exc}", "check the path, or move the file aside")
    alive = runner_alive(db)
    parts = [f"{trials} trial(s)", f"{len(pending)} migration(s) pending (applied when opened)" if pending
             else "schema current", "a runner is attached" if alive else "no runner"]
    if running and not alive:
        parts.append(f"{running} trial(s) left running by a stopped runner (the next run marks them infra-invalid)")
    return HostCheck(f"store {db}", True, ", ".join(parts))
