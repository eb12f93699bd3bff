"""Cache writes by lifetime: the 1-hour share of an Anthropic-style cache write is priced at a
snapshot's `cache_write_1h`, the rest at `cache_write`; the share is kept per call and per trial
(migration m003). Figures: the recorded usage of tests/fixtures/providers/anthropic-cache-1h.json
(input 100, cache writes 556 of which 100 for 1 hour, output 1) at Sonnet's list prices."""

from __future__ import annotations

from decimal import Decimal

from agentmeter_tui.core.pricing import PriceSnapshot
from agentmeter_tui.core.store import Store
from agentmeter_tui.core.usage import TokenUsage

SNAPSHOT = """
as_of = 2026-11-01
[models."anthropic/claude-sonnet-4"]
aliases = ["claude-sonnet-4-20250514"]
input = "3"
cached_input = "0.3"
cache_write = "3.75"
cache_write_1h = "6"
output = "15"
[models.plain]
input = "3"
cache_write = "3.75"
output = "15"
"""
RECORDED = TokenUsage(uncached_input=100, cache_write=556, output=1, cache_write_1h=100)


def test_the_1h_share_is_priced_at_cache_write_1h(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text(SNAPSHOT)
    prices = PriceSnapshot.load(path)
    expected = (100 * Decimal(3) + 456 * Decimal("3.75") + 100 * Decimal(6) + 1 * Decimal(15)) / 1_000_000
    assert prices.cost_usd("claude-sonnet-4-20250514", RECORDED) == expected
    # an entry without cache_write_1h prices every write at cache_write
    assert prices.cost_usd("plain", RECORDED) == (100 * 3 + 556 * Decimal("3.75") + 15) / Decimal(1_000_000)


def test_the_1h_share_is_kept_per_call_and_per_trial(tmp_path):
    store = Store(tmp_path / "s.db")
    try:
        assert "cache_write_1h" in store.db["trials"].columns_dict
        assert "cache_write_1h" in store.db["usage"].columns_dict
    finally:
        store.close()
    assert (RECORDED + RECORDED).cache_write_1h == 200 and RECORDED.raw == 657  # not a sixth class


def test_reports_show_the_providers_charge_and_divergences(tmp_path):
    from agentmeter_tui.core.reporting.build import cost_notes, report_from_store
    from agentmeter_tui.core.store import Store

    store = Store(tmp_path / "r.db")
    try:
        store.db["suites"].insert({"id": "s", "name": "s"})
        for i, (flags, source, actual) in enumerate([('["cost-divergence"]', "provider", 0.000837),
                                                     (None, "provider", 0.00333825), (None, None, None)]):
            store.db["trials"].insert({"suite_id": "s", "task_id": "t", "model": "m", "cli": "c", "trial_index": i,
                                       "status": "passed", "cost_usd": 0.001, "flags": flags,
                                       "cost_actual_usd": actual, "cost_actual_source": source})
        checks = store.reports.cost_checks("s")
        assert checks == {"divergent": 1, "charged_usd": 0.000837 + 0.00333825, "charged_trials": 2,
                          "comparable_of_charged_usd": 0.002}
        notes = report_from_store(store, "s").notes
    finally:
        store.close()
    assert notes[-2:] == cost_notes(checks)
    assert "2 trial(s) carry the provider's own charge" in notes[-2] and "$0.0042" in notes[-2]
    assert notes[-1].startswith("1 trial(s) flagged cost-divergence")
