"""Time what issue 20 adds to a run (agreement + AC1 with its bootstrap, Dawid–Skene, per-judge
diagnostics, the robustness table and the report's trust section) at the default study's size,
and at the paper's release size; prints one JSON object.

Study size: the default study's five cells (cs CoT/FGP 36 items, math FGP 12, social CoT/FGP
24), three judges, five criteria, 1,000 bootstrap resamples (config.yaml). The existing α with
its bootstrap is timed on the same votes for scale. The goal is that the new steps add at most
10% to the default study's wall time (README: about 7 minutes, 420 s).

    python benchmarks/judge_reliability.py [--scale study|release] [--resamples 1000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bloomqg.metrics.robustness import robustness_table  # noqa: E402
from bloomqg.release.reliability import release_reliability  # noqa: E402
from bloomqg.reporting.trust import trust_context  # noqa: E402
from bloomqg.voting.agreement import agreement_with_ci  # noqa: E402
from bloomqg.voting.alpha import CRITERION_LEVEL, alpha_with_ci, encode_votes  # noqa: E402
from bloomqg.voting.cell import measure_criterion  # noqa: E402
from bloomqg.store.frames import CRITERIA, VOTES  # noqa: E402

STUDY_CELLS = [("cs", "cot", 36), ("cs", "fgp", 36), ("math", "fgp", 12), ("social", "cot", 24), ("social", "fgp", 24)]
RELEASE_CELLS = [(d, s, n) for d, s, n in (("cs", "cot", 1416), ("cs", "fgp", 1416), ("math", "fgp", 438))]
LEVELS = ["Remember", "Understand", "Apply", "Analyze", "Evaluate", "Create"]


def ballots(rng, criterion: str, n: int, judges: int = 3) -> list[list[str]]:
    if criterion in ("unique", "readable", "answerable"):
        truth = rng.random(n) < 0.9
        return [["1" if (t if rng.random() < 0.9 else not t) else "0" for _ in range(judges)] for t in truth]
    if criterion == "bloom_level":
        truth = rng.integers(0, 6, n)
        return [[LEVELS[t if rng.random() < 0.6 else rng.integers(0, 6)] for _ in range(judges)] for t in truth]
    truth = rng.integers(0, 8, n)
    return [[json.dumps([f"unit-{t if rng.random() < 0.8 else rng.integers(0, 8)}"]) for _ in range(judges)] for t in truth]


def votes_frame(rng, models: list[str], cells) -> pd.DataFrame:
    rows = []
    for model in models:
        for dataset, strategy, n in cells:
            lists = {c: ballots(rng, c, n) for c in CRITERIA}
            for i in range(n):
                row = {name: None for name in VOTES.names}
                row.update(prompt_id=f"{dataset}-{i:04d}:{strategy}", item_id=f"{dataset}-{i:04d}", dataset=dataset,
                           strategy=strategy, model=model, original_question="q", original_bloom_level="Apply",
                           original_knowledge_units=["unit-1"], new_question="n", parse_status="ok", n_judges=3,
                           alpha_gated=False, aggregation="majority")
                for c in CRITERIA:
                    row[f"{c}_votes"] = lists[c][i]
                rows.append(row)
    frame = pd.DataFrame(rows, columns=VOTES.names)
    # stored labels: recomputed by release_reliability's relabelling path below
    return frame


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", choices=("study", "release"), default="study")
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    cells = STUDY_CELLS if args.scale == "study" else RELEASE_CELLS
    models = ["m1"] if args.scale == "study" else ["m1", "m2"]
    alpha_s = new_s = 0.0
    for dataset, strategy, n in cells:
        for criterion in CRITERIA:
            votes = ballots(rng, criterion, n)
            start = time.perf_counter()
            alpha_with_ci(encode_votes(votes, CRITERION_LEVEL[criterion]), n_resamples=args.resamples)
            alpha_s += time.perf_counter() - start
            start = time.perf_counter()
            agreement_with_ci(votes, criterion, CRITERION_LEVEL[criterion], n_resamples=args.resamples)
            measure_criterion(criterion, votes, ["a", "b", "c"], n_resamples=0)  # DS + diagnostics (α without bootstrap)
            new_s += time.perf_counter() - start
    frame = votes_frame(rng, models, cells)
    labelled = []
    for _, cell in frame.groupby(["model", "dataset", "strategy"], sort=False):
        labelled.append(release_reliability(cell, n_resamples=0, aggregation="dawid_skene"))
    votes = pd.concat([v for v, _ in labelled], ignore_index=True)
    reliability = pd.concat([r for _, r in labelled], ignore_index=True)
    start = time.perf_counter()
    table = robustness_table(votes, ["judge 1", "judge 2", "judge 3"])
    robustness_s = time.perf_counter() - start
    start = time.perf_counter()
    trust_context(reliability, table)
    report_s = time.perf_counter() - start
    added = new_s + robustness_s + report_s
    print(json.dumps({
        "scale": args.scale, "cells": len(cells) * len(models), "items": int(sum(n for *_, n in cells) * len(models)),
        "resamples": args.resamples,
        "existing_alpha_with_bootstrap_s": round(alpha_s, 2),
        "new_agreement_ac1_dawid_skene_diagnostics_s": round(new_s, 2),
        "new_robustness_table_s": round(robustness_s, 2),
        "new_report_section_s": round(report_s, 2),
        "new_total_s": round(added, 2),
        "share_of_default_study_420_s": round(added / 420, 3) if args.scale == "study" else None,
    }, indent=2))


if __name__ == "__main__":
    main()
