"""The runner's control socket: JSON lines over a Unix socket beside the store.

Requests are one JSON object per line with an ``op``; replies are one object per line.
``subscribe`` {events?: bool, max_events?: int} turns the connection into a feed: a
``snapshot`` first, then a ``tick`` about every 100 ms with the newest transcript events per
running trial (``skipped`` counts what a tick left out: the store has everything), the
meters that changed, the trials that finished, the progress and a fleet's ``nodes`` when
they changed; ``finished`` when the
schedule ends. A client that is slow, crashes or quits is dropped without the runner
noticing beyond that.

Ops: ``hello``, ``status``, ``subscribe``, ``kill`` {trial, reason?}, ``pause`` and ``resume``
{model?, cli?}, ``budget`` {trial? | model?, cli?; wall_seconds?, tokens?, usd?}, ``cap`` {scope:
run|provider|model, name?, usd?, tokens?}, ``hold`` {trial, seconds?: 0..30, 0 releases}
(holds a trial's budget kill while the operator types a raise; a raise ends it), ``node``
{name, availability: active|drain} (a fleet's node takes new trials or none), ``stop``. Each request is checked
whole (``requests``): an unknown op or field, a wrong type, a budget that is not finite and
positive is refused with ``{"ok": false, "error": ...}`` and changes nothing. The socket
answers as soon as the runner has the store, before the first trial: while it prepares
(services, task images), ``hello`` says ``preparing`` and subscribers get ``preparing``
messages.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, Required, TypedDict, cast, overload

import orjson

from ..paths import socket_path

MAX_LINE = 64 << 20
LIVE_TEXT = 2000  # characters of an event's text sent to live clients; the store keeps it all


# -- the feed's messages ---------------------------------------------------------------------
# Sent as JSON objects (these are their shapes; the runner builds them as plain dicts, so
# encoding stays one orjson call). ``type`` tells them apart (a tagged union: testing
# ``message["type"]`` narrows a FeedMessage to one of them; a client takes a line for one only
# through ``feed_message``, which checks that tag). What JSON changes on the way: the
# int keys of ``events``/``skipped`` arrive as strings, a LiveEvent arrives as a list.

# One transcript event as live clients get it: (seq, ts, kind, stream, text[:LIVE_TEXT]), its
# EventRow's fields (core/rows.py) without the trial id and the raw line. A plain tuple, not a
# NamedTuple: orjson writes a tuple as the JSON array it always was, and refuses a NamedTuple.
LiveEvent = tuple[int, float | None, str, str, str]


class Meter(TypedDict):
    """One trial as the feed describes it (``TrialRun.meter``)."""

    id: int | None
    task: str
    model: str
    cli: str
    trial: int
    status: str  # a TrialStatus value
    reason: str | None
    tokens: dict[str, int]  # per token class (core.usage.TOKEN_CLASSES)
    cost_usd: float | None
    reported_cost_usd: float | None
    turns: int
    tool_calls: int
    flags: list[str]
    elapsed: float | None  # seconds since it started, None once it is final
    budget: dict[str, Any]  # Budget.model_dump(): wall_seconds, tokens, usd
    events: int
    metered_by: Literal["proxy", "cli"]
    reported_tokens: dict[str, int] | None  # the CLI's own figures, behind the proxy
    node: str | None  # the fleet node it runs on (swarm sandbox), once placed; None elsewhere
    budget_hold: float | None  # seconds left of the operator's hold on its budget kill (op ``hold``)


class Progress(TypedDict, total=False):
    done: int
    total: int
    running: int
    queued: int
    paused: bool
    stopping: bool
    held: list[str]  # why our side holds new trials back (a full disk, a model server restarting)
    cap_held: str | None  # the cap hold among them: a cap (reached, or committed spend) holds the schedule
    preparing: str  # before the first trial: what the runner is doing (building a task's image...)
    caps: list[dict[str, Any]]  # CapLedger.status(): scope, name, usd, tokens, spent_usd, spent_tokens, share, state
    paused_models: list[str]  # paused alone while the rest runs
    paused_clis: list[str]
    # forecast.Forecast.project() without its cells: basis (trials it rests on), usd and tokens
    # {spent, projected, low, high} (never below the caps' spend), finish {seconds_left, at, low,
    # high} (all None and ``held``: "held: ..." or "paused" while the schedule starts nothing),
    # models {id: {usd, tokens}}
    forecast: dict[str, Any]


class NodeState(TypedDict):
    """One node of a fleet (a Swarm's): its state and the trials running on it now."""

    name: str
    state: Literal["ready", "drain", "down"]
    running: int
    slots: int  # trials it holds at once (its CPUs and memory over a trial's reservations)
    seen: float | None  # wall time the manager last reported it ready (its heartbeats arrive)


class Snapshot(TypedDict):
    type: Literal["snapshot"]
    run_id: int | None
    suite: str
    db: str
    pid: int
    started: float
    progress: Progress
    running: list[Meter]
    subscribers: int  # clients following the feed now (the headless printer, TUIs)
    done: list[Meter]  # the trials this run finished before the client attached
    nodes: list[NodeState]  # a fleet's nodes (the swarm sandbox's); [] for other sandboxes
    forecast_cells: dict[str, dict[str, float]]  # "task|model|cli" -> projected final usd, tokens
    prepared: list[str]  # while the runner prepares: what it has told so far, oldest first


class Tick(TypedDict, total=False):
    type: Required[Literal["tick"]]
    ts: float
    meters: list[Meter]
    finished: list[Meter]
    progress: Progress
    events: dict[int, list[LiveEvent]]  # newest events per trial, at most max_events each
    skipped: dict[int, int]  # events per trial a tick left out (the store has them)
    nodes: list[NodeState]  # a fleet's nodes, when they changed (at most once per NODES_EVERY)


class Preparing(TypedDict):
    """Sent (before the first trial) each time what the runner prepares changes."""

    type: Literal["preparing"]
    text: str  # e.g. "task images 2/9: building fix-git: Step 3/12 : RUN apt-get ..."


class Finished(TypedDict, total=False):
    type: Required[Literal["finished"]]
    status: str  # "finished", "stopped", or "failed" (the run could not start: ``error`` says why)
    progress: Progress
    error: str


FeedMessage = Snapshot | Tick | Preparing | Finished
FEED_TYPES = frozenset({"snapshot", "tick", "preparing", "finished"})  # the tags of FeedMessage


# -- the replies to requests -----------------------------------------------------------------
# One JSON object per request; ``ok`` tells a refusal from the rest. A client raises on a
# refusal and takes the rest for the reply its op gets (``ControlClient.request``, ``UiSession
# .request``), unchecked beyond ``ok``: another process wrote them, perhaps an older runner, so
# a client reads what it needs with ``.get`` as before.


class Refused(TypedDict):
    """A request checked and refused (nothing of it was applied), or one the runner cannot
    answer now (still preparing)."""

    ok: Literal[False]
    error: str


class HelloReply(TypedDict):
    ok: Literal[True]
    run_id: int | None
    suite: str
    pid: int
    db: str
    preparing: str | None  # what the runner prepares before its first trial; None once it runs


class StatusReply(Snapshot):
    """``status``, and the first message of a ``subscribe``: the snapshot."""

    ok: Literal[True]


class Done(TypedDict):
    """``stop``: it stops starting trials and stops the running ones."""

    ok: Literal[True]


class PauseReply(TypedDict, total=False):
    ok: Required[Literal[True]]
    paused: Required[bool]
    model: str | None  # these two when the op named a model or CLI (the rest runs on)
    cli: str | None


class BudgetReply(TypedDict, total=False):
    ok: Required[Literal[True]]
    budget: Required[dict[str, Any]]  # the limits asked for; a trial's: its whole budget after the raise
    trial: int | None  # the trial raised
    model: str | None  # the cell, model or CLI raised, with how many of its running trials
    cli: str | None
    running: int


class KillReply(TypedDict):
    ok: Literal[True]
    trial: int | None


class HoldReply(TypedDict):
    ok: Literal[True]
    trial: int | None
    held: float | None  # seconds left of the hold; None: released (seconds 0)


class CapReply(TypedDict):
    ok: Literal[True]
    scope: Literal["run", "provider", "model"]
    name: str | None
    cap: dict[str, Any]  # the cap as it is now (Cap.model_dump())


class NodeReply(TypedDict):
    ok: Literal[True]
    name: str
    availability: Literal["active", "drain"]


class RerunReply(TypedDict):
    ok: Literal[True]
    added: int  # cells queued again


Reply = (Refused | HelloReply | StatusReply | Done | PauseReply | BudgetReply | KillReply | HoldReply | CapReply
         | NodeReply | RerunReply)
# What a request that was not refused gets: Reply without Refused (an op not known statically).
Answer = (HelloReply | StatusReply | Done | PauseReply | BudgetReply | KillReply | HoldReply | CapReply | NodeReply
          | RerunReply)


class ControlError(Exception):
    pass


class NotListening(ControlError):
    """Nothing listens on the store's control socket: no runner runs for it."""


class Hangup(ControlError):
    """The runner closed the connection without answering: it is going down."""


def encode(message: Mapping[str, Any]) -> bytes:
    return orjson.dumps(message, option=orjson.OPT_NON_STR_KEYS) + b"\n"


def feed_message(decoded: Any) -> FeedMessage | None:
    """One decoded feed line as the message its ``type`` says, or None when it is not one this
    client knows (a newer runner's type, or no type): skipped, as the UI always skipped them.
    A refusal to be followed (``{"ok": false, "error": ...}``: the door full, bad options)
    raises ControlError, as ``ControlClient.request`` raises for a refused request.

    Only the tag is checked: the fields are the runner's to get right (``feed.py`` builds
    them to these shapes), as they were when clients read plain dicts."""
    if not isinstance(decoded, dict):
        return None
    if decoded.get("ok") is False:
        raise ControlError(decoded.get("error") or "the runner refused to be followed")
    if decoded.get("type") not in FEED_TYPES:
        return None
    return cast(FeedMessage, decoded)


class ControlClient:
    """A blocking client for scripts and commands (``status``, ``kill``, ``attach``)."""

    def __init__(self, db: str | Path, timeout: float | None = 10.0):
        self.path = socket_path(Path(db))
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(str(self.path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            self.sock.close()
            raise NotListening(f"no runner is listening for {db} ({exc.strerror})") from None
        self.reader = self.sock.makefile("rb")

    def close(self) -> None:
        try:
            self.reader.close()
        finally:
            self.sock.close()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Typed for the ops callers name as literals and read fields of; an op in a variable (the
    # command line's) gets the generic Answer.
    @overload
    def request(self, op: Literal["hello"], **fields: Any) -> HelloReply: ...
    @overload
    def request(self, op: Literal["status"], **fields: Any) -> StatusReply: ...
    @overload
    def request(self, op: str, **fields: Any) -> Answer: ...

    def request(self, op: str, **fields: Any) -> Any:
        """The reply to ``op``; a refusal raises ControlError with its words."""
        try:
            self.sock.sendall(encode({"op": op, **fields}))
            line = self.reader.readline()
        except (ConnectionResetError, BrokenPipeError):  # a runner going down resets, not closes
            line = b""
        if not line:
            raise Hangup("the runner closed the connection")
        reply = orjson.loads(line)
        if not reply.get("ok", False):
            raise ControlError(reply.get("error", "request failed"))
        return reply

    def subscribe(self, events: bool = True, max_events: int | None = None) -> Iterator[FeedMessage]:
        """The feed's messages until the runner closes the connection, or resets it: a runner
        that ends while the request is still unread (a run over at once) resets, not closes.
        Lines that are no message this client knows are skipped; a refusal raises ControlError
        (``feed_message``)."""
        try:
            self.sock.sendall(encode({"op": "subscribe", "events": events, "max_events": max_events}))
            self.sock.settimeout(None)
            for line in self.reader:
                if (message := feed_message(orjson.loads(line))) is not None:
                    yield message
        except (ConnectionResetError, BrokenPipeError):
            return


async def open_async(db: str | Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """An asyncio connection for clients that live in an event loop (the TUI)."""
    try:
        return await asyncio.open_unix_connection(str(socket_path(Path(db))), limit=MAX_LINE)
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        raise NotListening(f"no runner is listening for {db} ({exc.strerror})") from None


def runner_alive(db: str | Path) -> bool:
    """Whether a runner holds the store's control socket. One that took the connection but did
    not answer in time is alive and busy (a loaded machine): saying it was not running made
    `attach` turn the operator away from a run that was going on."""
    try:
        with ControlClient(db, timeout=2) as client:
            client.request("hello")
    except (NotListening, Hangup, json.JSONDecodeError):
        return False
    except (TimeoutError, ControlError):  # busy, or refusing in its own words (a full door)
        return True
    except OSError:
        return False
    return True
