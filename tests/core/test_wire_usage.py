"""Usage on the wire: the shared readers invert the scripted server's writers, and the proxy's
scanner reads each protocol's usage off a response however its bytes are cut."""

from __future__ import annotations

import gzip

import orjson
import pytest

from agentmeter_tui.core.scripted.anthropic import ScriptedAnthropicMessages
from agentmeter_tui.core.scripted.chat import ScriptedChatCompletions
from agentmeter_tui.core.scripted.gemini import ScriptedGemini
from agentmeter_tui.core.scripted.replies import Reply, ToolCall
from agentmeter_tui.core.scripted.responses import ScriptedResponses
from agentmeter_tui.core.scripted.protocol import ScriptedRequest
from agentmeter_tui.core.proxy import diverges
from agentmeter_tui.core.proxy.scan import UsageScanner
from agentmeter_tui.core.proxy.forward import upstream_headers, upstream_query
from agentmeter_tui.core.usage import TOKEN_CLASSES, TokenUsage
from agentmeter_tui.core.wire import MERGED, READERS, find_key, fold, protocol_for
from agentmeter_tui.core.wire.anthropic import to_anthropic
from agentmeter_tui.core.wire.chat import from_chat, to_chat
from agentmeter_tui.core.wire.gemini import from_gemini, to_gemini
from agentmeter_tui.core.wire.responses import to_responses

USAGE = TokenUsage(uncached_input=1200, cached_input=4000, cache_write=300, output=30, reasoning=20)
WRITERS = {"chat": to_chat, "anthropic": lambda u: to_anthropic(u, u.output + u.reasoning),
           "responses": to_responses, "gemini": to_gemini}
PROTOCOLS = {"chat": ScriptedChatCompletions(), "anthropic": ScriptedAnthropicMessages(), "responses": ScriptedResponses(),
             "gemini": ScriptedGemini()}


def _reply() -> Reply:
    call = ToolCall("shell", {"command": "echo hi > out.txt"}, "call_1")
    return Reply(kind="turn", turn=1, reasoning="I should write it.", text="Writing.", tool_call=call,
                 usage=USAGE, message_id="t_1")


def _request(protocol: str, stream: bool) -> ScriptedRequest:
    if protocol == "gemini":
        action = "streamGenerateContent" if stream else "generateContent"
        return ScriptedRequest({}, {"alt": "sse"} if stream else {}, {"target": f"gemini-2.5-pro:{action}"})
    body = {"model": "m", "stream": stream}
    if protocol == "chat":
        body["stream_options"] = {"include_usage": True}
    return ScriptedRequest(body)


@pytest.mark.parametrize("protocol", sorted(READERS))
def test_readers_invert_writers_up_to_the_protocols_merged_classes(protocol):
    assert READERS[protocol](WRITERS[protocol](USAGE)) == fold(USAGE, MERGED[protocol])
    assert set(MERGED[protocol]) | set(MERGED[protocol].values()) <= set(TOKEN_CLASSES)


def test_fold_moves_classes_and_keeps_raw():
    folded = fold(USAGE, {"reasoning": "output", "cache_write": "uncached_input"})
    assert folded == TokenUsage(1500, 4000, 0, 50, 0)
    assert folded.raw == USAGE.raw


def test_readers_take_provider_variants():
    # DeepSeek reports cache hits beside, not inside, the details; Gemini's tool-use prompt is input.
    deepseek = {"prompt_tokens": 5000, "completion_tokens": 50, "prompt_cache_hit_tokens": 4000}
    assert from_chat(deepseek) == TokenUsage(1000, 4000, 0, 50, 0)
    assert from_gemini({"promptTokenCount": 100, "toolUsePromptTokenCount": 20, "candidatesTokenCount": 5}) == \
        TokenUsage(120, 0, 0, 5, 0)
    assert from_chat({"prompt_tokens": None, "completion_tokens": "x"}) == TokenUsage()


def _cut(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("size", [1, 7, 4096])
@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_scanner_reads_streamed_usage_at_any_chunking(protocol, size):
    wire = PROTOCOLS[protocol]
    stream = b"".join(wire.stream(_reply(), "m", _request(protocol, True)))
    scanner = UsageScanner(protocol, "text/event-stream; charset=utf-8")
    changes = sum(scanner.feed(chunk) for chunk in _cut(stream, size))
    scanner.finish()
    assert scanner.final == fold(USAGE, MERGED[protocol])
    assert changes == 1  # read once, before the stream ended


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_scanner_reads_whole_json_answers(protocol):
    wire = PROTOCOLS[protocol]
    body = orjson.dumps(wire.complete(_reply(), "m", _request(protocol, False)))
    scanner = UsageScanner(protocol, "application/json")
    assert not any(scanner.feed(chunk) for chunk in _cut(body, 100))
    assert scanner.finish()
    assert scanner.final == fold(USAGE, MERGED[protocol])


def test_scanner_reads_gemini_json_array_and_gzip():
    request = ScriptedRequest({}, {}, {"target": "gemini-2.5-pro:streamGenerateContent"})  # no alt=sse
    body = orjson.dumps(ScriptedGemini().complete(_reply(), "m", request))
    scanner = UsageScanner("gemini", "application/json", "gzip")
    for chunk in _cut(gzip.compress(body), 50):
        scanner.feed(chunk)
    scanner.finish()
    assert scanner.final == fold(USAGE, MERGED["gemini"])


def test_cut_stream_keeps_only_partial_figures():
    stream = b"".join(ScriptedAnthropicMessages().stream(_reply(), "m", _request("anthropic", True)))
    scanner = UsageScanner("anthropic", "text/event-stream")
    scanner.feed(stream[: stream.index(b"message_delta")])
    scanner.finish(clean=False)
    assert scanner.final is None
    assert scanner.partial == TokenUsage(1200, 4000, 300, 1, 0)  # message_start: input, output 1


def test_gemini_running_usage_counts_only_at_the_finish():
    def chunk(metadata: dict, finish: bool = False) -> bytes:
        candidate = {"content": {"parts": [{"text": "x"}]}, **({"finishReason": "STOP"} if finish else {})}
        return b"data: " + orjson.dumps({"candidates": [candidate], "usageMetadata": metadata}) + b"\r\n\r\n"

    scanner = UsageScanner("gemini", "text/event-stream")
    assert not scanner.feed(chunk({"promptTokenCount": 100, "candidatesTokenCount": 1}))
    assert scanner.partial == TokenUsage(100, 0, 0, 1, 0)
    assert scanner.feed(chunk({"promptTokenCount": 100, "candidatesTokenCount": 9}, finish=True))
    assert scanner.final == TokenUsage(100, 0, 0, 9, 0)
    # A clean end without a finishing chunk takes the last running figures.
    scanner = UsageScanner("gemini", "text/event-stream")
    scanner.feed(chunk({"promptTokenCount": 7, "candidatesTokenCount": 2}))
    assert scanner.finish() and scanner.final == TokenUsage(7, 0, 0, 2, 0)


def test_a_last_event_without_its_blank_line_is_read_at_the_end():
    usage = orjson.dumps({"choices": [], "usage": to_chat(USAGE)})
    scanner = UsageScanner("chat", "text/event-stream")
    assert not scanner.feed(b'data: {"choices": []}\n\ndata: ' + usage[:10])
    assert not scanner.feed(usage[10:] + b"\n")
    assert scanner.finish() and scanner.final == USAGE


def test_unknown_encoding_and_broken_json_are_reported_not_raised():
    scanner = UsageScanner("chat", "application/json", "br")
    assert not scanner.feed(b"\x00\x01") and not scanner.finish()
    assert scanner.unreadable == "content-encoding br"
    scanner = UsageScanner("chat", "application/json")
    scanner.feed(b"{not json")
    assert not scanner.finish() and scanner.unreadable == "body is not JSON"


def test_protocol_of_paths():
    assert protocol_for("/v1/chat/completions") == "chat"
    assert protocol_for("/chat/completions") == "chat"
    assert protocol_for("/v1/messages") == "anthropic"
    assert protocol_for("/v1/messages/count_tokens") is None
    assert protocol_for("/v1/responses") == "responses"
    assert protocol_for("/v1beta/models/gemini-2.5-pro:streamGenerateContent") == "gemini"
    assert protocol_for("/v1beta/models/gemini-2.5-pro:countTokens") is None
    assert protocol_for("/v1/models") is None


def test_key_is_found_and_swapped_in_place():
    assert find_key({"Authorization": "Bearer amp-1"}, {}) == "amp-1"
    assert find_key({"x-goog-api-key": "amp-2"}, {}) == "amp-2"
    assert find_key({}, {"key": "amp-3"}) == "amp-3"
    headers = upstream_headers([("Authorization", "bearer amp-1"), ("x-api-key", "amp-1"), ("Host", "x"),
                                ("Accept-Encoding", "gzip"), ("anthropic-version", "2023-06-01"),
                                ("Connection", "keep-alive")], "amp-1", "sk-real")
    assert headers["Authorization"] == "bearer sk-real" and headers["x-api-key"] == "sk-real"
    assert "Host" not in headers and "Connection" not in headers
    assert headers["Accept-Encoding"] == "identity" and headers["anthropic-version"] == "2023-06-01"
    assert upstream_query([("alt", "sse"), ("key", "amp-1")], "amp-1", "sk-real") == [("alt", "sse"),
                                                                                      ("key", "sk-real")]


def test_divergence_rule():
    metered = TokenUsage(1000, 0, 0, 0, 0)
    assert not diverges(metered, TokenUsage(1020))  # 2 % is within
    assert diverges(metered, TokenUsage(1021))
    assert diverges(metered, TokenUsage(900))
    assert not diverges(metered, TokenUsage())  # the CLI reported nothing: nothing to compare
    assert diverges(TokenUsage(), TokenUsage(5))  # the CLI reports calls the proxy never saw
