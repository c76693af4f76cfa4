"""Checks that a rendered report does not contradict itself: what the page says in one place is
what it says in another. :func:`report_inconsistencies` returns one line per contradiction.

- no "from X … to X" and no "most … and least …" on one value;
- a robustness verdict needs pairs: a row with 0 pairs reads "not compared";
- the Answer's difference, interval, Holm p and n pairs per dataset are the paired table's, and
  its n pairs is the robustness table's for the same comparison;
- the ‡ rule is stated once; every undefined α of the agreement table is a failed gate there and
  is listed as "undefined †" in the gate table.
"""

from __future__ import annotations

import html as html_lib
import re

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
        if len(row) < 8:
            continue
        comparison, metric, n, verdict = row[0], row[1], row[2], row[7]
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
    for item in re.findall(r"<li>(.*?)</li>", _section(page, "answer"), re.S):
        metric = text_of(item.split("</strong>", 1)[0])
        pair = text_of(item).split(" (", 1)[1].split(")", 1)[0]  # "CatCons (FGP − CoT) — …"
        clauses = text_of(item).split(" — ", 1)[-1]
        for match in re.finditer(r"(?:^|; )(?:(\S+) · )?(\S+): (\S+) points( \[[^\]]*\]| \(one pair: no interval\))?, "
                                 r"Holm p = (\S+), n = (\d+) pairs", clauses):
            model, dataset, diff, interval, p_holm, n = match.groups()
            model = model or (next(iter(models)) if len(models) == 1 else None)  # one model: not named
            shown = f"{diff}{interval or ''}".replace(" (one pair: no interval)", "")
            in_table = paired.get((model, dataset, pair, metric))
            if in_table is None:
                problems.append(f"the Answer's {metric} on {dataset} has no row in the paired table")
                continue
            table_diff = in_table[0].replace(" (one pair: no interval)", "")
            if (table_diff, in_table[1], in_table[2]) != (shown, p_holm, n):
                problems.append(f"{metric} on {dataset}: the Answer says {shown}, p {p_holm}, n {n}; "
                                f"the paired table {in_table}")
            robust_n = pairs_of.get((model, dataset, pair, metric.lower()))
            if robust_n is not None and robust_n != n:
                problems.append(f"{metric} on {dataset}: {n} pairs in the Answer, {robust_n} in the robustness table")

    if page.count("could not have come out otherwise") != 1:
        problems.append(f"the ‡ rule is stated {page.count('could not have come out otherwise')} times, not once")
    coefficients = table_rows(page, 'id="trust-coefficients-table"')
    # α undefined: no variance in the votes, or no item with two votes ("not assessable" there,
    # a failed gate all the same)
    undefined = [row for row in coefficients if len(row) > 5 and (
        row[5].startswith("undefined") or (row[5] == "not assessable" and row[-1].startswith("failed")))]
    for row in undefined:
        if not row[-1].startswith("failed"):
            problems.append(f"an undefined α passes the gate: {row}")
    gate_listed = _section(page, "reliability").count("undefined †")
    if len(undefined) != gate_listed:
        problems.append(f"{len(undefined)} undefined α in the agreement table, {gate_listed} listed in the gate table")
    return problems
