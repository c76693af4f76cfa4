"""Reading a report as a person does, in headless Chromium: the page's height with everything
collapsed as it opens, whether the Answer is on the first screen, and, with every ``<details>``
opened, each word or number split across two lines (a broken token) and each table's width
against its frame. Used by the browser reading test and by ``benchmarks``-style measurements.

A *token* is a run of non-space characters; a line break right after a hyphen, a dash or a
slash inside it is ordinary typesetting ("leave-one-/judge-out"), any other break inside it is
a broken token ("Mo/del", "0./21/9").
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from tests.support.devtools import DevToolsPipe

#: Measured with the page as it opens (details closed), then with every details open.
MEASURE_JS = r"""(() => {
  const out = {width: innerWidth, viewport: innerHeight, height: document.documentElement.scrollHeight};
  const headline = document.querySelector('#answer .headline');
  if (headline) {
    const box = headline.getBoundingClientRect();
    out.answerHeadline = headline.textContent.trim();
    out.answerOnFirstScreen = box.top >= 0 && box.bottom <= innerHeight;
  } else { out.answerHeadline = null; out.answerOnFirstScreen = false; }
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  out.openHeight = document.documentElement.scrollHeight;
  out.pageScrollWidth = document.documentElement.scrollWidth;
  const broken = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode, text = node.textContent;
    const parent = node.parentElement;
    if (!parent || parent.closest('style, script, title') || !parent.getClientRects().length) continue;
    const re = /[^\s\-–—\/]+[\-–—\/]?|[\-–—\/]/g;
    let m;
    while ((m = re.exec(text))) {
      const range = document.createRange();
      range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
      const tops = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (tops.size > 1) {
        const where = parent.closest('[id]');
        broken.push({token: m[0], where: where ? where.id : parent.tagName});
      }
    }
  }
  out.broken = broken;
  out.tables = Array.from(document.querySelectorAll('table')).map(t => {
    const frame = t.closest('.table-wrap') || t.parentElement;
    const box = frame.getBoundingClientRect();
    const where = t.closest('[id]');
    return {where: where ? where.id : '', tableWidth: t.scrollWidth, frameWidth: frame.clientWidth,
            scrolls: getComputedStyle(frame).overflowX === 'auto' || getComputedStyle(frame).overflowX === 'scroll',
            frameRight: Math.round(box.right)};
  });
  return out;
})()"""


def console_errors(events: list[dict]) -> list[str]:
    """Exceptions, console errors and error log entries among the DevTools events."""
    errors = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            errors.append(str(params["exceptionDetails"].get("text")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            errors.append(json.dumps(params.get("args"))[:300])
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            errors.append(str(params["entry"].get("text")))
    return errors


def read_report(chromium: str, report: Path, width: int, profile_dir: Path, shots_dir: Path,
                height: int = 900) -> dict:
    """Open ``report`` at ``width`` × ``height`` CSS px; :data:`MEASURE_JS`'s figures, the
    console errors and two screenshots (the first screen, and the whole page as it opens)."""
    browser = DevToolsPipe(chromium, profile_dir)
    try:
        session = browser.open_page(width, height)
        browser.send("Page.navigate", {"url": report.resolve().as_uri()}, session)
        browser.wait_for_event("Page.loadEventFired", session)
        page_height = browser.send("Runtime.evaluate", {"returnByValue": True,
                                   "expression": "document.documentElement.scrollHeight"}, session)["result"]["value"]
        shots_dir.mkdir(parents=True, exist_ok=True)
        shots = {}
        for name, clip_height in (("first_screen", height), ("page", min(page_height, 16000))):
            clip = {"x": 0, "y": 0, "width": width, "height": clip_height, "scale": 1}
            data = browser.send("Page.captureScreenshot",
                                {"format": "png", "captureBeyondViewport": True, "clip": clip}, session)["data"]
            shots[name] = shots_dir / f"report_{width}px_{name}.png"
            shots[name].write_bytes(base64.b64decode(data))
        state = browser.send("Runtime.evaluate", {"returnByValue": True, "expression": MEASURE_JS},
                             session)["result"]["value"]
        events = list(browser.events)
    finally:
        browser.close()
    return {**state, "console_errors": console_errors(events), "screenshots": shots}
