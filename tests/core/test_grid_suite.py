"""The suite a command line implies (issue 34, core/suites/grid.py): the same options name the same
suite, a real provider's model is priced from a dated snapshot written once (a resumed run prices
as the first did), and a registry is read over HTTP (a server on 127.0.0.1) as from a file."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from agentmeter_tui.core import pricing
from agentmeter_tui.core.harbor.dataset_registry import read_registry
from agentmeter_tui.core.suites.grid import GridOptions, grid_suite, write_grid_suite
from agentmeter_tui.core.suites.load import load_suite
from tests.conftest import ROOT

SMOKE = ROOT / "suites" / "smoke"


def options(**extra) -> GridOptions:
    return GridOptions(models=["anthropic/claude-sonnet-4-5"], agents=["claude-code"], attempts=3, concurrency=4,
                       **extra)


def test_the_same_options_name_the_same_suite_and_others_another():
    first, again = grid_suite(SMOKE, options(), None), grid_suite(SMOKE, options(), None)
    assert first["suite"]["id"] == again["suite"]["id"]
    assert grid_suite(SMOKE, options(include=["count-*"]), None)["suite"]["id"] != first["suite"]["id"]
    assert grid_suite(SMOKE, options(suite_id="mine"), None)["suite"]["id"] == "mine"
    model = first["models"][0]
    assert (model["id"], model["provider"], model["price_key"]) == ("claude-sonnet-4-5", "anthropic",
                                                                    "anthropic/claude-sonnet-4-5")
    assert first["providers"]["anthropic"]["api_key_env"] == "ANTHROPIC_API_KEY"  # the variable's name, never a key


def test_a_real_models_prices_are_drafted_once_and_kept(tmp_path, monkeypatch):
    data = grid_suite(SMOKE, options(), None)
    folder = write_grid_suite(data, tmp_path, None)
    snapshot = (folder / "prices.toml").read_text()
    assert '"anthropic/claude-sonnet-4-5"' in snapshot and "as_of" in snapshot, snapshot
    load_suite(folder)  # the implied suite loads, its pricing inside its folder
    found = pricing.PriceSnapshot.load(folder / "prices.toml").find("anthropic/claude-sonnet-4-5")
    assert found is not None and found[1].input > 0, snapshot
    # A later day's resume: the snapshot the run started with stays (no redraft at the new date).
    monkeypatch.setattr(pricing, "now_utc", lambda: datetime(2030, 1, 1, tzinfo=UTC))
    write_grid_suite(grid_suite(SMOKE, options(), None), tmp_path, None)
    assert (folder / "prices.toml").read_text() == snapshot


def test_a_registry_is_read_over_http_from_127_0_0_1():
    body = json.dumps([{"name": "d", "version": "1", "description": "", "tasks": [
        {"name": "t", "git_url": "file:///x", "git_commit_id": "abcdef1", "path": "t", "extra": 1}]}]).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        (dataset,) = read_registry(f"http://127.0.0.1:{server.server_address[1]}/registry.json")
    finally:
        server.shutdown()
        server.server_close()
    assert (dataset.ref, dataset.tasks[0].git_commit_id, dataset.tasks[0].folder()) == ("d@1", "abcdef1", "t")
