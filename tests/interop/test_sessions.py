"""``agentmeter import sessions`` on session files the real CLIs wrote against the scripted
server (tests/fixtures/streams/<cli>/<scenario>.session.jsonl, recorded with the e2e runs:
see tests/e2e/cases.py), laid out as each CLI lays out its store under a home folder. Tokens
must equal what the server served once folded by the CLI's merged classes, with the records
the CLIs write twice (Claude Code's per-block copies, Gemini CLI's second copy of a message)
counted once. tests/e2e/test_import_sessions.py does the same on whole session folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentmeter_tui.core.harnesses import ADAPTERS
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TokenUsage
from agentmeter_tui.core.wire import fold
from tests.interop.support import STREAMS
from tests.interop.support import cli as run

LAYOUT = {  # where each CLI keeps a session file, under its store's folder
    "claude-code": ".claude/projects/-work-proj/{sid}.jsonl",
    "codex": ".codex/sessions/2026/11/26/rollout-2026-11-26T04-13-00-{sid}.jsonl",
    "gemini-cli": ".gemini/tmp/proj/chats/session-{sid}.jsonl",
    "qwen-code": ".qwen/projects/-work-proj/chats/{sid}.jsonl",
    "kimi-cli": ".kimi/sessions/0123abcd/{sid}/wire.jsonl",
}
STORE = {"claude-code": ".claude/projects", "codex": ".codex/sessions", "gemini-cli": ".gemini/tmp",
         "qwen-code": ".qwen/projects", "kimi-cli": ".kimi/sessions"}
FINISHED = ("write-file", "cache-heavy", "reasoning")


def sid(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def lay_out(home: Path, cli: str, scenarios: tuple[str, ...]) -> dict[str, str]:
    """Copy the recorded session files into ``home``; session id -> scenario."""
    ids = {}
    for n, scenario in enumerate(scenarios, start=1):
        path = home / LAYOUT[cli].format(sid=sid(n))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes((STREAMS / cli / f"{scenario}.session.jsonl").read_bytes())
        ids[f"session-{sid(n)}" if cli == "gemini-cli" else sid(n)] = scenario  # Gemini: the file's name
    return ids


def served(cli: str, scenario: str) -> TokenUsage:
    return TokenUsage.from_dict(json.loads((STREAMS / cli / f"{scenario}.expected.json").read_text())["served"])


@pytest.mark.parametrize("cli", sorted(LAYOUT))
def test_session_tokens_are_what_the_server_served(cli, tmp_path, db):
    ids = lay_out(tmp_path / "home", cli, FINISHED)
    code, err = run("import", "sessions", "--cli", cli, str(tmp_path / "home" / STORE[cli]), "--db", str(db))
    assert code == 0, err
    rows = Store(db).trials()
    assert len(rows) == len(FINISHED)
    merged = ADAPTERS.get(cli).merged_classes
    for row in rows:
        scenario = ids[json.loads(row["extra"])["session"]["id"]]
        got = TokenUsage.from_dict(row)
        assert fold(got, merged) == fold(served(cli, scenario), merged), (cli, scenario, got)
        assert row["source"] == f"session:{cli}" and row["cli"] == cli
        shown = [TokenUsage.from_dict(u) for u in Store(db).usage_by_seq(row["id"]).values()]
        assert sum(shown, TokenUsage()) == got  # the transcript's usage events add up to the trial


def test_repeated_records_count_once(tmp_path, db):
    # Claude Code wrote the first call's message three times (one per content block), Gemini CLI
    # wrote its first message twice: counting lines would add those calls again.
    for cli in ("claude-code", "gemini-cli"):
        lines = (STREAMS / cli / "write-file.session.jsonl").read_text().splitlines()
        ids = [json.loads(line).get("id") or json.loads(line)["message"]["id"] for line in lines]
        assert len(ids) > len(set(ids))
        lay_out(tmp_path / cli, cli, ("write-file",))
        assert run("import", "sessions", "--cli", cli, str(tmp_path / cli / STORE[cli]), "--db", str(db))[0] == 0
    rows = {r["cli"]: r for r in Store(db).trials()}
    for cli in ("claude-code", "gemini-cli"):
        merged = ADAPTERS.get(cli).merged_classes
        assert fold(TokenUsage.from_dict(rows[cli]), merged) == fold(served(cli, "write-file"), merged)
        assert rows[cli]["turns"] == 2


def test_reimport_adds_only_new_sessions_and_filters(tmp_path, db):
    home = tmp_path / "home"
    lay_out(home, "codex", ("write-file", "reasoning"))
    root = str(home / STORE["codex"])
    assert "imported 2 session(s)" in run("import", "sessions", "--cli", "codex", root, "--db", str(db))[1]
    again = run("import", "sessions", "--cli", "codex", root, "--db", str(db))[1]
    assert "imported 0 session(s), 2 already in the store" in again
    extra = home / LAYOUT["codex"].format(sid=sid(9))
    extra.write_bytes((STREAMS / "codex" / "cache-heavy.session.jsonl").read_bytes())
    third = run("import", "sessions", "--cli", "codex", root, "--db", str(db))[1]
    assert "imported 1 session(s), 2 already in the store" in third
    assert len(Store(db).trials()) == 3
    # The recorded Codex files start 2026-11-26T04:13 (their first record's timestamp).
    later = run("import", "sessions", "--cli", "codex", root, "--since", "2030-01-01", "--db", str(tmp_path / "l.db"))
    assert "imported 0 session(s)" in later[1]


def test_project_filter_and_task_name(tmp_path, db):
    # The recorded Claude Code session ran in /sandbox/workspace (its records' cwd).
    lay_out(tmp_path / "home", "claude-code", ("write-file",))
    root = str(tmp_path / "home" / STORE["claude-code"])
    elsewhere = run("import", "sessions", "--cli", "claude-code", root, "--project", "/elsewhere", "--db", str(db))
    assert "imported 0 session(s)" in elsewhere[1]
    there = run("import", "sessions", "--cli", "claude-code", root, "--project", "/sandbox/workspace", "--db", str(db))
    assert "imported 1 session(s)" in there[1]
    (row,) = Store(db).trials()
    assert row["task_id"] == "workspace" and row["suite_id"].startswith("sessions-claude-code-")


def test_batches_are_written_while_the_next_is_read(tmp_path, db):
    from agentmeter_tui.core.interop.sessions import read_sessions
    from agentmeter_tui.core.interop.trials import store_all

    lay_out(tmp_path / "home", "codex", FINISHED)
    root = tmp_path / "home" / STORE["codex"]
    first = store_all(Store(db), read_sessions("codex", root), batch=1)
    assert (first.added, first.already) == (3, 0)
    again = store_all(Store(db), read_sessions("codex", root), batch=1)  # keys not passed: the store skips them
    assert (again.added, again.already) == (0, 3)
    assert len(Store(db).trials()) == 3
