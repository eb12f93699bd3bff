"""Triage scanners (issue 35) on recorded transcripts.

Positive fixtures: tests/fixtures/triage/claude-code/*.events.jsonl, trials recorded by this
project's own real runs of the real Claude Code CLI (2.1.197) against the scripted model server
(tests/e2e/test_triage.py with AGENTMETER_SAVE_STREAMS=1): the stored trial (status, reason,
flags) and its events. Each is the negative fixture of every other scanner, and so are
tests/fixtures/streams/claude-code/write-file.stdout.jsonl (a real run of the same CLI that just
does the task) and the published SkillsBench Gemini CLI trajectory (tests/fixtures/harbor-published).
Expected evidence is picked from the raw files here by plain string tests, not by the scanners.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agentmeter_tui.core.interop.atif_read import ImportedEvent
from agentmeter_tui.core.interop.trials import ImportedTrial
from agentmeter_tui.core.scanners import SCANNERS, Event, Scanner, TrialView, scanners
from agentmeter_tui.core.scanners.scan import scan_store, scan_trial
from agentmeter_tui.core.store import Store
from tests.conftest import FIXTURES, agentmeter
from tests.interop.support import stream_rows

TRIAGE = FIXTURES / "triage" / "claude-code"
GEMINI = next((FIXTURES / "harbor-published").glob("gemini-cli-*/*__*/agent/trajectory.json"))


def recorded(name: str) -> tuple[dict, list[dict]]:
    first, *events = [json.loads(line) for line in (TRIAGE / f"{name}.events.jsonl").read_text().splitlines()]
    return first["trial"], events


def view(name: str) -> TrialView:
    trial, events = recorded(name)
    return TrialView(1, trial["status"], trial["reason"], tuple(json.loads(trial["flags"] or "[]")), trial["error"],
                     tuple(Event(e["seq"], e["kind"], e["text"]) for e in events))


def seqs(name: str, test) -> tuple[int, ...]:
    return tuple(e["seq"] for e in recorded(name)[1] if test(e))


# scanner -> (its positive fixture, the evidence as the raw file shows it)
POSITIVE = {
    "reward-tampering": ("tampering", lambda e: e["kind"] == "tool_call" and "/logs/verifier/reward.txt" in e["text"]
                         and "/tests/test.sh" in e["text"]),
    "refusal": ("refusal", lambda e: e["kind"] == "assistant" and e["text"].startswith("I can't help")),
    "unfinished": ("unfinished", lambda e: e["kind"] == "assistant" and "unable to complete" in e["text"]),
    "infra-error": ("infra", lambda e: e["kind"] == "tool_result" and "Failed to connect to 127.0.0.1" in e["text"]),
    "context-overflow": ("overflow", lambda e: "Prompt is too long" in e["text"] and e["kind"] in ("assistant", "error")
                         or e["kind"] == "status" and e["text"].startswith("errored: Prompt is too long")),
    "thrash": ("thrash", lambda e: e["kind"] == "status" and e["text"].startswith("thrashing:")),
}


def test_every_registered_scanner_has_a_positive_fixture():
    assert sorted(POSITIVE) == SCANNERS.names()
    for scanner in scanners():
        assert isinstance(scanner, Scanner) and scanner.summary


@pytest.mark.parametrize("name", sorted(POSITIVE))
def test_a_scanner_flags_its_recorded_case_with_the_events_that_show_it(name):
    fixture, shows = POSITIVE[name]
    expected = seqs(fixture, shows)
    assert expected  # the recording holds what the case was made to show
    found = SCANNERS.get(name)().scan(view(fixture))
    assert found is not None and found.scanner == name and found.why
    assert found.evidence == expected


@pytest.mark.parametrize("name", sorted(POSITIVE))
def test_a_scanner_is_silent_on_the_other_recordings(name):
    scanner = SCANNERS.get(name)()
    for other, (fixture, _shows) in POSITIVE.items():
        if other != name:
            assert scanner.scan(view(fixture)) is None, (name, fixture)


def test_a_run_that_just_does_the_task_and_a_published_trajectory_raise_nothing():
    rows, _usage = stream_rows("claude-code", "write-file")
    clean = TrialView(1, "passed", events=tuple(Event(r[0], r[2], r[4]) for r in rows))
    assert scan_trial(clean, scanners()) == []
    from agentmeter_tui.core.interop.atif import events_from_trajectory, load_trajectory

    events = events_from_trajectory(load_trajectory(GEMINI))
    published = TrialView(2, "passed", events=tuple(Event(i, str(e.kind), e.text) for i, e in enumerate(events, 1)))
    assert scan_trial(published, scanners()) == []


def recorded_trials() -> list[ImportedTrial]:
    trials = []
    for fixture in sorted({f for f, _ in POSITIVE.values()}):
        trial, events = recorded(fixture)
        imported = ImportedTrial("record", f"triage:{fixture}", "triage", fixture, "mock", trial["cli"], trial["status"],
                                 reason=trial["reason"], flags=json.loads(trial["flags"] or "[]"),
                                 events=[ImportedEvent(e["kind"], e["text"]) for e in events])
        trials.append(imported)
    return trials


def store_with_recordings(path: Path) -> tuple[Store, dict[str, int]]:
    store = Store(path)
    store.imports.add_imported(recorded_trials())
    return store, {row["task_id"]: row["id"] for row in store.trials("triage")}


def test_flags_are_stored_once_with_their_evidence_and_verdicts_are_appended(tmp_path):
    store, ids = store_with_recordings(tmp_path / "s.db")
    outcome = scan_store(store)
    assert outcome.scanned == len(ids) and sum(outcome.flagged.values()) == len(POSITIVE)
    assert scan_store(store).scanned == 0  # a finished trial is scanned once
    flags = store.flags.flags_of()
    for name, (fixture, shows) in POSITIVE.items():
        (flag,) = [f for f in flags[ids[fixture]] if f.scanner == name]
        assert flag.evidence == seqs(fixture, shows)  # imported events keep their order: seq i is event i
    (flag,) = flags[ids["refusal"]]
    store.flags.add_flag_verdict(flag.id, "right", "ana")
    store.flags.add_flag_verdict(flag.id, "wrong", "bo", "a polite preamble, then it worked")
    assert [(v.verdict, v.reviewer) for v in store.flags.flag_verdicts(flag.id)] == [("right", "ana"), ("wrong", "bo")]
    assert store.flags.flags_of([ids["refusal"]])[ids["refusal"]][0].verdict == "wrong"  # the latest counts
    with pytest.raises(ValueError):
        store.flags.add_flag_verdict(flag.id, "maybe", "ana")
    statuses = ("passed", "failed", "errored", "killed")
    assert [i for i, _ in store.views.review_queue("triage", statuses, flag="thrash")] == [ids["thrash"]]
    # Flagged first: the refusal's only flag was called wrong, so it no longer counts.
    order = [i for i, _ in store.views.review_queue("triage", statuses, by_flags=True)]
    assert order.index(ids["refusal"]) == len(order) - 1


def test_an_import_is_scanned_at_its_end_without_agentmeter_scan(tmp_path):
    from agentmeter_tui.core.interop.trials import store_all

    store = Store(tmp_path / "s.db")
    outcome = store_all(store, recorded_trials())
    assert outcome.added == len(POSITIVE)
    flags = store.flags.flags_of()
    ids = {row["task_id"]: row["id"] for row in store.trials("triage")}
    assert {name: [f.scanner for f in flags.get(ids[fixture], [])] for name, (fixture, _) in POSITIVE.items()} == \
        {name: [name] for name in POSITIVE}
    assert scan_store(store).scanned == 0  # nothing left for `agentmeter scan`


def test_the_migration_brings_a_store_of_the_previous_release_forward(tmp_path):
    path = tmp_path / "old.db"
    Store(path).close()
    conn = sqlite3.connect(path)
    with conn:
        for table in ("flags", "flag_scans", "flag_verdicts"):
            conn.execute(f"drop table {table}")
        conn.execute("delete from _migrations where name = 'm007_35_triage_flags'")
    conn.close()
    store = Store(path)
    assert {"flags", "flag_scans", "flag_verdicts"} <= set(store.db.table_names())
    assert "m007_35_triage_flags" in {r["name"] for r in store.db["_migrations"].rows}


def test_scan_and_flag_commands(tmp_path):
    store, ids = store_with_recordings(tmp_path / "s.db")
    store.close()
    db = str(tmp_path / "s.db")
    result = agentmeter("scan", "--db", db)
    assert result.returncode == 0, result.stderr
    assert f"scanned {len(ids)} trial(s)" in result.stderr
    (line,) = [line for line in result.stdout.splitlines() if " thrash: " in line]
    flag_id = int(line.split()[1])
    assert f"trial {ids['thrash']} thrash: thrashing: the same tool call repeated 3 times" in line
    result = agentmeter("flag", str(flag_id), "right", "--by", "ana", "--db", db)
    assert result.returncode == 0 and "right (by ana)" in result.stdout
    assert "[right by ana]" in agentmeter("scan", "--db", db).stdout
    assert agentmeter("flag", "999", "wrong", "--db", db).returncode == 1
    assert agentmeter("review", "--flag", "no-such", "--db", db).returncode == 2


def test_the_site_lists_each_trials_flags(tmp_path):
    store, ids = store_with_recordings(tmp_path / "s.db")
    scan_store(store)
    (flag,) = [f for f in store.flags.flags_of()[ids["refusal"]]]
    store.flags.add_flag_verdict(flag.id, "right", "ana <i>x</i>")  # a reviewer's name is untrusted text
    store.close()
    out = tmp_path / "site"
    result = agentmeter("report", "--suite", "triage", "--format", "html", "--out", str(out), "--db", str(tmp_path / "s.db"))
    assert result.returncode == 0, result.stderr
    page = (out / "trial" / f"{ids['tampering']}.html").read_text()
    # each evidence event a link into the transcript viewer (``#eSEQ``)
    evidence = ", ".join(f'<a href="#e{s}">{s}</a>' for s in seqs("tampering", POSITIVE["reward-tampering"][1]))
    assert "<h2>Triage flags</h2>" in page and "<b>reward-tampering</b>" in page and f"(events {evidence})" in page
    refusal = (out / "trial" / f"{ids['refusal']}.html").read_text()
    assert "right by ana &lt;i&gt;x&lt;/i&gt;" in refusal and "<i>x</i>" not in refusal
    assert "<b>infra-error</b>" in (out / "trial" / f"{ids['infra']}.html").read_text()
    configs = "".join(p.read_text() for p in (out / "config").glob("*.html"))
    assert "<th>Flags</th>" in configs and "thrash" in configs
