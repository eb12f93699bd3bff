"""``agentmeter meter``: the metering proxy for one command outside any suite.

The command runs with the usual base-URL variables pointed at a proxy on 127.0.0.1 and a
placeholder key per protocol (the real keys, read from our own environment, stay in the
proxy's memory). Every model call is metered off the wire, priced by the model name it
carries (through a price snapshot's keys and aliases, or one forced key), and checked against
the budgets: once the usage has reached a budget, the next model call is refused at the proxy
and the command's whole process tree is stopped. :class:`Meter` is the proxy's sink and the
totals; :func:`run_metered` runs the command.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, TextIO

import orjson

from ..harnesses import ADAPTERS, HarnessAdapter, get_adapter
from ..pricing import PriceSnapshot
from .. import cgroups
from ..procs import TOKEN_VAR, kill_ladder, sweep
from ..usage import TOKEN_CLASSES, TokenUsage
from ..wire import families, get_protocol, protocols
from .calls import ProxyCall
from .server import MeteringProxy

EXIT_OVER_BUDGET = 7  # `agentmeter meter` exits with this when it stopped the command over a budget
KILL_INT_GRACE, KILL_GRACE = 1.0, 3.0


def kinds() -> list[str]:
    """The command's kinds of calls: one per protocol family (``--upstream KIND=URL``)."""
    return list(families())


def _cli_variables() -> list[tuple[HarnessAdapter, str]]:
    """Each adapter that names variables of its own, with the family of its protocol."""
    adapters = [get_adapter(name) for name in ADAPTERS.names()]
    return [(adapter, get_protocol(adapter.protocol).family) for adapter in adapters
            if adapter.base_url_env or adapter.key_env]


def key_sources() -> dict[str, tuple[str, ...]]:
    """Per kind, where its real key is looked for in our environment (first set wins): the
    SDKs' variables, the CLIs' own, then the providers'."""
    cli = _cli_variables()
    return {kind: (*wire.key_env, *(name for adapter, family in cli if family == kind for name in adapter.key_env),
                   *wire.key_env_if_set, *wire.key_sources) for kind, wire in families().items()}


def child_environment(parent: Mapping[str, str], base_url: str, keys: Mapping[str, str],
                      token: str, key_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The command's environment: every provider variable a CLI reads points at the proxy, every
    key variable holds the placeholder key of its kind, never a real key. ``key_env`` names
    more variables (a CLI config's own ``env_key``) to hold a kind's placeholder."""
    sources = key_sources()
    env = {name: value for name, value in parent.items() if not any(name in names for names in sources.values())}
    named: list[tuple[dict[str, str], tuple[str, ...], str]] = [
        (wire.base_url_env, wire.key_env, kind) for kind, wire in families().items()]
    named += [(adapter.base_url_env, adapter.key_env, kind) for adapter, kind in _cli_variables()]
    for base_env, key_names, kind in named:  # the SDKs' variables, then each CLI's own
        env.update({name: base_url + path for name, path in base_env.items()})
        env.update({name: keys[kind] for name in key_names})
    env[TOKEN_VAR] = token  # finds every process of the command, setsid'd or re-parented ones too
    for kind, wire in families().items():
        env.update({name: keys[kind] for name in wire.key_env_if_set if name in parent})
    for name, kind in (key_env or {}).items():
        env[name] = keys[kind]
    return env


def real_keys(parent: Mapping[str, str]) -> dict[str, str]:
    return {kind: next((parent[n] for n in names if parent.get(n)), "") for kind, names in key_sources().items()}


@dataclass
class Meter:
    """The proxy's sink for the command, and its running totals."""

    prices: PriceSnapshot | None = None
    price_key: str | None = None
    budget_usd: Decimal | None = None
    budget_tokens: int | None = None
    on_update: Callable[[Meter], None] = lambda meter: None
    on_refused: Callable[[Meter], None] = lambda meter: None
    started: float = field(default_factory=time.monotonic)
    usage: TokenUsage = field(default_factory=TokenUsage)
    cost_usd: Decimal = Decimal(0)
    unpriced_calls: int = 0
    charged: Decimal = Decimal(0)
    charged_calls: int = 0
    calls: list[ProxyCall] = field(default_factory=list)
    call_costs: dict[int, Decimal | None] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    over: str | None = None  # which budget was reached, once it was
    refused: int = 0

    def _price(self, call: ProxyCall, delta: TokenUsage) -> Decimal | None:
        if self.prices is None:
            return None
        key = self.price_key or call.model
        usage = call.usage
        return self.prices.cost_usd(key, delta, usage.uncached_input + usage.cached_input + usage.cache_write) \
            if key else None

    # -- CallSink ------------------------------------------------------------------------------

    def admit_call(self) -> str | None:
        if self.over is None:
            return None
        self.refused += 1
        self.on_refused(self)
        return f"over its budget: {self.over}"

    def on_proxy_usage(self, call: ProxyCall, delta: TokenUsage) -> None:
        self.usage = self.usage + delta
        cost = self._price(call, delta)
        key = id(call)
        if cost is None:
            self.call_costs.setdefault(key, None)
        else:
            self.cost_usd += cost
            self.call_costs[key] = (self.call_costs.get(key) or Decimal(0)) + cost
        if self.budget_tokens is not None and self.usage.raw >= self.budget_tokens and self.over is None:
            self.over = f"budget:tokens ({self.usage.raw} >= {self.budget_tokens})"
        if self.budget_usd is not None and self.cost_usd >= self.budget_usd and self.over is None:
            self.over = f"budget:usd ({self.cost_usd:.6f} >= {self.budget_usd})"
        self.on_update(self)

    def on_proxy_call(self, call: ProxyCall) -> None:
        if call.outcome == "refused" or call.side:  # its totals count model calls
            return
        self.calls.append(call)
        if self.prices is not None and call.usage and self.call_costs.get(id(call)) is None:
            self.unpriced_calls += 1
        if call.charged is not None:
            self.charged += call.charged
            self.charged_calls += 1
        if call.error is not None:
            status = str(call.error.get("status", call.status))
            self.errors[status] = self.errors.get(status, 0) + 1
        self.on_update(self)

    # -- reporting -----------------------------------------------------------------------------

    def call_line(self, call: ProxyCall) -> dict[str, Any]:
        """One line of ``--log-calls``."""
        cost = self.call_costs.get(id(call))
        return {"protocol": call.protocol, "model": call.model, "status": call.status, **call.usage.as_dict(),
                "cache_write_1h": call.usage.cache_write_1h,
                "cost_usd": None if cost is None else float(cost),
                "cost_actual_usd": None if call.charged is None else float(call.charged), "error": call.error}

    def totals(self, exit_code: int | None, killed: bool) -> dict[str, Any]:
        priced = self.prices is not None and not self.unpriced_calls
        return {
            "calls": len(self.calls),
            "tokens": {**self.usage.as_dict(), "cache_write_1h": self.usage.cache_write_1h},
            "cost_usd": float(self.cost_usd) if priced else None,
            "cost_actual_usd": float(self.charged) if self.charged_calls else None,
            "cost_actual_source": "provider" if self.charged_calls else None,
            "errors": dict(self.errors),
            "refused": self.refused,
            "budget": self.over,
            "exit_code": exit_code,
            "killed": killed,
        }

    def line(self) -> str:
        """The one-line live meter: five classes, calls, USD, burn rate (fresh tokens a minute)."""
        u = self.usage
        minutes = max((time.monotonic() - self.started) / 60, 1 / 60)
        usd = f"${self.cost_usd:.4f}" if self.prices is not None else "$ -"
        if self.charged_calls:
            usd += f" (charged ${self.charged:.4f})"
        errors = f" | errors {sum(self.errors.values())}" if self.errors else ""
        return (f"agentmeter: {len(self.calls)} calls | in {u.uncached_input:,} cached {u.cached_input:,} "
                f"write {u.cache_write:,} out {u.output:,} reasoning {u.reasoning:,} | {usd} | "
                f"{u.fresh / minutes:,.0f} tok/min{errors}")


@dataclass
class MeterRun:
    meter: Meter
    exit_code: int | None
    killed: bool


def _routes(proxy: MeteringProxy, meter: Meter, environ: Mapping[str, str],
            upstreams: Mapping[str, str] | None) -> dict[str, Any]:
    """A route per provider family, to its default upstream or the one asked for, with the real key."""
    keys = real_keys(environ)
    wanted = {**{kind: wire.default_upstream for kind, wire in families().items()}, **(upstreams or {})}
    by_family = {kind: tuple(p.name for p in protocols() if p.family == kind) for kind in kinds()}
    return {kind: proxy.route(wanted[kind], keys[kind], meter, label=kind, protocols=by_family[kind])
            for kind in kinds()}


class _Progress:
    """After each call: the meter's line on stderr (rewritten in place on a terminal) and the
    calls not yet logged appended to the log file."""

    def __init__(self, stderr: TextIO, live: bool, log: TextIO | None):
        self.stderr, self.live, self.log, self.shown = stderr, live, log, 0

    def __call__(self, m: Meter) -> None:
        if self.log is not None:
            while self.shown < len(m.calls):
                self.log.write(orjson.dumps(m.call_line(m.calls[self.shown])).decode() + "\n")
                self.shown += 1
            self.log.flush()
        print(("\r" + m.line() + "\033[K") if self.live else m.line(), end="" if self.live else "\n",
              file=self.stderr, flush=True)


async def run_metered(command: Sequence[str], meter: Meter, *, upstreams: Mapping[str, str] | None = None,
                      environ: Mapping[str, str] | None = None, stderr: TextIO | None = None,
                      log_calls: Path | None = None, port: int = 0,
                      key_env: Mapping[str, str] | None = None) -> MeterRun:
    """Run ``command`` behind a metering proxy; return once it and its whole tree are gone."""
    environ = dict(os.environ if environ is None else environ)
    stderr = stderr or sys.stderr
    live = stderr.isatty()
    proxy = MeteringProxy(port=port, log=lambda text: print(text, file=stderr, flush=True))
    base_url = await proxy.start()
    routes = _routes(proxy, meter, environ, upstreams)
    token = "meter-" + secrets.token_hex(8)
    env = child_environment(environ, base_url, {kind: route.key for kind, route in routes.items()}, token,
                            key_env)
    log = log_calls.open("w", encoding="utf-8") if log_calls else None
    update = _Progress(stderr, live, log)

    exited = asyncio.Event()
    stop: asyncio.Task | None = None
    # The command's own cgroup: what it leaves (a daemon that clears its environment too) goes with it.
    group = await asyncio.to_thread(cgroups.new_group, token)
    argv = group.wrap(list(command), env.get("PATH")) if group else command
    proc = await asyncio.create_subprocess_exec(*argv, env=env)

    def refused(m: Meter) -> None:
        nonlocal stop
        if stop is None:
            print(f"\nagentmeter: {m.over}: the next model call was refused; stopping the command",
                  file=stderr, flush=True)
            stop = asyncio.get_running_loop().create_task(
                kill_ladder(proc.pid, token, int_grace=KILL_INT_GRACE, grace=KILL_GRACE, exited=exited, group=group))

    meter.on_update, meter.on_refused = update, refused
    try:
        exit_code = await proc.wait()
        exited.set()
        if stop is not None:
            await stop
        sweep(token, None, group)  # whatever the command left behind (background jobs) goes with it
        for route in routes.values():
            await proxy.release(route)
    finally:
        if group is not None:
            await asyncio.to_thread(group.remove)
            cgroups.remove_owner_folder()
        await proxy.close()
        if log is not None:
            log.close()
        if live:
            print(file=stderr)
    return MeterRun(meter, exit_code, killed=stop is not None)


def totals_text(totals: dict[str, Any]) -> str:
    """The totals as aligned lines, for a person."""
    def usd(value: float | None, missing: str) -> str:
        return missing if value is None else f"{value:.6f}"

    tokens = totals["tokens"]
    lines = [f"{'calls':<18} {totals['calls']}"]
    lines += [f"{name:<18} {tokens[name]:,}" for name in (*TOKEN_CLASSES, "cache_write_1h")]
    lines.append(f"{'cost_usd':<18} {usd(totals['cost_usd'], 'unpriced (give --prices)')}")
    lines.append(f"{'cost_actual_usd':<18} {usd(totals['cost_actual_usd'], 'not reported')}"
                 + (f" ({totals['cost_actual_source']})" if totals["cost_actual_source"] else ""))
    errors = ", ".join(f"{status}: {n}" for status, n in sorted(totals["errors"].items())) or "none"
    lines.append(f"{'errors':<18} {errors}")
    if totals["budget"]:
        lines.append(f"{'stopped':<18} {totals['budget']} ({totals['refused']} call(s) refused)")
    lines.append(f"{'exit_code':<18} {totals['exit_code']}{' (killed)' if totals['killed'] else ''}")
    return "\n".join(lines)
