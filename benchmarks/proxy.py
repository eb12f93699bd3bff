"""The metering proxy's cost: added latency to first byte, and streamed throughput, through the
proxy against a direct connection to the same provider; and the runner's event ingest while
the proxy in its event loop carries model traffic.

    python benchmarks/proxy.py [--calls 300] [--streams 30] [--frames 20000] [--agents 24]

Three processes, as in a real run: a provider (a bare Chat Completions SSE server, so that its
own cost is as small as possible and the proxy's shows), the proxy (its own event loop, as
inside the runner, with a route and a sink that meters every call), and this client (stdlib
``http.client`` with keep-alive). Direct and proxied calls alternate so load on the machine
hits both alike; figures are medians. Each proxied call's usage is metered and checked.

The ingest part runs one suite twice, without and with ``proxy = true``: half the agents
print events as fast as they can (as in ``benchmarks/ingest.py``), the other half make
streamed model calls to the scripted server for the whole run, at a fixed rate (through the
proxy in the second run), and the flooders' sustained ingest rate is compared.

The recorded part replays every provider answer of ``tests/fixtures/providers`` (OpenAI,
Anthropic, Gemini, DeepSeek, Moonshot, DashScope, GLM, MiniMax, OpenRouter; issue 14) from
the same provider process, direct and through the proxy, so the added time to first byte is
measured with each provider's own usage reader at work.

Target (issue 8): no added latency worth measuring against a model's own time to first
token (hundreds of ms); throughput far above any model's output rate; ingest as fast with
the proxy's traffic as without it.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RECORDINGS = ROOT / "tests" / "fixtures" / "providers"

FRAME_TEXT = "x" * 900  # about 1 KB per SSE frame, a long text delta
USAGE = {"prompt_tokens": 5000, "completion_tokens": 50,
         "prompt_tokens_details": {"cached_tokens": 4000}, "completion_tokens_details": {"reasoning_tokens": 10}}


# -- the provider ---------------------------------------------------------------------------------

def serve_provider(ready) -> None:
    from aiohttp import web

    async def chat(request: web.Request) -> web.StreamResponse:
        frames = int((await request.json()).get("frames", 10))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        chunk = b"data: " + json.dumps({"object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {"content": FRAME_TEXT}}]}).encode() + b"\n\n"
        batch = chunk * 64
        for _ in range(frames // 64):
            await response.write(batch)
        for _ in range(frames % 64):
            await response.write(chunk)
        await response.write(b"data: " + json.dumps({"choices": [], "usage": USAGE}).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    import tomllib

    recorded = tomllib.loads((RECORDINGS / "SOURCES.toml").read_text())["fixtures"]

    async def replay(request: web.Request) -> web.StreamResponse:
        entry = recorded[request.match_info["name"]]
        response = web.StreamResponse(status=entry.get("status", 200),
                                      headers={"Content-Type": entry["content_type"]})
        await response.prepare(request)
        await response.write((RECORDINGS / entry["file"]).read_bytes())
        await response.write_eof()
        return response

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        app.router.add_post("/rec/{name}/{tail:.*}", replay)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        ready.send(runner.addresses[0][1])
        await asyncio.Event().wait()

    asyncio.run(main())


# -- the proxy ------------------------------------------------------------------------------------

def serve_proxy(provider_port: int, conn) -> None:
    from agentmeter_tui.core.proxy.server import MeteringProxy
    from agentmeter_tui.core.usage import TokenUsage

    class Sink:
        usage = TokenUsage()
        calls = 0

        def admit_call(self):
            return None

        def on_proxy_usage(self, call, delta):
            self.usage = self.usage + delta

        def on_proxy_call(self, call):
            self.calls += 1

    async def main() -> None:
        proxy = MeteringProxy()
        await proxy.start()
        sink = Sink()
        route = proxy.route(f"http://127.0.0.1:{provider_port}", "sk-provider", sink, "bench")
        conn.send((proxy.port, route.key))
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, conn.recv)  # the client is done
        conn.send((sink.calls, sink.usage.raw))

    asyncio.run(main())


# -- the client -----------------------------------------------------------------------------------

def one_call(conn: http.client.HTTPConnection, key: str, frames: int,
             path: str = "/v1/chat/completions") -> tuple[float, float, int]:
    """(seconds to the first body byte, seconds to the end, bytes) of one streamed call."""
    body = json.dumps({"model": "bench", "stream": True, "frames": frames}).encode()
    started = time.perf_counter()
    conn.request("POST", path, body, {"Authorization": f"Bearer {key}", "x-api-key": key, "x-goog-api-key": key,
                                      "Content-Type": "application/json"})
    response = conn.getresponse()
    first = response.read1(65536)
    ttfb = time.perf_counter() - started
    size = len(first)
    while data := response.read1(1 << 20):
        size += len(data)
    return ttfb, time.perf_counter() - started, size


def recorded_ttfb(direct, proxied, key: str, calls: int) -> dict[str, tuple[int, list[float]]]:
    """Per recorded answer: its raw tokens as SOURCES.toml states them, and the added time to
    first byte (ms) of each proxied call over the direct call just before it."""
    import tomllib

    out = {}
    for name, entry in tomllib.loads((RECORDINGS / "SOURCES.toml").read_text())["fixtures"].items():
        path = f"/rec/{name}{entry['path']}"
        gaps = []
        for _ in range(calls):
            plain = one_call(direct, "sk-provider", 0, path)[0]
            gaps.append((one_call(proxied, key, 0, path)[0] - plain) * 1000)
        out[name] = (sum(entry["expect"].get(k, 0) for k in ("uncached_input", "cached_input", "cache_write",
                                                                "output", "reasoning")), gaps)
    return out


def reader_cpu() -> dict[str, float]:
    """Seconds the usage scanner alone takes over each recorded answer (fed in 4 KB chunks):
    what the new readers add, free of the machine's network and scheduling noise."""
    import tomllib

    from agentmeter_tui.core.proxy.scan import UsageScanner
    from agentmeter_tui.core.wire import protocol_for

    out = {}
    for name, entry in tomllib.loads((RECORDINGS / "SOURCES.toml").read_text())["fixtures"].items():
        body, protocol = (RECORDINGS / entry["file"]).read_bytes(), protocol_for(entry["path"].split("?")[0])
        best = float("inf")
        for _ in range(7):
            started = time.perf_counter()
            for _ in range(20):
                scanner = UsageScanner(protocol, entry["content_type"])
                for at in range(0, len(body), 4096):
                    scanner.feed(body[at:at + 4096])
                scanner.finish()
            best = min(best, (time.perf_counter() - started) / 20)
        out[name] = best
    return out


# -- the runner's ingest with proxy traffic ---------------------------------------------------------

INGEST_SUITE = """
[suite]
id = "proxy-ingest"
trials = {agents}
concurrency = {concurrency}
proxy = {proxy}
[[models]]
id = "load"
[[clis]]
adapter = "command"
args = ["{{python}}", "{agent}"]
[budgets.default]
wall_seconds = 300
"""


def ingest_run(folder: Path, agents: int, events: int, chat_seconds: float, rate: float,
               proxy: bool) -> tuple[float, float]:
    """(flooders' sustained events/s, chatters' model calls/s) of one run."""
    from agentmeter_tui.core.store import Store

    suite = folder / ("proxied" if proxy else "direct")
    for task, instruction in (("flood", f"flood {events}"), ("chat", f"chat {chat_seconds:g} {rate:g}")):
        (suite / task).mkdir(parents=True)
        (suite / task / "task.toml").write_text('[verifier]\nkind = "none"\n')
        (suite / task / "instruction.md").write_text(instruction + "\n")
    (suite / "scenarios").mkdir()
    (suite / "scenarios" / "load.toml").write_text('[[turns]]\nloop = true\ntext = "ok"\n')
    (suite / "suite.toml").write_text(INGEST_SUITE.format(
        agents=agents, concurrency=2 * agents, proxy=str(proxy).lower(),
        agent=ROOT / "benchmarks" / "proxy_load_agent.py"))
    db = folder / f"{suite.name}.db"
    subprocess.run([sys.executable, "-m", "agentmeter_tui", "run", str(suite), "--headless", "--db", str(db)],
                   check=True, stdout=subprocess.DEVNULL)
    store = Store(db)
    rates = []
    for task, kind in (("flood", None), ("chat", "usage")):
        count, first, last = store.db.execute(
            "select count(*), min(e.ts), max(e.ts) from events e join trials t on t.id = e.trial_id "
            "where t.task_id = ? and e.stream = 'stdout' and (? is null or e.kind = ?)", [task, kind, kind]).fetchone()
        rates.append(count / (last - first))
    sources = {r["usage_source"] for r in store.db.query("select usage_source from trials where task_id = 'chat'")}
    assert sources == {"proxy" if proxy else "stdout"}, sources
    return rates[0], rates[1]


def ingest(agents: int, events: int, rate: float) -> None:
    folder = Path(tempfile.mkdtemp(prefix="proxy-ingest-"))
    try:
        direct = ingest_run(folder, agents, events, 15, rate, proxy=False)
        proxied = ingest_run(folder, agents, events, 15, rate, proxy=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"runner ingest, {agents} agents x {events} events while {agents} agents make up to {rate:g} "
          f"model calls/s each:")
    print(f"  calls direct to the provider: {direct[0]:,.0f} events/s ingested, {direct[1]:,.0f} model calls/s")
    print(f"  calls through the proxy:      {proxied[0]:,.0f} events/s ingested, {proxied[1]:,.0f} model calls/s "
          f"(ingest ratio {proxied[0] / direct[0]:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300, help="short calls (20 frames) for time to first byte")
    parser.add_argument("--streams", type=int, default=30, help="long streams for throughput")
    parser.add_argument("--frames", type=int, default=20000, help="frames of ~1 KB per long stream")
    parser.add_argument("--agents", type=int, default=24, help="flooders (and as many chatters) for the ingest part")
    parser.add_argument("--events", type=int, default=5000, help="events per flooder")
    parser.add_argument("--rate", type=float, default=10, help="model calls per second per chatter")
    parser.add_argument("--recorded", type=int, default=40, help="calls per recorded provider answer")
    args = parser.parse_args()
    ctx = multiprocessing.get_context("spawn")
    ready_in, ready_out = ctx.Pipe()
    provider = ctx.Process(target=serve_provider, args=(ready_out,), daemon=True)
    provider.start()
    provider_port = ready_in.recv()
    control, control_child = ctx.Pipe()
    proxy = ctx.Process(target=serve_proxy, args=(provider_port, control_child), daemon=True)
    proxy.start()
    proxy_port, key = control.recv()
    import psutil

    proxy_cpu = psutil.Process(proxy.pid)
    direct = http.client.HTTPConnection("127.0.0.1", provider_port)
    proxied = http.client.HTTPConnection("127.0.0.1", proxy_port)
    for _ in range(20):  # warm up connections and both event loops
        one_call(direct, "sk-provider", 20)
        one_call(proxied, key, 20)
    ttfb = {"direct": [], "proxy": []}
    cpu_before = sum(proxy_cpu.cpu_times()[:2])
    for _ in range(args.calls):
        ttfb["direct"].append(one_call(direct, "sk-provider", 20)[0])
        ttfb["proxy"].append(one_call(proxied, key, 20)[0])
    cpu_per_call = (sum(proxy_cpu.cpu_times()[:2]) - cpu_before) / args.calls
    rate = {"direct": [], "proxy": []}
    size = 0
    cpu_before = sum(proxy_cpu.cpu_times()[:2])
    for _ in range(args.streams):
        for name, conn, k in (("direct", direct, "sk-provider"), ("proxy", proxied, key)):
            _, total, size = one_call(conn, k, args.frames)
            rate[name].append(size / total)
    cpu_per_mb = (sum(proxy_cpu.cpu_times()[:2]) - cpu_before) / (args.streams * size / 1e6)
    recorded = recorded_ttfb(direct, proxied, key, args.recorded)
    control.send("done")
    metered_calls, metered_raw = control.recv()
    expected_calls = 20 + args.calls + args.streams
    assert metered_calls == expected_calls + args.recorded * len(recorded), (metered_calls, expected_calls)
    expected_raw = expected_calls * 5050 + args.recorded * sum(raw for raw, _ in recorded.values())
    assert metered_raw == expected_raw, (metered_raw, expected_raw)  # every call's usage read off the stream
    med = {name: statistics.median(values) * 1000 for name, values in ttfb.items()}
    p95 = {name: statistics.quantiles(values, n=20)[-1] * 1000 for name, values in ttfb.items()}
    print(f"time to first byte, median of {args.calls} calls (p95):")
    print(f"  direct {med['direct']:.3f} ms ({p95['direct']:.3f})   through the proxy {med['proxy']:.3f} ms "
          f"({p95['proxy']:.3f})   added {med['proxy'] - med['direct']:.3f} ms")
    mb = {name: statistics.median(values) / 1e6 for name, values in rate.items()}
    print(f"streamed throughput, median of {args.streams} streams of {size / 1e6:.1f} MB "
          f"({args.frames} SSE frames of ~1 KB):")
    print(f"  direct {mb['direct']:.0f} MB/s   through the proxy {mb['proxy']:.0f} MB/s   "
          f"ratio {mb['proxy'] / mb['direct']:.2f}")
    print(f"proxy CPU: {cpu_per_call * 1000:.3f} ms per short call, {cpu_per_mb * 1000:.2f} ms per MB streamed")
    print(f"metered: {metered_calls} calls, usage read off every stream")
    added = [gap for _, gaps in recorded.values() for gap in gaps]
    print(f"recorded provider answers ({len(recorded)} shapes x {args.recorded} calls), added time to first byte "
          f"through the proxy: median {statistics.median(added):.3f} ms")
    cpu = reader_cpu()
    for name, (_, gaps) in sorted(recorded.items()):
        print(f"  {name:<34} {statistics.median(gaps):+.3f} ms   reader CPU {cpu[name] * 1000:.3f} ms "
              f"for the whole answer")
    print(f"usage readers alone (best of 7, in process): median {statistics.median(cpu.values()) * 1000:.3f} ms, "
          f"max {max(cpu.values()) * 1000:.3f} ms per recorded answer")
    proxy.terminate()
    provider.terminate()
    if args.agents:
        ingest(args.agents, args.events, args.rate)


if __name__ == "__main__":
    main()
