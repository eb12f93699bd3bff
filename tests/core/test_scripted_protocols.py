"""Wire protocols of the scripted model server: streamed chunk shapes, tool call shapes, usage
in each protocol's own semantics (checked by mapping it back to the scenario's five classes),
non-streaming answers and error bodies."""

from __future__ import annotations

import json

import pytest

from tests.core.scripted_support import (
    SHELL_SCHEMA,
    TURN1,
    TWO_TURNS,
    chat_body,
    parse_sse,
    post,
    register,
    start_server,
    write_scenario,
)

SHELL = {"command": "echo hi > out.txt"}
CMD_SCHEMA = {"type": "object", "properties": {"cmd": {"type": "string"}, "login": {"type": "boolean"}},
              "required": ["cmd"]}


@pytest.fixture
async def server(tmp_path):
    server = await start_server(write_scenario(tmp_path, TWO_TURNS))
    yield server
    await server.close()


def anthropic_body(stream: bool = True) -> dict:
    return {"model": "claude-sonnet-4-6", "stream": stream, "max_tokens": 1000,
            "messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "Bash", "input_schema": SHELL_SCHEMA}]}


def responses_body(stream: bool = True) -> dict:
    return {"model": "gpt-5.5", "stream": stream, "input": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "name": "exec_command", "parameters": CMD_SCHEMA},
                      {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}}, {"type": "web_search"}]}


def gemini_body() -> dict:
    return {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "tools": [{"functionDeclarations": [{"name": "run_shell_command", "parametersJsonSchema": SHELL_SCHEMA}]}]}


GEMINI_STREAM = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"


# Chat Completions ------------------------------------------------------------------------------

def chat_classes(usage: dict) -> dict:
    prompt, completion = usage["prompt_tokens"], usage["completion_tokens"]
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    write = usage["prompt_tokens_details"]["cache_write_tokens"]
    reasoning = usage["completion_tokens_details"]["reasoning_tokens"]
    assert usage["total_tokens"] == prompt + completion
    return {"uncached_input": prompt - cached - write, "cached_input": cached, "cache_write": write,
            "output": completion - reasoning, "reasoning": reasoning}


async def test_chat_stream_shapes_and_usage(server):
    status, headers, text = await post(server, "/v1/chat/completions", chat_body())
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    frames = [data for _, data in parse_sse(text)]
    assert frames[-1] == "[DONE]"
    chunks = frames[:-1]
    assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
    assert len({chunk["id"] for chunk in chunks}) == 1
    deltas = [chunk["choices"][0]["delta"] for chunk in chunks if chunk["choices"]]
    assert deltas[0]["role"] == "assistant"
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "I should write the file."
    assert "".join(d.get("content") or "" for d in deltas) == "Writing the file."
    calls = [call for d in deltas for call in d.get("tool_calls", [])]
    assert calls[0]["id"].startswith("call_") and calls[0]["function"]["name"] == "shell"
    assert len(calls) >= 3, "arguments arrive split over several chunks"
    assert json.loads("".join(call["function"]["arguments"] for call in calls)) == SHELL
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chat_classes(chunks[-1]["usage"]) == TURN1


async def test_chat_usage_on_finish_chunk_without_include_usage(server):
    body = chat_body()
    del body["stream_options"]
    _, _, text = await post(server, "/v1/chat/completions", body)
    chunks = [data for _, data in parse_sse(text)][:-1]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert chat_classes(chunks[-1]["usage"]) == TURN1


async def test_chat_non_streaming(server):
    status, _, text = await post(server, "/v1/chat/completions", chat_body(stream=False))
    answer = json.loads(text)
    message = answer["choices"][0]["message"]
    assert status == 200 and answer["object"] == "chat.completion"
    assert message["content"] == "Writing the file." and message["reasoning_content"] == "I should write the file."
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == SHELL
    assert answer["choices"][0]["finish_reason"] == "tool_calls"
    assert chat_classes(answer["usage"]) == TURN1
    _, _, text = await post(server, "/v1/chat/completions", chat_body(stream=False))
    assert json.loads(text)["choices"][0]["finish_reason"] == "stop"


# Anthropic Messages ----------------------------------------------------------------------------

async def test_anthropic_stream_shapes_and_usage(server):
    status, headers, text = await post(server, "/v1/messages?beta=true", anthropic_body(), header="x-api-key")
    assert status == 200 and headers["request-id"].startswith("req_")
    frames = parse_sse(text)
    assert all(event == data["type"] for event, data in frames)
    kinds = [event for event, _ in frames]
    assert kinds[:2] == ["message_start", "ping"] and kinds[-2:] == ["message_delta", "message_stop"]
    starts = [data["content_block"] for event, data in frames if event == "content_block_start"]
    assert [block["type"] for block in starts] == ["thinking", "text", "tool_use"]
    assert starts[2]["name"] == "Bash" and starts[2]["id"].startswith("toolu_")
    deltas = [data["delta"] for event, data in frames if event == "content_block_delta"]
    assert "".join(d.get("thinking", "") for d in deltas) == "I should write the file."
    assert any(d["type"] == "signature_delta" for d in deltas)
    assert "".join(d.get("text", "") for d in deltas) == "Writing the file."
    assert json.loads("".join(d.get("partial_json", "") for d in deltas)) == SHELL
    start_usage = frames[0][1]["message"]["usage"]
    final = frames[-2][1]
    assert final["delta"]["stop_reason"] == "tool_use"
    assert (start_usage["input_tokens"], start_usage["cache_read_input_tokens"],
            start_usage["cache_creation_input_tokens"], start_usage["output_tokens"]) == (1200, 4000, 300, 1)
    # Anthropic folds thinking into output_tokens: output + reasoning.
    assert final["usage"]["output_tokens"] == TURN1["output"] + TURN1["reasoning"]
    assert final["usage"]["input_tokens"] == 1200


async def test_anthropic_non_streaming_and_count_tokens(server):
    status, _, text = await post(server, "/v1/messages/count_tokens", anthropic_body(), header="x-api-key")
    assert status == 200 and json.loads(text)["input_tokens"] > 0
    _, _, text = await post(server, "/v1/messages", anthropic_body(stream=False), header="x-api-key")
    message = json.loads(text)
    assert [block["type"] for block in message["content"]] == ["thinking", "text", "tool_use"]
    assert message["content"][2]["input"] == SHELL, "count_tokens did not consume the first turn"
    assert message["stop_reason"] == "tool_use"
    assert message["usage"]["output_tokens"] == 50 and message["usage"]["cache_read_input_tokens"] == 4000


# OpenAI Responses ------------------------------------------------------------------------------

def responses_classes(usage: dict) -> dict:
    cached = usage["input_tokens_details"]["cached_tokens"]
    write = usage["input_tokens_details"]["cache_write_tokens"]
    reasoning = usage["output_tokens_details"]["reasoning_tokens"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    return {"uncached_input": usage["input_tokens"] - cached - write, "cached_input": cached, "cache_write": write,
            "output": usage["output_tokens"] - reasoning, "reasoning": reasoning}


async def test_responses_stream_shapes_and_usage(server):
    status, _, text = await post(server, "/v1/responses", responses_body())
    frames = parse_sse(text)
    assert status == 200 and all(event == data["type"] for event, data in frames)
    assert [data["sequence_number"] for _, data in frames] == list(range(len(frames)))
    assert frames[0][0] == "response.created" and frames[-1][0] == "response.completed"
    done = [data["item"] for event, data in frames if event == "response.output_item.done"]
    assert [item["type"] for item in done] == ["reasoning", "message", "function_call"]
    assert done[0]["summary"][0]["text"] == "I should write the file." and done[0]["encrypted_content"]
    assert done[1]["content"][0]["text"] == "Writing the file."
    assert done[2]["name"] == "exec_command" and json.loads(done[2]["arguments"]) == {"cmd": "echo hi > out.txt"}
    pieces = [data["delta"] for event, data in frames if event == "response.function_call_arguments.delta"]
    assert len(pieces) == 2 and "".join(pieces) == done[2]["arguments"]
    text_deltas = [data["delta"] for event, data in frames if event == "response.output_text.delta"]
    assert "".join(text_deltas) == "Writing the file."
    completed = frames[-1][1]["response"]
    assert completed["status"] == "completed" and completed["output"] == done
    assert responses_classes(completed["usage"]) == TURN1


async def test_responses_non_streaming(server):
    _, _, text = await post(server, "/v1/responses", responses_body(stream=False))
    response = json.loads(text)
    assert [item["type"] for item in response["output"]] == ["reasoning", "message", "function_call"]
    assert responses_classes(response["usage"]) == TURN1


async def test_responses_custom_tool_call(tmp_path):
    scenario = write_scenario(tmp_path, '[[turns]]\ntool = { name = "apply_patch", arguments = { input = "*** Begin Patch" } }\n')
    server = await start_server(scenario)
    try:
        _, _, text = await post(server, "/v1/responses", responses_body())
        done = [data["item"] for event, data in parse_sse(text) if event == "response.output_item.done"]
        assert done == [{"id": done[0]["id"], "type": "custom_tool_call", "status": "completed",
                         "call_id": done[0]["call_id"], "name": "apply_patch", "input": "*** Begin Patch"}]
    finally:
        await server.close()


# Gemini ----------------------------------------------------------------------------------------

def gemini_classes(meta: dict) -> dict:
    cached, thoughts = meta.get("cachedContentTokenCount", 0), meta.get("thoughtsTokenCount", 0)
    assert meta["totalTokenCount"] == meta["promptTokenCount"] + meta["candidatesTokenCount"] + thoughts
    # Gemini has no cache-write field: writes are inside promptTokenCount, seen as uncached input.
    return {"uncached_input": meta["promptTokenCount"] - cached, "cached_input": cached,
            "output": meta["candidatesTokenCount"], "reasoning": thoughts}


GEMINI_TURN1 = {"uncached_input": 1500, "cached_input": 4000, "output": 30, "reasoning": 20}


async def test_gemini_stream_shapes_and_usage(server):
    status, _, text = await post(server, GEMINI_STREAM, gemini_body(), header="x-goog-api-key")
    chunks = [data for _, data in parse_sse(text)]
    assert status == 200 and all(chunk["modelVersion"] == "gemini-2.5-pro" for chunk in chunks)
    parts = [part for chunk in chunks for part in chunk["candidates"][0]["content"]["parts"]]
    assert "".join(p["text"] for p in parts if p.get("thought")) == "I should write the file."
    assert "".join(p["text"] for p in parts if "text" in p and not p.get("thought")) == "Writing the file."
    calls = [p["functionCall"] for p in parts if "functionCall" in p]
    assert calls == [{"id": calls[0]["id"], "name": "run_shell_command", "args": SHELL}]
    assert all("usageMetadata" not in chunk for chunk in chunks[:-1])
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert gemini_classes(chunks[-1]["usageMetadata"]) == GEMINI_TURN1


async def test_gemini_json_array_generate_and_count_tokens(server):
    status, _, text = await post(server, "/v1beta/models/gemini-2.5-pro:countTokens", gemini_body(),
                                 key="k1", header="x-goog-api-key")
    assert status == 200 and json.loads(text)["totalTokens"] > 0
    _, _, text = await post(server, "/v1beta/models/gemini-2.5-pro:streamGenerateContent", gemini_body(),
                            header="x-goog-api-key")
    chunks = json.loads(text)
    assert isinstance(chunks, list) and gemini_classes(chunks[-1]["usageMetadata"]) == GEMINI_TURN1
    _, _, text = await post(server, "/v1beta/models/gemini-2.5-pro:generateContent?key=k1", gemini_body(), key=None)
    answer = json.loads(text)
    assert answer["candidates"][0]["content"]["parts"] == [{"text": "Done."}]
    assert gemini_classes(answer["usageMetadata"]) == {"uncached_input": 1300, "cached_input": 4500,
                                                       "output": 80, "reasoning": 25}


# Errors ----------------------------------------------------------------------------------------

ERRORS = """
[[turns]]
error = { status = 429, message = "slow down", retry_after = 0 }
repeat = 2
[[turns]]
error = { status = 400, message = "scripted invalid request" }
[[turns]]
error = { status = 500, message = "boom" }
"""

CALLS = {
    "chat": ("/v1/chat/completions", chat_body(), "authorization"),
    "anthropic": ("/v1/messages", anthropic_body(), "x-api-key"),
    "responses": ("/v1/responses", responses_body(), "authorization"),
    "gemini": (GEMINI_STREAM, gemini_body(), "x-goog-api-key"),
}


def error_fields(protocol: str, body: dict) -> tuple[str, str]:
    if protocol == "anthropic":
        assert body["type"] == "error"
        return body["error"]["message"], body["error"]["type"]
    if protocol == "gemini":
        return body["error"]["message"], body["error"]["status"]
    return body["error"]["message"], body["error"]["type"]


EXPECTED_TYPES = {
    "chat": ["rate_limit_error", "rate_limit_error", "invalid_request_error", "server_error"],
    "responses": ["rate_limit_error", "rate_limit_error", "invalid_request_error", "server_error"],
    "anthropic": ["rate_limit_error", "rate_limit_error", "invalid_request_error", "api_error"],
    "gemini": ["RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED", "INVALID_ARGUMENT", "INTERNAL"],
}


@pytest.mark.parametrize("protocol", sorted(CALLS))
async def test_errors_in_each_protocols_shape(tmp_path, protocol):
    path, body, header = CALLS[protocol]
    server = await start_server()
    try:
        await register(server, "k1", write_scenario(tmp_path, ERRORS))
        seen = []
        for _ in range(4):
            status, headers, text = await post(server, path, body, header=header)
            seen.append((status, error_fields(protocol, json.loads(text)), headers.get("retry-after")))
        assert [s for s, _, _ in seen] == [429, 429, 400, 500]
        assert [fields[1] for _, fields, _ in seen] == EXPECTED_TYPES[protocol]
        assert [fields[0] for _, fields, _ in seen] == ["slow down", "slow down", "scripted invalid request", "boom"]
        assert [r for _, _, r in seen] == ["0", "0", None, None]
        status, _, _ = await post(server, path, body, header=header)
        assert status == 200, "after the scripted errors the script has run out: 'Done.'"
    finally:
        await server.close()


def test_side_calls_asking_for_json_get_json_that_fits():
    """Gemini CLI's loop check asks a side model for JSON and stalls on plain text."""
    from agentmeter_tui.core.scripted.replies import sample_json

    schema = {"type": "object", "properties": {"unproductive_state_confidence": {"type": "number"},
                                               "unproductive_state_analysis": {"type": "string"},
                                               "kind": {"enum": ["a", "b"]}, "items": {"type": "array"}},
              "required": ["unproductive_state_confidence"]}
    assert sample_json(schema) == {"unproductive_state_confidence": 0, "unproductive_state_analysis": "",
                                   "kind": "a", "items": []}


async def test_gemini_loop_check_side_call_gets_json_and_keeps_the_script(server):
    body = {"contents": [{"role": "user", "parts": [{"text": "is this looping?"}]}],
            "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {
                "type": "object", "properties": {"unproductive_state_confidence": {"type": "number"}}}}}
    status, _, text = await post(server, "/v1beta/models/gemini-3-flash-preview:generateContent", body)
    assert status == 200
    answer = json.loads(text)["candidates"][0]["content"]["parts"][0]["text"]
    assert json.loads(answer) == {"unproductive_state_confidence": 0}
    # It was a side call: the scenario's first turn is still next.
    status, _, text = await post(server, "/v1beta/models/gemini-2.5-pro:generateContent", gemini_body())
    assert status == 200 and "functionCall" in text
