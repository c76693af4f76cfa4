"""The report read in headless Chromium at 1280 and 1920 px, as a person reads it: the Answer on
the first screen, no word or number broken across two lines (every ``<details>`` opened), each
table no wider than its frame's page (a wide one scrolls inside its frame), no console error, and
the page's height as it opens (at most :data:`MAX_HEIGHT` at 1280 px for the default study).

Two reports: one shaped like the default study (one model; cs and social under CoT and FGP, math
under FGP only) built from synthetic frames, always; and the default study's own
``results/report.html`` when ``make study`` has written it in this checkout (or the report
``BLOOMQG_REPORT`` names), skipped with the reason otherwise. Screenshots (the first screen and
the whole page) are kept under the test's temp dir, or ``BLOOMQG_SCREENSHOT_DIR``; their paths
are printed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.devtools import chromium_or_skip
from tests.support.report_reading import read_report

pytestmark = [pytest.mark.browser, pytest.mark.integration]

#: The default study's page at 1280 px, as it opens (the issue's aim).
MAX_HEIGHT = 8000
WIDTHS = (1280, 1920)
DEFAULT_SHAPE = {"cs": ["cot", "fgp"], "math": ["fgp"], "social": ["cot", "fgp"]}


def default_shaped_report(out: Path) -> Path:
    """A report of one model over the default study's design, from synthetic frames."""
    from bloomqg.metrics.paired import paired_comparisons
    from bloomqg.reporting.figures.write import write_figures
    from bloomqg.reporting.report import build_report
    from bloomqg.reporting.tables.write import write_tables
    from tests.support.synthetic import synthetic_study, trust_frames

    study = synthetic_study(n_models=1, n_items=24, cells=DEFAULT_SHAPE)
    reliability, robustness = trust_frames(study)
    paired = paired_comparisons(study.votes, n_resamples=50)
    tables = write_tables(study.metrics, study.datasets, reliability, out / "tables", paired=paired)
    figures = write_figures(study.metrics, study.votes, reliability, study.correlations, out / "figures")
    build_report(
        out / "report.html", config=study.config, all_metrics=study.metrics, votes=study.votes,
        reliability=reliability, robustness=robustness, generations=study.generations,
        generation_provenance=study.generation_provenance, judgment_provenance=study.judgment_provenance,
        ledger=study.ledger, table_paths=tables, figure_paths=figures, correlations=study.correlations,
        paired=paired, git_commit="0" * 40, package_versions={"pandas": "3.0.0"},
        explorer_href="explorer/index.html",
    )
    return out / "report.html"


@pytest.fixture(scope="module", params=["default-shaped", "default-study"])
def report(request, tmp_path_factory, repo) -> Path:
    if request.param == "default-shaped":
        return default_shaped_report(tmp_path_factory.mktemp("default-shaped"))
    path = Path(os.environ.get("BLOOMQG_REPORT") or repo / "results" / "report.html")
    if not path.is_file():
        pytest.skip(f"no default study report at {path}: run `make study` (or set BLOOMQG_REPORT) to read it too")
    return path


@pytest.fixture(scope="module")
def readings(report, tmp_path_factory) -> dict[int, dict]:
    chromium = chromium_or_skip()
    shots = Path(os.environ.get("BLOOMQG_SCREENSHOT_DIR") or tmp_path_factory.mktemp("reading-screenshots"))
    out = {}
    for width in WIDTHS:
        out[width] = read_report(chromium, report, width, tmp_path_factory.mktemp("chromium"), shots / report.parent.name)
        print(f"{report} at {width} px: height {out[width]['height']} px ({out[width]['openHeight']} px with "
              f"every details open), broken tokens {len(out[width]['broken'])}, screenshots "
              f"{', '.join(str(p) for p in out[width]['screenshots'].values())}")
    return out


@pytest.mark.parametrize("width", WIDTHS)
def test_no_word_or_number_breaks_across_lines(readings, width):
    broken = readings[width]["broken"]
    assert not broken, f"{len(broken)} broken tokens at {width} px, e.g. {broken[:12]}"


@pytest.mark.parametrize("width", WIDTHS)
def test_the_answer_is_on_the_first_screen(readings, width):
    state = readings[width]
    assert state["answerHeadline"] and state["answerOnFirstScreen"], state["answerHeadline"]


@pytest.mark.parametrize("width", WIDTHS)
def test_tables_scroll_inside_their_frames_and_the_page_does_not(readings, width):
    state = readings[width]
    assert state["pageScrollWidth"] <= width, f"the page scrolls sideways: {state['pageScrollWidth']} > {width}"
    for table in state["tables"]:
        assert table["frameRight"] <= width, table
        assert table["tableWidth"] <= table["frameWidth"] or table["scrolls"], table


@pytest.mark.parametrize("width", WIDTHS)
def test_no_console_errors(readings, width):
    assert not readings[width]["console_errors"], readings[width]["console_errors"]


def test_the_page_is_short_at_1280_px(readings):
    height = readings[1280]["height"]
    assert height <= MAX_HEIGHT, f"the page is {height} px long at 1280 px (aim: ≤ {MAX_HEIGHT})"
    for path in readings[1280]["screenshots"].values():
        assert path.stat().st_size > 10_000, f"{path} looks empty"


def test_every_number_the_default_study_prints_is_a_fact(report):
    """One fact per number (tests/support/report_facts.py): each number of the report's sections
    that state quantities is a row of the facts frame written beside it."""
    import pandas as pd

    from bloomqg.reporting.report import facts_path
    from tests.support.report_facts import unmatched_numbers

    facts = facts_path(report)
    assert facts.is_file(), f"{facts} missing: the report was built before its facts frame; rerun `make study`"
    assert unmatched_numbers(report.read_text(encoding="utf-8"), pd.read_parquet(facts)) == []


def test_the_default_studys_explorer_list_fits_at_1280_px(repo, tmp_path):
    """Its default columns (dataset, strategy, both questions, levels, shift, usable) stand whole
    beside the filters and the detail pane: a reader missed the last column when the list scrolled."""
    import time

    from tests.support.devtools import DevToolsPipe

    explorer = Path(os.environ.get("BLOOMQG_REPORT") or repo / "results" / "report.html").parent / "explorer" / "index.html"
    if not explorer.is_file():
        pytest.skip(f"no default study explorer at {explorer}: run `make study` to read it too")
    browser = DevToolsPipe(chromium_or_skip(), tmp_path)
    try:
        session = browser.open_page(1280, 900)
        browser.send("Page.navigate", {"url": explorer.resolve().as_uri()}, session)
        browser.wait_for_event("Page.loadEventFired", session)
        deadline = time.monotonic() + 10
        while True:  # the list is drawn after the data script has run
            widths = browser.send("Runtime.evaluate", {"returnByValue": True, "expression": (
                "(v => v && document.querySelector('#thead div') ? [v.scrollWidth, v.clientWidth] : null)"
                "(document.getElementById('viewport'))")}, session)["result"].get("value")
            if widths or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        browser.close()
    assert widths, "the explorer drew no list"
    assert widths[0] <= widths[1], f"the list scrolls sideways at 1280 px ({widths[0]} px in {widths[1]})"
