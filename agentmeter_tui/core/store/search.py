"""Search in a trial's event texts: a trigram index (SQLite FTS5) narrows the candidates, the
scan's own test decides.

The review screen's search is ``text LIKE '%needle%'``: a substring, ASCII case folded (SQLite
without ICU), the text read up to a NUL as LIKE reads it. On a million-event transcript that
scan reads every text (~400 ms). The index (``event_search``, added by migration
``m005_17_event_search``) is a contentless FTS5 table with the trigram tokenizer: it stores no
copy of the texts, only which rows hold which three-character sequences (case folded). A
needle's trigrams, ANDed, give a superset of the rows LIKE accepts (the tokenizer folds case at
least as widely as LIKE does), so every candidate is checked with the same LIKE on its row and
the results are exactly the scan's.

The index is keyed by ``trial_id * 2**32 + seq``, so one trial's entries are one rowid range in
seq order: the next match after a seq is the first verified entry of that range, and FTS5 walks
it in order and stops there. ``detail=none``: the smallest index, and phrase positions are not
needed when LIKE has the last word.

Events are not indexed as they are inserted: trigram indexing costs more than the insert itself
(a trigger cut plain inserts from ~130k to ~11k events/s), so the runner's store writer indexes
in the background when ingest is slow (``index_events``, a few thousand rows a transaction, by
rowid: ``event_search_state.indexed_rowid`` says how far), and so does a review screen that finds a
backlog. Rows past that mark are scanned by rowid; when the backlog is large, the search is the
scan of the trial it always was.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from .group import Queries
from .tx import immediate

if TYPE_CHECKING:  # sqlite-utils loads when a Store opens, not when a light command imports this
    import sqlite_utils

    from .lazydb import Database

SEQ_SPAN = 2**32  # index key = trial_id * SEQ_SPAN + seq; a seq outside [0, SEQ_SPAN) is not indexed
INDEX_CHUNK = 8192  # rows per indexing transaction: ~40 ms here, short enough for a writer to wait
SCAN_BACKLOG = 50_000  # unindexed rows the indexed search scans by rowid; past that, the trial's scan
MAX_TERMS = 12  # trigrams ANDed into the index query; more narrow little and each reads a doclist

CREATE_SQL = (
    "create virtual table event_search using fts5(text, content='', tokenize='trigram', detail='none')",
    "create table event_search_state (id integer primary key check (id = 1), indexed_rowid integer not null)",
    "insert into event_search_state (id, indexed_rowid) values (1, 0)",
)


def create_index(db: sqlite_utils.Database) -> bool:
    """Create the (empty) index; False when this SQLite lacks FTS5's trigram tokenizer (3.34+):
    searches then stay the scan."""
    try:
        db.execute("create virtual table temp.trigram_probe using fts5(x, tokenize='trigram')")
    except sqlite3.OperationalError:
        return False
    db.execute("drop table temp.trigram_probe")
    for sql in CREATE_SQL:
        db.execute(sql)
    return True


def like_pattern(needle: str) -> str:
    return "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def match_query(needle: str) -> str | None:
    """The FTS5 query for ``needle``'s trigrams (None when the index cannot narrow: a needle
    shorter than three characters, or one holding a NUL, which ends LIKE's pattern)."""
    if len(needle) < 3 or "\x00" in needle:
        return None
    starts = list(range(0, len(needle) - 2, 3))
    if starts[-1] != len(needle) - 3:
        starts.append(len(needle) - 3)  # the last three characters, so every one is covered
    if len(starts) > MAX_TERMS:
        step = len(starts) / MAX_TERMS
        starts = [starts[int(i * step)] for i in range(MAX_TERMS - 1)] + [starts[-1]]
    return " AND ".join('"' + needle[i:i + 3].replace('"', '""') + '"' for i in starts)


class SearchQueries(Queries):
    """``store.search``."""

    def __init__(self, db: Database):
        super().__init__(db)
        self._search_index: bool | None = None  # looked up on first use

    def has_search_index(self) -> bool:
        if self._search_index is None:
            self._search_index = self.db.execute(
                "select count(*) from sqlite_master where name = 'event_search_state'").fetchone()[0] == 1
        return self._search_index

    def search_backlog(self) -> int:
        """Events not indexed yet (0 without an index: there is nothing to build)."""
        if not self.has_search_index():
            return 0
        return max(0, self._top_rowid() - self._indexed_rowid())

    def _top_rowid(self) -> int:
        return self.db.execute("select coalesce(max(rowid), 0) from events").fetchone()[0]

    def _indexed_rowid(self) -> int:
        return self.db.execute("select indexed_rowid from event_search_state where id = 1").fetchone()[0]

    def index_events(self, limit: int = INDEX_CHUNK) -> int:
        """Index the next ``limit`` events (by rowid) in one transaction; returns how many rows
        it covered (0: the index is complete). Safe from several processes: each chunk reads the
        mark under the write lock."""
        if not self.has_search_index() or self.db.conn.in_transaction:
            return 0  # never inside a caller's transaction: the chunk commits on its own
        if self._top_rowid() <= self._indexed_rowid():
            return 0  # complete: no write lock taken (the writer asks ten times a second)
        with immediate(self.db):
            mark = self._indexed_rowid()
            end = self.db.execute("select max(rowid) from (select rowid from events where rowid > ? order by rowid "
                                  "limit ?)", [mark, limit]).fetchone()[0]
            if end is None:
                return 0
            self.db.execute(
                "insert into event_search (rowid, text) select trial_id * ? + seq, text from events "
                "where rowid > ? and rowid <= ? and text is not null and seq >= 0 and seq < ? and trial_id >= 0",
                [SEQ_SPAN, mark, end, SEQ_SPAN])
            self.db.execute("update event_search_state set indexed_rowid = ? where id = 1", [end])
        return end - mark

    def search_events(self, trial_id: int, needle: str, after: int, backwards: bool = False) -> int | None:
        """The seq of the next (or previous) event whose text contains ``needle``, any case (ASCII).

        Through the index when it covers all but a short backlog; otherwise the scan. LIKE
        rather than ``instr(lower(text), lower(?))``: the same ASCII-only case folding (SQLite's
        lower() without ICU), without a lowered copy of every text."""
        pattern = like_pattern(needle)
        query = match_query(needle)
        if query is None or not self.has_search_index() or not self._seqs_indexable(trial_id):
            return self._scan_events(trial_id, pattern, after, backwards)
        mark = self._indexed_rowid()  # read first: what is past it gets scanned, so nothing is missed
        if self._top_rowid() - mark > SCAN_BACKLOG:
            return self._scan_events(trial_id, pattern, after, backwards)
        base = trial_id * SEQ_SPAN
        low, high = (base - 1, base + after) if backwards else (base + after, base + SEQ_SPAN)
        row = self.db.execute(
            "select f.rowid - ? from event_search f where event_search match ? and f.rowid > ? and f.rowid < ? "
            "and exists (select 1 from events e where e.trial_id = ? and e.seq = f.rowid - ? "
            "and e.text like ? escape '\\') "
            f"order by f.rowid {'desc' if backwards else 'asc'} limit 1",
            [base, query, low, high, trial_id, base, pattern]).fetchone()
        indexed = row[0] if row else None
        # The backlog by rowid (unary + keeps SQLite off the (trial_id, seq) index, which would
        # walk the whole trial).
        tail = self.db.execute(
            f"select {'max' if backwards else 'min'}(seq) from events where rowid > ? and +trial_id = ? "
            f"and +seq {'<' if backwards else '>'} ? and text like ? escape '\\'",
            [mark, trial_id, after, pattern]).fetchone()[0]
        found = [s for s in (indexed, tail) if s is not None]
        if not found:
            return None
        return max(found) if backwards else min(found)

    def _seqs_indexable(self, trial_id: int) -> bool:
        """Whether every seq of the trial fits the index key (two probes of the seq index)."""
        # Two statements: SQLite answers a lone min() or max() from the index's edge, both at once
        # by walking the trial.
        low = self.db.execute("select min(seq) from events where trial_id = ?", [trial_id]).fetchone()[0]
        high = self.db.execute("select max(seq) from events where trial_id = ?", [trial_id]).fetchone()[0]
        return trial_id >= 0 and (low is None or (low >= 0 and high < SEQ_SPAN))

    def _scan_events(self, trial_id: int, pattern: str, after: int, backwards: bool) -> int | None:
        op, order = ("<", "desc") if backwards else (">", "asc")
        row = self.db.execute(
            f"select seq from events where trial_id = ? and seq {op} ? and text like ? escape '\\' "
            f"order by seq {order} limit 1", [trial_id, after, pattern]).fetchone()
        return row[0] if row else None
