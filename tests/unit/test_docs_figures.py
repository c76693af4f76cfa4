"""A figure quoted on more than one page of the README and docs/ carries a tag, and every tag of
one name carries the same value.

The tag is an HTML comment around the figure, invisible on GitHub:
``<!-- figure: suite-wall-time -->18 min 51 s<!-- /figure -->``. Names are lower-case words
joined by dashes; a tag opens and closes on one line, and never at a line's start (CommonMark
would read that line as an HTML block, not as text). Values compare with emphasis (``*``) and
runs of spaces ignored. A comment that begins with "figure" in any other shape is refused, so a
misspelt tag cannot drop out of the check unseen.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO

OPEN = re.compile(r"<!-- figure: ([a-z0-9]+(?:-[a-z0-9]+)*) -->")
CLOSE = "<!-- /figure -->"
TAG = re.compile(r"<!-- figure: ([a-z0-9]+(?:-[a-z0-9]+)*) -->(.*?)<!-- /figure -->")
#: any HTML comment whose text starts with "figure" or "/figure", well-formed or not
FIGURE_COMMENT = re.compile(r"<!--\s*/?\s*figures?\b.*?-->", re.IGNORECASE)


@dataclass(frozen=True)
class Figure:
    name: str
    value: str
    where: str  # "docs/testing.md:183"


def pages(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def normalised(value: str) -> str:
    return " ".join(value.replace("*", "").split())


def read_figures(root: Path) -> tuple[list[Figure], list[str]]:
    """Every tagged figure of the README and docs/ under ``root``, and every malformed tag."""
    figures: list[Figure] = []
    errors: list[str] = []
    for page in pages(root):
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            where = f"{page.relative_to(root)}:{number}"
            tagged = TAG.findall(line)
            figures += [Figure(name, normalised(value), where) for name, value in tagged]
            well_formed = len(OPEN.findall(line)) + line.count(CLOSE)
            if len(FIGURE_COMMENT.findall(line)) != well_formed or well_formed != 2 * len(tagged):
                errors.append(f"{where}: a figure tag not of the form "
                              f"'<!-- figure: some-name -->value<!-- /figure -->' on one line: {line.strip()}")
            if tagged and line.lstrip().startswith("<!--"):
                errors.append(f"{where}: a figure tag starts the line (CommonMark reads it as an HTML block)")
            errors += [f"{where}: figure {name} has an empty value" for name, value in tagged if not value.strip()]
    return figures, errors


def disagreements(figures: list[Figure]) -> list[str]:
    """One line per figure name that carries more than one value, naming where each value is."""
    by_name: dict[str, dict[str, list[str]]] = {}
    for figure in figures:
        by_name.setdefault(figure.name, {}).setdefault(figure.value, []).append(figure.where)
    return [
        f"figure {name}: " + "; ".join(f"{value!r} at {', '.join(where)}" for value, where in values.items())
        for name, values in sorted(by_name.items())
        if len(values) > 1
    ]


def test_every_tag_is_well_formed():
    _, errors = read_figures(REPO)
    assert not errors, "\n".join(errors)


def test_each_tagged_figure_has_one_value():
    figures, _ = read_figures(REPO)
    problems = disagreements(figures)
    assert not problems, "\n".join(problems)


def test_the_figures_quoted_on_several_pages_are_tagged_on_each():
    figures, _ = read_figures(REPO)
    pages_of: dict[str, set[str]] = {}
    for figure in figures:
        pages_of.setdefault(figure.name, set()).add(figure.where.split(":")[0])
    assert {"README.md", "docs/testing.md"} <= pages_of.get("suite-wall-time", set())
    assert {"README.md", "docs/testing.md"} <= pages_of.get("suite-test-count", set())
    assert {"README.md", "docs/judge-reliability.md"} <= pages_of.get("learned-level-agreement", set())


def planted_copy(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    for page in pages(REPO):
        shutil.copy(page, tmp_path / page.relative_to(REPO))
    return tmp_path


def test_a_planted_disagreement_is_named_with_its_file_line_and_both_values(tmp_path):
    root = planted_copy(tmp_path)
    page = root / "docs" / "testing.md"
    text = page.read_text(encoding="utf-8")
    match = re.search(r"<!-- figure: suite-wall-time -->(.*?)<!-- /figure -->", text)
    assert match, "docs/testing.md tags the suite's wall time"
    line = text[: match.start()].count("\n") + 1
    page.write_text(text.replace(match.group(0), "<!-- figure: suite-wall-time -->9 min 59 s<!-- /figure -->"),
                    encoding="utf-8")
    figures, errors = read_figures(root)
    assert not errors
    (problem,) = disagreements(figures)
    assert problem.startswith("figure suite-wall-time: ")
    assert f"'9 min 59 s' at docs/testing.md:{line}" in problem
    assert f"{normalised(match.group(1))!r} at README.md:" in problem


def test_a_misspelt_or_unclosed_tag_is_refused(tmp_path):
    root = planted_copy(tmp_path)
    readme = root / "README.md"
    original = readme.read_text(encoding="utf-8")
    for bad in ("<!-- figure suite-wall-time -->1 s<!-- /figure -->",   # no colon
                "<!-- figure: Suite_Wall -->1 s<!-- /figure -->",       # not lower-case-with-dashes
                "<!--figure: suite-wall-time-->1 s<!-- /figure -->",    # spacing
                "<!-- figures: suite-wall-time -->1 s<!-- /figure -->",
                "<!-- figure: suite-wall-time -->1 s",                  # never closed on its line
                "1 s<!-- /figure -->"):
        readme.write_text(original + f"\nThe suite takes {bad} here.\n", encoding="utf-8")
        _, errors = read_figures(root)
        assert len(errors) == 1 and errors[0].startswith(f"README.md:{original.count(chr(10)) + 2}: "), (bad, errors)
    readme.write_text(original + "\n<!-- figure: suite-wall-time -->1 s<!-- /figure --> at a line's start\n",
                      encoding="utf-8")
    _, errors = read_figures(root)
    assert any("starts the line" in error for error in errors), errors
