"""Adding a CLI is one new module and one registry line: a module written here (outside the
package) and registered by name is picked up by everything that handles CLIs generically:
the registry, ``install-clis``'s targets, ``transcript parse``'s summary, the e2e checks'
class folding. Nothing else names it."""

from __future__ import annotations

import sys
import textwrap

import pytest

from agentmeter_tui.core import installer
from agentmeter_tui.core.harnesses import ADAPTERS, get_adapter
from agentmeter_tui.core.harnesses.summary import summarize
from agentmeter_tui.core.usage import TokenUsage

MODULE = '''
"""A made-up seventh CLI: prints {"calls": N, "in": I, "out": O} running totals, then {"done": true}."""
from agentmeter_tui.core.harnesses.base import HarnessAdapter, InstallSpec, LaunchContext, StreamParser
from agentmeter_tui.core.harnesses.jsonl import load_object
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

    def command(self, ctx: LaunchContext):
        return [self.executable(ctx.clis_root), "--prompt", ctx.instruction]

    def new_parser(self):
        return SeventhParser()
'''


@pytest.fixture
def seventh(tmp_path, monkeypatch):
    (tmp_path / "seventh_cli_adapter.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    ADAPTERS.register("seventh", "seventh_cli_adapter:SeventhAdapter")  # the one registry line
    yield
    ADAPTERS._entries.pop("seventh", None)
    ADAPTERS._loaded.pop("seventh", None)
    sys.modules.pop("seventh_cli_adapter", None)


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
