"""The store is one facade that composes query objects (issue 33), not a class made of mixins:
a name defined in two mixins was silently shadowed by the first in the MRO (two branches once
each added a ``cell_trials``, and the review screen called the wrong one). Each group is its
own object, reached by its concept's name, and all of them share the store's one connection,
so a write through one group is what another reads."""

from __future__ import annotations

from agentmeter_tui.core.store import Store
from agentmeter_tui.core.store.group import Queries

GROUPS = ("reviews", "runs", "views", "search", "flags", "regrades", "sources", "reports", "imports")


def test_the_store_composes_its_query_groups_on_its_one_connection(tmp_path):
    store = Store(tmp_path / "s.db")
    try:
        assert Store.__bases__ == (object,)  # no mixins: nothing to shadow
        for name in GROUPS:
            group = getattr(store, name)
            assert isinstance(group, Queries) and group.db is store.db, name
        assert store.reports.regrades is store.regrades  # the one group reports read another through
        assert store.reports.configurations is store and store.imports.configurations is store
        trial_id = store.runs.insert_trial({"suite_id": "s", "task_id": "t", "model": "m", "cli": "c",
                                            "trial_index": 0, "status": "passed"})
        store.reviews.add_note(trial_id, "seen", "ana")
        assert [n["text"] for n in store.views.notes(trial_id)] == ["seen"]
        assert store.reviews.audit_rows("note")[0]["trial_id"] == trial_id
    finally:
        store.close()
