"""Adding a model API protocol is one module and one registry line: a made-up protocol written
here (outside the package) and registered by name is served by the scripted model server,
forwarded and metered off the wire by the metering proxy (streamed and whole), read by the
usage reader, accepted as a suite's provider kind and given its variables by ``agentmeter
meter``. Nothing else names it."""

from __future__ import annotations

import aiohttp
import pytest

from agentmeter_tui.core.proxy.meter import child_environment, kinds, real_keys
from agentmeter_tui.core.proxy.server import MeteringProxy
from agentmeter_tui.core.suites.suitefile import Provider
from agentmeter_tui.core.usage import TokenUsage
from agentmeter_tui.core.wire import MERGED, PROTOCOLS, READERS, fold, get_protocol, protocol_for
from tests.core.scripted_support import SHELL_SCHEMA, TWO_TURNS, register, start_server, write_scenario
from tests.core.plugin_support import module_in
from tests.core.test_proxy import Sink, served

MODULE = '''
"""A made-up protocol "tiny": POST .../tiny/complete, the key in x-tiny-key, with {"model",
"prompt", "stream", "tools": [{"name", "schema"}]}; the answer is {"text", "call", "usage": {"in", "cached", "out"}}
("in" counts the cache; no cache-write or reasoning count), streamed as SSE frames {"text"}
and a last {"done": true, "usage": ...}."""
from agentmeter_tui.core.scripted.replies import OfferedTool, text_pieces
from agentmeter_tui.core.scripted.protocol import ScriptedProtocol, sse
from agentmeter_tui.core.usage import TokenUsage
from agentmeter_tui.core.wire.base import WireProtocol, as_int


class TinyWire(WireProtocol):
    name = "tiny"
    provider_kind = "tiny"
    family = "tiny"
    default_upstream = "https://tiny.example"
    scripted = "tiny_protocol:TinyScripted"
    merged = {"cache_write": "uncached_input", "reasoning": "output"}
    base_url_env = {"TINY_BASE_URL": "/api"}
    key_env = ("TINY_API_KEY",)
    key_headers = ("x-tiny-key",)
    model_paths = (r"/v1/tiny/complete",)  # what the metering proxy lets through

    def matches(self, path):
        return path.endswith("/tiny/complete")

    def error_body(self, status, message, error_type=None):
        return {"problem": {"status": status, "kind": error_type or "tiny_error", "text": message}}

    def read_usage(self, usage):
        return TokenUsage.from_inclusive(input_tokens=as_int(usage.get("in")), cached=as_int(usage.get("cached")),
                                         output_tokens=as_int(usage.get("out")))

    def write_usage(self, usage):
        return {"in": usage.uncached_input + usage.cached_input + usage.cache_write,
                "cached": usage.cached_input, "out": usage.output + usage.reasoning}

    def frame(self, scan, obj):
        if obj.get("done") and isinstance(obj.get("usage"), dict):
            scan.set_final(self.read_usage(obj["usage"]))


class TinyScripted(ScriptedProtocol):
    name = "tiny"

    def offered_tools(self, body):
        return [OfferedTool(tool["name"], tool.get("schema")) for tool in body.get("tools") or []]

    def _call(self, reply):
        call = reply.tool_call
        return None if call is None else {"name": call.name, "arguments": call.arguments}

    def stream(self, reply, model, req):
        frames = [sse({"text": piece}) for piece in text_pieces(reply.text or "")]
        return frames + [sse({"done": True, "call": self._call(reply), "usage": TinyWire().write_usage(reply.usage)})]

    def complete(self, reply, model, req):
        return {"model": model, "text": reply.text, "call": self._call(reply),
                "usage": TinyWire().write_usage(reply.usage)}
'''
REAL_KEY = "tiny-real-key"
TURNS = [TokenUsage(1200, 4000, 300, 30, 20), TokenUsage(1300, 4500, 0, 80, 25)]  # TWO_TURNS' usage


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    with module_in(tmp_path, "tiny_protocol", MODULE, monkeypatch):
        PROTOCOLS.register("tiny", "tiny_protocol:TinyWire")  # the one registry line
        yield
        PROTOCOLS.unregister("tiny")


def test_the_registry_line_makes_it_a_protocol_kind_and_family(tiny):
    assert protocol_for("/v1/tiny/complete") == "tiny" and protocol_for("/v1/chat/completions") == "chat"
    assert "tiny" in kinds() and Provider(kind="tiny").kind == "tiny"
    with pytest.raises(ValueError, match="unknown provider kind 'tinier'"):
        Provider(kind="tinier")
    # the usage reader: what the writer wrote, read back up to what the protocol cannot tell apart
    usage = TURNS[0]
    assert READERS["tiny"](get_protocol("tiny").write_usage(usage)) == fold(usage, MERGED["tiny"]) \
        == TokenUsage(uncached_input=1500, cached_input=4000, output=50)


def test_agentmeter_meter_gives_its_variables_the_placeholder(tiny):
    parent = {"TINY_API_KEY": REAL_KEY, "PATH": "/bin"}
    assert real_keys(parent)["tiny"] == REAL_KEY
    keys = {kind: f"placeholder-{kind}" for kind in kinds()}
    env = child_environment(parent, "http://127.0.0.1:9", keys, "token")
    assert env["TINY_BASE_URL"] == "http://127.0.0.1:9/api" and env["TINY_API_KEY"] == "placeholder-tiny"
    assert REAL_KEY not in env.values()


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_served_forwarded_and_metered_end_to_end(tiny, tmp_path, stream):
    upstream = await start_server()
    proxy = MeteringProxy(log=lambda text: None)
    await proxy.start()
    try:
        status, _ = await register(upstream, REAL_KEY, write_scenario(tmp_path, TWO_TURNS))
        assert status == 200
        sink = Sink()
        route = proxy.route(str(upstream.make_url("")), REAL_KEY, sink, "trial 1")
        body = {"model": "tiny-1", "prompt": "hi", "stream": stream,
                "tools": [{"name": "shell", "schema": SHELL_SCHEMA}]}
        answers = []
        async with aiohttp.ClientSession() as client:
            for _ in TURNS:
                async with client.post(proxy.base_url + "/v1/tiny/complete", json=body,
                                       headers={"x-tiny-key": route.key}) as response:
                    assert response.status == 200
                    answers.append(await response.read())
            # refused in the protocol's own error shape once the trial is over budget
            sink.refusal = "over its budget"
            async with client.post(proxy.base_url + "/v1/tiny/complete", json=body,
                                   headers={"x-tiny-key": route.key}) as response:
                assert response.status == 400 and (await response.json())["problem"]["kind"] == "tiny_error"
        assert b'"command":"echo hi > out.txt"' in answers[0]  # the scripted turn's shell call, in tiny's shape
        info = await served(upstream, REAL_KEY)
        # the real key reached the server in tiny's own header, swapped there by the proxy
        assert info["calls"] == 2 and all(c["completed"] and c["protocol"] == "tiny" for c in info["served"])
        assert [c.usage for c in sink.calls if c.outcome == "completed"] == [fold(u, MERGED["tiny"]) for u in TURNS]
        assert sink.usage == route.usage == fold(TokenUsage.from_dict(info["usage"]), MERGED["tiny"])
        assert sink.calls[0].protocol == "tiny" and sink.calls[0].model == "tiny-1"
    finally:
        await proxy.close()
        await upstream.close()
