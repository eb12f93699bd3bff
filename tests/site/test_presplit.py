"""The trial page filled from the pre-split template (site/presplit.py) is the text of a real
Jinja2 render of trial.html, on varied trials (the recorded streams of the six CLIs; scores,
notes, a reason, verifier output or none; plain and blind) with hostile text in every field a
page prints, including the sentinels' own spelling; and a template that does more with a value
than print it is rendered by Jinja2."""

from __future__ import annotations

from itertools import cycle

import jinja2
import pytest

from agentmeter_tui.core.reporting.site import model, pages
from agentmeter_tui.core.reporting.site.presplit import _JINJA, PreSplit
from agentmeter_tui.core.review.reviewing import Masker
from agentmeter_tui.core.store.reviews import ScoreRow
from tests.interop.support import CLIS, SCENARIOS, STREAMS, stream_rows
from tests.interop.test_atif import trial_row

HOSTILE = ["</pre><script>alert('x')</script>", 'a "quoted" & <b>bold</b> \' text', "@@0&@@ @@1&amp;@@ @@12&@@",
           "{{ title }} {% if x %}", "mock-model said \u2028 and \x00", "claude-code 1.2.3 wrote &amp; twice"]


def _contexts(names: model.Names) -> list[dict]:
    """Trial pages' contexts: every recorded stream, each with other scores, notes and texts."""
    hostile = cycle(HOSTILE)
    contexts = []
    for n, (cli, scenario) in enumerate((c, s) for c in CLIS for s in SCENARIOS
                                         if (STREAMS / c / f"{s}.stdout.jsonl").exists()):
        rows, usage = stream_rows(cli, scenario)
        rows = [*rows, (len(rows) + 1, None, "tool_call", "stdout", next(hostile), None),
                (len(rows) + 2, None, "tool_result", "stdout", next(hostile), None)]
        trial = {**trial_row(cli, usage), "id": n + 1, "trial_index": n % 3 + 1, "turns": n % 2 * 4,
                 "reason": next(hostile) if n % 3 == 0 else None,
                 "verifier_output": [None, "", next(hostile)][n % 3],
                 "cost_actual_usd": None if n % 2 else 0.5}
        scores = [ScoreRow(k, trial["id"], k % 4, next(hostile) if k % 2 else None, next(hostile),
                           "2026-11-27T05:00:00", "adjudication" if k == 2 else None) for k in range(n % 4)]
        notes = [{"id": k, "trial_id": trial["id"], "author": next(hostile), "created_at": "2026-11-27",
                  "text": next(hostile)} for k in range(n % 3)]
        shared = pages.Shared({"suite": next(hostile), "blind": names.blind, "version": "0.1.0"}, names,
                              {("mock", cli): n}, {trial["id"]: scores}, {trial["id"]: notes})
        contexts.append(pages.trial_context(trial, rows, shared))
    return contexts


@pytest.mark.parametrize("blind", [False, True])
def test_the_pre_split_page_is_the_jinja_render(blind):
    names = model.Names(True, {"mock": "model-1", **{c: f"cli-{n}" for n, c in enumerate(CLIS)}},
                        Masker(["mock", *CLIS])) if blind else model.Names(False)
    template = pages.environment().get_template("trial.html")
    page = PreSplit(template)
    contexts = _contexts(names)
    assert len(contexts) == 30
    for context in contexts * 2:  # the second round reads every shape from the cut pages
        assert page.render(**context) == template.render(**context)
    assert page.shapes and _JINJA not in page.shapes.values()  # every shape was filled, none fell back
    assert len(page.shapes) < len(contexts)  # and trials of one shape share their cut page


def test_a_template_that_compares_or_reads_into_a_value_is_rendered_by_jinja():
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    compares = PreSplit(env.from_string('{% if status == "passed" %}ok{% else %}no{% endif %} {{ status }}'))
    assert [compares.render(status=s) for s in ("passed", "failed", "passed")] == \
           ["ok passed", "no failed", "ok passed"]
    filtered = PreSplit(env.from_string("{{ name | upper }} {{ name | length }}"))
    assert [filtered.render(name=s) for s in ("ab", "<cde>", "ab")] == ["AB 2", "&lt;CDE&gt; 5", "AB 2"]
    reads = PreSplit(env.from_string("{{ s.score }} by {{ s.reviewer }}"))
    row = ScoreRow(1, 1, 3, None, "ana <b>", "2026-11-27")
    assert reads.render(s=row) == "3 by ana &lt;b&gt;"
    assert set(reads.shapes.values()) == {_JINJA}
