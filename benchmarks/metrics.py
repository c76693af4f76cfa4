"""Time bloomqg.metrics.cell.score_cell at the paper's scale; prints one JSON object.

20,700 synthetic questions (the paper's 16,872 + 2,628 + 1,200) split into 18 cells of
model × dataset × strategy, each scored with 1,000 bootstrap resamples. Goal: ≤ 5 s in total.

    python benchmarks/metrics.py [--questions 20700] [--cells 18] [--resamples 1000]
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

from bloomqg.inputs.bloom import BLOOM_LEVELS
from bloomqg.metrics.cell import score_cell
from bloomqg.store.frames import VOTES

UNITS = [f"unit-{i}" for i in range(12)]


def synthetic_votes(n_questions: int, n_cells: int, seed: int = 0) -> list[pd.DataFrame]:
    """One VOTES frame per cell with plausible, seeded random votes."""
    rng = np.random.default_rng(seed)
    sizes = np.full(n_cells, n_questions // n_cells)
    sizes[: n_questions % n_cells] += 1
    levels = np.array(list(BLOOM_LEVELS) + [None], dtype=object)
    cells = []
    for cell, size in enumerate(sizes):
        strategy = "cot" if cell % 2 == 0 else "fgp"
        unique, readable, answerable = (rng.random((3, size)) < [[0.93], [0.99], [0.98]])
        units = [[UNITS[i]] for i in rng.integers(0, len(UNITS), size)]
        frame = pd.DataFrame({name: [None] * size for name in VOTES.names})
        frame["prompt_id"] = [f"cs-{i:04d}:{strategy}" for i in range(size)]
        frame["item_id"] = [f"cs-{i:04d}" for i in range(size)]
        frame["dataset"] = "cs"
        frame["strategy"] = strategy
        frame["model"] = f"model-{cell // 2}"
        frame["original_question"] = "q"
        frame["original_bloom_level"] = levels[rng.choice(7, size, p=[0.16] * 6 + [0.04])]
        frame["original_knowledge_units"] = units
        frame["new_question"] = "new"
        frame["parse_status"] = np.where(rng.random(size) < 0.02, "failed", "ok")
        frame["n_judges"] = 3
        frame["unique"], frame["readable"], frame["answerable"] = unique, readable, answerable
        frame["useful"] = unique & readable & answerable
        frame["bloom_level"] = levels[rng.integers(0, 6, size)]
        frame["knowledge_units"] = [u if rng.random() < 0.85 else [UNITS[0]] for u in units]
        if strategy == "cot":
            frame["identified_bloom_level"] = levels[rng.integers(0, 6, size)]
            frame["identified_knowledge_units"] = [u if rng.random() < 0.8 else [UNITS[1]] for u in units]
        frame["alpha_gated"] = False
        cells.append(frame)
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=20_700)
    parser.add_argument("--cells", type=int, default=18)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    cells = synthetic_votes(args.questions, args.cells)
    start = time.perf_counter()
    results = [score_cell(frame, None, n_resamples=args.resamples, seed=0) for frame in cells]
    seconds = time.perf_counter() - start
    print(json.dumps({
        "n_questions": int(sum(len(frame) for frame in cells)),
        "n_cells": len(cells),
        "n_resamples": args.resamples,
        "n_metric_rows": int(sum(len(result) for result in results)),
        "seconds": round(seconds, 3),
    }))


if __name__ == "__main__":
    main()
