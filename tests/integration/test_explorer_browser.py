"""The item explorer in headless Chromium, opened as a file: it loads without a request leaving the
folder, filters by a click, searches, moves with the keyboard, keeps its view in the address,
and every metric cell of the report, and every linked mark of its figures, opens it on exactly
that number's ``n`` questions.

The study is judged, voted and scored by the real code (:mod:`tests.support.judged_study`).
Screenshots go to ``BLOOMQG_SCREENSHOT_DIR`` when set (else the test's temp dir).
"""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pandas as pd
import pytest

from tests.support.devtools import DevToolsPipe, chromium_or_skip

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A study's report and explorer side by side, as the workflow writes them."""
    from bloomqg.api.ledger import ledger_from_judgments
    from bloomqg.metrics.correlations import correlations
    from bloomqg.metrics.paired import paired_comparisons
    from bloomqg.store.parquet_io import read_frames, read_provenance
    from bloomqg.reporting.explorer.write import write_explorer_from_files
    from bloomqg.reporting.figures.write import write_figures
    from bloomqg.reporting.report import build_report
    from bloomqg.reporting.tables.write import write_tables
    from bloomqg.store.frames import GENERATIONS, JUDGMENTS
    from tests.support.judged_study import judged_study

    out = tmp_path_factory.mktemp("site")
    study = judged_study(out / "files", n_models=3, n_items=20)
    paired = paired_comparisons(study.votes, n_resamples=20, seed=0)
    tables = write_tables(study.metrics, study.datasets, study.reliability, out / "tables", paired=paired)
    correlated = correlations(study.metrics, confidence=0.95)
    figures = write_figures(study.metrics, study.votes, study.reliability, correlated, out / "figures")
    build_report(
        out / "report.html", config={"seed": 0}, all_metrics=study.metrics, votes=study.votes,
        reliability=study.reliability, generations=read_frames(study.generation_files, GENERATIONS),
        generation_provenance=[read_provenance(p) for p in study.generation_files],
        judgment_provenance=[read_provenance(p) for p in study.judgment_files],
        ledger=ledger_from_judgments(read_frames(study.judgment_files, JUDGMENTS)), table_paths=tables,
        figure_paths=figures, correlations=correlated, paired=paired,
        git_commit="0" * 40, package_versions={}, explorer_href="explorer/index.html",
    )
    write_explorer_from_files(
        out / "explorer", votes=study.vote_files, generations=study.generation_files,
        judgments=study.judgment_files, reliability=study.reliability_files, metrics=study.metrics_file,
        title="judged study",
    )
    return {"root": out, "study": study}


class Tab:
    """One page of a headless browser, and the few things a test does with it."""

    def __init__(self, browser: DevToolsPipe) -> None:
        self.browser = browser
        self.session = browser.open_page(1600, 950, ("Page", "Runtime", "Log", "Network"))

    def send(self, method: str, params: dict | None = None) -> dict:
        return self.browser.send(method, params, self.session)

    def eval(self, expression: str):
        reply = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in reply:
            raise AssertionError(f"{expression[:80]}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def wait(self, expression: str, timeout: float = 20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = self.eval(expression)
            except (AssertionError, RuntimeError):  # the page is between two documents
                value = None
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {expression}; body: {self.eval('document.body.dataset.error || null')}")

    def open(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})
        self.wait("document.readyState === 'complete' && document.body && document.body.dataset.ready === '1'")

    def click(self, selector: str) -> None:
        box = self.eval(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            if (!e) return null; e.scrollIntoView({{block: 'center'}});
            // the first box of its text: a link that wraps (report cells wrap to fit) has two
            // boxes, and the middle of their bounding rectangle may lie between them, on no link
            const r = e.getClientRects()[0] || e.getBoundingClientRect();
            return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")
        assert box, f"nothing matches {selector}"
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1})

    def press(self, key: str, code: int = 0) -> None:
        params = {"type": "keyDown", "key": key, "windowsVirtualKeyCode": code}
        if len(key) == 1:
            params["text"] = key
        self.send("Input.dispatchKeyEvent", params)
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": key, "windowsVirtualKeyCode": code})

    def count(self) -> int:
        return int(self.eval("document.getElementById('count').dataset.count"))

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"]))
        return path


@pytest.fixture(scope="module")
def tab(tmp_path_factory):
    browser = DevToolsPipe(chromium_or_skip(), tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield Tab(browser)
    finally:
        browser.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    path = Path(os.environ.get("BLOOMQG_SCREENSHOT_DIR") or tmp_path_factory.mktemp("screenshots"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def explorer_url(site, fragment: str = "") -> str:
    return (site["root"] / "explorer" / "index.html").resolve().as_uri() + (f"#{fragment}" if fragment else "")


def test_opens_as_a_file_without_errors_or_requests(site, tab, shots):
    tab.browser.events.clear()
    tab.open(explorer_url(site))
    assert tab.count() == len(site["study"].votes)
    time.sleep(0.2)
    errors, outside = [], []
    for event in tab.browser.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            errors.append(params["exceptionDetails"].get("text"))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            errors.append(params["entry"].get("text"))
        elif method == "Network.requestWillBeSent" and not params["request"]["url"].startswith(("file:", "data:", "blob:")):
            outside.append(params["request"]["url"])
    assert not errors, errors
    assert not outside, f"the explorer requested {outside}"
    assert tab.screenshot(shots / "explorer_all.png").stat().st_size > 20_000


def test_a_click_on_a_filter_and_the_permalink(site, tab):
    tab.open(explorer_url(site))
    votes = site["study"].votes
    tab.click('input[data-key="model"][data-value="qwen2.5-7b"]')
    tab.wait("document.getElementById('count').dataset.count !== '%d'" % len(votes))
    assert tab.count() == int((votes["model"] == "qwen2.5-7b").sum())
    tab.click('input[data-key="transition"][data-value="drift"]')
    time.sleep(0.1)
    expected = tab.eval("""(() => { const e = window.explorer, S = e.state; let n = 0;
        for (let r = 0; r < S.n; r++) n += e.value('model', r) === 'qwen2.5-7b' && e.value('transition', r) === 'drift';
        return n; })()""")
    assert 0 < tab.count() == expected
    address = tab.eval("location.href")
    assert "f.model=qwen2.5-7b" in address and "f.transition=drift" in address
    tab.send("Page.navigate", {"url": "about:blank"})
    time.sleep(0.2)
    tab.open(address)
    assert tab.count() == expected, "the permalink restores the view"


def test_sorting_by_a_header_click(site, tab):
    tab.open(explorer_url(site))
    tab.click('#thead div[data-sort="judged_level"]')
    tab.wait("location.hash.includes('s=judged_level')")
    order = ["Remember", "Understand", "Apply", "Analyze", "Evaluate", "Create", "Uncategorized"]
    levels = tab.eval("Array.from(explorer.state.visible).map(r => explorer.value('judged_level', r))")
    ranks = [order.index(level) if level in order else len(order) for level in levels]
    assert len(levels) == len(site["study"].votes) and ranks == sorted(ranks), "Bloom order, then no level"
    tab.click('#thead div[data-sort="judged_level"]')
    tab.wait("location.hash.includes('s=-judged_level')")
    levels = tab.eval("Array.from(explorer.state.visible).map(r => explorer.value('judged_level', r))")
    ranks = [order.index(level) if level in order else len(order) for level in levels]
    assert ranks == sorted(ranks, reverse=True)


def test_search_and_keyboard(site, tab, shots):
    tab.open(explorer_url(site))
    votes = site["study"].votes
    tab.press("/")
    assert tab.eval("document.activeElement.id") == "search"
    tab.send("Input.insertText", {"text": "hashing"})
    expected = int((votes["original_question"].str.lower().str.contains("hashing")
                    | votes["new_question"].fillna("").str.lower().str.contains("hashing")).sum())
    tab.wait(f"document.getElementById('count').dataset.count === '{expected}'")
    assert 0 < expected < len(votes)
    tab.press("Escape", 27)
    assert tab.eval("document.activeElement.id") != "search"
    assert tab.eval("document.getElementById('search').value") == "hashing", "Esc leaves the search, keeps it"
    tab.press("j")
    tab.press("j")
    first_two = tab.eval("Array.from(window.explorer.state.visible.slice(0, 2))")
    assert tab.eval("window.explorer.state.selected") == first_two[1]
    tab.press("k")
    assert tab.eval("window.explorer.state.selected") == first_two[0]
    detail = tab.eval("document.getElementById('detail').innerText")
    original = tab.eval(f"window.explorer.value('original_question', {first_two[0]})")
    assert original in detail and "Verdicts".upper() in detail.upper() and "Provenance".upper() in detail.upper()
    assert "0123abc" in detail and "fedcba9876543210" in detail, "the detail names model revision and judge prompt"
    assert "i=" in tab.eval("location.hash")
    tab.screenshot(shots / "explorer_search_detail.png")
    tab.press("Escape", 27)
    assert tab.eval("window.explorer.state.selected") == -1


def _n_of(site, href: str) -> int:
    query = parse_qs(urlsplit(href).fragment)
    strategy = {"CoT": "cot", "FGP": "fgp"}[query["f.strategy"][0]]
    metrics = site["study"].metrics
    row = metrics[(metrics["model"] == query["f.model"][0]) & (metrics["dataset"] == query["f.dataset"][0])
                  & (metrics["strategy"] == strategy) & (metrics["metric"] == query["m"][0])]
    assert len(row) == 1, href
    return int(row["n"].iloc[0])


def test_report_cells_open_their_items(site, tab, shots):
    report = (site["root"] / "report.html").resolve().as_uri()
    tab.send("Page.navigate", {"url": report})
    tab.wait("document.readyState === 'complete'")
    # figures and tables are folded under their readings: a reader opens them first
    tab.eval("document.querySelectorAll('details').forEach(d => { d.open = true; })")
    # the page's own link to the explorer (in the top bar) comes back to the page's top, not to the
    # link itself: scrolled to it, the title and the bar's first row would be hidden
    assert tab.eval("document.getElementById('explorer-link').getAttribute('href')") == "explorer/index.html#back=top"
    links = tab.eval("Array.from(document.querySelectorAll('a.items')).map(a => a.href)")
    # per link, whether its table cell carries the gate's † (null: not in a table cell)
    marks = tab.eval("""Array.from(document.querySelectorAll('a.items')).map(a => {
        const td = a.closest('td'); return td ? td.textContent.includes('†') : null; })""")
    tables = tab.eval("Array.from(new Set(Array.from(document.querySelectorAll('a.items')).map(a => (a.closest('[id^=table-]') || a.closest('section')).id)))")
    for name in ("table-table4_quality", "table-table5_usability", "table-table6_cognitive_shift", "table-table_auxiliary"):
        assert name in tables
    # A click on the CatCons cell of the first model, as a reader would.
    selector = "#table-table5_usability a.items[href*='m=catcons']"
    href = tab.eval(f"document.querySelector({json.dumps(selector)}).href")
    marked = tab.eval(f"document.querySelector({json.dumps(selector)}).closest('td').textContent.includes('†')")
    tab.click(selector)
    tab.wait("location.pathname.endsWith('/explorer/index.html') && document.body.dataset.ready === '1'")
    n = _n_of(site, href)
    assert tab.count() == n > 0
    assert int(tab.eval("document.getElementById('banner').dataset.den")) == n
    assert int(tab.eval("document.getElementById('banner').dataset.tableN")) == n
    # the report's † beside the value comes along: the banner marks it too, and only then
    assert tab.eval("Boolean(document.querySelector('#banner .dagger'))") == marked
    tab.screenshot(shots / "explorer_from_report.png")
    # "not counted" narrows to the mismatches: useful, judged, level differs from the target.
    tab.click('#banner button[data-mv="rest"]')
    time.sleep(0.1)
    transitions = tab.eval("Array.from(window.explorer.state.visible).map(r => window.explorer.value('transition', r))")
    assert transitions and "match" not in transitions
    # Every link: the same page, a new fragment (the page's own hashchange listener runs first).
    fragments = [urlsplit(link).fragment for link in links]
    counts = tab.eval("""(async (fragments) => { const out = [];
        for (const f of fragments) {
            await new Promise(done => { addEventListener('hashchange', done, {once: true}); location.hash = f; });
            out.push([Number(document.getElementById('count').dataset.count),
                      Boolean(document.querySelector('#banner .dagger'))]);
        }
        return out; })(%s)""" % json.dumps(fragments))
    expected = [_n_of(site, link) for link in links]
    wrong = [(link, got, n) for link, (got, _), n in zip(links, counts, expected) if got != n]
    assert not wrong, wrong[:5]
    assert len(links) > 100
    # the banner marks a value † exactly where the report's cell does
    unmarked = [link for link, (_, dagger), mark in zip(links, counts, marks) if mark is not None and dagger != mark]
    assert not unmarked, unmarked[:5]
    assert any(marks) and not all(m for m in marks if m is not None)  # both kinds were followed


def _page_counts(tab: Tab, fragments: list[str]) -> list[int]:
    """The explorer's count for each fragment, through the page's own filters (explorer.js
    filterMasks), the fragment parsed as readHash parses it. Not through the address itself:
    Chromium ignores URL changes past about 200 in 10 s ("Throttling navigation"), and the
    figures have more marks than that."""
    return tab.eval("""((fragments) => fragments.map(f => {
        const p = new URLSearchParams(f), S = explorer.state;
        S.filters = new Map(); S.q = "";
        for (const [k, v] of p) {
            if (!k.startsWith("f.")) continue;
            if (!S.byKey[k.slice(2)]) throw new Error("no explorer column " + k);
            if (!S.filters.has(k.slice(2))) S.filters.set(k.slice(2), new Set());
            S.filters.get(k.slice(2)).add(v);
        }
        if (!S.byKey["m." + p.get("m")]) throw new Error("no metric " + p.get("m"));
        return explorer.setMetric(p.get("m"));
    }))(%s)""" % json.dumps(fragments))


def test_report_figure_marks_open_their_items(site, tab, shots):
    """A click on a bar of Figure 3 lands on the explorer showing that value's n questions; then
    every linked mark of every figure (bars, heat-map cells, bands, nodes) is followed."""
    report = (site["root"] / "report.html").resolve().as_uri()
    tab.send("Page.navigate", {"url": report})
    tab.wait("document.readyState === 'complete'")
    # figures and tables are folded under their readings: a reader opens them first
    tab.eval("document.querySelectorAll('details').forEach(d => { d.open = true; })")
    marks = tab.eval("""Array.from(document.querySelectorAll('a.mark')).map(a => ({
        href: a.href, n: Number(a.dataset.n), figure: a.closest('figure').id, label: a.getAttribute('aria-label'),
        focusable: a.tabIndex === 0, inside: a.closest('.plot').querySelector('img') !== null}))""")
    figures = {mark["figure"] for mark in marks}
    assert figures == {"figure-fig2_transitions", "figure-fig3_shift_scores", "figure-fig4_knowledge_id",
                       "figure-fig6_confusion", "figure-parse_failures"}, figures
    assert all(mark["focusable"] and mark["inside"] and mark["label"] and mark["n"] > 0 for mark in marks)
    selector = "#figure-fig3_shift_scores a.mark"
    on_top = tab.eval(f"""(() => {{ const a = document.querySelector({json.dumps(selector)});
        a.scrollIntoView({{block: 'center'}}); const r = a.getBoundingClientRect();
        return document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2) === a; }})()""")
    assert on_top, "the bar's overlay is not what a click at its middle reaches"
    # The hover state a reader sees, for the screenshot.
    centre = tab.eval(f"""(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();
        return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")
    tab.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": centre[0], "y": centre[1]})
    tab.screenshot(shots / "report_figure_link_hover.png")
    href = tab.eval(f"document.querySelector({json.dumps(selector)}).href")
    tab.click(selector)
    tab.wait("location.pathname.endsWith('/explorer/index.html') && document.body.dataset.ready === '1'")
    n = _n_of(site, href)
    assert tab.count() == n == marks[[m["href"] for m in marks].index(href)]["n"] > 0
    assert int(tab.eval("document.getElementById('banner').dataset.tableN")) == n
    counts = _page_counts(tab, [urlsplit(mark["href"]).fragment for mark in marks])
    wrong = [(mark["label"], got, mark["n"]) for mark, got in zip(marks, counts) if got != mark["n"]]
    assert not wrong, wrong[:5]
    metric_marks = [m for m in marks
                    if set(parse_qs(urlsplit(m["href"]).fragment)) == {"f.model", "f.dataset", "f.strategy", "m", "back"}]
    assert len(metric_marks) > 10
    assert all(_n_of(site, m["href"]) == m["n"] for m in metric_marks)
    assert len(marks) > 150


def test_report_examples_open_their_reply(site, tab):
    """An example's name opens the explorer on that one reply, selected in its cell, and the
    explorer's "← Report" link comes back to the example."""
    report = (site["root"] / "report.html").resolve().as_uri()
    tab.send("Page.navigate", {"url": report})
    tab.wait("document.readyState === 'complete'")
    tab.eval("document.querySelectorAll('#examples details').forEach(d => { d.open = true; })")
    examples = tab.eval("""Array.from(document.querySelectorAll('#examples a.item')).map(a => ({
        id: a.id, href: a.href, name: a.textContent}))""")
    assert len(examples) > 5
    first = examples[0]
    tab.click(f"#{first['id']}")
    tab.wait("location.pathname.endsWith('/explorer/index.html') && document.body.dataset.ready === '1'")
    selected = tab.eval("(S => S.selected >= 0 ? window.explorer.value('prompt_id', S.selected) : null)(window.explorer.state)")
    assert selected == first["name"]
    assert tab.eval("document.getElementById('report-link').getAttribute('href')") == f"../report.html#{first['id']}"
    # every example's reply is found (a wrong row key would leave none selected)
    found = tab.eval("""((fragments) => fragments.map(f => {
        const key = new URLSearchParams(f).get("i"); const S = window.explorer.state;
        for (let r = 0; r < S.n; r++) if (window.explorer.rowKey(r) === key) return window.explorer.value("prompt_id", r);
        return null; }))(%s)""" % json.dumps([urlsplit(e["href"]).fragment for e in examples]))
    assert found == [e["name"] for e in examples]


@pytest.fixture(scope="module")
def glm_release(release_dir, tmp_path_factory) -> dict:
    """The GLM-4-9B slice of the paper's release, scored, with its explorer written: built once
    for the release tests below."""
    from bloomqg.reporting.explorer.items import build_items
    from bloomqg.reporting.explorer.write import write_explorer
    from tests.support.release_slice import glm_slice

    if not (release_dir / "generated" / "glm").is_dir():
        pytest.skip(f"the GLM-4-9B run of the paper's release is not at {release_dir / 'generated' / 'glm'}")
    out = tmp_path_factory.mktemp("release")
    votes, reliability, metrics, lines = glm_slice(release_dir, out, n_resamples=5)
    write_explorer(out / "explorer", build_items(votes, reliability=reliability, metrics=metrics, lines=lines),
                   title="GLM slice")
    return {"root": out, "votes": votes, "reliability": reliability, "metrics": metrics, "lines": lines}


def test_release_slice_tables_open_their_items(tab, glm_release, shots):
    """The GLM-4-9B slice of the paper's release: every cell of the release tables opens the
    explorer on its cell's n rows with its value: Table 4's on the published vote lines, the
    others on the questions, which the explorer shows by default."""
    from bloomqg.release.tables import release_tables
    from bloomqg.reporting.explorer.links import metric_fragment
    from bloomqg.reporting.tables.view import read_view

    out, votes, metrics, lines = (glm_release[key] for key in ("root", "votes", "metrics", "lines"))
    written = release_tables(metrics, out / "tables")
    sources = [tuple(source) for path in written if path.suffix == ".json" and path.stem != "paper_comparison"
               for row in read_view(path).sources or [] for source in row if source]
    assert len(sources) >= 20  # Tables 4-6 and the auxiliary tasks, less the values math has none of
    tab.open((out / "explorer" / "index.html").resolve().as_uri())
    assert tab.count() == len(votes) == 3270, "the questions by default, not their published lines as well"
    assert tab.eval("document.getElementById('count').dataset.total") == "3270"
    fragments = [metric_fragment(*source) for source in sources]
    seen = tab.eval("""(fragments) => fragments.map(f => { explorer.openHash(f); const b = document.getElementById('banner');
        return [explorer.state.visible.length, Number(b.dataset.den), b.dataset.value === '' ? null : Number(b.dataset.value),
                [...explorer.state.filters.get('row')].join()]; })""".join(["(", f")({json.dumps(fragments)})"]))
    table = metrics.set_index(["model", "dataset", "strategy", "metric"])
    wrong = [(s, got, int(table.loc[s, "n"])) for s, (got, den, _, _) in zip(sources, seen) if not got == den == table.loc[s, "n"]]
    assert not wrong, wrong[:5]
    values = [(s, value, table.loc[s, "value"]) for s, (_, _, value, _) in zip(sources, seen) if table.loc[s, "n"]]
    assert all(value == pytest.approx(expected) for _, value, expected in values), values[:5]
    kinds = {s[3]: row for s, (*_, row) in zip(sources, seen)}
    assert kinds["unique"] == "published vote line" and kinds["catcons"] == "question"
    # A later line of a text judged before: its own question takes its votes, and it names the other line.
    cs = lines[lines["dataset"] == "cs"]
    repeat = int(cs.index[cs.duplicated(["strategy", "question"])][0])
    assert len(lines.loc[repeat, "joined"]) == 1, "every line of the slice is some original's own"
    key = f"cs/{lines.loc[repeat, 'strategy']}/glm-4-9b/line {lines.loc[repeat, 'line']}"
    tab.eval(f"explorer.openHash('f.dataset=cs&m=unique&i=' + encodeURIComponent({json.dumps(key)}))")
    detail = tab.eval("document.getElementById('detail').innerText")
    assert f"published vote line {lines.loc[repeat, 'line']}" in detail and "the same text is also on" in detail
    tab.screenshot(shots / "explorer_release_line.png")
    tab.eval("explorer.openHash('f.dataset=cs&f.strategy=FGP&m=catcons&mv=rest&i=cs/fgp/glm-4-9b/cs-0007:fgp')")
    tab.screenshot(shots / "explorer_release_slice.png")


def test_a_missing_data_file_is_said_on_the_page(site, tab, tmp_path):
    for name in ("index.html", "explorer.js", "explorer.css"):
        (tmp_path / name).write_bytes((site["root"] / "explorer" / name).read_bytes())
    tab.send("Page.navigate", {"url": (tmp_path / "index.html").resolve().as_uri()})
    error = tab.wait("document.body && document.body.dataset.error")
    assert "data.js is missing" in error
    assert "data.js is missing" in tab.eval("document.getElementById('status').textContent")


def test_release_slice_figures_open_their_items(tab, glm_release):
    """The GLM-4-9B slice of the paper's release: every linked mark of the figures opens the
    explorer on as many questions as it stands for (drawn, not saved: the links are the artists')."""
    import matplotlib

    from bloomqg.reporting.figures.links import linked_marks
    from bloomqg.reporting.figures.style import STYLE
    from bloomqg.reporting.figures.write import _BUILDERS

    out, votes, reliability, metrics = (glm_release[key] for key in ("root", "votes", "reliability", "metrics"))
    with matplotlib.rc_context(STYLE):
        links = [(stem, link) for stem, build in _BUILDERS.items()
                 for _, link in linked_marks(build(metrics, votes, reliability, None))]
    assert {stem for stem, _ in links} >= {"fig2_transitions", "fig3_shift_scores", "fig6_confusion"}
    tab.open((out / "explorer" / "index.html").resolve().as_uri())
    counts = _page_counts(tab, [link.fragment for _, link in links])
    wrong = [(stem, link.label, got, link.n) for (stem, link), got in zip(links, counts) if got != link.n]
    assert not wrong, wrong[:5]


#: Every cell of every report table that leaves its table's visible box (and every box that
#: needs a horizontal scroll), with the <details> opened so their tables are laid out too.
OVERFLOWING_CELLS = """(() => { document.querySelectorAll('details').forEach((d) => { d.open = true; });
  // A table wider than its frame scrolls inside it (overflow-x auto) with its first column sticky:
  // a cell outside the visible box is fine there, and nowhere else.
  const out = [];
  for (const wrap of document.querySelectorAll('.table-wrap')) {
    const box = wrap.getBoundingClientRect();
    const where = (wrap.closest('[id]') || {}).id || '?';
    if (wrap.scrollWidth <= wrap.clientWidth + 1) {
      for (const cell of wrap.querySelectorAll('th, td')) {
        const r = cell.getBoundingClientRect();
        if (r.width && (r.right > box.right + 0.5 || r.left < box.left - 0.5))
          out.push([where, cell.textContent.trim().slice(0, 40), Math.round(r.right - box.right)]);
      }
      continue;
    }
    if (!['auto', 'scroll'].includes(getComputedStyle(wrap).overflowX)) out.push([where, 'runs past a frame that does not scroll']);
    const first = wrap.querySelector('tbody td:first-child, tr td:first-child');
    if (first && getComputedStyle(first).position !== 'sticky') out.push([where, 'scrolls without a sticky first column']);
    if (box.right > innerWidth + 0.5) out.push([where, 'frame past the page', Math.round(box.right - innerWidth)]);
  }
  return out; })()"""


def at_width(tab, width: int) -> None:
    tab.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 950, "deviceScaleFactor": 1, "mobile": False})


@pytest.fixture(scope="module")
def release_report(glm_release) -> Path:
    """The release report's tables (Tables 4–6, the auxiliary tasks and paper_comparison, with
    their intervals, n and daggers) and trust section, built from the GLM-4-9B slice."""
    from bloomqg.metrics.robustness import panel_judges, robustness_table
    from bloomqg.release.tables import release_tables
    from bloomqg.reporting.report import build_report

    out = glm_release["root"]
    robustness = robustness_table(glm_release["votes"], panel_judges(glm_release["reliability"]), n_resamples=20)
    tables = release_tables(glm_release["metrics"], out / "report-tables")
    path = out / "release-report.html"
    build_report(
        path, config={"seed": 0}, all_metrics=glm_release["metrics"], votes=glm_release["votes"],
        reliability=glm_release["reliability"], generations=None, generation_provenance=[], judgment_provenance=[],
        ledger=pd.DataFrame(columns=["judge", "model", "dataset", "strategy", "requests", "cached", "prompt_tokens",
                                     "completion_tokens", "cost_usd"]),
        table_paths=tables, figure_paths=[], git_commit="0" * 40, package_versions={}, robustness=robustness,
        title="the paper's release reproduced",
    )
    return path


def overflowing_cells_at(tab, page: Path, width: int, shot: Path) -> list:
    """The table cells of ``page`` that overflow their table's visible box at ``width`` px
    (a screenshot to ``shot``); the tab is back at 1600 px afterwards, the page still open."""
    at_width(tab, width)
    try:
        tab.send("Page.navigate", {"url": page.resolve().as_uri()})
        tab.wait("document.readyState === 'complete'")
        overflowing = tab.eval(OVERFLOWING_CELLS)
        tab.screenshot(shot)
    finally:
        at_width(tab, 1600)
    return overflowing


@pytest.mark.parametrize("width", [1280, 1920])
def test_no_report_table_cell_leaves_its_box(site, tab, width, shots):
    overflowing = overflowing_cells_at(tab, site["root"] / "report.html", width, shots / f"report_{width}.png")
    assert not overflowing, overflowing[:10]


@pytest.mark.parametrize("width", [1280, 1920])
def test_no_release_report_table_cell_leaves_its_box(release_report, tab, width, shots):
    overflowing = overflowing_cells_at(tab, release_report, width, shots / f"release_report_{width}.png")
    assert tab.eval("document.querySelectorAll('#table-paper_comparison td').length") > 0
    assert tab.eval("document.querySelectorAll('#trust td').length") > 0  # agreement, AC1, gate, robustness
    assert not overflowing, overflowing[:10]


@pytest.mark.parametrize("width", [1280, 1920])
def test_the_explorer_shows_both_questions_side_by_side(site, tab, width):
    at_width(tab, width)
    try:
        tab.open(explorer_url(site))
        cut = tab.eval("""Array.from(document.querySelectorAll('#thead div')).filter((e) => e.scrollWidth > e.clientWidth + 1)
            .map((e) => e.textContent)""")
        assert not cut, f"column headers cut at {width} px: {cut}"
        boxes = tab.eval("""(() => { const list = document.getElementById('viewport').getBoundingClientRect();
            const box = (k) => { const e = document.querySelector(`#thead [data-sort="${k}"]`);
                                 if (!e) return null; const r = e.getBoundingClientRect(); return [r.left, r.right]; };
            return {list: [list.left, list.right], generated: box('new_question'), original: box('original_question')}; })()""")
    finally:
        at_width(tab, 1600)
    generated, original, (left, right) = boxes["generated"], boxes["original"], boxes["list"]
    assert generated and original, boxes
    assert original[0] >= generated[1], "the original beside the generated question, to its right"
    for name, (a, b) in (("generated", generated), ("original", original)):
        assert left <= a and b <= right + 0.5, (name, boxes)  # in sight without scrolling
        # at 1280 px the levels, shift and usable columns stand whole beside the two questions (one model's
        # list does not scroll sideways); the selected row's detail shows both questions whole
        assert b - a >= (120 if width == 1280 else 220), (name, b - a)


def test_the_explorer_links_back_to_the_report_beside_it(site, tab):
    tab.open(explorer_url(site))
    back = tab.eval("(e => e ? e.getAttribute('href') : null)(document.getElementById('report-link'))")
    assert back == "../report.html"
    assert (site["root"] / "explorer" / back).resolve() == (site["root"] / "report.html").resolve()
