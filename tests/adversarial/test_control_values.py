"""Values sent to a running runner are checked at the command line and at the socket (issue 24,
item 2): finite, positive, of the right type, known fields only. A bad one is refused with a
message and changes nothing; the run goes on and finishes every trial."""

from __future__ import annotations

import json
import socket

import orjson
import pytest

from agentmeter_tui.core.paths import socket_path
from tests.conftest import agentmeter
from tests.core.runpaths_support import start_gated, wait_run_ended

BAD_ARGUMENTS = [["--tokens", "0"], ["--tokens", "-1"], ["--tokens", str(10**25)], ["--tokens", "abc"],
                 ["--usd", "nan"], ["--usd", "inf"], ["--usd", "-0.5"], ["--wall-seconds", "abc"],
                 ["--wall-seconds", "1e400"], []]

BAD_REQUESTS = [b'{"op": "budget", "wall_seconds": "abc"}', b'{"op": "budget", "tokens": 0}',
                b'{"op": "budget", "tokens": -1}', b'{"op": "budget", "tokens": 10000000000000000000000000}',
                b'{"op": "budget", "usd": 1e400}', b'{"op": "budget", "tokens": 1.5}',
                b'{"op": "budget", "tokens": true}', b'{"op": "budget", "tokens": 5, "bogus": 1}',
                b'{"op": "budget"}', b'{"op": "budget", "trial": "1", "tokens": 5}',
                b'{"op": "kill", "trial": "x"}', b'{"op": "kill"}', b'{"op": "pause", "now": true}',
                b'{"op": "subscribe", "max_events": "many"}', b'{"op": 7}', b'[1, 2]']


def ask(db, line: bytes) -> dict:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(socket_path(db)))
        sock.sendall(line + b"\n")
        reply = sock.makefile("rb").readline()
    assert reply, f"the runner closed the connection on {line!r}"
    return orjson.loads(reply)


@pytest.fixture
def running(tmp_path):
    """A run of the gated slow suite with two trials waiting at the gate."""
    db = tmp_path / "agentmeter.db"
    _suite, gate, store = start_gated(tmp_path, db)
    yield db, gate, store
    agentmeter("stop", "--db", str(db))


def budgets(db) -> list[dict]:
    status = json.loads(agentmeter("status", "--json", "--db", str(db), check=True).stdout)
    return [m["budget"] for m in status["running"]]


def test_bad_values_are_refused_and_change_nothing(running):
    db, gate, store = running
    before = budgets(db)
    for arguments in BAD_ARGUMENTS:
        result = agentmeter("budget", *arguments, "--db", str(db))
        assert result.returncode == 2, (arguments, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr and result.stderr.strip().splitlines()[-1].startswith(
            ("agentmeter budget: error:", "agentmeter budget: give")), (arguments, result.stderr)
    for line in BAD_REQUESTS:
        reply = ask(db, line)
        assert reply["ok"] is False and reply["error"], (line, reply)
    assert "tokens" in ask(db, b'{"op": "budget", "tokens": 0}')["error"]
    assert "unknown field" in ask(db, b'{"op": "budget", "tokens": 5, "bogus": 1}')["error"]
    assert budgets(db) == before
    # The runner is whole: a good value still lands, and every trial runs to its end.
    assert ask(db, b'{"op": "budget", "tokens": 123456}') == {"ok": True, "budget": {"tokens": 123456}}
    assert {b["tokens"] for b in budgets(db)} == {123456}
    gate.touch()
    assert wait_run_ended(store) == "finished"
    assert len(store.trials("slow", "status = 'passed'")) == 6
