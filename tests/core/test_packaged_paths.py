"""What a user without a clone relies on: built-in suites by id, `suite copy`, `--version`, shell
completion of commands, options, suites and trial ids, and a clear word when an extra is missing."""

from __future__ import annotations

import sys

import pytest

from agentmeter_tui import __version__, cli
from agentmeter_tui.commands.completion import candidates
from agentmeter_tui.core.extras import MissingExtra, require
from agentmeter_tui.core.paths import suites_root
from agentmeter_tui.core.store import Store
from tests.sample_data import build_sample_store


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"agentmeter-tui {__version__}"


def test_suite_copy_writes_a_runnable_copy_and_refuses_what_it_must(tmp_path, capsys):
    dest = tmp_path / "mine"
    assert cli.main(["suite", "copy", "smoke", str(dest)]) == 0
    original = sorted(p.relative_to(suites_root() / "smoke") for p in (suites_root() / "smoke").rglob("*"))
    assert sorted(p.relative_to(dest) for p in dest.rglob("*")) == original
    assert cli.main(["suite", "copy", "smoke", str(dest)]) == 2  # exists: never merged into
    assert cli.main(["suite", "copy", "no-such-suite", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "exists" in err and "no built-in suite 'no-such-suite'" in err and "smoke" in err
    assert not (tmp_path / "x").exists() and not list(tmp_path.glob("*.part"))


def test_completion_of_commands_options_suites_and_trials(tmp_path, monkeypatch):
    assert candidates(["agentmeter", "rep"], 1) == ["report"]
    assert "--version" in candidates(["agentmeter", "--"], 1)
    assert {"--headless", "--detach", "--db"} <= set(candidates(["agentmeter", "run", "--"], 2))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mysuite").mkdir()
    (tmp_path / "mysuite" / "suite.toml").write_text("")
    suites = candidates(["agentmeter", "run", ""], 2)
    assert "mysuite/" in suites and {"smoke", "demo"} <= set(suites)
    assert candidates(["agentmeter", "run", "smoke", ""], 3) == []  # one suite only
    db = tmp_path / "s.db"
    build_sample_store(db, events_per_trial=1)
    store = Store(db)
    ids = [row["id"] for row in store.db.query("select id from trials order by id")]
    store.close()
    assert candidates(["agentmeter", "kill", "--db", str(db), ""], 4) == [str(i) for i in reversed(ids)]
    assert candidates(["agentmeter", "review", f"--db={db}", "--trial", "1"], 4) == [
        str(i) for i in reversed(ids) if str(i).startswith("1")]
    assert candidates(["agentmeter", "kill", ""], 2) == []  # no ./agentmeter.db here: nothing, no error


def test_a_missing_extra_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "asyncssh", None)  # as if the ssh extra were not installed
    with pytest.raises(MissingExtra, match=r"agentmeter-tui\[ssh\]"):
        require("asyncssh")
