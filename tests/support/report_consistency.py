"""Checks that a rendered report does not contradict itself: what the page says in one place is
what it says in another. :func:`report_inconsistencies` returns one line per contradiction.

- no "from X … to X" and no "most … and least …" on one value;
- a robustness verdict needs pairs: a row with 0 pairs reads "not compared";
- the Answer's difference, interval, Holm p and n pairs per dataset are the paired table's, and
  its n pairs is the robustness table's for the same comparison;
- the ‡ rule is stated once; every undefined α of the agreement table is "not measured" there,
  never reliable, and every agreement not measured there (undefined α, or one judge whose votes
  vary) is listed as "not measured †" in the gate table.
"""

from __future__ import annotations

import html as html_lib
import re

from bloomqg.reporting.trust import NO_PER_JUDGE_VOTES

ROW = re.compile(r"<tr[^>]*>(.*?)</tr>", re.S)
CELL = re.compile(r"<t[dh][^>]*>(.*?)</t[dh]>", re.S)
TAG = re.compile(r"<[^>]+>")


def text_of(fragment: str) -> str:
    return re.sub(r"\s+", " ", html_lib.unescape(TAG.sub("", fragment))).strip()


def table_rows(page: str, start_marker: str) -> list[list[str]]:
    """The body rows (cell texts) of the first table after ``start_marker``."""
    at = page.find(start_marker)
    if at < 0:
        return []
    opening = page.rfind("<", 0, at)
    table = page[opening:] if page.startswith("<table", opening) else page[at:]  # the marker on the table itself
    table = table[table.find("<table"):]
    table = table[:table.find("</table>")]
    body = table[table.find("<tbody"):] if "<tbody" in table else table
    return [[text_of(c) for c in CELL.findall(row)] for row in ROW.findall(body)]


def _section(page: str, section_id: str) -> str:
    at = page.find(f'<section id="{section_id}"')
    return page[at:page.find("</section>", at)] if at >= 0 else ""


def report_inconsistencies(page: str) -> list[str]:
    problems = []
    text = text_of(page)
    for match in re.finditer(r"from (-?[\d.]+%?) \(([^()]*)\) to \1 \(", text):
        problems.append(f"'from X to X' on one value: {match.group(0)}")
    for match in re.finditer(r"most [^.;]*?\(([^()]*?)\)[^.;]*? least [^.;]*?\(\1\)", text):
        problems.append(f"'most and least' on one value: {match.group(0)[:160]}")

    robustness = table_rows(page, 'id="trust-robustness-table"')
    pairs_of = {}
    for row in robustness:
        if len(row) < 6:
            continue
        # the verdict stands after the metric (the panels' columns, one per left-out judge, follow)
        comparison, metric, verdict, n = row[0], row[1], row[2], row[3]
        if n == "0" and not verdict.startswith("not compared"):
            problems.append(f"robustness verdict without pairs: {comparison} {metric}: {verdict}")
        where, _, pair = comparison.partition(": ")
        model, _, dataset = where.partition(" · ")
        pairs_of[(model, dataset, pair, metric.lower())] = n

    paired = {}
    for row in table_rows(page, 'id="table-table_paired"'):
        if len(row) >= 11:
            model, dataset, metric, pair, n, _, _, diff, _, _, p_holm = row[:11]
            paired[(model, dataset, pair, metric)] = (diff, p_holm, n)
    models = {key[0] for key in paired}
    answer = _section(page, "answer")
    pair_headers = [text_of(h) for h in re.findall(r'<th class="right">(<span class="atom">[^<]*</span> − <span class="atom">[^<]*</span>)(?:(?: |<br>)(?:on the )?pairs)? \[95% interval\]</th>', answer)]
    if answer and '<table class="answer">' in answer and not pair_headers:
        problems.append("the Answer's tables have no header this check reads (its pair columns changed?)")
    for pair, table in zip(pair_headers, re.findall(r'<table class="answer">.*?</table>', answer, re.S)):
        for row in table_rows(table, "<table"):
            if len(row) < 8:
                continue
            metric, where, verdict, _, _, difference = row[:6]
            # the pairs' count closes the difference's cell ("… 22 pairs")
            counted = re.search(r"(\d+) pairs?\s*$", difference)
            n = counted.group(1) if counted else ""
            difference = difference[:counted.start()].strip() if counted else difference
            model, _, dataset = where.rpartition(" · ")
            model = model or (next(iter(models)) if len(models) == 1 else None)  # one model: not named
            # the pairs' own values, on the line under it ("A 0.00% → B 0.00%"), read with no space before
            difference = re.sub(r"(?<=[\])])\s*(?:pairs: )?[^\])]*→.*$", "", difference)
            shown = re.sub(r" (points|levels|units)$", "", difference).replace(" (one pair: no interval)", "")
            in_table = paired.get((model, dataset, pair, metric))
            if in_table is None:
                problems.append(f"the Answer's {metric} on {dataset} has no row in the paired table")
                continue
            table_diff = in_table[0].replace(" (one pair: no interval)", "").rstrip("†‡ ")
            if n != "0" and (table_diff, in_table[2]) != (shown, n):
                problems.append(f"{metric} on {dataset}: the Answer says {shown}, n {n}; the paired table {in_table}")
            if "Holm's p " in row[7] and f"Holm's p {in_table[1] if in_table[1].startswith('<') else '= ' + in_table[1]}" not in row[7]:
                problems.append(f"{metric} on {dataset}: the Answer's Holm p is not the paired table's {in_table[1]}")
            robust_n = pairs_of.get((model, dataset, pair, metric.lower()))
            if robust_n is not None and robust_n != n:
                problems.append(f"{metric} on {dataset}: {n} pairs in the Answer, {robust_n} in the robustness table")

    if page.count("no question could have changed it") != 1:
        problems.append(f"the ‡ rule is stated {page.count('no question could have changed it')} times, not once")
    coefficients = table_rows(page, 'id="trust-coefficients-table"')
    # α undefined (no variance in the votes, or no item with two votes): agreement not measured,
    # never a pass, and listed as such in the gate table
    gate, alpha = 2, 3  # the agreement table's columns: cell, criterion, gate, α, …
    undefined = [row for row in coefficients if len(row) > 5 and (
        row[alpha].startswith("undefined") or (row[alpha] == NO_PER_JUDGE_VOTES and row[gate].startswith("not measured")))]
    for row in undefined:
        if row[gate].startswith("reliable"):
            problems.append(f"an undefined α passes the gate: {row}")
    # not measured: α undefined, or defined but resting on at most one judge whose votes vary
    not_measured = [row for row in coefficients if len(row) > 5 and row[gate].startswith("not measured")]
    if any(row not in not_measured for row in undefined):
        problems.append("an undefined α is not 'not measured' in the agreement table")
    gate_listed = len(re.findall(r"not measured( \([^)]*\))? †", _section(page, "reliability")))
    if len(not_measured) != gate_listed:
        problems.append(f"{len(not_measured)} agreements not measured in the agreement table, {gate_listed} listed "
                        "in the gate table")
    return problems
