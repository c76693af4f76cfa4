"""Check a `snakemake --report report.zip`: unpacked, every link of every page in it resolves
inside it, and the workflow description shows the config's values (no ``None``, no template)."""

from __future__ import annotations

import html
import json
import re
import zipfile
from pathlib import Path

_LINK = re.compile(r"""(?:href|src)\s*=\s*["']([^"']+)["']""")
_RAW = re.compile(r"""data/raw/[0-9a-f]+/[^"'\\ <>]+""")


def unpack(bundle: Path, into: Path) -> Path:
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(into)
    (index,) = into.glob("*/report.html")
    return index


def broken_links(root: Path) -> list[tuple[str, str]]:
    """(page, link) for every relative link of an HTML page under ``root`` that leads to no file
    (a fragment or query is dropped first), and every ``data/raw/…`` path Snakemake's page names."""
    broken = []
    for page in sorted(root.rglob("*.html")):
        text = page.read_text(encoding="utf-8", errors="replace")
        links = [html.unescape(link) for link in _LINK.findall(text)]
        if page.parent == root:  # Snakemake's own page: its results are named in its scripts' JSON
            links += _RAW.findall(text.replace("\\/", "/"))
        for link in links:
            if link.startswith(("#", "data:", "http:", "https:", "mailto:", "javascript:", "blob:")) or "${" in link:
                continue
            target = (page.parent / link.split("#")[0].split("?")[0]).resolve()
            if not target.exists():
                broken.append((str(page.relative_to(root)), link))
    return broken


def workflow_description(index: Path) -> str:
    """The rendered text of report/workflow.rst inside Snakemake's page."""
    text = index.read_text(encoding="utf-8")
    match = re.search(r"var workflow_desc\s*=\s*(\".*?\");", text, re.S) or re.search(r"workflow_desc\s*=\s*(\".*?\")", text, re.S)
    assert match, f"{index}: no workflow description found"
    return re.sub(r"<[^>]+>", "", html.unescape(json.loads(match.group(1))))
