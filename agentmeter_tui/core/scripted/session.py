"""ScriptedSessions of the scripted model server: one per API key, each with its scenario, turn
cursor, the usage it served and its request log.

Concurrent trials share one server by using different API keys. All state changes happen on
the event loop between awaits, so taking the next turn is atomic without locks.
"""

from __future__ import annotations

import hashlib
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..usage import TokenUsage
from .replies import OfferedTool, Reply, reply_for_turn, sample_json
from .scenario import DEFAULT_USAGE, SIDE_CALL_USAGE, Scenario

LOG_LIMIT = 200  # requests kept in memory per session (bodies can be 100+ KB); --log files keep all
REDACTED = "[redacted]"
_SECRET_HEADERS = {"authorization", "proxy-authorization", "cookie", "set-cookie"}


def is_secret_name(name: str) -> bool:
    lowered = name.lower()
    return lowered in _SECRET_HEADERS or "key" in lowered or "token" in lowered


def redact(pairs: Any) -> dict[str, str]:
    """Headers or query parameters with the values of secret-looking names replaced."""
    return {str(name): (REDACTED if is_secret_name(name) else str(value)) for name, value in pairs.items()}


def key_label(key: str) -> str:
    """A name for a session that does not reveal its key (used in logs and file names)."""
    return "k" + hashlib.sha256(key.encode()).hexdigest()[:12]


@dataclass(slots=True)
class ServedCall:
    call: int
    protocol: str
    answer: str
    turn: int | None
    status: int
    usage: TokenUsage
    completed: bool = False  # the whole response reached the client (its usage was delivered)

    def as_dict(self) -> dict[str, Any]:
        return {"call": self.call, "protocol": self.protocol, "answer": self.answer, "turn": self.turn,
                "status": self.status, "completed": self.completed, "usage": self.usage.as_dict()}


@dataclass
class ScriptedSession:
    key: str
    scenario: Scenario
    scenario_path: str | None
    label: str = ""
    turn_index: int = 0  # next scenario turn (0-based)
    turn_used: int = 0  # calls already answered by that turn (for `repeat`)
    calls: list[ServedCall] = field(default_factory=list)
    log: deque = field(default_factory=lambda: deque(maxlen=LOG_LIMIT))
    requests_seen: int = 0

    def __post_init__(self) -> None:
        self.label = self.label or key_label(self.key)

    def next_reply(self, tools: list[OfferedTool], protocol: str, wanted_json: dict | None = None) -> Reply:
        """Take the answer for the next model call and record it as served (not yet completed)."""
        number = len(self.calls) + 1
        call_id = f"call_{self.label}_{number}"
        if not tools and not self.scenario.toolless_turns:
            # Side calls (titles, summaries, a loop check) offer no tools; they must not shift the
            # script. One that asks for structured output gets JSON that fits its schema.
            text = "Scripted session" if wanted_json is None else orjson.dumps(sample_json(wanted_json)).decode()
            reply = Reply(kind="side", text=text, usage=SIDE_CALL_USAGE)
        elif self.turn_index < len(self.scenario.turns):
            turn = self.scenario.turns[self.turn_index]
            reply = reply_for_turn(turn, self.turn_index + 1, tools, number, call_id)
            if not turn.loop:
                self.turn_used += 1
                if self.turn_used >= turn.repeat:
                    self.turn_index, self.turn_used = self.turn_index + 1, 0
        else:
            reply = Reply(kind="exhausted", text="Done.", usage=DEFAULT_USAGE)
        reply.message_id = f"{self.label}_{number}"
        status = reply.error.status if reply.error else 200
        usage = TokenUsage() if reply.error else reply.usage
        self.calls.append(ServedCall(number, protocol, reply.label, reply.turn, status, usage))
        return reply

    def usage_served(self) -> TokenUsage:
        total = TokenUsage()
        for call in self.calls:
            if call.completed:
                total = total + call.usage
        return total

    def info(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "scenario": self.scenario_path,
            "description": self.scenario.description,
            "turns": len(self.scenario.turns),
            "next_turn": self.turn_index + 1,
            "calls": len(self.calls),
            "requests": self.requests_seen,
            "served": [call.as_dict() for call in self.calls],
            "usage": self.usage_served().as_dict(),
        }


class ScriptedSessions:
    """Key -> session, with a default scenario for keys nobody registered."""

    def __init__(self, default: Scenario | None = None, default_path: str | None = None,
                 log_dir: Path | None = None):
        self.default, self.default_path = default, default_path
        self.log_dir = log_dir
        self.by_key: dict[str, ScriptedSession] = {}
        self.unmatched: deque = deque(maxlen=LOG_LIMIT)  # requests that found no session
        if log_dir is not None:
            log_dir.mkdir(parents=True, exist_ok=True)

    def register(self, key: str, scenario: Scenario, path: str | None,
                 label: str | None = None) -> ScriptedSession:
        session = ScriptedSession(key, scenario, path, label=label or "")
        self.by_key[key] = session
        return session

    def lookup(self, key: str | None) -> ScriptedSession | None:
        if key is None:
            return None
        session = self.by_key.get(key)
        if session is None and self.default is not None:
            session = self.register(key, self.default, self.default_path)
        return session

    def record(self, session: ScriptedSession | None, entry: dict[str, Any]) -> None:
        """Keep a finished request's log entry in memory and, with ``--log``, in a JSONL file."""
        target = session.log if session is not None else self.unmatched
        target.append(entry)
        if self.log_dir is not None:
            name = session.label if session is not None else "unmatched"
            with open(self.log_dir / f"{name}.jsonl", "ab") as out:
                out.write(orjson.dumps(entry) + b"\n")


def log_entry(request: Any, raw_body: bytes, protocol: str | None, received: float) -> dict[str, Any]:
    """The start of a request log entry; :func:`finish_entry` adds the outcome."""
    try:
        body: Any = orjson.loads(raw_body) if raw_body else None
    except orjson.JSONDecodeError:
        body = raw_body[:65536].decode("utf-8", "replace")
    return {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(received)) + f".{int(received % 1 * 1000):03d}Z",
        "method": request.method,
        "path": request.path,
        "query": redact(request.query),
        "headers": redact(request.headers),
        "body": body,
        "protocol": protocol,
        "_received": time.monotonic(),
    }


def finish_entry(entry: dict[str, Any], status: int, answer: str | None, outcome: str,
                 first_byte: float | None) -> dict[str, Any]:
    started = entry.pop("_received")
    now = time.monotonic()
    entry.update(
        status=status,
        answer=answer,
        outcome=outcome,
        first_byte_ms=round((first_byte - started) * 1000, 2) if first_byte else None,
        total_ms=round((now - started) * 1000, 2),
    )
    return entry
