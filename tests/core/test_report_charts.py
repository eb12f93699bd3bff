"""Chart data functions and the drawn files (matplotlib, SVG and PNG)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from agentmeter_tui.cli import main
from agentmeter_tui.core.reporting.charts import heatmap_data, scatter_data, tier_profile_data, write_charts
from agentmeter_tui.core.metrics import Attempt
from agentmeter_tui.core.reporting.records import import_records
from agentmeter_tui.core.reporting import build_report, report_from_records
from agentmeter_tui.core.reporting.synthetic import synthetic_records
from agentmeter_tui.core.store import Store

TIERS = {"e": "easy", "m": "medium", "h": "hard"}


def r(task, model, cli, passed, cost):
    return Attempt(task, model, cli, 0, "passed" if passed else "failed", passed, float(passed), 1000, cost)


REPORT = build_report([
    r("e", "a", "x", True, 0.01), r("m", "a", "x", True, 0.1), r("h", "a", "x", False, 1.0),
    r("e", "a", "y", True, 0.01), r("m", "a", "y", False, 0.1), r("h", "a", "y", False, 1.0),
    r("e", "b", "y", False, 0.5), r("m", "b", "y", False, 0.5),
], suite="s", task_tiers=TIERS)


def test_heatmap_data():
    data = heatmap_data(REPORT)
    assert data.models == ["a", "b"] and data.clis == ["x", "y"]
    assert data.values[1][0] is None  # b/x never ran
    assert data.best == [0, 1]
    assert data.values[0][0] == REPORT.configuration("a", "x").ams


def test_scatter_data_shows_configurations_without_a_pass_at_their_cost():
    data = scatter_data(REPORT)
    assert [(p.model, p.cli) for p in data.points] == [("a", "x"), ("a", "y")]
    assert [(p.model, p.cli, p.usd_spent) for p in data.no_pass] == [("b", "y", 1.0)]
    assert data.left_out == []  # only an unknown cost leaves a configuration out
    assert data.mean_pass_rate == (2 / 3 + 1 / 3) / 2
    assert data.points[0].usd_per_pass == 1.11 / 2
    # a/x passes more for 0.555/pass, a/y less for 1.11/pass: a/y is dominated
    assert data.front == [0]


def test_scatter_axes_from_zero_every_point_labelled_front_and_version(tmp_path):
    from agentmeter_tui.core.reporting.charts import draw_scatter

    runs = [r(t, m, c, ok, cost) for t in ("e", "m", "h") for m, c, ok, cost in
            (("a", "x", True, 0.2), ("a", "y", t != "h", 0.05), ("b", "y", False, 0.3), ("b", "x", True, 0.9))]
    report = build_report(runs, suite="s", task_tiers=TIERS)
    data = scatter_data(report)
    fig = draw_scatter(data, "t", "9.9.9")
    (ax,) = fig.axes
    assert ax.get_ylim()[0] == 0 and ax.get_xlim()[0] == 0 and ax.get_xscale() == "linear"
    texts = [t.get_text() for t in ax.texts]
    for label in ("a/x", "a/y", "b/x"):
        assert label in texts
    assert any(t.startswith("b/y (no pass") for t in texts)
    assert [line.get_label() for line in ax.lines if line.get_label() == "Pareto front"]
    assert any("agentmeter-tui 9.9.9" == t.get_text() for t in fig.texts)
    from agentmeter_tui.core.reporting.site.svg import scatter

    svg = scatter(data)
    for label in ("a / x", "a / y", "b / x", "b / y (no pass)"):
        assert f'class="point-label">{label}</text>' in svg
    assert 'class="dot nopass"' in svg and "<polyline" in svg


def test_tier_profile_data_ranks_by_ams():
    data = tier_profile_data(REPORT, top=2)
    assert data.labels == ["a/x", "a/y"]
    assert data.passes == {"easy": [1, 1], "medium": [1, 0], "hard": [0, 0]}
    assert data.tasks_per_tier == {"easy": 1, "medium": 1, "hard": 1}


def test_write_charts_svg_and_png(tmp_path):
    report = report_from_records(list(synthetic_records(models=3, clis=3, tasks=9, trials=1)))
    paths = write_charts(report, tmp_path / "charts")
    assert sorted(p.name for p in paths) == sorted(f"{n}.{f}" for n in ("ams-heatmap", "pass-vs-cost",
                                                                          "tier-profile") for f in ("svg", "png"))
    for path in paths:
        if path.suffix == ".png":
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        else:
            assert ET.parse(path).getroot().tag.endswith("svg")
    first = (tmp_path / "charts" / "ams-heatmap.svg").read_bytes()
    write_charts(report, tmp_path / "charts")
    assert (tmp_path / "charts" / "ams-heatmap.svg").read_bytes() == first  # deterministic


def test_charts_with_nothing_to_plot(tmp_path):
    empty = build_report([r("e", "a", "x", False, 0.5)], suite="s", task_tiers=TIERS)
    assert len(write_charts(empty, tmp_path)) == 6


def test_report_command_writes_charts(tmp_path, capsys):
    db = tmp_path / "r.db"
    store = Store(db)
    import_records(store, list(synthetic_records(models=2, clis=2, tasks=6, trials=1)))
    store.close()
    assert main(["report", "--db", str(db), "--charts", str(tmp_path / "out")]) == 0
    assert len(list((tmp_path / "out").iterdir())) == 6
    assert "wrote" in capsys.readouterr().err
