"""The annotation form in headless Chromium: an annotator types an id, fills items with the mouse
and the keyboard, reloads (answers come back from local storage), downloads the CSV; the import
reads it back to the same values and the agreement with the panel is what the answers give."""

from __future__ import annotations

import time

import pandas as pd
import pytest

from bloomqg.annotation.form import write_form
from bloomqg.annotation.panel_agreement import human_panel_agreement
from bloomqg.annotation.sample import annotation_items
from bloomqg.annotation.sheets import read_sheets
from bloomqg.schemas import VOTES
from tests.integration.test_report_browser import CHROMIUM_NAMES, DevToolsPipe, find_chromium

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def _votes() -> pd.DataFrame:
    """Six judged questions; texts with commas, quotes, a newline and Chinese, to test quoting."""
    texts = ['Design a stack, then "push" twice.', "Explain\na queue.", "什么是哈希表，如何处理冲突？",
             "List two trees.", "Compare BFS and DFS.", "Write a heap."]
    rows = []
    for i, text in enumerate(texts):
        rows.append({
            "prompt_id": f"cs-{i:04d}:fgp", "item_id": f"cs-{i:04d}", "dataset": "cs", "strategy": "fgp",
            "model": "m", "original_question": f"Original {i}, with a comma", "original_bloom_level": "Apply",
            "original_knowledge_units": ["Stacks"], "new_question": text, "parse_status": "ok", "n_judges": 3,
            "unique": i != 1, "readable": True, "answerable": i != 2, "bloom_level": "Analyze",
            "knowledge_units": ["Stacks"], "alpha_gated": False,
        })
    frame = pd.DataFrame(rows)
    for column in VOTES.names:
        if column not in frame:
            frame[column] = None
    return frame[VOTES.names]


@pytest.fixture(scope="module")
def chromium():
    executable = find_chromium()
    if executable is None:
        pytest.skip(f"no headless Chromium found (looked for {', '.join(CHROMIUM_NAMES)}); "
                    "install it with `apt-get install chromium` or `make test-browser-deps`")
    return executable


def _evaluate(browser: DevToolsPipe, session: str, expression: str):
    reply = browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
    if "exceptionDetails" in reply:
        raise AssertionError(f"{expression!r} threw: {reply['exceptionDetails']}")
    return reply["result"].get("value")


def _key(browser: DevToolsPipe, session: str, key: str) -> None:
    for kind in ("keyDown", "keyUp"):
        params = {"type": kind, "key": key}
        if kind == "keyDown" and len(key) == 1:
            params["text"] = key
        if key == "Enter":
            params.update({"code": "Enter", "windowsVirtualKeyCode": 13})
        browser.send("Input.dispatchKeyEvent", params, session)


def _load(browser: DevToolsPipe, session: str, url: str) -> None:
    browser.events.clear()
    browser.send("Page.navigate", {"url": url}, session)
    browser.wait_for_event("Page.loadEventFired", session)


def test_fill_reload_download_and_import(chromium, tmp_path):
    items = annotation_items([_votes()], items_per_cell=6, seed=0, knowledge_units={"cs": ["Stacks", "Queues"]})
    form = tmp_path / "form.html"
    write_form(items, form, title="Browser test")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    ids = items["annotation_id"].tolist()

    browser = DevToolsPipe(chromium, tmp_path / "profile")
    try:
        browser.send("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Network"):
            browser.send(f"{domain}.enable", session=session)
        _load(browser, session, form.resolve().as_uri())
        assert _evaluate(browser, session, "document.getElementById('items').hidden") is True

        # The id is asked once: typed, confirmed with Enter.
        _evaluate(browser, session, "document.getElementById('annotator').focus()")
        browser.send("Input.insertText", {"text": "expert_1"}, session)
        _key(browser, session, "Enter")
        assert _evaluate(browser, session, "document.querySelectorAll('.item').length") == 6

        # Item 1 by mouse: unique yes, readable yes, answerable no, Create, Stacks + Queues, a note.
        first = ids[0]
        for control in (f"{first}-unique-yes", f"{first}-readable-yes", f"{first}-answerable-no",
                        f"{first}-bloom_level-Create", f"{first}-unit-0", f"{first}-unit-1"):
            _evaluate(browser, session, f"document.getElementById('{control}').click()")
        _evaluate(browser, session, f"""(() => {{ const t = document.getElementById('{first}-notes');
            t.value = 'says "push", twice'; t.dispatchEvent(new Event('input', {{bubbles: true}})); }})()""")
        # Item 2 by keyboard: j moves to it, 4 sets Analyze; the rest by click.
        _evaluate(browser, session, f"document.getElementById('item-{first}').focus()")
        _key(browser, session, "j")
        second = ids[1]
        assert _evaluate(browser, session, "document.activeElement.dataset.id") == second
        _key(browser, session, "4")
        for control in (f"{second}-unique-no", f"{second}-readable-yes", f"{second}-answerable-yes", f"{second}-unit-0"):
            _evaluate(browser, session, f"document.getElementById('{control}').click()")
        # Item 3 half done: it must stay out of the CSV.
        _evaluate(browser, session, f"document.getElementById('{ids[2]}-unique-yes').click()")
        assert _evaluate(browser, session, "document.getElementById('progress').textContent") == "2 of 6 complete"

        # A reload keeps everything (local storage) and does not ask for the id again.
        _load(browser, session, form.resolve().as_uri())
        assert _evaluate(browser, session, "document.getElementById('annotator-box').hidden") is True
        assert _evaluate(browser, session, f"document.getElementById('{second}-bloom_level-Analyze').checked") is True
        assert _evaluate(browser, session, "document.getElementById('progress').textContent") == "2 of 6 complete"

        _evaluate(browser, session, "document.getElementById('download').click()")
        csv_path = downloads / "annotations-expert_1.csv"
        deadline = time.monotonic() + 30
        while not csv_path.is_file() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert csv_path.is_file(), f"no download in {downloads}: {list(downloads.iterdir())}"
        note = _evaluate(browser, session, "document.getElementById('download-note').textContent")
        assert note == "2 complete item(s) written; 4 incomplete item(s) left out"
        external = [e["params"]["request"]["url"] for e in browser.events
                    if e.get("method") == "Network.requestWillBeSent"
                    and not e["params"]["request"]["url"].startswith(("file:", "data:", "about:", "blob:"))]
        assert not external, f"the form requested {external}"
    finally:
        browser.close()

    ratings = read_sheets([csv_path], items)
    got = {(r.annotation_id, r.criterion): r.value for r in ratings.itertuples(index=False)}
    assert got == {
        (first, "unique"): True, (first, "readable"): True, (first, "answerable"): False,
        (first, "bloom_level"): "Create", (first, "knowledge_units"): frozenset({"Stacks", "Queues"}),
        (second, "unique"): False, (second, "readable"): True, (second, "answerable"): True,
        (second, "bloom_level"): "Analyze", (second, "knowledge_units"): frozenset({"Stacks"}),
    }
    assert ratings["notes"].dropna().tolist() == ['says "push", twice'] * 5
    assert set(ratings["annotator"]) == {"expert_1"}

    # Agreement computed independently from the answers above and the panel in the key.
    key = items.set_index("annotation_id")
    agreement = human_panel_agreement(items, ratings, n_resamples=50)
    cell = agreement[(agreement["model"] == "m") & (agreement["statistic"] == "percent_agreement")]
    for criterion in ("unique", "readable", "answerable", "bloom_level"):
        expected = [got[(item, criterion)] == key.at[item, f"panel_{criterion}"] for item in (first, second)]
        row = cell[cell["criterion"] == criterion].iloc[0]
        assert row["n"] == 2 and row["value"] == pytest.approx(100.0 * sum(expected) / 2), criterion
