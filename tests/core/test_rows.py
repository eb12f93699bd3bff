"""The transcript's rows (core/rows.py): the store inserts them positionally, so the SQL's
columns and the records' fields must be the same, in the same order; and what the runner's
writer and the importers store through them reads back field by field."""

from __future__ import annotations

import re

from agentmeter_tui.core.interop.atif_read import ImportedEvent
from agentmeter_tui.core.interop.trials import ImportedTrial
from agentmeter_tui.core.rows import EVENT_FIELDS, UsageRow
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.store.imports import EVENT_SQL, USAGE_SQL
from agentmeter_tui.core.store.writer import StoreWriter
from agentmeter_tui.core.usage import TokenUsage
from agentmeter_tui.core.vocab import EventKind


def test_the_inserts_name_the_records_fields_in_their_order():
    for sql, fields in ((EVENT_SQL, EVENT_FIELDS), (USAGE_SQL, UsageRow._fields)):
        columns = re.fullmatch(r"insert into \w+ \(([^)]*)\) values \(([?, ]*)\)", sql)
        assert columns is not None, sql
        assert tuple(columns.group(1).split(", ")) == fields
        assert columns.group(2).count("?") == len(fields)


def test_the_writer_stores_the_records_field_by_field(tmp_path):
    usage = TokenUsage(11, 22, 33, 44, 5, 7)
    event = (1, 1, 12.5, "usage", "proxy", "a call", b'{"call": 1}')
    call = UsageRow.of(1, 1, "proxy", "m", usage, 0.25, None, usage.cache_write_1h)
    writer = StoreWriter(tmp_path / "w.db")
    try:
        writer.add_events([event], [call])
        writer.call(lambda store: None).result(5)
    finally:
        writer.close()
    store = Store(tmp_path / "w.db", readonly=True)
    try:
        stored = store.db.execute(f"select {', '.join(EVENT_FIELDS)} from events").fetchall()
        calls = store.db.execute(f"select {', '.join(UsageRow._fields)} from usage").fetchall()
    finally:
        store.close()
    assert [tuple(r) for r in stored] == [event]
    assert [UsageRow(*r) for r in calls] == [call]
    assert calls[0][4:9] == usage.as_tuple() and calls[0][11] == 7


def test_an_imported_call_keeps_its_tokens_and_no_hour_cache_figure(tmp_path):
    store = Store(tmp_path / "i.db")
    try:
        trial = ImportedTrial("atif", "rows:1", "rows", "t", "m", "cli", "passed", events=[
            ImportedEvent(EventKind.ASSISTANT, "hello", ts=3.0),
            ImportedEvent(EventKind.USAGE, "call", usage=TokenUsage(1, 2, 3, 4, 0, 9), cost_usd=0.5, model="m2")])
        (trial_id,) = store.imports.add_imported([trial])
        events = [tuple(r) for r in store.db.execute(
            f"select {', '.join(EVENT_FIELDS)} from events order by seq").fetchall()]
        calls = [UsageRow(*r) for r in store.db.execute(
            f"select {', '.join(UsageRow._fields)} from usage").fetchall()]
    finally:
        store.close()
    assert [e[:6] for e in events] == [
        (trial_id, 1, 3.0, "assistant", "atif", "hello"), (trial_id, 2, None, "usage", "atif", "call")]
    # the importers never stored a 1-hour share: NULL, as before the rows had a type
    assert calls == [UsageRow(trial_id, 2, "atif", "m2", 1, 2, 3, 4, 0, 0.5, None, None)]
