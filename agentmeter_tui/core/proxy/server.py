"""The metering proxy: an aiohttp server on 127.0.0.1, inside the runner's event loop.

Each trial gets a :class:`~.calls.Route` with its own proxy key; the CLI is given the proxy's
URL and that key instead of the provider's. A request is matched to its route by the key,
the key is swapped for the real one in the header (or query parameter) it came in, and the
request goes to the provider. The answer streams back chunk by chunk as it arrives, bytes
unchanged, while a :class:`~.scan.UsageScanner` reads its usage; the usage is metered into
the trial before the chunk carrying it is passed on, so a CLI cannot start its next call
before the budget has seen this one. A model call from a trial that is over budget (or
being stopped) is refused in its protocol's error shape and never reaches the provider.

Keys are never logged: error messages name the path, never the URL's query string.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import secrets
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp import web
from yarl import URL

from ..wire import PROTOCOLS, error_body, find_key, get_protocol
from .calls import CallSink, ProxyCall, Route
from .limits import KEEPALIVE, MAX_ROUTE_CONNECTIONS, ConnectionGuard, admit_connection
from .scan import UsageScanner
from .target import TargetRefused, canonical_path, find_endpoint
from .forward import MAX_ERROR_BODY, read_error, response_headers, upstream_headers, upstream_query

KEY_PREFIX = "amp-"
KEY_BYTES = 24  # 192 random bits per trial's key (secrets), never derived from anything the agent sees
SHUTDOWN_TIMEOUT = 0.5
ANSWER_DRAIN = 1.5  # seconds the rest of an answer is read for its figures once its CLI is gone
# Seconds a finished trial waits for its last calls to be recorded: a fail-safe only, since each
# call ends on its own within ANSWER_DRAIN of its CLI going. The margin is for a loaded loop: a
# stall past both deadlines wakes them together, and a wait of ANSWER_DRAIN + 0.5 s gave up on
# a call whose drain had just ended and was being recorded (its usage lost).
DRAIN_TIMEOUT = ANSWER_DRAIN + 3.5


class MeteringProxy:
    """``await proxy.start()``; ``route(...)`` per trial; ``await proxy.close()``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, log: Callable[[str], None] | None = None):
        self.host, self.port = host, port
        self.routes: dict[bytes, Route] = {}  # by the digest of the route's key (_digest)
        self.base_url = ""
        self._log = log or (lambda text: print(text, file=sys.stderr, flush=True))
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None
        self._listener: asyncio.AbstractServer | None = None
        self._guard: ConnectionGuard | None = None

    async def start(self) -> str:
        app = web.Application(client_max_size=256 << 20)  # bodies with long histories get large
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None,
                                     shutdown_timeout=SHUTDOWN_TIMEOUT, keepalive_timeout=KEEPALIVE)
        await self._runner.setup()
        sock = socket.create_server((self.host, self.port), backlog=1024)
        loop = asyncio.get_running_loop()
        guard = self._guard = ConnectionGuard(loop)
        server = self._runner.server
        assert server is not None  # made by setup()

        def connection() -> Any:  # aiohttp's handler, timed until its first request head is in
            handler = server()
            guard.watch(handler)
            return handler

        self._listener = await loop.create_server(connection, sock=sock, backlog=1024)
        self.port = sock.getsockname()[1]
        # No read timeout: a model may think for minutes; the CLI and the budgets decide.
        timeout = aiohttp.ClientTimeout(total=None, connect=30, sock_read=None)
        self._client = aiohttp.ClientSession(timeout=timeout, auto_decompress=False,
                                             connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
                                             skip_auto_headers=("User-Agent", "Accept-Encoding"))
        self.base_url = f"http://{self.host}:{self.port}"
        return self.base_url

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            if self._guard is not None:  # made with the listener
                self._guard.close_all()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._client is not None:
            await self._client.close()

    # -- routes --------------------------------------------------------------------------------

    def route(self, upstream: str, upstream_key: str, sink: CallSink, label: str = "", limiter=None,
              protocols: tuple[str, ...] | None = None) -> Route:
        """A new route with a fresh proxy key (give the CLI ``route.key`` and ``self.base_url``);
        ``limiter`` (a :class:`~.limits.CallRate`) caps the calls per minute of its provider;
        ``protocols`` are those whose endpoints it may call (every protocol when None)."""
        key = KEY_PREFIX + secrets.token_urlsafe(KEY_BYTES)
        route = Route(key, upstream.rstrip("/"), upstream_key, sink, label, limiter=limiter,
                      protocols=tuple(protocols) if protocols else tuple(PROTOCOLS.names()))
        self.routes[_digest(key)] = route
        return route

    async def release(self, route: Route, timeout: float = DRAIN_TIMEOUT) -> None:
        """Wait (briefly) for the route's calls in flight to be recorded, then forget it.
        Called once the trial's agent is gone, so its connections are closing already."""
        try:
            await asyncio.wait_for(route.idle.wait(), timeout)
        except TimeoutError:
            self._log(f"proxy: {route.label}: {route.inflight} call(s) still open after the trial ended")
        self.routes.pop(_digest(route.key), None)

    def find_route(self, key: str | None) -> Route | None:
        """The route of a presented key. Looked up by the key's digest, so the time taken says
        nothing about how much of a real key a guess had right."""
        route = self.routes.get(_digest(key)) if key else None
        return route if route is not None and key is not None and hmac.compare_digest(route.key, key) else None

    # -- requests ------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        assert self._guard is not None  # made by start(), before the listener takes a connection
        self._guard.arrived(request.protocol)
        route = self.find_route(find_key(request.headers, request.query))
        try:
            path, refusal = canonical_path(request.raw_path), None
        except TargetRefused as exc:
            path, refusal = request.raw_path.split("?", 1)[0][:200], str(exc)
        endpoint = None if refusal else find_endpoint(request.method, path, route.protocols if route else
                                                      tuple(PROTOCOLS.names()))
        protocol = endpoint.protocol if endpoint else route.protocols[0] if route else None
        if route is None:
            return _json_error(protocol, 401, "agentmeter proxy: unknown or expired key (is the trial still running?)")
        if not admit_connection(route.connections, request.protocol):
            refused = _json_error(protocol, 429, f"agentmeter proxy: this trial has {MAX_ROUTE_CONNECTIONS} "
                                  "connections open already; use fewer")
            refused.force_close()  # its place is not taken: the connection goes with the answer
            return refused
        route.requests += 1
        call = ProxyCall(route.requests, protocol, request.method, path,
                         side=endpoint is not None and not endpoint.model_call)
        route.enter()
        try:
            if endpoint is None:  # not an endpoint of its protocol: refused, never passed on
                refusal = refusal or f"{request.method} {path} is not an endpoint of {' or '.join(route.protocols)}"
                route.refused += 1
                call.status, call.outcome, call.note = 404, "refused", f"not a model endpoint: {refusal}"
                return _json_error(protocol, 404, f"agentmeter proxy: {refusal}; only model calls pass")
            return await self._forward(request, route, call)
        finally:
            call.total_ms = round((time.monotonic() - call.clock) * 1000, 2)
            try:
                route.sink.on_proxy_call(call)
            except Exception as exc:  # a sink bug must not break the CLI's call
                self._log(f"proxy: {route.label}: recording a call failed: {exc!r}")
            route.leave()

    async def _meter_rest(self, route: Route, call: ProxyCall, scanner: UsageScanner | None,
                          content: aiohttp.StreamReader, deadline: float | None = None) -> None:
        """The CLI went away mid-answer. The provider bills an answer it finished, so the rest of
        it is still read, for its final figures only (nothing is passed on), until its end or
        ``deadline`` at most (ANSWER_DRAIN seconds after the CLI went away); an answer cut there
        keeps its partial figures.
        Reading only what had already arrived missed a call the server had finished sending
        while the proxy was still passing on its start (the codex kill cell, 1 run in ~10)."""
        if scanner is None:
            return
        try:
            loop = asyncio.get_running_loop()
            async with asyncio.timeout_at(deadline if deadline is not None else loop.time() + ANSWER_DRAIN):
                async for chunk in content.iter_any():
                    if scanner.feed(chunk):
                        self._meter(route, call, scanner)
        except (TimeoutError, aiohttp.ClientError, OSError, RuntimeError):  # cut: the partial figures stay
            return
        if scanner.finish():
            self._meter(route, call, scanner)

    async def _forward(self, request: web.Request, route: Route, call: ProxyCall) -> web.StreamResponse:
        body = await request.read()
        protocol = call.protocol
        assert protocol is not None  # a call with a route: its endpoint's protocol, or the route's first
        if not call.side:
            call.model = get_protocol(protocol).request_model(call.path, body)
            reserve = getattr(route.sink, "reserve_call", None)  # the run's caps: wait for room
            if reserve is not None:
                await reserve(call)
            refusal = route.sink.admit_call()
            if refusal is not None:
                route.refused += 1
                call.status, call.outcome = 400, "refused"
                call.note = refusal
                return _json_error(protocol, 400, f"agentmeter: {refusal}; no further model calls for this trial")
            if route.limiter is not None:  # the provider's calls-per-minute cap: wait, never refuse
                notify = getattr(route.sink, "on_proxy_wait", None)
                await route.limiter.acquire(None if notify is None else lambda seconds: notify(call, seconds))
            route.calls += 1
        drain = _Drain()
        exchange = asyncio.ensure_future(self._exchange(request, route, call, body, drain))
        exchange.add_done_callback(lambda task: task.cancelled() or task.exception())  # a late error is its own
        try:
            return await asyncio.shield(exchange)
        except asyncio.CancelledError:
            # aiohttp cancels the handler when the CLI hangs up. The request is at the provider
            # already, which bills an answer it finishes, so the exchange goes on: its next write
            # to the CLI fails and it reads the rest of the answer for its figures (_meter_rest),
            # until ANSWER_DRAIN seconds from now. Cancelled at once, a call whose answer had not
            # begun was recorded with no usage though the provider served it whole, and one whose
            # rest was being read lost it (agents killed mid-call, issue 25's caps under kills).
            loop = asyncio.get_running_loop()
            drain.deadline = loop.time() + ANSWER_DRAIN
            while not exchange.done() and (left := drain.deadline - loop.time()) > 0:
                with contextlib.suppress(asyncio.CancelledError):  # aiohttp may cancel again meanwhile
                    await asyncio.wait({exchange}, timeout=left)
            exchange.cancel()  # a provider still silent then: the answer is cut, its partial figures stay
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({exchange})
            raise

    async def _exchange(self, request: web.Request, route: Route, call: ProxyCall, body: bytes,
                        drain: _Drain) -> web.StreamResponse:
        """The call at the provider: its answer passed on to the CLI as it comes, metered."""
        protocol = call.protocol if call.metered else None  # a side call's answer is not scanned
        url = URL(route.upstream + call.path)  # the canonical path, never the raw one
        headers = upstream_headers(request.headers.items(), route.key, route.upstream_key)
        params = upstream_query(request.query.items(), route.key, route.upstream_key)
        response: web.StreamResponse | None = None
        scanner: UsageScanner | None = None
        assert self._client is not None
        try:
            async with self._client.request(request.method, url, params=params, data=body, headers=headers,
                                            allow_redirects=False) as upstream:
                call.status = upstream.status
                scanner = UsageScanner(protocol, upstream.headers.get("Content-Type", ""),
                                       upstream.headers.get("Content-Encoding", "")) \
                    if protocol is not None and upstream.status < 400 else None
                response = web.StreamResponse(status=upstream.status, reason=upstream.reason,
                                              headers=response_headers(upstream.headers.items()))
                if upstream.content_length is not None:
                    response.content_length = upstream.content_length
                await self._pass_on(request, route, call, upstream, response, scanner, drain,
                                    failed=protocol is not None and upstream.status >= 400)
                return response
        except asyncio.CancelledError:
            if call.outcome != "completed":
                call.outcome = "client disconnected"
            raise
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return self._upstream_failed(request, route, call, response, exc)
        finally:
            _settle(route, call, scanner)

    async def _pass_on(self, request: web.Request, route: Route, call: ProxyCall, upstream: aiohttp.ClientResponse,
                       response: web.StreamResponse, scanner: UsageScanner | None, drain: _Drain, *,
                       failed: bool) -> None:
        """The provider's answer to the CLI chunk by chunk, metered as it passes."""
        # A provider's error answer is small: keep a copy to record its type and retry-after.
        copy = bytearray() if failed else None
        try:  # from the headers on: the CLI can be gone before they reach it
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                if call.ttfb_ms is None:
                    call.ttfb_ms = round((time.monotonic() - call.clock) * 1000, 2)
                if scanner is not None and scanner.feed(chunk):
                    self._meter(route, call, scanner)
                elif copy is not None and len(copy) < MAX_ERROR_BODY:
                    copy += chunk[:MAX_ERROR_BODY - len(copy)]
                call.bytes_out += len(chunk)
                await response.write(chunk)
        except (asyncio.CancelledError, OSError):
            if not upstream.content.exception():  # the CLI's side failed, not the provider's
                await self._meter_rest(route, call, scanner, upstream.content, drain.deadline)
            raise
        if scanner is not None and scanner.finish():
            self._meter(route, call, scanner)
        if copy is not None:
            call.error = read_error(upstream.status, upstream.headers, bytes(copy))
        # Every byte of the answer is the CLI's now. A CLI that read its answer to the end
        # ([DONE], the last event) may hang up before the stream's framing ends: that call
        # is complete, not cut (CI saw it as "client disconnected", 1 run in hundreds).
        call.outcome = "completed"
        await response.write_eof()

    def _upstream_failed(self, request: web.Request, route: Route, call: ProxyCall,
                         response: web.StreamResponse | None, exc: BaseException) -> web.StreamResponse:
        """The provider or the connection failed: the answer so far cut visibly, or an error in
        the protocol's shape. Messages name the exception and path only: a URL's query may hold a key."""
        transport = request.transport
        if response is not None and call.outcome == "completed":  # gone after the whole answer
            return response
        if response is not None:
            # Mid-stream the CLI went away, or the provider did: either way the answer is cut,
            # and the CLI must see it cut, not a stream that ends as if complete.
            gone = transport is None or transport.is_closing()
            call.outcome = "client disconnected" if gone else f"upstream error: {type(exc).__name__}"
            if not gone:  # the provider's fault: an agent that ends on it is infra-invalid, retried
                call.error = {"status": 502, "type": "upstream reset", "message": type(exc).__name__,
                              "retry_after": None}
            if transport is not None:
                transport.close()
            return response
        call.outcome = f"upstream error: {type(exc).__name__}"
        call.status = 502
        call.error = {"status": 502, "type": "unreachable", "message": type(exc).__name__, "retry_after": None}
        self._log(f"proxy: {route.label}: {request.method} {call.path}: upstream failed: {type(exc).__name__}")
        return _json_error(call.protocol, 502, f"agentmeter proxy: the provider could not be reached "
                                          f"({type(exc).__name__})")

    def _meter(self, route: Route, call: ProxyCall, scanner: UsageScanner) -> None:
        final = scanner.final
        if final is None:
            return
        if scanner.charged is not None and call.charged is None:
            route.charged += scanner.charged
            route.charged_calls += 1
            call.charged = scanner.charged
        delta = final - call.usage
        call.usage = final
        route.usage = route.usage + delta
        try:
            route.sink.on_proxy_usage(call, delta)
        except Exception as exc:
            self._log(f"proxy: {route.label}: metering failed: {exc!r}")


def _settle(route: Route, call: ProxyCall, scanner: UsageScanner | None) -> None:
    """What the scanner saw, kept on the call however it ended; the call's error recorded."""
    if scanner is not None:
        call.partial = scanner.partial if not call.usage else None
        if scanner.unreadable:
            call.note = f"usage not read: {scanner.unreadable}"
        if scanner.error is not None:  # an error inside a 2xx answer (Anthropic's event: error)
            call.error = {"status": call.status, **scanner.error, "retry_after": None}
    route.record_error(call)


def _json_error(protocol: str | None, status: int, message: str, error_type: str | None = None) -> web.Response:
    import orjson

    return web.Response(body=orjson.dumps(error_body(protocol, status, message, error_type)), status=status,
                        content_type="application/json")


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).digest()


class _Drain:
    """Until when an answer is read for its figures once its CLI has gone (the loop's clock)."""

    deadline: float | None = None
