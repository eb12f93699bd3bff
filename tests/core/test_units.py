"""Unit tests of the small pieces the run engine stands on."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from agentmeter_tui.core.harnesses.reference import ReferenceParser, chat_usage
from agentmeter_tui.core.lines import TRUNCATION_MARKER, LineSplitter
from agentmeter_tui.core.pricing import PriceSnapshot, draft_snapshot
from agentmeter_tui.core.reporting.records import (
    RecordError,
    import_records,
    read_records,
    records_from_store,
    write_records,
)
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.tomlerrors import InputError
from agentmeter_tui.core.usage import TokenUsage


def test_token_usage_arithmetic_and_inclusive_conversion():
    u = TokenUsage.from_inclusive(input_tokens=11300, cached=8500, cache_write=300, output_tokens=110, reasoning=45)
    assert u == TokenUsage(2500, 8500, 300, 65, 45)
    assert u.raw == 11410 and u.fresh == 2910
    assert (u + u) - u == u
    assert TokenUsage.from_dict(u.as_dict()) == u
    assert not TokenUsage()


def test_chat_usage_subtracts_cache_and_reasoning():
    usage = {"prompt_tokens": 5200, "completion_tokens": 50,
             "prompt_tokens_details": {"cached_tokens": 4000, "cache_write_tokens": 200},
             "completion_tokens_details": {"reasoning_tokens": 20}}
    assert chat_usage(usage) == TokenUsage(1000, 4000, 200, 30, 20)


def test_line_splitter_chunks_truncation_and_tail():
    s = LineSplitter(max_line=10)
    assert s.feed(b"ab") == []
    assert s.feed(b"c\nde\nf") == [b"abc", b"de"]
    assert s.feed(b"0123456789ABCDEF") == []
    assert s.feed(b"GH\nok\n") == [b"f012345678" + TRUNCATION_MARKER % 9, b"ok"]
    assert s.feed(b"tail") == []
    assert s.flush() == [b"tail"]
    assert s.flush() == []


def test_reference_parser_keeps_garbage_and_counts():
    p = ReferenceParser()
    assert p.feed("stdout", b"\xff not json")[0].kind == "raw"
    assert p.feed("stdout", b'{"no": "type"}')[0].kind == "raw"
    assert p.feed("stdout", b"[1, 2]")[0].kind == "raw"
    (usage,) = p.feed("stdout", b'{"type": "usage", "usage": {"prompt_tokens": 10, "completion_tokens": 4}}')
    assert usage.usage == TokenUsage(10, 0, 0, 4, 0) and p.turns == 1
    (call,) = p.feed("stdout", b'{"type": "tool_call", "name": "shell", "arguments": {"command": "ls"}}')
    assert call.tool_key == 'shell:{"command":"ls"}' and p.tool_calls == 1
    p.feed("stdout", b'{"type": "error", "status": 400, "message": "bad"}')
    assert p.outcome(1, killed=False).errored
    assert not p.outcome(1, killed=True).errored


def test_price_snapshot_cost_tiers_currency_and_unpriced(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text('''as_of = "2026-11-01"
[fx]
CNY = "6.77"
[models."anthropic/claude-sonnet-4-6"]
aliases = ["claude-sonnet-4-6"]
input = "3"
cached_input = "0.3"
cache_write = "3.75"
output = "15"
[models.long]
input = 1
output = 2
tiers = [{ above_input_tokens = 1000, input = 10, output = 20 }]
[models.yuan]
currency = "CNY"
input = "6.77"
output = "13.54"
''')
    snap = PriceSnapshot.load(path)
    u = TokenUsage(12_000, 480_000, 20_000, 3_000, 1_500)
    assert snap.cost_usd("claude-sonnet-4-6", u) == Decimal("0.3225")  # research: genai-prices gives 0.3225
    assert snap.cost_usd("long", TokenUsage(500, 0, 0, 100, 0), call_input=500) == Decimal("0.0007")
    assert snap.cost_usd("long", TokenUsage(1500, 0, 0, 100, 0), call_input=1500) == Decimal("0.017")
    assert snap.cost_usd("yuan", TokenUsage(1_000_000, 0, 0, 1_000_000, 0)) == Decimal(3)
    assert snap.cost_usd("nobody", u) is None


def test_price_snapshot_errors_name_the_field(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text('as_of = "2026-11-01"\n[models.a]\ninput = "3"\noutput = "x"\n')
    with pytest.raises(InputError) as info:
        PriceSnapshot.load(path)
    assert ":4:" in str(info.value) and "models.a.output" in str(info.value)


def test_prices_draft_from_genai_prices_is_offline_and_dated():
    text, missing = draft_snapshot(["anthropic/claude-sonnet-4-6", "no-such-model-x"],
                                   datetime(2026, 11, 1, 12, tzinfo=UTC))
    assert 'input = "3"' in text and 'cache_write = "3.75"' in text
    assert missing == ["no-such-model-x"]


RECORD = ('{"suite": "s", "task": "t1", "tier": "easy", "model": "m", "cli": "c", "trial": 1, "status": "passed",'
          ' "passed": true, "quality": 1.0, "tokens": {"uncached_input": 10, "cached_input": 20, "cache_write": 0,'
          ' "output": 5, "reasoning": 1}, "cost_usd": 0.5, "cost_source": "snapshot", "turns": 2, "tool_calls": 1,'
          ' "started_at": "2026-11-01T00:00:00Z", "finished_at": "2026-11-01T00:01:00Z", "note": "kept"}\n')


def test_records_round_trip_through_a_store(tmp_path):
    records = list(read_records(io.StringIO(RECORD * 2), "in.jsonl"))
    store = Store(tmp_path / "r.db")
    assert import_records(store, records) == 2
    back = records_from_store(store, "s")
    assert [r.tokens for r in back] == [records[0].tokens] * 2
    out = io.BytesIO()
    write_records(back, out)
    again = list(read_records(io.BytesIO(out.getvalue()), "out.jsonl"))
    assert again[0].extra["note"] == "kept" and again[0].cost_usd == 0.5


@pytest.mark.parametrize("bad,field", [
    ('"trial": 1', '"trial": "one"'), ('"status": "passed"', '"status": "won"'),
    ('"output": 5', '"output": -5'), ('"tier": "easy"', '"tier": "extreme"'),
])
def test_bad_record_names_line_and_field(bad, field):
    text = RECORD + RECORD.replace(bad, field)
    with pytest.raises(RecordError) as info:
        list(read_records(io.StringIO(text), "in.jsonl"))
    assert info.value.line == 2 and str(info.value).startswith("in.jsonl:2: field")


def test_scores_are_append_only_and_latest_wins(tmp_path):
    store = Store(tmp_path / "s.db")
    import_records(store, list(read_records(io.StringIO(RECORD), "x")))
    trial_id = store.trials()[0]["id"]
    store.reviews.add_score(trial_id, 1, "ana", "first look")
    store.reviews.add_score(trial_id, 3, "bo")
    assert store.reviews.latest_scores()[trial_id].score == 3
    assert [s.score for s in store.reviews.score_history(trial_id)] == [1, 3]
    assert store.db.execute("select count(*) from audit where action = 'score'").fetchone()[0] == 2
    with pytest.raises(ValueError):
        store.reviews.add_score(trial_id, 4, "ana")


def test_migrations_are_idempotent(tmp_path):
    Store(tmp_path / "m.db").close()
    store = Store(tmp_path / "m.db")
    from agentmeter_tui.core.store.migrations import MIGRATIONS

    names = [r["name"] for r in store.db["_migrations"].rows]
    assert names[0] == "m001_initial" and names == [m.__name__ for m in MIGRATIONS]


def test_calibrated_tiers_in_the_suite_override_task_tiers(tmp_path):
    import shutil

    from agentmeter_tui.core.suites.load import load_suite
    from tests.conftest import ROOT

    suite = tmp_path / "smoke"
    shutil.copytree(ROOT / "suites" / "smoke", suite)
    with open(suite / "suite.toml", "a") as handle:
        handle.write('\n[scoring.tiers]\ncount-lines = "hard"\n')
    loaded = load_suite(suite)
    assert loaded.task("count-lines").tier == "hard"
    assert loaded.task("write-greeting").tier == "easy"
    assert loaded.budget_for(loaded.task("count-lines")).wall_seconds == 60


def test_store_writer_keeps_a_batch_that_failed_and_writes_it_later(tmp_path):
    from agentmeter_tui.core.store.writer import StoreWriter

    writer = StoreWriter(tmp_path / "w.db")
    try:
        rows = [(1, seq, 0.0, "raw", "stdout", "x", b"x") for seq in range(1, 4)]
        writer.add_events(rows)
        writer.add_events([(1, 2, 0.0, "raw", "stdout", "dup", None)])  # (trial, seq) must be unique
        try:
            writer.call(lambda store: None).result(5)
        except Exception:
            pass
        assert writer.events_written == 0  # the whole batch rolled back, none of it lost
        with writer._lock:
            writer._events = [r for r in writer._events if r[5] != "dup"]
        writer.call(lambda store: None).result(5)
        assert writer.store.event_count(1) == 3
    finally:
        writer.close()
