"""The static site in a real headless Chromium, from file:// (no server): no console error, every
link resolves, the table's rows are the configurations, sorting works, a trial page shows its
transcript, and `--blind` leaks no model or CLI name, checked on the DOM and on every file.

The store is a real run of the smoke suite (the runner, the scripted model server, the reference
agent) with two reviewers' scores and a review note written as the review screen writes them."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sqlite3
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from agentmeter_tui import cli
from agentmeter_tui.core.interop.atif import parse_trajectory, trial_trajectory
from agentmeter_tui.core.reporting.site import pages as site_pages
from agentmeter_tui.core.store import Store
from tests.site.cdp import Browser, chromium_path, file_url

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("site")]

ROOT = Path(__file__).resolve().parents[2]
NOTE = "reads the file twice <b>not bold</b> & keeps going"
# An error event planted in the first trial, as an agent's stderr would bring it: hostile markup
# that the viewer's search splits into text nodes and must never parse.
ERROR_TEXT = "fatal: <img src=x onerror=document.title='owned'> data.txt vanished"


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("site-store")
    db = folder / "smoke.db"
    assert cli.main(["run", str(ROOT / "suites" / "smoke"), "--headless", "--db", str(db)]) == 0
    store = Store(db)
    ids = [t["id"] for t in store.trials("smoke")]
    for n, trial_id in enumerate(ids):
        store.reviews.add_score(trial_id, 3 if n % 2 == 0 else 1, "ana")
        store.reviews.add_score(trial_id, 3 if n % 3 else 1, "bob", blind=True)
    store.reviews.add_note(ids[0], NOTE, "ana")
    store.close()
    with sqlite3.connect(db) as conn:
        seq = conn.execute("select max(seq) from events where trial_id = ?", [ids[0]]).fetchone()[0]
        conn.execute("insert into events (trial_id, seq, ts, kind, stream, text, data) values (?, ?, 0, 'error', "
                     "'stderr', ?, null)", [ids[0], seq + 1, ERROR_TEXT])
    return db


@pytest.fixture(scope="module")
def compared(store_path, tmp_path_factory) -> dict[str, Path]:
    """``report --compare A B --format html``: B the smoke store, A a copy in which the solver's
    latest count-lines trial failed and the fumbler's latest write-greeting trial passed."""
    out = tmp_path_factory.mktemp("compared")
    a = out / "a.db"
    shutil.copyfile(store_path, a)
    with sqlite3.connect(a) as conn:
        for model, task, status, passed in (("solver", "count-lines", "failed", 0),
                                            ("fumbler", "write-greeting", "passed", 1)):
            conn.execute("update trials set status = ?, passed = ? where id = (select id from trials where "
                         "model = ? and task_id = ? order by finished_at desc, id desc limit 1)",
                         [status, passed, model, task])
    made = {"a": a}
    for kind, extra in (("plain", []), ("blind", ["--blind"])):
        made[kind] = out / kind
        assert cli.main(["report", "--compare", str(a), str(store_path), "--format", "html", "--out",
                         str(made[kind]), "--intervals", "200", *extra]) == 0
    return made


@pytest.fixture(scope="module")
def sites(store_path, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("sites")
    made = {}
    for kind, extra in (("plain", []), ("blind", ["--blind"])):
        target = out / kind
        assert cli.main(["report", "--db", str(store_path), "--format", "html", "--out", str(target), *extra]) == 0
        made[kind] = target
    return made


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.targets: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.targets.append(value)


def test_every_link_resolves_and_nothing_comes_from_the_network(sites):
    for site in sites.values():
        pages = list(site.rglob("*.html"))
        assert len(pages) > 3
        for page in pages:
            parser = _Links()
            parser.feed(page.read_text(encoding="utf-8"))
            for target in parser.targets:
                parts = urlsplit(target)
                assert not parts.scheme and not parts.netloc, f"{page}: {target} leaves the site"
                if parts.path:
                    assert (page.parent / unquote(parts.path)).resolve().is_file(), f"{page}: {target} is missing"


def test_every_atif_file_is_the_export_of_its_trial(sites, store_path):
    """The site writes its ATIF files without building the pydantic models: each is still a valid
    trajectory, and the very bytes `agentmeter export atif` writes for that trial."""
    store = Store(store_path)
    try:
        trials = store.trials("smoke")
        assert trials
        for trial in trials:
            written = (sites["plain"] / "trial" / f"{trial['id']}.atif.json").read_bytes()
            assert parse_trajectory(written).to_json() == written
            assert trial_trajectory(store, trial["id"]).to_json() == written
    finally:
        store.close()


def test_workers_write_the_same_site_byte_for_byte(sites, store_path, tmp_path, monkeypatch):
    """A small store is written in process, a large one by worker processes reading chunks of
    trials: both give the same bytes, and a second build gives the first one's."""
    monkeypatch.setattr(site_pages, "PARALLEL_FROM", 1)
    monkeypatch.setattr(site_pages, "CHUNK", 2)
    target = tmp_path / "site"
    assert cli.main(["report", "--db", str(store_path), "--format", "html", "--out", str(target)]) == 0
    files = sorted(p.relative_to(sites["plain"]) for p in sites["plain"].rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(target) for p in target.rglob("*") if p.is_file())
    for name in files:
        assert (target / name).read_bytes() == (sites["plain"] / name).read_bytes(), name


def test_blind_site_has_no_name_in_any_file(sites, store_path):
    store = Store(store_path)
    terms = store.reviews.identity_terms("smoke")
    store.close()
    assert {"solver", "fumbler", "reference"} <= set(terms)
    pattern = re.compile("|".join(re.escape(t) for t in terms), re.IGNORECASE)
    for path in sites["blind"].rglob("*"):
        if path.is_file():
            found = pattern.search(path.read_text(encoding="utf-8"))
            assert found is None, f"{path} names {found.group(0)!r}"
    # ... and the plain site does name them, so the check above can fail
    assert pattern.search((sites["plain"] / "index.html").read_text(encoding="utf-8"))


@pytest.mark.skipif(chromium_path() is None and not os.environ.get("CI"),
                    reason="needs chromium (.ci/run installs it; with CI=true this test never skips)")
def test_in_chromium(sites, store_path):
    store = Store(store_path)
    configs = store.views.configuration_pairs("smoke")
    first = store.trials("smoke")[0]
    store.close()

    async def check() -> None:
        browser = Browser()
        try:
            await browser.start()
            await browser.open(file_url(sites["plain"] / "index.html"))
            rows = await browser.js("[...document.querySelectorAll('#table2 tbody tr')]"
                                    ".map(r => [r.cells[0].textContent, r.cells[1].textContent])")
            assert sorted(map(tuple, rows)) == sorted(configs)
            assert await browser.js("document.querySelectorAll('svg.heatmap rect').length") == len(configs)
            # sort by AMS (column 12), twice: descending then ascending
            column = await browser.js("[...document.querySelectorAll('#table2 thead th')]"
                                      ".findIndex(h => h.textContent === 'AMS')")
            values = f"[...document.querySelectorAll('#table2 tbody tr')].map(r => +r.cells[{column}].dataset.sort)"
            await browser.js(f"document.querySelectorAll('#table2 thead th')[{column}].click()")
            descending = await browser.js(values)
            assert descending == sorted(descending, reverse=True)
            await browser.js(f"document.querySelectorAll('#table2 thead th')[{column}].click()")
            assert await browser.js(values) == sorted(descending)
            # every page of the site loads without a console error
            for page in sorted(sites["plain"].rglob("*.html")):
                await browser.open(file_url(page))
            assert browser.errors() == []
            await browser.open(file_url(sites["plain"] / "trial" / f"{first['id']}.html"))
            events = await browser.js("document.querySelectorAll('ol.transcript li').length")
            assert events > 0
            assert NOTE in await browser.js("document.body.innerText")  # a note, as text, not markup
            assert await browser.js("document.querySelectorAll('main b').length") >= 1  # scores are bold
            assert "not bold" not in await browser.js("[...document.querySelectorAll('b')].map(b => b.textContent)"
                                                       ".join(' ')")
            await browser.js("document.getElementById('unfold').click()")
            assert await browser.js("[...document.querySelectorAll('details')].every(d => d.open)")
            # the blind site's DOM, after its script ran
            for page in sorted(sites["blind"].rglob("*.html")):
                await browser.open(file_url(page))
                text = await browser.js("document.documentElement.outerHTML")
                for name in {c for pair in configs for c in pair}:
                    assert name not in text, f"{page} shows {name}"
            assert browser.errors() == []
        finally:
            await browser.close()

    asyncio.run(check())


def test_a_failed_build_leaves_the_previous_site(sites, store_path, tmp_path):
    target = tmp_path / "site"
    shutil.copytree(sites["plain"], target)
    before = sorted(p.relative_to(target) for p in target.rglob("*"))
    assert cli.main(["report", "--db", str(tmp_path / "missing.db"), "--format", "html", "--out", str(target)]) == 1
    assert sorted(p.relative_to(target) for p in target.rglob("*")) == before
    assert cli.main(["report", "--db", str(store_path), "--format", "html"]) == 2  # no --out


def _latest_passes(db: Path) -> dict[tuple[str, str, str], bool]:
    """Each cell's most recently finished attributable trial's pass, read from the raw rows."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("select model, cli, task_id, passed from trials where status != 'infra-invalid' "
                            "order by finished_at, id").fetchall()
    return {(m, c, t): bool(p) for m, c, t, p in rows}  # the last row of a cell wins


def test_compared_site_shows_the_flips(compared, store_path):
    a, b = _latest_passes(compared["a"]), _latest_passes(store_path)
    flips = {key: b[key] for key in a.keys() & b.keys() if a[key] != b[key]}
    assert len(flips) == 2
    page = (compared["plain"] / "compare.html").read_text(encoding="utf-8")
    assert f"{len(flips)} flip(s)" in page
    index = (compared["plain"] / "index.html").read_text(encoding="utf-8")
    assert 'href="compare.html"' in index
    marks = re.findall(r'<td class="[^"]*flipped"[^>]*>[^<]*<span class="flip">(.)</span>', index)
    assert sorted(marks) == sorted("▲" if passed else "▼" for passed in flips.values())
    # a site without a compared run has neither
    assert not (compared["plain"].parent / "plain" / "none").exists()


def test_blind_compared_site_names_nothing(compared, store_path):
    store = Store(store_path)
    terms = [*store.reviews.identity_terms("smoke"), compared["a"].name, str(compared["a"].parent)]
    store.close()
    pattern = re.compile("|".join(re.escape(t) for t in terms), re.IGNORECASE)
    for path in compared["blind"].rglob("*"):
        if path.is_file():
            found = pattern.search(path.read_text(encoding="utf-8"))
            assert found is None, f"{path} names {found.group(0)!r}"
    assert pattern.search((compared["plain"] / "compare.html").read_text(encoding="utf-8"))


@pytest.mark.skipif(chromium_path() is None and not os.environ.get("CI"),
                    reason="needs chromium (.ci/run installs it; with CI=true this test never skips)")
def test_viewer_search_and_first_error_in_chromium(sites, store_path):
    """The trial page's search and jump, driven in a real headless Chromium by URL fragment and by
    its buttons: the match count against the events' text counted here, the current match inside an
    opened tool call, the first error event the one planted, the hostile error text never parsed."""
    store = Store(store_path)
    trial = store.trials("smoke")[0]
    texts = [text or "" for _seq, _ts, kind, _st, text, _d in store.events(trial["id"])]
    error_seq = next(seq for seq, _ts, kind, *_ in store.events(trial["id"]) if kind == "error")
    store.close()
    needle = "data.txt"
    expected = sum(t.lower().count(needle) for t in texts)
    assert expected >= 2
    page = file_url(sites["plain"] / "trial" / f"{trial['id']}.html")

    async def check() -> None:
        browser = Browser()
        try:
            await browser.start()
            await browser.open(page + "#q=" + needle)
            assert await browser.js("document.querySelectorAll('#transcript mark').length") == expected
            assert await browser.js("document.getElementById('search-count').textContent") == f"1 of {expected}"
            assert await browser.js("[...document.querySelectorAll('#transcript mark')]"
                                    ".every(m => m.textContent.toLowerCase() === 'data.txt')")
            current = "document.querySelector('#transcript .current')"
            # the current match is the first mark, shown: a tool call around it unfolded
            assert await browser.js(f"{current} === document.querySelector('#transcript mark')")
            assert await browser.js(f"!{current}.closest('details') || {current}.closest('details').open")
            assert await browser.js("document.querySelectorAll('#transcript mark')[1].closest('details') !== null")
            await browser.js("document.getElementById('search-next').click()")
            assert await browser.js("document.getElementById('search-count').textContent") == f"2 of {expected}"
            assert await browser.js(f"{current}.closest('details').open")
            # typing a new query replaces the old marks (the text is restored, then marked again)
            await browser.js("var b = document.getElementById('search'); b.value = 'IMG';"
                             "b.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter'}))")
            assert await browser.js("document.querySelectorAll('#transcript mark').length") == \
                sum(t.lower().count("img") for t in texts)
            assert await browser.js("document.querySelectorAll('#transcript img').length") == 0
            assert await browser.js("document.title") != "owned"
            assert ERROR_TEXT in await browser.js("document.getElementById('transcript').textContent")
            # the first error: by fragment (a same-page navigation: no load event, a hashchange), and by
            # the button after scrolling away
            await browser.js("new Promise(done => { addEventListener('hashchange', () => setTimeout(done, 0), "
                             "{once: true}); location.hash = 'first-error'; })")
            assert await browser.js(f"{current}.id") == f"e{error_seq}"
            await browser.js("window.scrollTo(0, 0); document.getElementById('first-error-button').click()")
            assert await browser.js(f"{current}.id") == f"e{error_seq}"
            assert await browser.js(f"{current}.getBoundingClientRect().top") > 0
            assert browser.errors() == []
        finally:
            await browser.close()

    asyncio.run(check())
