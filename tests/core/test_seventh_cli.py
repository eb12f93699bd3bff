"""Adding a CLI is one new module and one registry line: a module written here (outside the
package) and registered by name is picked up by everything that handles CLIs generically:
the registry, ``install-clis``'s targets, ``transcript parse``'s summary, the e2e checks'
class folding, ``import sessions`` (its session reader), ``import harbor`` (its Harbor name),
``agentmeter meter`` (its variables) and the scripted server (its shell tool). Nothing else
names it."""

from __future__ import annotations

import pytest

from agentmeter_tui.core.install import installer
from agentmeter_tui.core.harnesses import ADAPTERS, get_adapter
from agentmeter_tui.core.harnesses.summary import summarize
from agentmeter_tui.core.harbor.importer import cli_name
from agentmeter_tui.core.interop.sessions import default_path, read_sessions, session_clis
from agentmeter_tui.core.scripted.replies import OfferedTool, find_shell_tool
from agentmeter_tui.core.proxy.meter import child_environment, kinds
from agentmeter_tui.core.usage import TokenUsage
from tests.core.plugin_support import module_in

MODULE = '''
"""A made-up seventh CLI: prints {"calls": N, "in": I, "out": O} running totals, then {"done": true};
its session files (~/.seventh/sessions/ID.jsonl) hold {"cwd": ...} and the same running totals."""
from agentmeter_tui.core.harnesses.base import HarnessAdapter, InstallSpec, LaunchContext, Recovery, StreamParser
from agentmeter_tui.core.harnesses.jsonl import load_object
from agentmeter_tui.core.interop.sessions.base import CliSession, SessionReader, SessionSource, read_lines
from agentmeter_tui.core.vocab import EventKind, ParsedEvent
from agentmeter_tui.core.usage import TokenUsage


class SeventhParser(StreamParser):
    def feed(self, stream, line):
        obj = load_object(line)
        if obj is None:
            return [self.raw(line)]
        if obj.get("done"):
            self.final_seen = True
            return [ParsedEvent(EventKind.SYSTEM, "done")]
        event = self.set_total(TokenUsage(uncached_input=obj["in"], output=obj["out"]), turns=obj["calls"])
        return [event] if event else [ParsedEvent(EventKind.SYSTEM, "no change")]


class SeventhAdapter(HarnessAdapter):
    name = "seventh"
    protocol = "chat"
    install = InstallSpec("npm", "seventh-cli", "7.0.0", "seventh")
    merged_classes = {"reasoning": "output"}
    session_reader = "seventh_cli_adapter:SeventhSessions"
    harbor_names = ("seventh-agent",)
    base_url_env = {"SEVENTH_BASE_URL": "/v1"}
    key_env = ("SEVENTH_API_KEY",)
    shell_tool = "seventh_shell"

    def command(self, ctx: LaunchContext):
        return [self.executable(ctx.clis_root), "--prompt", ctx.instruction]

    def new_parser(self):
        return SeventhParser()

    def recover(self, files):
        totals = [obj for data in files.values() for obj in map(load_object, data.splitlines()) if obj and "calls" in obj]
        if not totals:
            return None
        last = totals[-1]
        return Recovery(TokenUsage(uncached_input=last["in"], output=last["out"]), last["calls"], "session")


class SeventhSessions(SessionReader):
    cli = "seventh"
    home_path = ".seventh/sessions"

    def sources(self, root):
        for path in sorted(root.glob("*.jsonl")):
            yield SessionSource(path.stem, [path], root)

    def read(self, source):
        session = CliSession()
        for _number, _line, obj in read_lines(source.files[0], source.data):
            session.project = session.project or (obj or {}).get("cwd")
        return session
'''


@pytest.fixture
def seventh(tmp_path, monkeypatch):
    with module_in(tmp_path, "seventh_cli_adapter", MODULE, monkeypatch):
        ADAPTERS.register("seventh", "seventh_cli_adapter:SeventhAdapter")  # the one registry line
        yield
        ADAPTERS.unregister("seventh")


def test_a_new_module_and_a_registry_line_are_enough(seventh, tmp_path):
    adapter = get_adapter("seventh")
    assert adapter.version == "7.0.0" and "seventh" in ADAPTERS.names()
    wanted, _ = installer.targets()
    (target,) = [t for t in wanted if t.adapter == "seventh"]
    assert (target.spec.package, target.spec.version) == ("seventh-cli", "7.0.0")
    assert installer.targets(["seventh-cli@7.0.1"])[0][0].spec.version == "7.0.1"
    assert not adapter.is_installed(tmp_path)
    lines = [b'{"calls": 1, "in": 100, "out": 10}', b'{"calls": 2, "in": 250, "out": 30}', b"oops", b'{"done": true}']
    summary = summarize(adapter, lines)
    assert summary.usage == TokenUsage(uncached_input=250, output=30) and summary.turns == 2
    assert summary.events == {"usage": 2, "raw": 1, "system": 1} and not summary.outcome.errored


def test_its_session_reader_harbor_name_variables_and_shell_tool_come_from_its_adapter(seventh, tmp_path):
    assert "seventh" in session_clis()
    store = default_path("seventh", tmp_path)
    assert store == tmp_path / ".seventh" / "sessions"
    store.mkdir(parents=True)
    (store / "s1.jsonl").write_bytes(b'{"cwd": "/home/someone/proj"}\n{"calls": 1, "in": 100, "out": 10}\n'
                                     b'{"calls": 2, "in": 250, "out": 30}\n')
    (trial,) = read_sessions("seventh", store)
    assert (trial.cli, trial.task, trial.turns) == ("seventh", "proj", 2)
    assert trial.tokens == TokenUsage(uncached_input=250, output=30)
    assert cli_name("seventh-agent") == "seventh"
    env = child_environment({"SEVENTH_API_KEY": "real"}, "http://127.0.0.1:9", {k: f"p-{k}" for k in kinds()}, "t")
    assert env["SEVENTH_BASE_URL"] == "http://127.0.0.1:9/v1" and env["SEVENTH_API_KEY"] == "p-openai"
    offered = [OfferedTool("read_file", None), OfferedTool("seventh_shell", None)]
    assert find_shell_tool(offered) is offered[1]
