"""The store is one class made of query mixins: a name defined in two of them would be silently
shadowed by the first in the MRO (two branches once each added a ``cell_trials``, and the review
screen called the wrong one). Each name is defined once."""

from __future__ import annotations

from agentmeter_tui.core.store import Store


def test_no_two_store_mixins_define_the_same_method():
    owners: dict[str, list[str]] = {}
    for base in Store.__mro__[1:]:
        if base is object:
            continue
        for name, value in vars(base).items():
            if callable(value) and not name.startswith("__"):
                owners.setdefault(name, []).append(base.__name__)
    assert {name: where for name, where in owners.items() if len(where) > 1} == {}
