"""The smollm2 LLM judge in its two modes on the default study's generations (issue 53).

For each cell's generations (``results/generations/<dataset>/<strategy>/<model>.parquet`` of a
finished default study, read only), one judge_questions job per mode, as the rule runs it: the
judge's text generator built from the config (the converted weights in ``--model-dir``), a
fresh call cache (nothing answered from an earlier run), the stage, the generator closed. The
modes alternate cell by cell so load on shared cores falls on both. Prints, per mode, the
job-seconds (load and judging) and the answers' distributions, how often the modes agree, and
the share of questions whose judged level is the original's target, then one JSON line.

    python benchmarks/judge_modes.py --study /work/main [--threads 2] [--judge smollm2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from bloomqg.store.frames import DATASET, GENERATIONS
from bloomqg.judges.registry import make_judge_text_generator
from bloomqg.judges.stage import judge_questions
from bloomqg.inputs.specs import study_spec
from bloomqg.study.config import apply_defaults
from bloomqg.store.parquet_io import read_frame

MODES = ("generate", "choices")


def judge_cell(study: Path, config: dict[str, Any], judge: str, mode: str, generations_path: Path,
               model_dir: Path, threads: int, cache_dir: Path) -> tuple[float, Any]:
    """One judge_questions job on one cell in ``mode``: (seconds, judgments frame)."""
    dataset = generations_path.parts[-3]
    specs = study_spec(apply_defaults(config))
    spec = specs.judges[judge].with_entry({**specs.judges[judge].entry, "mode": mode})
    started = time.perf_counter()
    generator = make_judge_text_generator(spec, model=specs.borrowed_model(judge),
                                          model_dir=model_dir, cache_dir=cache_dir, num_threads=threads)
    try:
        frame = judge_questions(read_frame(generations_path, GENERATIONS), spec,
                                dataset=read_frame(study / "results" / "datasets" / f"{dataset}.parquet", DATASET),
                                domain=config["datasets"][dataset]["domain"], text_generator=generator)
    finally:
        generator.close()
    return time.perf_counter() - started, frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, required=True, help="a finished default study's folder")
    parser.add_argument("--judge", default="smollm2")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    config = yaml.safe_load((args.study / "config.yaml").read_text())
    model_ref = config["judges"][args.judge]["model_ref"]
    model_dir = args.study / "resources" / "models" / model_ref
    cells = sorted((args.study / "results" / "generations").glob(f"*/*/{model_ref}.parquet"))
    seconds = {mode: 0.0 for mode in MODES}
    frames: dict[str, list[Any]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as scratch:
        for index, cell in enumerate(cells):
            for mode in MODES if index % 2 == 0 else reversed(MODES):
                took, frame = judge_cell(args.study, config, args.judge, mode, cell, model_dir, args.threads,
                                         Path(scratch) / mode)
                seconds[mode] += took
                frames[mode].append(frame.assign(original_bloom_level=frame["prompt_id"].map(
                    read_frame(cell, GENERATIONS).set_index("prompt_id")["original_bloom_level"])))
                print(f"{cell.relative_to(args.study)} {mode}: {took:.1f} s", flush=True)
    import pandas as pd

    summary: dict[str, Any] = {"cells": len(cells), "threads": args.threads, "modes": {}}
    levels = {}
    for mode in MODES:
        frame = pd.concat(frames[mode], ignore_index=True)
        ok = frame[frame["status"] == "ok"]
        level_rows = ok[ok["criterion"] == "bloom_level"].set_index("prompt_id")
        levels[mode] = level_rows["value_level"]
        binary = {c: round(float(ok.loc[ok["criterion"] == c, "value_bool"].astype(bool).mean()), 3)
                  for c in ("unique", "readable", "answerable")}
        summary["modes"][mode] = {
            "job_seconds": round(seconds[mode], 1),
            "questions": int(frame["prompt_id"].nunique()),
            "levels_answered": int(len(level_rows)),
            "level_counts": dict(Counter(level_rows["value_level"]).most_common()),
            "yes_share": binary,
            "level_equals_original": round(float(
                (level_rows["value_level"] == level_rows["original_bloom_level"]).mean()), 3),
            "parse_failed_rows": int((frame["status"] == "parse_failed").sum()),
        }
    common = levels["generate"].index.intersection(levels["choices"].index)
    summary["level_agreement_between_modes"] = round(float(
        (levels["generate"][common] == levels["choices"][common]).mean()), 3) if len(common) else None
    summary["speedup"] = round(seconds["generate"] / seconds["choices"], 2) if seconds["choices"] else None
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
