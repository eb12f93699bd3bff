"""The control socket's ops on part of a run: a cap (the run's, a provider's, a model's), a
pause or a budget for one model, one CLI or one cell, a fleet node's availability. Apart from
:mod:`.runner` so the runner keeps to its process and its schedule."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .requests import BudgetChange, CapChange, NodeChange, Pause, Request, Resume

if TYPE_CHECKING:
    from ..sandboxes import Sandbox
    from ..suites.suite import Suite
    from .caps import CapLedger
    from .control import BudgetReply, CapReply, NodeReply, PauseReply, Refused
    from .scheduler import Scheduler


def unknown_name(suite: Suite, model: str | None = None, cli: str | None = None,
                 provider: str | None = None) -> str | None:
    """Why a name an op gives is none of the suite's (None: every name is known)."""
    for kind, name, known in (("model", model, [m.id for m in suite.spec.models]),
                              ("cli", cli, [c.label for c in suite.spec.clis]),
                              ("provider", provider, list(suite.spec.providers))):
        if name is not None and name not in known:
            return f"no {kind} {name!r} in this suite; known: {', '.join(known)}"
    return None


def handle_scoped(request: Request, suite: Suite, caps: CapLedger, scheduler: Scheduler | None
                  ) -> Refused | CapReply | BudgetReply | PauseReply | None:
    """The reply to a cap op or to a pause, resume or budget naming a model or CLI; None for
    any other request (the runner answers it)."""
    if isinstance(request, CapChange):
        why = unknown_name(suite, **{request.scope: request.name}) if request.name else None
        if why:
            return {"ok": False, "error": f"cap: {why}"}
        cap = caps.set_cap((request.scope, request.name or ""), usd=request.usd, tokens=request.tokens,
                           clear=request.clear)
        if scheduler is not None:
            scheduler.wake()  # a raised (or cleared) cap lets the held-back trials start: the schedule resumes
        return {"ok": True, "scope": request.scope, "name": request.name, "cap": cap.model_dump()}
    if not isinstance(request, (Pause, Resume, BudgetChange)) or (request.model is None and request.cli is None):
        return None
    why = unknown_name(suite, model=request.model, cli=request.cli)
    if why:
        return {"ok": False, "error": f"{request.op}: {why}"}
    if scheduler is None:
        return {"ok": False, "error": "no trial has started yet: the run is preparing"}
    if isinstance(request, BudgetChange):
        raised = scheduler.set_cell_budget(request.model, request.cli, **request.limits())
        return {"ok": True, "model": request.model, "cli": request.cli, "budget": request.limits(), "running": raised}
    scheduler.pause_scope(request.model, request.cli, isinstance(request, Pause))
    return {"ok": True, "model": request.model, "cli": request.cli, "paused": isinstance(request, Pause)}


async def set_node(sandbox: Sandbox | None, request: NodeChange) -> Refused | NodeReply:
    """The reply to a ``node`` op: the sandbox drains or activates the node (its engine's call)."""
    if sandbox is None:
        return {"ok": False, "error": "node: the run has no sandbox yet"}
    try:
        await sandbox.set_node(request.name, request.availability)
    except Exception as exc:  # an unknown name, a sandbox without nodes, an engine that refused
        return {"ok": False, "error": f"node: {exc}"}
    return {"ok": True, "name": request.name, "availability": request.availability}
