"""A folded tool call's summary is its command's first line, cut to 160 characters. It was cut
after escaping, so a '<' or '&' near the cut left half an entity ('&l') that the page showed as
text that is not in the command."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from agentmeter_tui.core.reporting.site.model import Names, transcript_html


class _Summaries(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.inside, self.found = False, []

    def handle_starttag(self, tag, attrs):
        if tag == "summary":
            self.inside = True
            self.found.append("")

    def handle_endtag(self, tag):
        if tag == "summary":
            self.inside = False

    def handle_data(self, data):
        if self.inside:
            self.found[-1] += data


@pytest.mark.parametrize("tail", ["<script>", "&& rm -rf x", "\"quoted\"", "'single'"])
def test_a_summary_shows_a_prefix_of_the_command(tail):
    command = "echo " + "x" * 153 + tail + "\nsecond line"
    parser = _Summaries()
    parser.feed(transcript_html([(1, 0.0, "tool_call", "stdout", command, None)], Names(False)).html)
    assert len(parser.found) == 1
    summary = parser.found[0].removeprefix("tool: ")
    assert summary == command.split("\n")[0][:160]
