"""The scripted model server against the real agent CLIs in ``.clis/``: each CLI runs the
two-turn scenario (a shell call ``echo hi > out.txt``, then a final answer), the file
appears in the workspace, the CLI exits 0, and the usage it reports equals what the server
served, read in that protocol's own semantics. Skipped when a CLI is missing, except in CI.

The commands and environments are those of ``research/real-clis.md``; the adapters
(``core/harnesses``) own them for real runs, these tests only prove the wire protocols.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from agentmeter_tui.core.scripted.client import register_session, session_info, start_server_process
from agentmeter_tui.core.scripted.scenario import SIDE_CALL_USAGE
from tests.conftest import need

pytestmark = pytest.mark.clis

ROOT = Path(__file__).resolve().parents[2]
NPM_BIN = ROOT / ".clis" / "node_modules" / ".bin"
SCENARIO = ROOT / "tests" / "fixtures" / "scenarios" / "shell-then-done.toml"
PROMPT = "Create a file out.txt containing hi."
SERVED = {"uncached_input": 2500, "cached_input": 8500, "cache_write": 300, "output": 110, "reasoning": 45}


@pytest.fixture(scope="module")
def server():
    with start_server_process() as server:
        yield server


def _json_lines(text: str) -> list[dict]:
    lines = []
    for line in text.splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    return lines


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


NO_TELEMETRY = {"privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
                "general": {"disableAutoUpdate": True}}


def setup_claude(home: Path, base: str, key: str) -> tuple[list[str], dict]:
    command = [str(NPM_BIN / "claude"), "-p", PROMPT, "--output-format", "stream-json", "--verbose",
               "--model", "claude-sonnet-4-6", "--dangerously-skip-permissions"]
    return command, {"ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": key, "IS_SANDBOX": "1",
                     "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
                     "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_MAX_RETRIES": "1"}


def setup_codex(home: Path, base: str, key: str) -> tuple[list[str], dict]:
    _write(home / ".codex" / "config.toml", f"""model = "gpt-5.5"
model_provider = "mock"
check_for_update_on_startup = false
[model_providers.mock]
name = "mock"
base_url = "{base}/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
request_max_retries = 1
stream_max_retries = 1
[analytics]
enabled = false
""")
    command = [str(NPM_BIN / "codex"), "exec", "--json", "--skip-git-repo-check",
               "--dangerously-bypass-approvals-and-sandbox", PROMPT]
    return command, {"CODEX_HOME": str(home / ".codex"), "MOCK_API_KEY": key}


def setup_qwen(home: Path, base: str, key: str) -> tuple[list[str], dict]:
    _write(home / ".qwen" / "settings.json", json.dumps({**NO_TELEMETRY, "security": {"auth": {"selectedType": "openai"}}}))
    command = [str(NPM_BIN / "qwen"), "--auth-type", "openai", "-m", "qwen3-coder-plus", "--output-format",
               "stream-json", "--approval-mode", "yolo", PROMPT]
    return command, {"OPENAI_BASE_URL": f"{base}/v1", "OPENAI_API_KEY": key, "OPENAI_MODEL": "qwen3-coder-plus",
                     "QWEN_CODE_NO_RELAUNCH": "true"}


def setup_gemini(home: Path, base: str, key: str) -> tuple[list[str], dict]:
    settings = {**NO_TELEMETRY, "security": {"auth": {"selectedType": "gemini-api-key"}}}
    _write(home / ".gemini" / "settings.json", json.dumps(settings))
    command = [str(NPM_BIN / "gemini"), "-m", "gemini-2.5-pro", "--output-format", "stream-json",
               "--approval-mode", "yolo", "-p", PROMPT]
    return command, {"GEMINI_API_KEY": key, "GOOGLE_GEMINI_BASE_URL": base, "GEMINI_CLI_TRUST_WORKSPACE": "true",
                     "GEMINI_CLI_NO_RELAUNCH": "true"}


def setup_opencode(home: Path, base: str, key: str) -> tuple[list[str], dict]:
    model = {"cost": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75},
             "limit": {"context": 200000, "output": 8000}}
    config = {"provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": f"{base}/v1",
                                                                                   "apiKey": key},
                                    "models": {"mock-model": model}}},
              "model": "mock/mock-model", "small_model": "mock/mock-model", "autoupdate": False, "share": "disabled",
              "permission": {"*": "allow", "bash": "allow", "edit": "allow"}}
    _write(home / ".config" / "opencode" / "opencode.json", json.dumps(config))
    flags = ("MODELS_FETCH", "AUTOUPDATE", "SHARE", "CLAUDE_CODE", "DEFAULT_PLUGINS")
    return [str(NPM_BIN / "opencode"), "run", "--format", "json", PROMPT], {f"OPENCODE_DISABLE_{f}": "1" for f in flags}


def setup_kimi(home: Path, base: str, key: str) -> tuple[list[str], dict]:
    _write(home / ".kimi" / "config.toml", f"""default_model = "mock"
telemetry = false
[providers.mock]
type = "kimi"
base_url = "{base}/v1"
api_key = "{key}"
[models.mock]
provider = "mock"
model = "kimi-k2"
max_context_size = 262144
""")
    # install-clis puts each PyPI CLI in its own venv named after its adapter.
    return [str(ROOT / ".clis" / "kimi-cli" / "bin" / "kimi"), "--print", "--output-format", "stream-json", "-p", PROMPT], {}


def run_cli(server, tmp_path: Path, name: str, setup) -> tuple[subprocess.CompletedProcess, Path, dict]:
    home, workspace = tmp_path / "home", tmp_path / "workspace"
    home.mkdir()
    workspace.mkdir()
    key = f"{name}-{tmp_path.name}"
    register_session(server.base_url, key, SCENARIO, control=server.control_key)
    command, extra = setup(home, server.base_url, key)
    need(Path(command[0]).exists(), f"{name} is not installed in .clis/ (agentmeter install-clis)")
    # A fresh HOME and a clean environment per run; PWD because opencode takes its directory from it.
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "PWD": str(workspace), "LANG": "C.UTF-8",
           "TERM": "dumb", **extra}
    started = time.monotonic()
    result = subprocess.run(command, cwd=workspace, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                            text=True, timeout=600, check=False)  # a fail-safe; the time is reported, never asserted
    assert result.returncode == 0, f"{name} exited {result.returncode} after {time.monotonic() - started:.1f} s:\n" \
                                   f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    assert (workspace / "out.txt").read_text() == "hi\n"
    return result, workspace, session_info(server.base_url, key, control=server.control_key)


def test_claude_code_anthropic_messages(server, tmp_path):
    result, _, info = run_cli(server, tmp_path, "claude", setup_claude)
    assert info["usage"] == SERVED and [c["protocol"] for c in info["served"]] == ["anthropic", "anthropic"]
    usage = [e for e in _json_lines(result.stdout) if e.get("type") == "result"][-1]["usage"]
    # Anthropic semantics: input is uncached; output includes thinking.
    assert (usage["input_tokens"], usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"],
            usage["output_tokens"]) == (2500, 8500, 300, 110 + 45)


def test_codex_responses(server, tmp_path):
    result, _, info = run_cli(server, tmp_path, "codex", setup_codex)
    assert info["usage"] == SERVED and [c["protocol"] for c in info["served"]] == ["responses", "responses"]
    usage = [e for e in _json_lines(result.stdout) if e.get("type") == "turn.completed"][-1]["usage"]
    # OpenAI semantics: input includes cache reads and writes; output includes reasoning.
    assert usage == {"input_tokens": 2500 + 8500 + 300, "cached_input_tokens": 8500, "cache_write_input_tokens": 300,
                     "output_tokens": 110 + 45, "reasoning_output_tokens": 45}


def test_qwen_code_chat_completions(server, tmp_path):
    result, _, info = run_cli(server, tmp_path, "qwen", setup_qwen)
    assert info["usage"] == SERVED and [c["protocol"] for c in info["served"]] == ["chat", "chat"]
    usage = [e for e in _json_lines(result.stdout) if e.get("type") == "result"][-1]["usage"]
    # Anthropic field names with OpenAI meaning: input includes the cache; output includes reasoning.
    assert (usage["input_tokens"], usage["cache_read_input_tokens"], usage["output_tokens"]) == (11300, 8500, 155)


def test_gemini_cli_gemini(server, tmp_path):
    result, _, info = run_cli(server, tmp_path, "gemini", setup_gemini)
    assert info["usage"] == SERVED and [c["protocol"] for c in info["served"]] == ["gemini", "gemini"]
    stats = [e for e in _json_lines(result.stdout) if e.get("type") == "result"][-1]["stats"]
    # Prompt includes cached (and, having no field of their own, cache writes); output excludes thoughts.
    assert (stats["input_tokens"], stats["cached"], stats["output_tokens"], stats["total_tokens"]) == (
        11300, 8500, 110, 11300 + 110 + 45)


def test_opencode_chat_completions(server, tmp_path):
    result, _, info = run_cli(server, tmp_path, "opencode", setup_opencode)
    # Its title-generation call offers no tools: a side call that does not take a turn.
    assert [c["answer"] for c in info["served"]] == ["side call", "turn 1", "turn 2"]
    side = SIDE_CALL_USAGE.as_dict()
    assert info["usage"] == {k: SERVED[k] + side[k] for k in SERVED}
    steps = [e["part"]["tokens"] for e in _json_lines(result.stdout) if e.get("type") == "step_finish"]
    assert sum(s["cache"]["read"] for s in steps) == 8500 and sum(s["reasoning"] for s in steps) == 45
    assert sum(s["output"] for s in steps) == 110 and sum(s["input"] for s in steps) == 2500 + 300


def test_kimi_cli_chat_completions(server, tmp_path):
    result, _, info = run_cli(server, tmp_path, "kimi", setup_kimi)
    assert info["usage"] == SERVED and [c["protocol"] for c in info["served"]] == ["chat", "chat"]
    messages = _json_lines(result.stdout)
    assert messages[0]["tool_calls"][0]["function"]["name"] == "Shell"
