"""Clients of a running runner: ``status``, ``kill``, ``pause``, ``resume``, ``budget``, ``stop``.

Each prints one human line (``--json``: the runner's reply as it came). Values are checked
here, before they travel (``budget``: finite, positive, not past what a budget takes), and the
runner checks them again (``core.run.requests``): a bad one is refused with a message and
changes nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..core.run.control import ControlClient, ControlError
from ..core.vocab import MAX_BUDGET_TOKENS, MAX_BUDGET_USD, MAX_BUDGET_WALL
from . import add_db_argument

EXIT_CAP_NEAR, EXIT_CAP_HIT = 3, 4  # `status --wait-cap`: for a cron job or CI to act on
STOP_HELP = "stop the run: running trials end infra-invalid and rerun on the next run"


def register(subparsers: argparse._SubParsersAction) -> None:
    status = subparsers.add_parser("status", help="what the runner is doing now (or how the last run ended)")
    add_db_argument(status)
    status.add_argument("--json", action="store_true", help="print the raw status object")
    status.add_argument("--wait-cap", action="store_true",
                        help=f"wait until a cap is near (exit {EXIT_CAP_NEAR}) or hit (exit {EXIT_CAP_HIT}: spent, "
                             "or the schedule held by it); exit 0 if the run ends first")
    status.add_argument("--near", type=float, default=0.9, help="with --wait-cap: the share of a cap that is near")
    status.set_defaults(handler=status_command)

    kill = subparsers.add_parser("kill", help="kill a running trial (reason: operator)")
    kill.add_argument("trial", type=int, help="trial id")
    kill.add_argument("--reason", default="operator")
    _common(kill)
    kill.set_defaults(handler=lambda a: _request(a, "kill", trial=a.trial, reason=a.reason))

    for op, text in (("pause", "start no new trials until resumed"), ("resume", "start trials again")):
        parser = subparsers.add_parser(op, help=text, description=text)
        parser.add_argument("--model", help="only this model's trials (the rest goes on)")
        parser.add_argument("--cli", help="only this CLI's trials (the rest goes on)")
        _common(parser)
        parser.set_defaults(handler=lambda a, op=op: _request(a, op, **_given(model=a.model, cli=a.cli)))
    stop = subparsers.add_parser("stop", help=STOP_HELP, description=STOP_HELP)
    _common(stop)
    stop.set_defaults(handler=lambda a: _request(a, "stop"))

    budget = subparsers.add_parser("budget", help="raise (or set) budgets of a running trial, a model, a CLI, "
                                   "a cell or the run, and the run's, a provider's or a model's cap")
    budget.add_argument("--trial", type=int, help="one running trial; default: the rest of the run")
    budget.add_argument("--model", help="the trials of one model (with --cli: one cell); with --cap-*: its cap")
    budget.add_argument("--cli", help="the trials of one CLI (with --model: one cell)")
    budget.add_argument("--provider", help="with --cap-usd/--cap-tokens: this provider's cap")
    budget.add_argument("--run-usd", type=_cap(float, MAX_BUDGET_USD),
                        help="the whole run's cap in US dollars (`none` removes it)")
    budget.add_argument("--run-tokens", type=_cap(int, MAX_BUDGET_TOKENS),
                        help="the whole run's cap in tokens (`none` removes it)")
    budget.add_argument("--cap-usd", type=_cap(float, MAX_BUDGET_USD),
                        help="the --provider's or --model's cap in US dollars (`none` removes it)")
    budget.add_argument("--cap-tokens", type=_cap(int, MAX_BUDGET_TOKENS),
                        help="the --provider's or --model's cap in tokens (`none` removes it)")
    budget.add_argument("--tokens", type=_limit(int, MAX_BUDGET_TOKENS), help="tokens (a positive integer)")
    budget.add_argument("--usd", type=_limit(float, MAX_BUDGET_USD), help="US dollars (positive)")
    budget.add_argument("--wall-seconds", type=_limit(float, MAX_BUDGET_WALL), help="seconds of wall time (positive)")
    _common(budget)
    budget.set_defaults(handler=_budget)


def _common(parser: argparse.ArgumentParser) -> None:
    add_db_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the runner's reply as JSON")


def _limit(kind: type, most: float) -> Callable[[str], Any]:
    """An argparse type for a budget limit: a finite number above 0 and at most ``most``."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if not math.isfinite(value) or value <= 0 or value > most:
            raise argparse.ArgumentTypeError(f"{text} is not a limit: give a number above 0 and at most {most:g}")
        return value

    return parse


NO_CAP = "none"  # `--run-usd none`: the cap's value that removes it


def _cap(kind: type, most: float) -> Callable[[str], Any]:
    """A cap's argparse type: a limit, or ``none`` to remove the cap."""
    limit = _limit(kind, most)
    return lambda text: NO_CAP if text.strip().lower() == NO_CAP else limit(text)


def _cap_fields(usd: Any, tokens: Any) -> dict[str, Any]:
    """The ``cap`` op's fields for ``--run-usd``/``--run-tokens`` (or ``--cap-*``) as given."""
    given = {k: v for k, v in (("usd", usd), ("tokens", tokens)) if v is not None}
    cleared = [k for k, v in given.items() if v == NO_CAP]
    return {**{k: v for k, v in given.items() if v != NO_CAP}, **({"clear": cleared} if cleared else {})}


def _budget(args: argparse.Namespace) -> int:
    if args.run_usd is not None or args.run_tokens is not None:
        return _request(args, "cap", scope="run", **_cap_fields(args.run_usd, args.run_tokens))
    if args.cap_usd is not None or args.cap_tokens is not None:
        if (args.provider is None) == (args.model is None) or args.cli or args.trial is not None:
            print("agentmeter budget: --cap-usd/--cap-tokens take one of --provider or --model", file=sys.stderr)
            return 2
        scope = "provider" if args.provider else "model"
        return _request(args, "cap", scope=scope, name=args.provider or args.model,
                        **_cap_fields(args.cap_usd, args.cap_tokens))
    limits = {k: v for k, v in (("tokens", args.tokens), ("usd", args.usd), ("wall_seconds", args.wall_seconds))
              if v is not None}
    if not limits:
        print("agentmeter budget: give at least one of --tokens, --usd, --wall-seconds", file=sys.stderr)
        return 2
    target = _given(trial=args.trial, model=args.model, cli=args.cli)
    return _request(args, "budget", **target, **limits)


def _given(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def _request(args: argparse.Namespace, op: str, **fields: Any) -> int:
    try:
        with ControlClient(Path(args.db)) as client:
            reply = client.request(op, **fields)
    except ControlError as exc:
        print(f"agentmeter {op}: {exc}", file=sys.stderr)
        return 1
    told = {key: value for key, value in reply.items() if key != "ok"}
    print(json.dumps(told) if args.json else said(op, told, fields, args.db))
    return 0


def said(op: str, reply: Mapping[str, Any], fields: dict[str, Any], db: str) -> str:
    """What the runner did, in a line."""
    scoped = " × ".join(str(fields[k]) for k in ("model", "cli") if fields.get(k))
    if op in ("pause", "resume") and scoped:
        return f"{scoped}: {'paused: none of its trials starts' if op == 'pause' else 'resumed'}; the rest goes on"
    if op == "pause":
        return f"paused: no new trial starts until `agentmeter resume --db {db}`; the running ones go on"
    if op == "resume":
        return "resumed: trials start again"
    if op == "stop":
        return "stopping: the running trials end infra-invalid and run again on the next `agentmeter run`"
    if op == "kill":
        return f"trial {reply.get('trial')}: killing ({fields.get('reason') or 'operator'})"
    if op == "cap":
        what = "run" if reply.get("scope") == "run" else f"{reply.get('scope')} {reply.get('name')}"
        cap = reply.get("cap") or {}
        if cap.get("usd") is None and cap.get("tokens") is None:
            return f"{what} cap removed; trials it held back start again"
        return (f"{what} cap now {budget_text(cap)}"
                + (f" ({' and '.join(fields['clear'])} no longer capped)" if fields.get("clear") else "")
                + "; trials it held back start again while it has room")
    if op == "budget":
        if reply.get("model") or reply.get("cli"):
            cell = " × ".join(x for x in (reply.get("model"), reply.get("cli")) if x)
            return f"{cell}: {budget_text(fields)} for its trials to come and its {reply.get('running', 0)} running"
        if "trial" in reply:
            return f"trial {reply['trial']}: budget now {budget_text(reply.get('budget') or {})}"
        return f"every running trial and the rest of the run: {budget_text(fields)}"
    return "ok"


def budget_text(budget: dict[str, Any]) -> str:
    parts = []
    if budget.get("tokens") is not None:
        parts.append(f"{budget['tokens']:,} tokens")
    if budget.get("usd") is not None:
        parts.append(f"${budget['usd']:g}")
    if budget.get("wall_seconds") is not None:
        parts.append(f"{budget['wall_seconds']:g} s")
    return ", ".join(parts) or "no limits"


def cap_text(cap: dict[str, Any]) -> str:
    """``run: $3.10 of $5 (62 %)``: a cap's spend against it, with its state when not ok."""
    name = "run" if cap["scope"] == "run" else f"{cap['scope']} {cap['name']}"
    parts = [f"${cap['spent_usd']:.2f} of ${cap['usd']:g}" if cap.get("usd") else None,
             f"{cap['spent_tokens']:,} of {cap['tokens']:,} tokens" if cap.get("tokens") else None]
    state = "" if cap["state"] == "ok" else f" · {cap['state'].upper()}"
    if cap.get("forecast_passes"):
        state += f" · the forecast passes it (${cap['forecast_usd']:.2f}, {cap['forecast_tokens']:,} tokens)"
    return f"{name}: {', '.join(p for p in parts if p)} ({cap['share']:.0%}){state}"


def forecast_text(forecast: dict[str, Any]) -> str:
    """The forecast in a line: projected USD and tokens with their intervals, and the finish."""
    import time

    usd, tokens, finish = forecast["usd"], forecast["tokens"], forecast["finish"]
    if finish.get("held"):  # held or paused: when it ends is the operator's, not a forecast
        when = f"no finish time while {finish['held']}"
    else:
        at = time.strftime("%H:%M", time.localtime(finish["at"]))
        when = f"done about {at} ({finish['seconds_left'] / 60:.0f} min left)"
    return (f"forecast (from {forecast['basis']} finished): ${usd['projected']:.2f} "
            f"(${usd['low']:.2f}-${usd['high']:.2f}), {int(tokens['projected']):,} tokens "
            f"({int(tokens['low']):,}-{int(tokens['high']):,}), {when}")


def wait_cap(args: argparse.Namespace) -> int:
    """Follow the runner's feed until a cap is hit (exit 4) or near (exit 3), or the run ends (0)."""
    try:
        with ControlClient(Path(args.db)) as client:
            for message in client.subscribe(events=False):
                progress = (message.get("progress") if message["type"] != "preparing" else None) or {}
                caps = progress.get("caps") or []
                hit = [c for c in caps if c["share"] >= 1]
                held = progress.get("cap_held")
                if held and not hit:  # held short of it (committed spend would pass it): at the cap all the same
                    print(f"cap hit: the schedule is held: {held}")
                    return EXIT_CAP_HIT
                near = [c for c in caps if c["share"] >= args.near]
                if hit or near:
                    print(("cap hit: " if hit else "near a cap: ") + "; ".join(cap_text(c) for c in hit or near))
                    return EXIT_CAP_HIT if hit else EXIT_CAP_NEAR
                if message.get("type") == "finished":
                    break
    except ControlError as exc:
        print(f"agentmeter status: {exc}", file=sys.stderr)
        return 1
    print("the run ended without reaching a cap")
    return 0


def status_command(args: argparse.Namespace) -> int:
    if args.wait_cap:
        return wait_cap(args)
    try:
        with ControlClient(Path(args.db)) as client:
            status = client.request("status")
    except ControlError as exc:
        from .runsummary import print_last_run

        return print_last_run(Path(args.db), as_json=args.json, why=str(exc))
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    progress = status.get("progress", {})
    print(f"suite {status.get('suite')} · run {status.get('run_id')} · runner pid {status.get('pid')}")
    print(f"{progress.get('done')}/{progress.get('total')} done, {progress.get('running')} running, "
          f"{progress.get('queued')} queued" + (" · PAUSED" if progress.get("paused") else ""))
    if progress.get("preparing"):  # before the first trial (task images being built...)
        print(f"preparing: {progress['preparing']}")
    for why in progress.get("held", []):
        print(f"HELD: {why}")
    for cap in progress.get("caps", []):
        print(f"cap {cap_text(cap)}")
    if (forecast := progress.get("forecast")) and forecast.get("basis"):
        print(forecast_text(forecast))
    for meter in status.get("running", []):
        tokens = sum((meter.get("tokens") or {}).values())
        cost = meter.get("cost_usd")
        print(f"  #{meter['id']} {meter['task']} · {meter['model']} × {meter['cli']} · t{meter['trial']}  "
              f"{meter['status']}  {tokens:,} tok  {'unpriced' if cost is None else f'${cost:.4f}'}  "
              f"{meter.get('elapsed') or 0:.1f}s" + (f"  [{', '.join(meter['flags'])}]" if meter.get("flags") else "")
              + (f"  on {meter['node']}" if meter.get("node") else ""))
    return 0
