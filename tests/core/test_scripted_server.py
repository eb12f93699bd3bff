"""The scripted model server: scenario files, sessions and turns, the request log, timing,
and the ways to start it (command, process, thread)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import aiohttp
import pytest

from agentmeter_tui.core.scripted.client import (
    ServerError,
    register_session,
    run_in_thread,
    session_info,
    session_requests,
    start_server_process,
)
from agentmeter_tui.core.scripted.replies import OfferedTool, find_shell_tool, shell_arguments
from agentmeter_tui.core.scripted.scenario import DEFAULT_USAGE, SIDE_CALL_USAGE, load_scenario
from agentmeter_tui.core.tomlerrors import InputError
from tests.core.scripted_support import (
    TURN1,
    TWO_TURNS,
    chat_body,
    control,
    get_json,
    parse_sse,
    post,
    register,
    start_server,
    write_scenario,
)
from tests.waiting import eventually, wait_for


@pytest.fixture
async def server():
    server = await start_server()
    yield server
    await server.close()


def tool_call(text: str) -> dict | None:
    """The tool call of a streamed chat answer, with its arguments parsed."""
    chunks = [data for _, data in parse_sse(text) if data != "[DONE]"]
    calls = [c for chunk in chunks if chunk["choices"] for c in chunk["choices"][0]["delta"].get("tool_calls", [])]
    if not calls:
        return None
    return {"name": calls[0]["function"]["name"],
            "arguments": json.loads("".join(c["function"]["arguments"] for c in calls))}


def content(text: str) -> str:
    chunks = [data for _, data in parse_sse(text) if data != "[DONE]"]
    return "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in chunks if chunk["choices"])


# Scenario files ---------------------------------------------------------------------------------

def test_scenario_loads_with_defaults(tmp_path):
    scenario = load_scenario(write_scenario(tmp_path, TWO_TURNS))
    assert scenario.description.startswith("a shell call") and len(scenario.turns) == 2
    assert scenario.turns[0].tokens().as_dict() == TURN1
    assert load_scenario(write_scenario(tmp_path, '[[turns]]\ntext = "x"\n', "d.toml")).turns[0].tokens() == DEFAULT_USAGE


@pytest.mark.parametrize("text, line, field, message", [
    ('[[turns]]\ntext = "a"\n[[turns]]\ntext = "b"\nusage = { outptu = 3 }\n', 5, "turns[1].usage.outptu", "unknown field"),
    ('[[turns]]\ntext = "a"\ndelay_ms = -5\n', 3, "turns[0].delay_ms", "greater than or equal to 0"),
    ('[[turns]]\nshell = "ls"\ntool = { name = "x" }\n', 1, "turns[0]", "at most one tool call"),
    ('[[turns]]\nrepeat = 2\n', 1, "turns[0]", "at least one of"),
    ('[[turns]]\nerror = { status = 200 }\n', 2, "turns[0].error.status", "greater than or equal to 400"),
    ('[[turns]\ntext = "a"\n', 1, None, "invalid TOML"),
])
def test_bad_scenario_names_file_line_and_field(tmp_path, text, line, field, message):
    path = write_scenario(tmp_path, text, "bad.toml")
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    error = caught.value
    assert (error.path, error.line, error.field) == (str(path), line, field)
    assert message in str(error) and str(error).startswith(f"{path}:{line}: ")


async def test_registering_a_bad_scenario_is_a_400_naming_file_line_field(server, tmp_path):
    path = write_scenario(tmp_path, '[[turns]]\ntext = "a"\nloop = "yes"\n')
    status, answer = await register(server, "k1", path)
    assert status == 400 and (answer["file"], answer["line"], answer["field"]) == (str(path), 3, "turns[0].loop")
    status, answer = await register(server, "k1", write_scenario(tmp_path, "[[turns]\n", "broken.toml"))
    assert status == 400 and "invalid TOML" in answer["error"] and answer["file"].endswith("broken.toml")


# Shell tool discovery ----------------------------------------------------------------------------

@pytest.mark.parametrize("name, schema, expected", [
    ("Bash", {"properties": {"command": {"type": "string"}, "timeout": {"type": "number"}}, "required": ["command"]},
     {"command": "ls"}),
    ("exec_command", {"properties": {"cmd": {"type": "string"}, "login": {"type": "boolean"}}, "required": ["cmd"]},
     {"cmd": "ls"}),
    ("run_shell_command", {"properties": {"command": {"type": "STRING"}, "is_background": {"type": "BOOLEAN"}},
                           "required": ["command"]}, {"command": "ls"}),
    ("bash", {"properties": {"command": {"type": "string"}, "description": {"type": "string"}},
              "required": ["command", "description"]}, {"command": "ls", "description": "run the scripted command"}),
    ("Shell", {"properties": {"command": {"type": "string"}}}, {"command": "ls"}),
    ("shell", None, {"command": "ls"}),
])
def test_shell_tool_arguments_follow_the_schema(name, schema, expected):
    tools = [OfferedTool("Read", {"properties": {"path": {"type": "string"}}}), OfferedTool(name, schema)]
    tool = find_shell_tool(tools)
    assert tool is not None and tool.name == name
    assert shell_arguments(tool, "ls") == expected


async def test_shell_turn_without_a_shell_tool_answers_text(server, tmp_path):
    await register(server, "k1", write_scenario(tmp_path, '[[turns]]\nshell = "ls -l"\n'))
    body = chat_body(tools=False)
    body["tools"] = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    _, _, text = await post(server, "/v1/chat/completions", body)
    assert tool_call(text) is None and "ls -l" in content(text)


# Sessions and turns ------------------------------------------------------------------------------

SCRIPT = """
[[turns]]
text = "first"
repeat = 2
usage = { uncached_input = 10, output = 1 }
[[turns]]
shell = "make"
usage = { uncached_input = 20, cached_input = 5, cache_write = 3, output = 2, reasoning = 1 }
[[turns]]
text = "looping"
loop = true
usage = { uncached_input = 30, output = 3 }
"""


async def test_repeat_loop_and_side_calls(server, tmp_path):
    await register(server, "k1", write_scenario(tmp_path, SCRIPT))
    answers = []
    for tools in (True, True, False, True, True, True):
        _, _, text = await post(server, "/v1/chat/completions", chat_body(tools=tools))
        answers.append(tool_call(text) or content(text))
    assert answers == ["first", "first", "Scripted session", {"name": "shell", "arguments": {"command": "make"}},
                       "looping", "looping"]
    _, info = await get_json(server, "/_scripted/sessions/k1")
    assert [call["answer"] for call in info["served"]] == ["turn 1", "turn 1", "side call", "turn 2", "turn 3", "turn 3"]
    side = SIDE_CALL_USAGE.as_dict()
    expected = {"uncached_input": 10 + 10 + side["uncached_input"] + 20 + 30 + 30, "cached_input": 5,
                "cache_write": 3, "output": 1 + 1 + side["output"] + 2 + 3 + 3, "reasoning": 1}
    assert info["usage"] == expected and info["calls"] == 6 and all(c["completed"] for c in info["served"])


async def test_after_the_last_turn_done(server, tmp_path):
    await register(server, "k1", write_scenario(tmp_path, '[[turns]]\ntext = "only"\n'))
    texts = [content((await post(server, "/v1/chat/completions", chat_body()))[2]) for _ in range(3)]
    assert texts == ["only", "Done.", "Done."]
    _, info = await get_json(server, "/_scripted/sessions/k1")
    assert info["served"][-1]["usage"] == DEFAULT_USAGE.as_dict() and info["served"][-1]["answer"] == "after last turn"


async def test_sessions_are_per_key_and_concurrent(server, tmp_path):
    path = write_scenario(tmp_path, TWO_TURNS)
    keys = [f"trial-{n}" for n in range(8)]
    for key in keys:
        await register(server, key, path)
    results = await asyncio.gather(*(post(server, "/v1/chat/completions", chat_body(), key=key) for key in keys))
    assert all(tool_call(text)["arguments"] == {"command": "echo hi > out.txt"} for _, _, text in results)
    for key in keys:
        _, info = await get_json(server, f"/_scripted/sessions/{key}")
        assert info["usage"] == TURN1 and info["next_turn"] == 2


async def test_unknown_key_401_or_default_scenario(server, tmp_path):
    status, _, text = await post(server, "/v1/chat/completions", chat_body(), key="nobody")
    assert status == 401 and "register it with POST /_scripted/sessions" in json.loads(text)["error"]["message"]
    status, _, _ = await post(server, "/v1/chat/completions", chat_body(), key=None)
    assert status == 401
    _, unmatched = await get_json(server, "/_scripted/requests")
    assert [entry["status"] for entry in unmatched["requests"]] == [401, 401]
    default = await start_server(write_scenario(tmp_path, TWO_TURNS))
    try:
        for key in ("a", "b"):  # each unknown key plays the default scenario in a session of its own
            _, _, text = await post(default, "/v1/chat/completions", chat_body(), key=key)
            assert tool_call(text)["name"] == "shell"
    finally:
        await default.close()


async def test_reregistering_starts_over_and_delete_forgets(server, tmp_path):
    path = write_scenario(tmp_path, TWO_TURNS)
    await register(server, "k1", path)
    await post(server, "/v1/chat/completions", chat_body())
    await register(server, "k1", path)
    _, info = await get_json(server, "/_scripted/sessions/k1")
    assert info["calls"] == 0 and info["next_turn"] == 1
    async with aiohttp.ClientSession(headers=control(server)) as client, \
            client.delete(server.make_url("/_scripted/sessions/k1")) as response:
        assert response.status == 200
    assert (await get_json(server, "/_scripted/sessions/k1"))[0] == 404


# Request log -------------------------------------------------------------------------------------

async def test_request_log_redacts_secrets_and_writes_jsonl(tmp_path):
    server = await start_server(log_dir=tmp_path / "log")
    try:
        _, registered = await register(server, "sk-secret", write_scenario(tmp_path, TWO_TURNS))
        headers = {"Authorization": "Bearer sk-secret", "x-api-key": "sk-secret", "x-goog-api-key": "sk-secret",
                   "X-Session-Token": "t0ken", "User-Agent": "test-agent"}
        async with aiohttp.ClientSession() as client:
            url = server.make_url("/v1/chat/completions?key=sk-secret&beta=true")
            async with client.post(url, json=chat_body(), headers=headers) as response:
                await response.read()
            async with client.get(server.make_url("/v1/unknown/endpoint"), headers=headers) as response:
                assert response.status == 404
        _, log = await get_json(server, "/_scripted/sessions/sk-secret/requests")
        entries = log["requests"]
        assert [(e["method"], e["path"], e["status"], e["answer"]) for e in entries] == [
            ("POST", "/v1/chat/completions", 200, "turn 1"), ("GET", "/v1/unknown/endpoint", 404, "unknown endpoint")]
        first = entries[0]
        assert first["query"] == {"key": "[redacted]", "beta": "true"}
        assert {name.lower(): value for name, value in first["headers"].items()}["user-agent"] == "test-agent"
        for name in ("authorization", "x-api-key", "x-goog-api-key", "x-session-token"):
            assert {n.lower(): v for n, v in first["headers"].items()}[name] == "[redacted]"
        assert first["body"]["tools"][0]["function"]["name"] == "shell" and first["outcome"] == "completed"
        assert first["total_ms"] >= first["first_byte_ms"] >= 0
        written = (tmp_path / "log" / f"{registered['label']}.jsonl").read_text()
        assert "sk-secret" not in written and "t0ken" not in written
        assert [json.loads(line)["path"] for line in written.splitlines()] == ["/v1/chat/completions",
                                                                              "/v1/unknown/endpoint"]
    finally:
        await server.close()


# Timing: delay, stall, a client that goes away -------------------------------------------------

async def test_delay_holds_the_response(server, tmp_path):
    await register(server, "k1", write_scenario(tmp_path, '[[turns]]\ntext = "late"\ndelay_ms = 300\n'))
    _, _, text = await post(server, "/v1/chat/completions", chat_body())
    assert content(text) == "late"
    _, log = await get_json(server, "/_scripted/sessions/k1/requests")
    assert log["requests"][0]["first_byte_ms"] >= 300  # the server's own record: held back, not cut short


async def test_stall_holds_the_stream_after_the_first_chunk(server, tmp_path):
    await register(server, "k1", write_scenario(tmp_path, '[[turns]]\ntext = "stuck"\nstall_ms = 60000\n'))
    async with aiohttp.ClientSession() as client, \
            client.post(server.make_url("/v1/chat/completions"), json=chat_body(),
                        headers={"Authorization": "Bearer k1"}) as response:
        first = await response.content.readuntil(b"\n\n")
        assert json.loads(first[6:])["choices"][0]["delta"]["role"] == "assistant"
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(response.content.readuntil(b"\n\n"), 0.3)
    # The client went away mid-stall: the call is logged as such and its usage was never delivered.
    async def logged():  # the server records the entry once its handler is cancelled
        _, log = await get_json(server, "/_scripted/sessions/k1/requests")
        return log if log["requests"] else None

    log = await eventually(logged, "the disconnected call in the request log")
    assert log["requests"][0]["outcome"] == "client disconnected"
    _, info = await get_json(server, "/_scripted/sessions/k1")
    assert info["served"][0]["completed"] is False and sum(info["usage"].values()) == 0


async def test_reset_cuts_the_connection_after_the_first_chunk(server, tmp_path):
    await register(server, "k1", write_scenario(tmp_path, '[[turns]]\ntext = "cut"\nreset = true\n'
                                                          'usage = { uncached_input = 900, output = 7 }\n'))
    async with aiohttp.ClientSession() as client, \
            client.post(server.make_url("/v1/chat/completions"), json=chat_body(),
                        headers={"Authorization": "Bearer k1"}) as response:
        assert response.status == 200
        first = await response.content.readuntil(b"\n\n")
        assert json.loads(first[6:])["choices"][0]["delta"]["role"] == "assistant"
        with pytest.raises(aiohttp.ClientPayloadError):  # a reset, not a clean end of the stream
            await response.read()
    _, info = await get_json(server, "/_scripted/sessions/k1")
    assert info["served"][0]["completed"] is False and sum(info["usage"].values()) == 0
    _, log = await get_json(server, "/_scripted/sessions/k1/requests")
    assert log["requests"][0]["outcome"] == "reset by the scenario"


# Control endpoints and other routes ---------------------------------------------------------------

async def test_health_models_and_unknown_routes(server):
    assert (await get_json(server, "/_scripted/health")) == (200, {"ok": True, "sessions": 0})
    status, models = await get_json(server, "/v1/models")
    assert status == 200 and models["data"][0]["id"] and models["object"] == "list"
    status, models = await get_json(server, "/v1beta/models")
    assert status == 200 and models["models"][0]["name"].startswith("models/")
    status, answer = await get_json(server, "/v2/whatever")
    assert status == 404 and "no endpoint GET /v2/whatever" in answer["error"]["message"]


# Starting it: command line, separate process, thread --------------------------------------------

def test_serve_command_prints_one_line_and_exits_0_on_sigterm(tmp_path):
    scenario = write_scenario(tmp_path, TWO_TURNS)
    process = subprocess.Popen([sys.executable, "-m", "agentmeter_tui.cli", "mockllm", "serve", "--port", "0",
                                "--scenario", str(scenario)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = process.stdout.readline().decode()
        assert line.startswith("listening on http://127.0.0.1:")
        base = line.split()[-1]
        with urllib.request.urlopen(base + "/_scripted/health", timeout=5) as response:
            assert response.status == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0
        assert process.stdout.read() == b""
    finally:
        process.kill()
        process.wait()


def test_serve_with_a_bad_scenario_exits_2_naming_the_line(tmp_path):
    scenario = write_scenario(tmp_path, '[[turns]]\ntext = "a"\nrepeat = 0\n')
    result = subprocess.run([sys.executable, "-m", "agentmeter_tui.core.scripted", "serve", "--scenario",
                             str(scenario)], capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 2 and result.stdout == ""
    assert f"{scenario}:3: field 'turns[0].repeat'" in result.stderr


def test_server_process_client_round_trip(tmp_path):
    scenario = write_scenario(tmp_path, TWO_TURNS)
    with start_server_process(log_dir=tmp_path / "log") as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        register_session(server.base_url, "key/with slash", scenario, control=server.control_key)
        request = urllib.request.Request(server.base_url + "/v1/chat/completions",
                                         data=json.dumps(chat_body()).encode(),
                                         headers={"Authorization": "Bearer key/with slash"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert tool_call(response.read().decode())["name"] == "shell"
        info = session_info(server.base_url, "key/with slash", control=server.control_key)
        assert info["usage"] == TURN1 and info["scenario"] == str(scenario.resolve())
        assert session_requests(server.base_url, "key/with slash", control=server.control_key)[0]["answer"] == "turn 1"
        with pytest.raises(ServerError, match="HTTP 404"):
            session_info(server.base_url, "nobody", control=server.control_key)
        with pytest.raises(ServerError, match="HTTP 401"):  # the model key is no control key
            session_info(server.base_url, "key/with slash", control="")
    assert server.process.returncode == 0


def test_server_process_start_failure_is_reported(tmp_path):
    bad = write_scenario(tmp_path, "turns = 3\n")
    with pytest.raises(ServerError, match="bad scenario|turns"):
        start_server_process(bad)


def test_run_in_thread(tmp_path):
    with run_in_thread(write_scenario(tmp_path, TWO_TURNS)) as server:
        request = urllib.request.Request(server.base_url + "/v1/chat/completions",
                                         data=json.dumps(chat_body(stream=False)).encode(),
                                         headers={"x-api-key": "anything"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert json.loads(response.read())["choices"][0]["finish_reason"] == "tool_calls"


def test_fixture_scenarios_load():
    folder = Path(__file__).resolve().parents[1] / "fixtures" / "scenarios"
    names = sorted(path.name for path in folder.glob("*.toml"))
    assert {"shell-then-done.toml", "loop.toml", "error-400.toml", "stall.toml"} <= set(names)
    for name in names:
        assert load_scenario(folder / name).turns


async def test_call_placeholder_varies_a_looping_turn(server, tmp_path):
    await register(server, "k1", write_scenario(tmp_path, '[[turns]]\nloop = true\nshell = "echo {call} >> f"\n'))
    commands = []
    for _ in range(3):
        _, _, text = await post(server, "/v1/chat/completions", chat_body())
        commands.append(tool_call(text)["arguments"]["command"])
    assert commands == ["echo 1 >> f", "echo 2 >> f", "echo 3 >> f"]


PARENT = """
import sys
from agentmeter_tui.core.scripted.client import start_server_process
server = start_server_process()
print(server.pid, server.base_url, flush=True)
sys.stdin.read()
"""


def _running(pid: str) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie has exited (a subreaper may not have reaped it yet)


def test_server_process_exits_when_its_parent_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        pid, _ = parent.stdout.readline().decode().split()
        parent.kill()
        parent.wait()
        # Polling /proc: an orphan's exit cannot be awaited by its ex-grandparent.
        wait_for(lambda: not _running(pid), "the server to exit with the process that started it")
    finally:
        parent.kill()
        parent.wait()
