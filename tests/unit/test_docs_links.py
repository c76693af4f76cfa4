"""Every relative link of the README and of docs/ leads somewhere: the file exists and, where the
link names a heading (``page.md#anchor``), the page has that heading."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: [text](target) outside code; images and plain links alike
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {github_anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def links(page: Path) -> list[str]:
    text = CODE_SPAN.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    return LINK.findall(text)


def test_the_readme_links_every_docs_page():
    readme_links = {target.split("#")[0] for target in links(REPO / "README.md")}
    for page in sorted((REPO / "docs").glob("*.md")):
        assert f"docs/{page.name}" in readme_links, f"docs/{page.name} is not linked from README.md"


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` that lead to no file or to no heading of their page."""
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: — not checked offline
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no file {resolved}")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path):
    broken = broken_links(page)
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


def test_the_checker_finds_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other page\n", encoding="utf-8")
    page.write_text("# Title\n\n[ok](#title) [ok](other.md#other-page) [web](https://example.org)\n"
                    "[bad](missing.md) [bad anchor](other.md#nowhere) `[code](skipped.md)`\n", encoding="utf-8")
    broken = broken_links(page)
    assert len(broken) == 2, broken
    assert broken[0].startswith("missing.md: no file") and broken[1].startswith("other.md#nowhere: no heading")
