"""What every trial of a run shares: the suite, the store writer, the sandbox, prices, the
scripted model server, and the sink that hears what trials do.

:class:`RunSink` is the one way a trial's news leaves the engine besides the store: the live
feed implements it (and keeps the live copies of events); a run without clients gets
:data:`NULL_SINK`.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import secrets
import sys
from collections.abc import Callable
from functools import partial
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..harnesses import LaunchContext
from ..pricing import PriceSnapshot
from ..redact import SECRET_NAME, Redactor
from ..store.writer import StoreWriter
from ..usage import TokenUsage
from .caps import CapLedger

if TYPE_CHECKING:
    from ..proxy.server import MeteringProxy
    from ..rows import EventRow
    from ..sandboxes.base import Sandbox, SandboxSession
    from ..suites.suitefile import ModelEntry
    from ..suites.suite import Suite
    from .scripted_server import ScriptedServer
    from .trialview import TrialView



class RunSink(Protocol):
    """Hears every trial of a run. Called on the event loop; must not block."""

    def trial_changed(self, trial: TrialView) -> None:
        """Its status or meter changed."""

    def trial_events(self, trial: TrialView, rows: list[EventRow]) -> None:
        """New events, as the rows handed to the store writer."""

    def trial_finished(self, trial: TrialView) -> None:
        """Its final row is committed."""


class _NullSink:
    def trial_changed(self, trial: TrialView) -> None:
        pass

    def trial_events(self, trial: TrialView, rows: list[EventRow]) -> None:
        pass

    def trial_finished(self, trial: TrialView) -> None:
        pass


NULL_SINK: RunSink = _NullSink()


class RunContext:
    def __init__(self, suite: Suite, writer: StoreWriter, sandbox: Sandbox, *, run_id: int | None,
                 clis_root: Path, mock_url: str | None = None, log: Callable[[str], None] | None = None,
                 proxy: MeteringProxy | None = None, sink: RunSink | None = None, caps: CapLedger | None = None):
        self.suite, self.writer, self.sandbox = suite, writer, sandbox
        self.run_id = run_id
        self.clis_root = clis_root
        self.mock_url = mock_url
        self.proxy = proxy  # the metering proxy, when the suite meters through it
        self._call_rates: dict[str, Any] = {}  # provider -> its CallRate (calls_per_minute), shared by trials
        self.prices = PriceSnapshot.load(suite.path / suite.spec.suite.pricing) if suite.spec.suite.pricing \
            else PriceSnapshot.empty()
        self.redactor = run_redactor(suite)  # every event and final row passes it before the store
        self._log = log or (lambda text: print(text, file=sys.stderr, flush=True))
        self.sink = sink or NULL_SINK
        self.scripted: ScriptedServer | None = None  # the watched scripted model server, if the run has one
        self.caps = caps or CapLedger(suite)  # the run's, providers' and models' caps against the run's spend
        self.suite_dir = str(suite.path.resolve())  # once: a resolve per trial was a stat per folder of the path
        self.scan_queue: Any = None  # finished trials waiting for the triage scanners (scanners/scan.py)

    # -- store --------------------------------------------------------------------------------

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.wrap_future(self.writer.call(fn, *args))

    def log(self, text: str) -> None:
        self._log(text)

    # -- prices -------------------------------------------------------------------------------

    def price(self, model: ModelEntry, usage: TokenUsage) -> Decimal | None:
        return self.prices.cost_usd(model.price_ref, usage)

    def scripted_lost(self, trial: TrialView) -> str | None:
        """Why the scripted model server this trial talked to is gone (None: it is not)."""
        if self.scripted is None:
            return None
        return self.scripted.died(getattr(trial, "scripted_url", None))

    async def scripted_served(self, trial: TrialView) -> dict[str, Any] | None:
        """What the scripted model server served this trial: the ground truth a dry run checks
        the adapter's accounting against. The session is forgotten afterwards."""
        key = getattr(trial, "scripted_key", None)
        if key is None or self.mock_url is None or self.scripted is None or self.scripted_lost(trial):
            return None  # a server that died took the session with it
        from ..scripted.client import forget_session, session_info

        control = self.scripted.control_key
        try:
            info = await asyncio.to_thread(partial(session_info, control=control), self.mock_url, key)
            await asyncio.to_thread(partial(forget_session, control=control), self.mock_url, key)
        except Exception as exc:  # the verdict stands without it; say why it is missing
            self.log(f"trial {trial.id}: could not read the scripted session: {exc!r}")
            return None
        return {"usage": info["usage"], "calls": info["calls"],
                "served": [[c["turn"], c["status"], c["completed"], list(c["usage"].values())]
                           for c in info["served"]]}

    # -- launch -------------------------------------------------------------------------------

    async def launch_context(self, trial: TrialView, session: SandboxSession,
                             solution_dir: str = "") -> LaunchContext:
        plan = trial.plan
        model = plan.config.model
        provider = self.suite.provider(model)
        if not trial.adapter.needs_model:
            base_url, api_key = "", ""
        elif provider.kind == "scripted":
            if self.mock_url is None or self.scripted is None:
                raise RuntimeError("the scripted model server is not running")
            from ..scripted.client import register_session

            # Random, not derived from the trial's token (which its agent sees in its environment):
            # no trial can work out another's key.
            api_key = "am-" + secrets.token_urlsafe(24)
            trial.scripted_url = self.mock_url
            scenario = self.suite.scenario_for(model, plan.task)
            await asyncio.to_thread(partial(register_session, control=self.scripted.control_key), self.mock_url,
                                    api_key, str(scenario), f"trial-{trial.id}")
            trial.scripted_key = api_key
            base_url = self.mock_url
        elif provider.kind == "none":
            base_url, api_key = "", ""
        else:
            base_url = provider.base_url or ""
            api_key = os.environ.get(provider.api_key_env or "", "")
            if not api_key:
                raise RuntimeError(f"provider '{model.provider}' needs its key in ${provider.api_key_env}")
            if self.proxy is None and trial.adapter.needs_model:  # the suite said proxy = false
                trial.note(f"warning: the suite says proxy = false, so this CLI holds the real key of provider "
                           f"'{model.provider}' (${provider.api_key_env}): its agent can read it and spend on it")
        if self.proxy is not None and provider.kind != "none" and trial.adapter.needs_model:
            base_url, api_key = self._route(trial, provider.kind, base_url, api_key, model.provider)
        price = self.prices.find(model.price_ref)
        translate = getattr(session, "translate_url", None)  # sandboxes that cannot see our 127.0.0.1
        if translate is not None and base_url:
            base_url = translate(base_url)
            if inspect.isawaitable(base_url):  # e.g. an SSH reverse tunnel opened on demand
                base_url = await base_url
        return LaunchContext(
            model_name=model.cli_names.get(plan.config.cli.adapter, model.id),
            instruction=plan.task.instruction, workspace=session.workspace, home=session.home,
            base_url=base_url, api_key=api_key,
            clis_root=str(getattr(session, "clis_root", self.clis_root)),
            python=getattr(session, "python", sys.executable), suite_dir=self.suite_dir,
            solution_dir=solution_dir,
            extra_args=list(plan.config.cli.args),
            price={k: str(v) for k, v in price[1].model_dump(include={"input", "cached_input", "cache_write",
                                                                      "output"}).items() if v is not None}
            if price else None,
        )

    def _route(self, trial: TrialView, kind: str, upstream: str, key: str, provider_name: str) -> tuple[str, str]:
        """Send the trial's model calls through the metering proxy: the CLI gets the proxy's URL
        and a key of its own; the real key stays in the proxy's memory. A provider with
        ``calls_per_minute`` gets one limiter that all its trials' routes share."""
        from ..proxy.limits import CallRate
        from ..wire import provider_kinds

        protocol = provider_kinds().get(kind)
        upstream = upstream or (protocol.default_upstream if protocol is not None else "")
        if not upstream:
            raise RuntimeError(f"provider kind '{kind}' has no base_url for the metering proxy to call")
        cap = self.suite.spec.providers[provider_name].calls_per_minute
        limiter = self._call_rates.setdefault(provider_name, CallRate(cap)) if cap else None
        # The endpoints it may call: its CLI's protocol (and the provider kind's, should they differ).
        spoken = tuple(dict.fromkeys(p for p in (trial.adapter.protocol, protocol and protocol.name) if p))
        proxy = self.proxy
        assert proxy is not None  # asked only of a suite that uses the proxy: the runner started it
        trial.proxy_route = proxy.route(upstream, key, trial, f"trial {trial.id}", limiter=limiter, protocols=spoken)
        return proxy.base_url, trial.proxy_route.key

    async def release_proxy(self, trial: TrialView) -> None:
        if self.proxy is not None and trial.proxy_route is not None:
            await self.proxy.release(trial.proxy_route)


def run_redactor(suite: Suite) -> Redactor:
    """The run's redactor: the keys the runner holds (its environment's secret-looking
    variables, each provider's key, the CLIs' secret-looking ``env`` values) and key shapes."""
    more = [(p.api_key_env, os.environ.get(p.api_key_env, "")) for p in suite.spec.providers.values()
            if p.api_key_env]
    more += [(name, value) for cli in suite.spec.clis for name, value in cli.env.items() if SECRET_NAME.search(name)]
    return Redactor.for_run(os.environ, more)

