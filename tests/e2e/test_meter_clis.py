"""`agentmeter meter -- CLI ...` with each real agent CLI as COMMAND and the scripted model
server as the upstream: the JSON totals equal what the server served (folded only where the
CLI's wire protocol cannot tell two classes apart), and the real key stays in the proxy.

The CLI is configured the way a user would: its config files (the adapter's, written into a
fresh HOME) point at ``http://127.0.0.1:PORT`` (``meter --port``) and name their own key
variable, which ``meter --key-env`` fills with the placeholder key."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agentmeter_tui.core.harnesses import agent_clis, get_adapter
from agentmeter_tui.core.harnesses.base import LaunchContext
from agentmeter_tui.core.scripted.client import session_info, start_server_process
from agentmeter_tui.core.paths import default_clis_root
from agentmeter_tui.core.sandboxes.local import SYSTEM_PATH
from agentmeter_tui.core.usage import TokenUsage
from agentmeter_tui.core.wire import MERGED, fold
from tests.conftest import FIXTURES
from tests.e2e.harness import require_cli

pytestmark = pytest.mark.clis

CLIS = agent_clis()
SCENARIO = FIXTURES / "scenarios" / "shell-then-done.toml"
KIND = {"anthropic": "anthropic", "chat": "openai", "responses": "openai", "gemini": "gemini"}
# the variables each meter sets itself; anything else an adapter reads its key from is --key-env
METER_KEYS = {"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "KIMI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"}
REAL_KEY = "sk-real-PLANTED-cli-51e0"
ROOT = Path(__file__).resolve().parents[2]
# `agentmeter meter` from this checkout, without PYTHONPATH (which the CLI would inherit)
RUN_METER = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from agentmeter_tui.cli import main; sys.exit(main())"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("cli", CLIS)
def test_meter_runs_a_real_cli(tmp_path, cli):
    require_cli(cli)
    adapter = get_adapter(cli)
    kind = KIND[adapter.protocol]
    port = free_port()
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    ctx = LaunchContext(model_name="mock", instruction="Create a file out.txt containing hi.",
                        workspace=str(workspace), home=str(home), base_url=f"http://127.0.0.1:{port}",
                        api_key="(set by agentmeter meter)", clis_root=str(default_clis_root()),
                        python=sys.executable)
    for rel, data in adapter.home_files(ctx).items():
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    adapter_env = adapter.environment(ctx)
    key_vars = [name for name, value in adapter_env.items() if value == ctx.api_key and name not in METER_KEYS]
    # The clean environment the runner's local sandbox gives a CLI, not this test's (no PYTHONPATH)
    env = {"PATH": SYSTEM_PATH, "HOME": str(home), "PWD": str(workspace), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "TERM": "dumb", "TMPDIR": str(tmp_path), **{k: v for k, v in adapter_env.items() if v != ctx.api_key}}
    for name in METER_KEYS | set(key_vars):
        env[name] = REAL_KEY  # the real key, where a careless meter would pass it on
    with start_server_process(SCENARIO, log_dir=tmp_path / "log") as provider:
        result = subprocess.run(
            [sys.executable, "-c", RUN_METER, "meter", "--port", str(port), "--json",
             "--upstream", f"{kind}={provider.base_url}", *[f"--key-env={name}={kind}" for name in key_vars],
             "--", *adapter.command(ctx)],
            cwd=workspace, env=env, capture_output=True, text=True, timeout=240)
        assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-3000:])
        info = session_info(provider.base_url, REAL_KEY, control=provider.control_key)
    totals = json.loads(result.stdout.strip().splitlines()[-1])
    served = fold(TokenUsage.from_dict(info["usage"]), MERGED[adapter.protocol])
    assert TokenUsage.from_dict(totals["tokens"]) == served, (totals, info["usage"])
    assert totals["calls"] == sum(1 for call in info["served"] if call["completed"]) >= 2
    assert (workspace / "out.txt").read_text().strip() == "hi"
    assert REAL_KEY not in result.stdout + result.stderr
