"""The facts check: every number a report prints is a fact of its facts frame.

:func:`unmatched_numbers` reads the report's visible text section by section (scripts, styles
and verbatim blocks — prompts, the config — left out: they quote, they do not measure), takes
each number token and looks for a fact whose value, n or interval end, at the token's own
precision (and ×100 for a share printed as a percentage), is that number. A token no fact
explains is returned with its context: a number the report computed on the way, or a fact
the frame lacks.

Structural numbers are not quantities and are skipped by form: "Figure 2", "Table 5", note
marks "[3]", numbers inside names ("smollm2-135m", "fig2_transitions.png"), dates and times.
"""

from __future__ import annotations

import math
import re
from html.parser import HTMLParser

import pandas as pd

# the sections that state quantities; examples quote questions, the glossary defines terms,
# the configuration and provenance list settings and versions
QUANTITY_SECTIONS = ("answer", "setup", "overview", "figures", "tables", "reliability", "trust", "judge-bias", "cost")

NUMBER = re.compile(r"(?<![\w.\-/:#@\[])([−+-]?)(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?![\w\-/:@\]]|\.\d)")
STRUCTURAL = re.compile(r"(?:Figure|Table|Fig\.|step|Step)\s*$")
#: The last of several figure or table numbers ("Tables 7 and 8"): a name, not a quantity.
STRUCTURAL_LIST = re.compile(r"(?:Figures|Tables)\s+\d+(?:,\s*\d+)*\s+and\s+$")


BLOCKS = {"p", "li", "div", "figcaption", "summary", "h2", "h3", "h4", "dt", "dd", "caption", "br", "ul", "ol",
          "table", "details", "section"}


class _Units(HTMLParser):
    """The visible text of each ``<section id=…>`` as units a number is read in: a table row
    (with its table's header row, which names what the columns hold), or a block's text;
    scripts, styles and ``pre``/``code`` blocks left out."""

    SKIP = {"script", "style", "pre", "code", "template"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.units: list[tuple[str, str, str]] = []
        self.section: str | None = None
        self.header = ""
        self.in_head = False
        self.depth = 0
        self.skipping = 0
        self.in_row = 0
        self.buffer: list[str] = []

    def _flush(self) -> None:
        text = re.sub(r"\s+", " ", "".join(self.buffer)).strip()
        if text and self.section:
            self.units.append((self.section, text, "" if self.in_head else self.header))
            if self.in_head:
                self.header = text
        self.buffer = []

    def handle_starttag(self, tag, attrs):
        if tag == "section":
            self._flush()
            if self.section is None and dict(attrs).get("id"):
                self.section, self.depth = dict(attrs)["id"], 0
            if self.section is not None:
                self.depth += 1
        if tag in self.SKIP:
            self.skipping += 1
        if tag == "table":
            self.header = ""
        if tag == "thead":
            self.in_head = True
        if tag == "tr":
            self._flush()
            self.in_row += 1
        elif tag in BLOCKS and not self.in_row:
            self._flush()
        elif tag in {"td", "th", "span"}:
            self.buffer.append(" ")

    def handle_endtag(self, tag):
        if tag in self.SKIP and self.skipping:
            self.skipping -= 1
        if tag == "thead":
            self.in_head = False
        if tag == "tr" and self.in_row:
            self._flush()
            self.in_row -= 1
        elif tag in BLOCKS and not self.in_row:
            self._flush()
        if tag == "section" and self.section is not None:
            self.depth -= 1
            if self.depth == 0:
                self._flush()
                self.section = None

    def handle_data(self, data):
        if self.section is not None and not self.skipping:
            self.buffer.append(data)


def section_units(page: str) -> list[tuple[str, str, str]]:
    """(section id, text, its table's header row or "") per table row or block of the page's
    sections."""
    parser = _Units()
    parser.feed(page)
    parser._flush()
    return parser.units


# what a number is by what stands before it: an n ("n = 12", "(n=12)"), an interval's end
# ("[0.10, 0.32]"), else a value or a count
ROLE_FIELDS = {"n": ("n",), "interval": ("ci_low", "ci_high"), "value": ("value", "n")}
N_BEFORE = re.compile(r"\bn\s*=\s*$")
INTERVAL_AROUND = re.compile(r"\[\s*[−+-]?[\d.,]+\s*,\s*[−+-]?[\d.,]+\s*\]")


INTERVAL_WORDS = re.compile(r"interval runs from (?:[−+-]?[\d.,]+ to )?$")


def role_of(text: str, start: int, end: int) -> str:
    if N_BEFORE.search(text[max(0, start - 6):start]):
        return "n"
    if INTERVAL_WORDS.search(text[max(0, start - 40):start]):
        return "interval"
    opening = text.rfind("[", max(0, start - 24), start)
    if opening >= 0 and (interval := INTERVAL_AROUND.match(text, opening)) and interval.end() >= end:
        return "interval"
    return "value"


def fact_numbers(facts: pd.DataFrame, fields: tuple[str, ...] = ("value", "n", "ci_low", "ci_high")) -> list[float]:
    numbers = pd.concat([facts[c] for c in fields]).dropna().astype(float)
    return sorted(set(numbers.tolist()))


def _printings(numbers: list[float], decimals: int, percent: bool) -> set[str]:
    """Every way a fact prints at ``decimals`` places, unsigned: itself, and ×100 where the page
    prints a percent sign (a share stored as a fraction)."""
    out = set()
    for number in numbers:
        for scaled in (number, number * 100) if percent else (number,):
            if math.isfinite(scaled):
                out.add(f"{abs(scaled):.{decimals}f}")
    return out


def _named(values: pd.Series) -> list[str]:
    return sorted({str(v) for v in values.dropna()}, key=len, reverse=True)


def _mentioned(text: str, names: list[str]) -> set[str]:
    return {name for name in names if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)}


def _strategies_named(text: str, names: list[str]) -> set[str]:
    """Strategies by their labels as the page writes them ("CoT", "Zero-shot" for zeroshot)."""
    folded = re.sub(r"(?<=\w)-(?=\w)", "", text).lower()
    return {name for name in names if re.search(rf"(?<![\w-]){re.escape(name.lower())}(?![\w-])", folded)}


# how the page names the judging criteria that the facts' subjects carry by their raw names
CRITERION_WORDS = {"unique": "Unique", "readable": "Readable", "answerable": "Answerable",
                   "bloom_level": "Bloom level", "knowledge_units": "Knowledge units"}


def _subject_parts(facts: pd.DataFrame) -> pd.Series:
    return facts["subject"].fillna("").map(lambda subject: frozenset(subject.split(" · ")) if subject else frozenset())


class FactsCheck:
    """Which printed numbers a facts frame explains.

    A number is read in its unit (a table row, or a block of text); where the unit names models
    or datasets of the facts, only their facts (and the study-wide ones) may explain it; where it
    names judging criteria or judges, only those criteria's and judges' facts among the ones
    about a criterion or a judge."""

    def __init__(self, facts: pd.DataFrame) -> None:
        self.facts = facts
        self.models, self.datasets = _named(facts["model"]), _named(facts["dataset"])
        self.strategies = _named(facts["strategy"])
        self.parts = _subject_parts(facts)
        reliability = facts.loc[facts["quantity"].str.startswith("reliability."), "subject"].dropna()
        self.judges = sorted({subject.split(" · ")[0] for subject in reliability} - CRITERION_WORDS.keys(),
                             key=len, reverse=True)
        self.about_criterion = self.parts.map(lambda p: bool(p & CRITERION_WORDS.keys()))
        self.about_judge = self.parts.map(lambda p: bool(p & set(self.judges)))
        self.cache: dict[tuple, set[str]] = {}

    def scope(self, text: str) -> tuple[frozenset[str], ...]:
        criteria = frozenset(name for name, word in CRITERION_WORDS.items()
                             if re.search(rf"(?<![\w-]){re.escape(word)}s?(?![\w-])", text, re.I))
        return (frozenset(_mentioned(text, self.models)), frozenset(_mentioned(text, self.datasets)), criteria,
                frozenset(_mentioned(text, self.judges)), frozenset(_strategies_named(text, self.strategies)))

    def explains(self, text: str, match: re.Match, scope: tuple[frozenset[str], ...], digits: str | None = None) -> bool:
        """Whether some fact in ``scope`` prints as ``match`` (or as ``digits`` in its place)."""
        if digits is None:
            digits = match.group(2).replace(",", "") + ("." + match.group(3) if match.group(3) else "")
        decimals = len(digits.partition(".")[2])
        percent = text[match.end():match.end() + 2].lstrip().startswith("%")
        role = role_of(text, match.start(), match.end())
        key = (*scope, decimals, percent, role)
        if key not in self.cache:
            facts = self.facts
            mask = pd.Series(True, index=facts.index)
            for column, named in zip(("model", "dataset", "strategy"), (scope[0], scope[1], scope[4])):
                if named:
                    mask &= facts[column].isna() | facts[column].isin(named)
            for about, named in ((self.about_criterion, scope[2]), (self.about_judge, scope[3])):
                if named:
                    mask &= ~about | self.parts.map(lambda p, named=named: bool(p & named))
            self.cache[key] = _printings(fact_numbers(facts[mask], ROLE_FIELDS[role]), decimals, percent)
        return digits in self.cache[key]

    def numbers(self, page: str, sections: tuple[str, ...] = QUANTITY_SECTIONS):
        """(section, unit text, scope, match) of every number the check reads."""
        for section, text, header in section_units(page):
            if section not in sections:
                continue
            scope = self.scope(f"{header} {text}")
            for match in NUMBER.finditer(text):
                if not (STRUCTURAL.search(text[max(0, match.start() - 8):match.start()])
                        or STRUCTURAL_LIST.search(text[max(0, match.start() - 24):match.start()])):
                    yield section, text, scope, match


def unmatched_numbers(page: str, facts: pd.DataFrame, sections: tuple[str, ...] = QUANTITY_SECTIONS) -> list[str]:
    """``"<section>: <token> in '…context…'"`` for each printed number no fact explains
    (:class:`FactsCheck`)."""
    check = FactsCheck(facts)
    return [f"{section}: {match.group(0)} in '…{text[max(0, match.start() - 60):match.end() + 25]}…'"
            for section, text, scope, match in check.numbers(page, sections)
            if not check.explains(text, match, scope)]
