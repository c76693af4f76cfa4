"""The offline judges (rules, embedding) through the judge_bias probes: wall time per judge.

Prints one JSON document. Questions: every item of the embedded computer-science sample (36), a
generated question standing for each ("Explain, with an example, why this matters: <original>"),
as one cell; ``--items`` per cell are probed (base, repeat, order: three verdicts each). Times
include building the judge (the embedding judge loads MiniLM and embeds the dataset once per
unit order: twice) and the statistics of :func:`bloomqg.judges.bias.stats.bias_estimates`.

    python benchmarks/judge_bias_offline.py [--items 30]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pandas as pd

from bloomqg.inputs.datasets import load_dataset
from bloomqg.inputs.specs import JudgeSpec
from bloomqg.judges.bias.probe import probe_judge
from bloomqg.judges.bias.stats import bias_estimates

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=30)
    args = parser.parse_args()
    dataset = load_dataset("cs", {"loader": "embedded", "path": str(REPO / "data" / "cs" / "questions.csv")},
                           base_dir=REPO)
    generations = pd.DataFrame([{
        "prompt_id": f"{row.item_id}:fgp", "item_id": row.item_id, "dataset": "cs", "strategy": "fgp", "model": "m",
        "original_question": row.question, "original_bloom_level": row.bloom_level,
        "original_knowledge_units": list(row.knowledge_units), "raw_text": None,
        "new_question": f"Explain, with an example, why this matters: {row.question}",
    } for row in dataset.itertuples(index=False)])
    results = {}
    for name, spec in (("rules", {"backend": "rules"}), ("minilm", {"backend": "embedding"})):
        started = time.perf_counter()
        probes = probe_judge(generations, JudgeSpec.read(name, spec, seed=20240611, budget_usd=None), dataset=dataset,
                             domain="computer science",
                             items_per_cell=args.items, seed=20240611)
        probed = time.perf_counter()
        bias_estimates(probes, {"judges": {name: None}, "generators": {"m": None}}, n_resamples=1000)
        results[name] = {"questions": int(probes["prompt_id"].nunique()), "verdicts": int(len(probes) // 5),
                         "probe_s": round(probed - started, 2), "estimates_s": round(time.perf_counter() - probed, 2)}
    print(json.dumps({"benchmark": "judge_bias_offline", "items_per_cell": args.items, "judges": results}, indent=2))


if __name__ == "__main__":
    main()
