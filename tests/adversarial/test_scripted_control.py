"""The scripted model server serves trials their model calls only (issue 37, attack 12).

Before: a trial's client, holding only its model key, listed the server's requests and
deleted its own session on the ``/_scripted/`` control routes; registering a session on a
host path made the server (root on CI) open and parse it, and its answer carried the parse
error of ``/etc/shadow``; the per-trial key was ``am-`` + the trial token the agent sees.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import aiohttp
import pytest

from agentmeter_tui.core.scripted.client import start_server_process
from agentmeter_tui.core.scripted.control import CONTROL_HEADER
from tests.core.scripted_support import TWO_TURNS, chat_body, control, post, register, start_server, write_scenario

MODEL_KEY = "am-trial-model-key"
CONTROL_ROUTES = [("GET", "/_scripted/requests"), ("GET", f"/_scripted/sessions/{MODEL_KEY}"),
                  ("GET", f"/_scripted/sessions/{MODEL_KEY}/requests"),
                  ("DELETE", f"/_scripted/sessions/{MODEL_KEY}"), ("POST", "/_scripted/sessions")]


@pytest.fixture
async def server(tmp_path):
    server = await start_server()
    status, _ = await register(server, MODEL_KEY, write_scenario(tmp_path, TWO_TURNS))
    assert status == 200
    yield server
    await server.close()


@pytest.mark.parametrize("method, path", CONTROL_ROUTES)
async def test_a_trial_key_never_opens_a_control_route(server, method, path):
    for headers in ({"Authorization": f"Bearer {MODEL_KEY}"}, {"x-api-key": MODEL_KEY},
                    {CONTROL_HEADER: MODEL_KEY}, {}):
        async with aiohttp.ClientSession() as client, \
                client.request(method, server.make_url(path), headers=headers,
                               json={"key": "mine", "scenario": "x", "toml": TWO_TURNS}) as response:
            assert response.status in (401, 403), (method, path, headers, response.status)
    # nothing was changed: the session is there, with the calls it had
    assert (await post(server, "/v1/chat/completions", chat_body(), key=MODEL_KEY))[0] == 200
    async with aiohttp.ClientSession(headers=control(server)) as client, \
            client.get(server.make_url(f"/_scripted/sessions/{MODEL_KEY}")) as response:
        assert response.status == 200 and (await response.json())["calls"] == 1


@pytest.mark.parametrize("target", ["/etc/shadow", "/etc/passwd", "/proc/self/environ"])
async def test_registering_a_host_path_opens_nothing(server, tmp_path, target):
    """Even with the control key, a session comes from the text the runner read: a path in
    the request is a name only, so the server never opens it and never echoes any of it."""
    secret_file = write_scenario(tmp_path, "root:$6$SECRET-HASH-LINE:19000:0:99999:7:::\n", "shadow")
    for name in (target, str(secret_file)):
        async with aiohttp.ClientSession(headers=control(server)) as client, \
                client.post(server.make_url("/_scripted/sessions"), json={"key": "k2", "scenario": name}) as response:
            text = await response.text()
        assert response.status == 400, text
        assert "SECRET-HASH" not in text and "invalid TOML" not in text and "root:" not in text
        if Path(name).exists():
            assert Path(name).read_text(errors="replace")[:40] not in text


def test_the_runners_server_takes_its_control_key_on_stdin_only(tmp_path):
    """The key is in no argument and no environment variable of the server process."""
    with start_server_process() as server:
        assert len(server.control_key) >= 32
        cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes()
        environ = Path(f"/proc/{server.pid}/environ").read_bytes() if os.access(f"/proc/{server.pid}/environ",
                                                                                  os.R_OK) else b""
        assert server.control_key.encode() not in cmdline + environ
        request = urllib.request.Request(server.base_url + "/_scripted/requests",
                                         headers={CONTROL_HEADER: "not-the-key-" + "x" * 20})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 403
        request = urllib.request.Request(server.base_url + "/_scripted/requests",
                                         headers={CONTROL_HEADER: server.control_key})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert json.loads(response.read()) == {"requests": []}


def test_an_agent_behind_the_proxy_cannot_go_around_it(tmp_path):
    """A live run: the agent computes ``am-`` + its token, finds the scripted server among
    the machine's listeners, and tries a model call and the control routes on it."""
    from tests.e2e.harness import run_scenario

    out = tmp_path / "thief.json"
    agent = Path(__file__).parent / "agents" / "key_thief.py"
    # Unwalled: the agent writes its findings to the test's folder, outside its trial.
    run_scenario(tmp_path, "command", '[[turns]]\ntext = "never asked"\n', suite_extra="proxy = true",
                 cli_args=["{python}", str(agent), str(out)], unwalled_run=True)
    found = json.loads(out.read_text())
    assert found["token_seen"] and found["servers"], found  # it did find the runner's scripted server
    for server in found["servers"]:
        assert server["model_call"] == 401, server  # no session has a key derived from the token
        assert all(status in (401, 403) for name, status in server.items() if name.startswith("requests")), server
