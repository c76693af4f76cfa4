"""How much the facts check sees (docs/answer.md, "One fact per number").

Reads a built report and the facts frame beside it, draws printed numbers at random from the
sections the check reads, changes each by 1–3 in its last printed digit, and counts how often
``tests.support.report_facts.FactsCheck`` no longer finds a fact that prints the changed number:
per section and for decimals and integers. First it says how many numbers it reads unmatched as
printed (0 for a report whose every number is a fact).

    python benchmarks/report_facts.py [--report results/report.html] [--draws 800] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support, from a checkout

from bloomqg.reporting.report import facts_path  # noqa: E402
from tests.support.report_facts import FactsCheck  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, default=Path("results/report.html"))
    parser.add_argument("--draws", type=int, default=800)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    page = args.report.read_text(encoding="utf-8")
    check = FactsCheck(pd.read_parquet(facts_path(args.report)))
    numbers = list(check.numbers(page))
    unmatched = sum(not check.explains(text, match, scope) for _, text, scope, match in numbers)
    print(f"{args.report}: {len(numbers)} numbers read, {unmatched} unmatched as printed")
    draw = random.Random(args.seed)
    caught: dict[tuple[str, str], list[bool]] = {}
    for section, text, scope, match in draw.sample(numbers, min(args.draws, len(numbers))):
        digits = match.group(2).replace(",", "") + ("." + match.group(3) if match.group(3) else "")
        decimals = len(match.group(3) or "")
        changed = float(digits) + 10 ** -decimals * draw.choice([1, -1, 2, 3])
        kind = "decimal" if decimals else "integer"
        caught.setdefault((section, kind), []).append(not check.explains(text, match, scope, f"{abs(changed):.{decimals}f}"))
    totals: dict[str, list[bool]] = {}
    for (section, kind), hits in sorted(caught.items()):
        print(f"  {section:<12} {kind:<8} {len(hits):>4} changed, {sum(hits) / len(hits):.0%} caught")
        totals.setdefault(kind, []).extend(hits)
    summary = {kind: round(sum(hits) / len(hits), 3) for kind, hits in totals.items()}
    print(json.dumps({"benchmark": "report_facts", "numbers": len(numbers), "unmatched": unmatched,
                      "draws": sum(len(h) for h in totals.values()), "caught": summary}))


if __name__ == "__main__":
    main()
