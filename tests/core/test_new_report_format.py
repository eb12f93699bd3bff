"""Adding a report format is one module and one registration: a module written here (outside
the package) and registered by name is what ``agentmeter report --format NAME`` renders, and
``--help`` lists it. Nothing else names it."""

from __future__ import annotations

import sys
import textwrap

import orjson
import pytest

from agentmeter_tui.cli import main
from agentmeter_tui.core.reporting.records import import_records
from agentmeter_tui.core.reporting import FORMATS
from agentmeter_tui.core.reporting.synthetic import synthetic_records
from agentmeter_tui.core.store import Store

MODULE = '''
"""A made-up report format: one line per configuration, "model cli passes/tasks ams"."""
from agentmeter_tui.core.reporting.formats import ReportFormat


class PlainFormat(ReportFormat):
    name = "plain"

    def render(self, report, *, detail=False):
        rows = report.configurations
        return "".join(f"{r.model} {r.cli} {r.passes}/{r.n_tasks} {r.ams:.4f}\\n" for r in rows)
'''


@pytest.fixture
def plain(tmp_path, monkeypatch):
    (tmp_path / "plain_report_format.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    FORMATS.register("plain", "plain_report_format:PlainFormat")  # the one registration
    yield
    FORMATS._entries.pop("plain", None)
    FORMATS._loaded.pop("plain", None)
    sys.modules.pop("plain_report_format", None)


@pytest.fixture
def grid_db(tmp_path):
    path = tmp_path / "r.db"
    store = Store(path)
    import_records(store, list(synthetic_records(models=3, clis=2, tasks=12, trials=2)))
    store.close()
    return path


def test_a_new_format_is_rendered_and_listed(plain, grid_db, capsys):
    assert main(["report", "--db", str(grid_db), "--format", "json"]) == 0
    configs = orjson.loads(capsys.readouterr().out)["configurations"]
    assert main(["report", "--db", str(grid_db), "--format", "plain"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"{c['model']} {c['cli']} {c['passes']}/{c['n_tasks']} {c['ams']:.4f}" for c in configs]
    assert len(lines) == 6
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    assert "plain" in " ".join(capsys.readouterr().out.split())


def test_an_unregistered_format_is_refused_with_the_known_ones(grid_db, capsys):
    with pytest.raises(SystemExit) as info:
        main(["report", "--db", str(grid_db), "--format", "plain"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'plain'" in err and "'md'" in err and "'csv'" in err and "'json'" in err


FOLDER_MODULE = '''
"""A made-up folder format: each configuration's Pass interval, one file."""
import json
from agentmeter_tui.core.reporting.formats import FolderFormat


class IntervalsFolder(FolderFormat):
    name = "intervals-folder"

    def write(self, store, report, out, *, blind=False):
        out.mkdir(parents=True, exist_ok=True)
        (out / "intervals.json").write_text(json.dumps(report.intervals is not None))
        return "wrote intervals.json"
'''


def test_a_new_folder_format_gets_the_intervals_computed(tmp_path, grid_db, monkeypatch):
    """The site takes the bootstrap deferred and settles it itself; a folder format that does not
    say so gets the report with its intervals, as before."""
    (tmp_path / "intervals_folder_format.py").write_text(textwrap.dedent(FOLDER_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    FORMATS.register("intervals-folder", "intervals_folder_format:IntervalsFolder")
    try:
        out = tmp_path / "out"
        assert main(["report", "--db", str(grid_db), "--format", "intervals-folder", "--out", str(out)]) == 0
        assert orjson.loads((out / "intervals.json").read_text()) is True
    finally:
        FORMATS._entries.pop("intervals-folder", None)
        FORMATS._loaded.pop("intervals-folder", None)
        sys.modules.pop("intervals_folder_format", None)
