"""The HTML report in a real browser: headless Chromium, driven over the DevTools protocol.

Builds a report from synthetic frames (or checks the one named by ``BLOOMQG_REPORT``), opens it
in headless Chromium and fails on a broken or missing image, a console error, an uncaught
exception, a script, or any request that leaves the file (the report must be self-contained).
Screenshots are written to ``BLOOMQG_SCREENSHOT_DIR`` when set (else the test's temp dir).

The DevTools client is :mod:`tests.support.devtools` (stdlib only).
"""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

import pytest

from tests.support.devtools import DevToolsPipe, chromium_or_skip

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture(scope="module")
def report_path(tmp_path_factory) -> Path:
    given = os.environ.get("BLOOMQG_REPORT")
    if given:
        path = Path(given)
        if not path.is_file():
            pytest.fail(f"BLOOMQG_REPORT={given} is not a file")
        return path
    from bloomqg.reporting.figures.write import write_figures
    from bloomqg.reporting.report import build_report
    from bloomqg.reporting.tables.human import human_agreement
    from bloomqg.reporting.tables.write import write_tables
    from tests.support.synthetic import synthetic_study, trust_frames

    out = tmp_path_factory.mktemp("report")
    study = synthetic_study(n_models=3, n_items=18)
    tables = write_tables(study.metrics, study.datasets, study.reliability, out / "tables", paired=study.paired,
                          human=human_agreement(study.votes, study.human_annotations))
    figures = write_figures(study.metrics, study.votes, study.reliability, study.correlations, out / "figures")
    path = out / "report.html"
    reliability, robustness = trust_frames(study)  # α, AC1, Dawid–Skene and robustness from the ballots
    build_report(
        path, config=study.config, all_metrics=study.metrics, votes=study.votes, reliability=reliability,
        robustness=robustness,
        generations=study.generations, generation_provenance=study.generation_provenance,
        judgment_provenance=study.judgment_provenance, ledger=study.ledger, table_paths=tables,
        figure_paths=figures, correlations=study.correlations, paired=study.paired, git_commit="0" * 40,
        package_versions={"pandas": "3.0.0"},
    )
    return path


@pytest.fixture(scope="module")
def rendered(report_path, tmp_path_factory) -> dict:
    browser = DevToolsPipe(chromium_or_skip(), tmp_path_factory.mktemp("chromium-profile"))
    try:
        session = browser.open_page(1280, 1000, ("Page", "Runtime", "Log", "Network"))
        browser.send("Page.navigate", {"url": report_path.resolve().as_uri()}, session)
        browser.wait_for_event("Page.loadEventFired", session)
        state = browser.send("Runtime.evaluate", {"returnByValue": True, "expression": """(() => ({
            images: Array.from(document.images).map(i => ({alt: i.alt, complete: i.complete,
                                                            width: i.naturalWidth, height: i.naturalHeight})),
            scripts: document.scripts.length,
            tables: document.querySelectorAll('table').length,
            details: document.querySelectorAll('details').length,
            height: document.documentElement.scrollHeight,
            figuresTop: document.getElementById('figures').getBoundingClientRect().top + window.scrollY,
            tablesTop: document.getElementById('tables').getBoundingClientRect().top + window.scrollY,
            trustTop: document.getElementById('trust').getBoundingClientRect().top + window.scrollY,
            trust: {
                heading: document.querySelector('#trust h2').textContent,
                coefficients: document.querySelectorAll('#trust-coefficients-table tbody tr').length,
                coefficientHeader: Array.from(document.querySelectorAll('#trust-coefficients-table thead th')).map(t => t.textContent),
                effective: document.querySelectorAll('#trust-effective-table tbody tr').length,
                judges: document.querySelectorAll('#trust-judges-table tbody tr').length,
                robustness: Array.from(document.querySelectorAll('#trust-robustness-table tbody tr')).map(r => r.cells.length > 5 ? r.cells[5].textContent : ''),
                figure: (i => i ? i.naturalWidth : 0)(document.querySelector('#figure-trust-judges img')),
                navLink: !!document.querySelector('nav a[href="#trust"]'),
            },
            title: document.title,
        }))()"""}, session)["result"]["value"]
        shots_dir = Path(os.environ.get("BLOOMQG_SCREENSHOT_DIR") or tmp_path_factory.mktemp("screenshots"))
        shots_dir.mkdir(parents=True, exist_ok=True)
        shots = {}
        for name, top in (("top", 0), ("figures", state["figuresTop"]), ("tables", state["tablesTop"]),
                          ("trust", state["trustTop"])):
            clip = {"x": 0, "y": top, "width": 1280, "height": 1800, "scale": 1}
            data = browser.send("Page.captureScreenshot",
                                {"format": "png", "captureBeyondViewport": True, "clip": clip}, session)["data"]
            shots[name] = shots_dir / f"report_{name}.png"
            shots[name].write_bytes(base64.b64decode(data))
        time.sleep(0.3)  # let late console/log events arrive
        events = list(browser.events)
    finally:
        browser.close()
    return {"state": state, "events": events, "screenshots": shots}


def test_every_image_loads(rendered):
    images = rendered["state"]["images"]
    assert images, "the report has no <img>"
    broken = [i["alt"] for i in images if not (i["complete"] and i["width"] > 0 and i["height"] > 0)]
    assert not broken, f"images that did not load: {broken}"


def test_no_console_errors_or_exceptions(rendered):
    errors = []
    for event in rendered["events"]:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            errors.append(params["exceptionDetails"].get("text"))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            errors.append(json.dumps(params.get("args"))[:300])
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            errors.append(params["entry"].get("text"))
    assert not errors, f"console errors: {errors}"


def test_report_is_self_contained(rendered):
    assert rendered["state"]["scripts"] == 0, "the report must not carry scripts"
    external = [
        e["params"]["request"]["url"][:120] for e in rendered["events"]
        if e.get("method") == "Network.requestWillBeSent"
        and not e["params"]["request"]["url"].startswith(("file:", "data:", "about:"))
    ]
    assert not external, f"the report requested external resources: {external}"


def test_report_structure_and_screenshots(rendered):
    state = rendered["state"]
    assert state["tables"] >= 5 and state["details"] >= 3, state
    assert state["height"] > 2000, "the page is suspiciously short"
    for path in rendered["screenshots"].values():
        # A blank or failed capture is tiny; a rendered page with text and figures is not.
        assert path.stat().st_size > 20_000, f"{path} looks empty"


def test_the_judges_trust_section_renders_its_tables_figure_and_verdicts(rendered):
    trust = rendered["state"]["trust"]
    assert trust["heading"] == "Can these judges be trusted?" and trust["navLink"]
    assert trust["coefficients"] >= 5 and trust["effective"] >= 1 and trust["judges"] >= 3
    assert any("α" in h for h in trust["coefficientHeader"]) and any("AC1" in h for h in trust["coefficientHeader"])
    assert any("Prevalence" in h for h in trust["coefficientHeader"])
    assert trust["figure"] > 0, "the Dawid–Skene figure did not load"
    assert trust["robustness"] and all(v for v in trust["robustness"]), trust["robustness"]
