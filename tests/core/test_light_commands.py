"""Commands a reviewer or an operator scripts (``--help``, ``status``, ``kill``, ``score``) start
without the heavy libraries: which modules they import is checked, not how long they take (the
timing is in benchmarks/startup.py)."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import sys

import pytest

from agentmeter_tui import cli
from agentmeter_tui.core.reporting.records import import_records, read_records
from agentmeter_tui.core.store import Store

HEAVY = ("textual", "rich.console", "rich.live", "numpy", "scipy", "matplotlib", "docker", "asyncssh",
         "sqlite_utils", "pydantic", "aiohttp", "sklearn", "krippendorff")

PROBE = """
import json, sys
from agentmeter_tui import cli
try:
    code = cli.main(json.loads(sys.argv[1]))
except SystemExit as exc:
    code = exc.code
sys.stdout.flush()
print("\\nMODULES " + json.dumps(sorted(sys.modules)), file=sys.stderr)
sys.exit(code or 0)
"""

RECORD = ('{"suite": "s", "task": "t1", "tier": "easy", "model": "m", "cli": "c", "trial": 1, "status": "passed",'
          ' "passed": true, "quality": 1.0, "tokens": {"uncached_input": 10, "cached_input": 20, "cache_write": 0,'
          ' "output": 5, "reasoning": 1}, "cost_usd": 0.5, "cost_source": "snapshot", "turns": 2, "tool_calls": 1,'
          ' "started_at": "2026-11-01T00:00:00Z", "finished_at": "2026-11-01T00:01:00Z"}\n')


def run_probe(argv: list[str]) -> tuple[subprocess.CompletedProcess, set[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], check=False, capture_output=True, text=True,
                          timeout=120)
    marker = done.stderr.rindex("MODULES ")
    return done, set(json.loads(done.stderr[marker + len("MODULES "):]))


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(name for name in HEAVY if name in modules)


@pytest.mark.parametrize("argv", [["--help"], ["status", "--help"], ["score", "--help"]])
def test_help_loads_nothing_heavy(argv):
    done, modules = run_probe(argv)
    assert done.returncode == 0, done.stderr
    assert "usage: agentmeter" in done.stdout
    assert heavy_in(modules) == []


@pytest.mark.parametrize("argv", [["status"], ["kill", "3"], ["pause"]])
def test_runner_clients_load_nothing_heavy(tmp_path, argv):
    done, modules = run_probe([*argv, "--db", str(tmp_path / "none.db")])
    assert done.returncode != 0  # no runner: said so, exit non-zero
    assert "runner" in done.stderr.lower()
    assert heavy_in(modules) == []


def test_score_on_a_current_store_loads_nothing_heavy_and_is_kept(tmp_path):
    db = tmp_path / "s.db"
    store = Store(db)
    import_records(store, list(read_records(io.StringIO(RECORD), "in.jsonl")))
    trial_id = store.trials("s")[0]["id"]
    store.close()
    done, modules = run_probe(["score", str(trial_id), "2", "--note", "one loss", "--by", "ana", "--db", str(db)])
    assert done.returncode == 0, done.stderr
    assert "score 2 by ana" in done.stdout
    assert heavy_in(modules) == []
    store = Store(db)
    [row] = store.reviews.score_history(trial_id)
    assert (row.score, row.reviewer, row.note) == (2, "ana", "one loss")
    store.close()
    conn = sqlite3.connect(db)
    assert conn.execute("select action, actor, trial_id from audit").fetchall() == [("score", "ana", trial_id)]
    conn.close()


def test_every_command_of_the_table_is_registered_by_its_module_with_that_help():
    full = cli.build_full_parser()
    [subparsers] = [a for a in full._actions if a.__class__.__name__ == "_SubParsersAction"]
    registered = {choice.dest: choice.help for choice in subparsers._choices_actions}
    assert registered == {name: text for name, (_module, text) in cli.COMMANDS.items()}
    # With a command word, that command's parser is the module's own, not the help-only stub.
    for name in cli.COMMANDS:
        parser = cli.build_parser([name])
        [sub] = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
        real = sub.choices[name]
        assert real.get_default("handler") is not None or len(real._actions) > 1, name
