"""The review search's trigram index (core/store/search.py): the same answers as the scan it
replaces, on hostile text, before, during and after the index is built, and on a store made
before the index existed.

Expected seqs come from the rows written (a Python model of LIKE: ASCII case folded, text up to
a NUL), and every answer is also compared with the scan's.
"""

from __future__ import annotations

import sqlite3

import pytest

from agentmeter_tui.core.store import Store, search
from agentmeter_tui.core.store.migrations import MIGRATIONS

TEXTS = [
    "plain text about a Zebra crossing",
    "NUL inside: abc\x00zebra hidden after the nul",
    "zebra before the nul\x00 and after",
    "replacement chars \ufffd\ufffd from invalid UTF-8: caf\ufffd zeBRA",
    "[bold red]markup[/] \x1b[31mansi zebra\x1b[0m <script>alert(1)</script>",
    "ÉCOLE école Straße STRASSE",
    "100% sure_thing with back\\slash and \"quotes\" 'single'",
    "ZEBRA upper",
    "",
    None,
    "z",
    "ze",
    "zebra",
    "\u212aelvin sign vs Kelvin",  # folds to 'k' in FTS5, not in LIKE
]
NEEDLES = ["zebra", "ZEBRA", "zeB", "ze", "z", "nul", "abc", "hidden", "\ufffd\ufffd", "caf\ufffd", "[bold",
           "[/]", "\x1b[31m", "<script>", "école", "ÉCOLE", "STRASSE", "straße", "100%", "sure_thing", "e_t",
           "%", "_", "back\\slash", '"quotes"', "'single'", "kelvin", "\u212aelvin", "a\x00z", "upper", "nothing",
           "ra crossing", "Zebra crossing"]


def like(text: str | None, needle: str) -> bool:
    """SQLite's LIKE '%needle%' without ICU: ASCII-only case folding, both read up to a NUL (so a
    needle holding one is the pattern '%prefix': the text ends with the prefix)."""
    if text is None:
        return False

    def fold(s: str) -> str:
        return "".join(c.lower() if c.isascii() else c for c in s.split("\x00")[0])

    if "\x00" in needle:
        return fold(text).endswith(fold(needle))
    return fold(needle) in fold(text)


def fill(store: Store, trial_id: int, texts: list[str | None], first_seq: int = 1) -> list[int]:
    rows = [(trial_id, first_seq + i, 0.0, "assistant", "stdout", text, None) for i, text in enumerate(texts)]
    with store.db.conn:
        store.db.conn.executemany("insert into events (trial_id, seq, ts, kind, stream, text, data) "
                                  "values (?, ?, ?, ?, ?, ?, ?)", rows)
    return [r[1] for r in rows]


def expected(texts, seqs, needle, after, backwards):
    hits = [s for s, t in zip(seqs, texts, strict=True) if like(t, needle) and (s < after if backwards else s > after)]
    if not hits:
        return None
    return max(hits) if backwards else min(hits)


def check_all(store: Store, trial_id: int, texts, seqs) -> int:
    checked = 0
    for needle in NEEDLES:
        for after in (0, seqs[3], seqs[-1] + 1):
            for backwards in (False, True):
                want = expected(texts, seqs, needle, after, backwards)
                got = store.search.search_events(trial_id, needle, after, backwards)
                assert got == want, (needle, after, backwards)
                assert got == store.search._scan_events(trial_id, search.like_pattern(needle), after, backwards)
                checked += 1
    return checked


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "s.db")
    yield s
    s.close()


def test_indexed_search_equals_the_scan_on_hostile_text(store):
    assert store.search.has_search_index()
    other = fill(store, 2, [t.upper() if t else t for t in TEXTS])  # another trial, interleaved rowids
    seqs = fill(store, 1, TEXTS)
    fill(store, 3, TEXTS, first_seq=1000)
    assert other and store.search.search_backlog() == 3 * len(TEXTS)
    check_all(store, 1, TEXTS, seqs)  # all of it scanned by rowid: nothing indexed yet
    while store.search.index_events(limit=5):
        pass
    assert store.search.search_backlog() == 0
    assert check_all(store, 1, TEXTS, seqs) == len(NEEDLES) * 6
    assert store.search.search_events(3, "zebra", 0) == 1000  # the same texts, another trial's seqs


def test_events_written_after_the_index_are_found_before_it_catches_up(store):
    seqs = fill(store, 1, TEXTS)
    while store.search.index_events():
        pass
    more = ["a late Zebra", "late nul\x00zebra"]
    seqs += fill(store, 1, more, first_seq=seqs[-1] + 1)
    assert store.search.search_backlog() == len(more)
    check_all(store, 1, TEXTS + more, seqs)
    store.search.index_events()
    check_all(store, 1, TEXTS + more, seqs)


def test_a_large_backlog_searches_by_the_scan(store, monkeypatch):
    monkeypatch.setattr(search, "SCAN_BACKLOG", 3)
    seqs = fill(store, 1, TEXTS)
    check_all(store, 1, TEXTS, seqs)


def test_seqs_beyond_the_index_key_are_searched_by_the_scan(store):
    texts = ["negative zebra", "huge zebra"]
    fill(store, 5, texts[:1], first_seq=-4)
    fill(store, 5, texts[1:], first_seq=search.SEQ_SPAN + 7)
    while store.search.index_events():
        pass
    assert store.search.search_events(5, "ZEBRA", -10) == -4
    assert store.search.search_events(5, "zebra", -4) == search.SEQ_SPAN + 7
    assert store.search.search_events(5, "zebra", search.SEQ_SPAN * 2, backwards=True) == search.SEQ_SPAN + 7


def test_an_old_store_gets_the_index_on_open_and_builds_it_in_chunks(tmp_path):
    """A store file written before migration m005: opening it adds the (empty) index without
    reading the events; chunks fill it; search answers the same throughout."""
    path = tmp_path / "old.db"
    store = Store(path)
    seqs = fill(store, 1, TEXTS * 20)
    store.close()
    # Make it the store the previous release wrote: no index, m005 not recorded.
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("drop table event_search")
        conn.execute("drop table event_search_state")
        conn.execute("delete from _migrations where name = 'm005_17_event_search'")
    conn.close()
    old = Store(path, readonly=True)
    assert not old.search.has_search_index() and old.search.search_events(1, "zebra", 0) == 1
    old.close()

    store = Store(path)
    names = [r["name"] for r in store.db["_migrations"].rows]
    # every migration has run (m005 again, after any later one: the order of the rows is the order they ran)
    assert sorted(names) == sorted(m.__name__ for m in MIGRATIONS) and store.search.has_search_index()
    assert store.search.search_backlog() == len(seqs)
    texts = TEXTS * 20
    check_all(store, 1, texts, seqs)
    assert store.search.index_events(limit=100) == 100
    check_all(store, 1, texts, seqs)
    while store.search.index_events(limit=100):
        pass
    assert store.search.search_backlog() == 0
    check_all(store, 1, texts, seqs)


def test_the_writer_indexes_when_ingest_is_slow(tmp_path):
    from agentmeter_tui.core.store.writer import StoreWriter

    writer = StoreWriter(tmp_path / "w.db")
    try:
        writer.add_events([(1, seq, 0.0, "assistant", "stdout", f"line {seq} zebra", None) for seq in range(1, 50)])
        writer.call(lambda store: None).result(60)  # flushed
        # The writer's next ticks index the backlog; ask it on its own thread until it is 0.
        backlog = writer.call(lambda store: store.search.search_backlog()).result(60)
        while backlog:
            writer.call(lambda store: store.search.index_events(0)).result(60)  # a no-op turn of the loop
            backlog = writer.call(lambda store: store.search.search_backlog()).result(60)
        assert writer.call(lambda store: store.search.search_events(1, "ZEBRA", 10)).result(60) == 11
    finally:
        writer.close()
