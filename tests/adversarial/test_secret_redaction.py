"""Secrets never stored (issue 37 attack 4): a CLI holding a real provider key (the default
without the metering proxy) whose agent prints it put the key into the store, ``export atif``,
``export-trials``, the HTML site and the blind site. Now every event and the final row pass
the redactor before the store: the key is nowhere in the store's files (the write-ahead log
included), in any export or in either site, and the trial says how many were replaced."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from agentmeter_tui.core.store import Store
from tests.conftest import agentmeter

AGENT = Path(__file__).parent / "agents" / "leaker.py"
KEY = "sk-ant-api03-" + "Qx7" * 30 + "-AAAA"  # real-looking, fake
OPERATOR_TOKEN = "opsecret-" + "k3Y" * 8  # a variable of the operator's environment named like a secret


def _suite(folder: Path) -> Path:
    (folder / "task" / "tests").mkdir(parents=True)
    (folder / "suite.toml").write_text(textwrap.dedent(f"""\
        [suite]
        id = "leaky"
        max_retries = 0
        # The CLI holds the real key only when the proxy is said off (it is on by default for a
        # real provider); then a key the agent prints must still never be stored.
        proxy = false

        [[models]]
        id = "frontier"
        provider = "real"

        [providers.real]
        kind = "openai"
        base_url = "http://127.0.0.1:9"
        api_key_env = "AMTEST_PROVIDER_KEY"

        [[clis]]
        adapter = "command"
        args = ["{sys.executable}", "{AGENT}"]
        """))
    (folder / "task" / "task.toml").write_text("[task]\n")
    (folder / "task" / "instruction.md").write_text("Print your key.\n")
    # the tests print what the agent left, the key among it, and the operator's token
    (folder / "task" / "tests" / "test.sh").write_text(
        "#!/bin/sh\ncat \"$AGENTMETER_WORKSPACE/key.txt\" key.txt 2>/dev/null\necho \"$AMTEST_OPERATOR_TOKEN\"\nexit 0\n")
    return folder


def _hits(paths: list[Path], secret: str) -> list[str]:
    needle = secret.encode()
    found = []
    for path in paths:
        for file in [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()):
            if needle in file.read_bytes():
                found.append(str(file))
    return found


def test_a_printed_key_is_stored_exported_and_published_redacted(tmp_path):
    env = {"AMTEST_PROVIDER_KEY": KEY, "AMTEST_OPERATOR_TOKEN": OPERATOR_TOKEN}
    db = tmp_path / "store.db"
    result = agentmeter("run", str(_suite(tmp_path / "suite")), "--headless", "--db", str(db), env=env)
    assert result.returncode == 0, result.stderr
    store = Store(db, readonly=True)
    (trial,) = store.trials("leaky")
    events = [e["text"] for e in store.db.query("select text from events where trial_id = ?", [trial["id"]])]
    store.close()
    assert any("[redacted:AMTEST_PROVIDER_KEY]" in (t or "") for t in events), events
    assert any("[redacted:github-token]" in (t or "") for t in events), events
    extra = json.loads(trial["extra"] or "{}")
    assert extra.get("redactions", 0) >= 6, extra  # plain, assistant, tool call, result, stderr, tests
    outputs = [tmp_path / "atif", tmp_path / "site", tmp_path / "blind", tmp_path / "records.jsonl"]
    for args in (["export", "atif", "--suite", "leaky", "--out", str(outputs[0])],
                 ["report", "--format", "html", "--out", str(outputs[1])],
                 ["report", "--format", "html", "--blind", "--out", str(outputs[2])],
                 ["export-trials", "--out", str(outputs[3])]):
        done = agentmeter(*args, "--db", str(db))
        assert done.returncode == 0, done.stderr
    stored = sorted(tmp_path.glob("store.db*"))  # the store, its -wal and -shm if they are there
    for secret in (KEY, OPERATOR_TOKEN, "ghp_" + "Z9" * 18):
        assert _hits(stored + outputs, secret) == [], secret


def test_the_review_screen_shows_the_count(tmp_path):
    from agentmeter_tui.ui.data import TrialDetail
    from agentmeter_tui.ui.widgets.review_panels import usage_markup

    detail = TrialDetail({"status": "passed", "reason": None}, [], [], [], {"redactions": 7}, 0)
    assert "secrets redacted[/] 7" in usage_markup(detail)


def test_an_imported_transcript_is_stored_redacted(tmp_path, monkeypatch):
    """The importers' path: an ATIF file quoting the operator's key and a shaped token."""
    from tests.interop.support import cli

    monkeypatch.setenv("AMTEST_PROVIDER_KEY", KEY)
    step = {"step_id": 1, "source": "agent", "message": f"found {KEY} and AKIAIOSFODNN7EXAMPL3"}
    (tmp_path / "t.json").write_text(json.dumps({"schema_version": "ATIF-v1.6", "session_id": "s",
                                                  "agent": {"name": "x", "version": "1"}, "steps": [step]}))
    db = tmp_path / "store.db"
    code, err = cli("import", "atif", str(tmp_path / "t.json"), "--db", str(db))
    assert code == 0, err
    (trial,) = Store(db).trials("atif")
    assert json.loads(trial["extra"])["redactions"] == 2
    assert _hits(sorted(tmp_path.glob("store.db*")), KEY) == [] and \
        _hits(sorted(tmp_path.glob("store.db*")), "AKIAIOSFODNN7EXAMPL3") == []


def test_the_runner_log_is_redacted(tmp_path, monkeypatch, capsys):
    """The runner's log (beside the store) quotes exceptions, image builds and provider answers,
    any of which may carry a key: it passes the same redactor as the store."""
    from agentmeter_tui.core.run.runner import Runner
    from agentmeter_tui.core.suites.load import load_suite

    monkeypatch.setenv("AMTEST_PROVIDER_KEY", KEY)
    runner = Runner(load_suite(_suite(tmp_path / "suite")), tmp_path / "store.db")
    runner.log(f"provider said: invalid key {KEY}; build printed ghp_{'Z9' * 18}")
    logged = capsys.readouterr().err
    assert KEY not in logged and "ghp_" + "Z9" * 18 not in logged, logged
    assert "[redacted:AMTEST_PROVIDER_KEY]" in logged and "[redacted:github-token]" in logged, logged
