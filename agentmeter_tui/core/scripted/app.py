"""The aiohttp application of the scripted model server.

Routes: the control endpoints under ``/_scripted/`` (register a session, read its served usage
and request log, health) and the OpenAI/Anthropic model listing; every other request goes to
the wire protocol whose path it is (``core/wire/``): a model call is answered from the
caller's session by that protocol's scripted class, a side endpoint of a protocol (token
counting, listings) without taking a turn. Any other path answers 404 and is logged, so
unknown endpoints of a CLI show up.

The control endpoints (all but health) are the runner's alone (issue 37, attack 12): they
need the control key the server was started with, in the ``X-Agentmeter-Control`` header
(401 without it, 403 with another); a trial's model key never works there. A session's
scenario comes as its text: no path a request names is ever opened.
"""

from __future__ import annotations

import asyncio
import hmac
import socket
import struct
import time
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from ..registry import load
from ..tomlerrors import InputError
from ..wire import find_key, get_protocol, protocol_for, protocols
from .control import CONTROL_HEADER, new_control_key
from .scenario import Scenario, load_scenario, scenario_from_text
from .session import ScriptedSession, ScriptedSessions, finish_entry, log_entry
from .protocol import DEFAULT_MODELS, ScriptedProtocol, ScriptedRequest

SESSIONS = web.AppKey("sessions", ScriptedSessions)
CONTROL = web.AppKey("control", str)  # the key of the control endpoints
NO_SESSION = ("no scripted session for this API key: register it with POST /_scripted/sessions "
              "(key, scenario, toml; with the server's control key) or start the server with --scenario FILE")
_SCRIPTED: dict[str, ScriptedProtocol] = {}


def scripted(name: str) -> ScriptedProtocol:
    """The scripted class of a wire protocol, as the protocol names it (one instance each)."""
    target = get_protocol(name).scripted
    if target not in _SCRIPTED:
        _SCRIPTED[target] = load(target)()
    return _SCRIPTED[target]


def json_body(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, headers=headers,
                        content_type="application/json")


async def _send(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    # Prepared and finished here, not by aiohttp after we return, so a vanished client is seen.
    await response.prepare(request)
    await response.write_eof()
    return response


class _Call:
    """One logged request: the session it belongs to, its log entry, and how it ended."""

    def __init__(self, request: web.Request, protocol: str | None, raw: bytes):
        self.sessions = request.app[SESSIONS]
        self.entry = log_entry(request, raw, protocol, time.time())
        self.session: ScriptedSession | None = self.sessions.lookup(find_key(request.headers, request.query))
        if self.session is not None:
            self.session.requests_seen += 1
        self.status = 0
        self.answer: str | None = None  # the scripted reply's label, or why there was none
        self.outcome = "completed"
        self.first_byte: float | None = None  # monotonic time of a stream's first frame
        self.delivered = False  # every byte of the answer handed to the client

    def done(self) -> None:
        entry = finish_entry(self.entry, self.status, self.answer, self.outcome, self.first_byte)
        self.sessions.record(self.session, entry)


async def _stream(request: web.Request, protocol: ScriptedProtocol, call: _Call, served: Any, reply: Any,
                  model: Any, req: ScriptedRequest, headers: dict) -> web.StreamResponse:
    """The scripted reply as the protocol's event stream, held or cut after the first frame as
    the scenario says."""
    response = web.StreamResponse(headers={**protocol.sse_headers, **headers})
    await response.prepare(request)
    for number, frame in enumerate(protocol.stream(reply, model, req)):
        await response.write(frame)
        if number == 0:
            call.first_byte = time.monotonic()
            if reply.stall_ms:
                await asyncio.sleep(reply.stall_ms / 1000)
            if reply.reset:
                return _reset(request, response, call)
    # Every frame is the client's: one that hangs up on the last event, before the
    # chunked stream's end, had its answer whole (as the proxy counts it).
    served.completed = call.delivered = True
    await response.write_eof()
    return response


async def model_call(request: web.Request, protocol: ScriptedProtocol) -> web.StreamResponse:
    raw = await request.read()
    call = _Call(request, protocol.name, raw)
    try:
        try:
            body = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            call.status, call.answer = 400, "bad request"
            return await _send(request, json_body(protocol.error_body(400, "request body is not a JSON object"), 400))
        if call.session is None:
            call.status, call.answer = 401, "no session"
            return await _send(request, json_body(protocol.error_body(401, NO_SESSION), 401))
        req = ScriptedRequest(body, request.query, protocol.path_match(request.path))
        reply = call.session.next_reply(protocol.offered_tools(body), protocol.name, protocol.wanted_json(body))
        served = call.session.calls[-1]
        call.answer, call.entry["call"] = reply.label, served.call
        if reply.delay_ms:
            await asyncio.sleep(reply.delay_ms / 1000)
        headers = protocol.response_headers(reply)
        if reply.error is not None:
            error = reply.error
            call.status = error.status
            if error.retry_after is not None:
                headers["retry-after"] = f"{error.retry_after:g}"
            response = await _send(request, json_body(protocol.error_body(error.status, error.message, error.type),
                                                      error.status, headers))
            served.completed = True
            return response
        model = protocol.model(req)
        call.status = 200
        if protocol.wants_stream(req):
            return await _stream(request, protocol, call, served, reply, model, req, headers)
        if reply.stall_ms:  # nothing to hold mid-body: a stall just delays the whole answer
            await asyncio.sleep(reply.stall_ms / 1000)
        if reply.reset:
            return _reset(request, None, call)
        response = await _send(request, json_body(protocol.complete(reply, model, req), 200, headers))
        served.completed = True
        return response
    except (asyncio.CancelledError, ConnectionResetError):
        if not call.delivered:
            call.outcome = "client disconnected"
        raise
    finally:
        call.done()


def _reset(request: web.Request, response: web.StreamResponse | None, call: _Call) -> web.StreamResponse:
    """A connection the provider's side drops mid-answer: a TCP reset (linger 0, then abort),
    so the client reads ECONNRESET, not a clean end of stream. The call is not completed."""
    call.outcome = "reset by the scenario"
    transport = request.transport
    if transport is not None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    return response if response is not None else web.Response(status=200)


async def _side_endpoint(request: web.Request, protocol: str | None, answer: str, data: Any,
                         status: int = 200) -> web.StreamResponse:
    call = _Call(request, protocol, await request.read())
    call.status, call.answer = status, answer
    try:
        return await _send(request, json_body(data, status))
    except (asyncio.CancelledError, ConnectionResetError):
        call.outcome = "client disconnected"
        raise
    finally:
        call.done()


async def dispatch(request: web.Request) -> web.StreamResponse:
    """A request of no control route: a model call or a side endpoint of a protocol, else 404."""
    name = protocol_for(request.path) if request.method == "POST" else None
    if name is not None:
        return await model_call(request, scripted(name))
    raw = await request.read()
    for wire in protocols():
        side = scripted(wire.name).side_answer(request.method, request.path, raw)
        if side is not None:
            return await _side_endpoint(request, wire.name, *side)
    return await not_found(request)


async def list_models(request: web.Request) -> web.StreamResponse:
    # One listing that satisfies both OpenAI's and Anthropic's shape.
    data = [{"id": name, "object": "model", "created": 0, "owned_by": "agentmeter", "type": "model",
             "display_name": name, "created_at": "2026-01-01T00:00:00Z"} for name in DEFAULT_MODELS]
    return await _side_endpoint(request, None, "model list", {
        "object": "list", "data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]})


async def not_found(request: web.Request) -> web.StreamResponse:
    message = f"the scripted model server has no endpoint {request.method} {request.path}"
    return await _side_endpoint(request, None, "unknown endpoint", {"error": {"message": message}}, 404)


# Control endpoints -------------------------------------------------------------------------------

async def health(request: web.Request) -> web.Response:
    return json_body({"ok": True, "sessions": len(request.app[SESSIONS].by_key)})


def control_route(handler):
    """``handler`` for the holder of the server's control key only (compared in constant time)."""
    async def guarded(request: web.Request) -> web.StreamResponse:
        given = request.headers.get(CONTROL_HEADER)
        if not given:
            return json_body({"error": f"the control endpoints need the server's control key ({CONTROL_HEADER})"},
                             401)
        if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"), request.app[CONTROL].encode()):
            return json_body({"error": "wrong control key"}, 403)
        return await handler(request)

    return guarded


async def register(request: web.Request) -> web.Response:
    try:
        data = await request.json(loads=orjson.loads)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("key"), str) or not data["key"]:
        return json_body({"error": "expected a JSON object with \"key\", \"scenario\" and \"toml\""}, 400)
    name, text = data.get("scenario"), data.get("toml")
    if not isinstance(name, str) or not name or not isinstance(text, str):
        # Never a path to open: the server runs as whoever started it (root on CI) and would
        # open and echo any file a caller named.
        return json_body({"error": "\"scenario\" names the scenario and \"toml\" is its text: "
                                   "the server opens no file a request names"}, 400)
    try:
        scenario = scenario_from_text(text, name)
    except InputError as exc:
        return json_body({"error": str(exc), "file": exc.path, "line": exc.line, "field": exc.field}, 400)
    label = data.get("label") if isinstance(data.get("label"), str) else None
    session = request.app[SESSIONS].register(data["key"], scenario, name, label)
    return json_body({"label": session.label, "scenario": name, "turns": len(scenario.turns)})


def _session_or_404(request: web.Request) -> ScriptedSession | web.Response:
    session = request.app[SESSIONS].by_key.get(request.match_info["key"])
    return session if session is not None else json_body({"error": "no session with this key"}, 404)


async def session_info(request: web.Request) -> web.Response:
    session = _session_or_404(request)
    return session if isinstance(session, web.Response) else json_body(session.info())


async def session_requests(request: web.Request) -> web.Response:
    session = _session_or_404(request)
    return session if isinstance(session, web.Response) else json_body({"requests": list(session.log)})


async def session_delete(request: web.Request) -> web.Response:
    session = _session_or_404(request)
    if isinstance(session, web.Response):
        return session
    del request.app[SESSIONS].by_key[session.key]
    return json_body({"deleted": session.label})


async def unmatched_requests(request: web.Request) -> web.Response:
    return json_body({"requests": list(request.app[SESSIONS].unmatched)})


def create_app(scenario: str | Path | None = None, log_dir: str | Path | None = None,
               control_key: str | None = None) -> web.Application:
    """The server; ``scenario`` plays for keys nobody registered (else they get 401);
    ``control_key`` opens the control endpoints (None: a random one, ``app[CONTROL]``)."""
    default: Scenario | None = load_scenario(scenario) if scenario else None
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[CONTROL] = control_key or new_control_key()
    app[SESSIONS] = ScriptedSessions(default, str(scenario) if scenario else None,
                                     Path(log_dir) if log_dir else None)
    add = app.router.add_route
    add("GET", "/_scripted/health", health)
    add("POST", "/_scripted/sessions", control_route(register))
    add("GET", "/_scripted/requests", control_route(unmatched_requests))
    add("GET", "/_scripted/sessions/{key}", control_route(session_info))
    add("DELETE", "/_scripted/sessions/{key}", control_route(session_delete))
    add("GET", "/_scripted/sessions/{key}/requests", control_route(session_requests))
    add("*", "/_scripted/{tail:.*}", control_route(not_found))  # no other control path is a model call
    for prefix in ("/v1", ""):  # base URLs are given with and without /v1
        add("GET", f"{prefix}/models", list_models)
    add("*", "/{tail:.*}", dispatch)
    return app
