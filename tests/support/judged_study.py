"""A small study run through the real voting and metrics code, written as the workflow's files.

:mod:`tests.support.synthetic` gives plausible frames whose metrics are *not* computed from the
votes; the explorer's tests need the opposite: judgments (three judges, with parse failures, a
judge that does not rate two criteria and one that abstains on some levels, questions that could
not be parsed, reasons and raw answers), then
:func:`bloomqg.voting.cell.vote_cell` and :func:`bloomqg.metrics.cell.score_cell`, so that a
table cell's ``n`` and the items the explorer shows for it come from the same rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bloomqg.inputs.bloom import BLOOM_LEVELS
from bloomqg.judges.verdict import NOT_JUDGED
from bloomqg.metrics.cell import score_cell
from bloomqg.store.parquet_io import write_frame
from bloomqg.store.frames import CRITERIA, GENERATIONS, JUDGMENTS, METRICS, RELIABILITY, VOTES
from bloomqg.voting.cell import vote_cell
from tests.support.synthetic import MODEL_NAMES, synthetic_dataset, synthetic_generations_and_votes

JUDGES: tuple[str, ...] = ("rules", "minilm", "smollm2")


@dataclass
class JudgedStudy:
    """The files of a judged study under ``root`` (the workflow's ``results/`` layout)."""

    root: Path
    datasets: dict[str, pd.DataFrame]
    votes: pd.DataFrame
    reliability: pd.DataFrame
    metrics: pd.DataFrame
    vote_files: list[Path] = field(default_factory=list)
    generation_files: list[Path] = field(default_factory=list)
    judgment_files: list[Path] = field(default_factory=list)
    reliability_files: list[Path] = field(default_factory=list)
    metrics_file: Path | None = None


def _judgments(generations: pd.DataFrame, judge: str, rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    llm = judge == "smollm2"
    for row in generations.itertuples(index=False):
        level = "Apply" if pd.isna(row.original_bloom_level) else row.original_bloom_level
        for criterion in CRITERIA:
            record = {
                "prompt_id": row.prompt_id, "item_id": row.item_id, "dataset": row.dataset,
                "strategy": row.strategy, "model": row.model, "judge": judge, "criterion": criterion,
                "value_bool": None, "value_level": None, "value_units": None, "status": "ok", "reason": None,
                "raw_text": None, "cached": False, "n_prompt_tokens": None, "n_completion_tokens": None,
                "cost_usd": 0.0,
            }
            if pd.isna(row.new_question):
                record.update(status="no_question", reason="the generation has no question")
            elif llm and rng.random() < 0.06:
                record.update(status="parse_failed", reason="no JSON object in the answer",
                              raw_text=f"I think the {criterion} is fine <maybe> & so on")
            elif judge == "minilm" and criterion in ("readable", "answerable"):
                # as the embedding judge: it does not rate these (status error, no failure)
                record.update(status="error", reason=NOT_JUDGED)
            elif judge == "rules" and criterion == "bloom_level" and rng.random() < 0.1:
                record.update(status="error", reason="no Bloom verb and no known question word: not guessed")
            elif criterion in ("unique", "readable", "answerable"):
                record["value_bool"] = bool(rng.random() < 0.85)
            elif criterion == "bloom_level":
                index = BLOOM_LEVELS.index(level) + int(rng.choice([-2, -1, 0, 0, 0, 1, 2]))
                record["value_level"] = BLOOM_LEVELS[min(5, max(0, index))]
            else:
                record["value_units"] = list(row.original_knowledge_units)[:1] if rng.random() < 0.8 else ["other"]
            if llm and record["status"] == "ok":
                value = record["value_bool"] if record["value_bool"] is not None else record["value_level"] or record["value_units"]
                record["raw_text"] = json.dumps({criterion: value, "reason": f"because of {row.item_id}"})
            rows.append(record)
    return pd.DataFrame(rows, columns=JUDGMENTS.names)


def judged_study(root: Path, *, n_models: int = 3, n_items: int = 24, seed: int = 0,
                 cells: dict[str, tuple[str, ...]] | None = None, n_resamples: int = 50) -> JudgedStudy:
    """Generate, judge, vote and score a small study; write its files under ``root``."""
    cells = cells or {"cs": ("cot", "fgp"), "math": ("fgp",)}
    models = MODEL_NAMES[:n_models]
    datasets = {name: synthetic_dataset(name, n_items, seed) for name in cells}
    generations, _ = synthetic_generations_and_votes(datasets, models, cells, seed)
    study = JudgedStudy(root, datasets, pd.DataFrame(), pd.DataFrame(), pd.DataFrame())
    all_votes, all_reliability, all_metrics = [], [], []
    rng = np.random.default_rng(seed)
    for (dataset, strategy, model), cell in generations.groupby(["dataset", "strategy", "model"], sort=False):
        cell = cell.reset_index(drop=True)
        where = f"{dataset}/{strategy}/{model}"
        judgments = [_judgments(cell, judge, rng) for judge in JUDGES]
        votes, reliability = vote_cell(cell, judgments, n_resamples=n_resamples, seed=seed)
        metrics = score_cell(votes, reliability, n_resamples=n_resamples, seed=seed)
        generation_file = root / "generations" / f"{where}.parquet"
        generation_file.parent.mkdir(parents=True, exist_ok=True)
        # In-process generations: no call was cached or paid (the API cost columns generate_questions writes).
        cell = cell.assign(cached=False, cost_usd=None, cache_key=None, passes_json=None)
        # The keys generate_questions records (bloomqg.generation.stage).
        write_frame(cell, generation_file, GENERATIONS, {
            "stage": "generate_questions", "model_name": model,
            "generator": {"source": f"example/{model}", "revision": "0123abc"},
            "decoding": {"temperature": 0.7, "max_new_tokens": 256, "seed": seed},
            "prompt_hashes": sorted(set(cell["prompt_hash"].dropna())), "git_commit": "deadbeef",
            "package_versions": {"torch": "2.13.0"},
        })
        study.generation_files.append(generation_file)
        for judge, frame in zip(JUDGES, judgments):
            path = root / "judgments" / where / f"{judge}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            write_frame(frame, path, JUDGMENTS, {"judge": judge, "judge_backend": judge, "judge_prompt_hash": "fedcba9876543210",
                                                 "judge_spec": {"backend": judge, "temperature": 0.0}})
            study.judgment_files.append(path)
        vote_file = root / "votes" / f"{where}.parquet"
        vote_file.parent.mkdir(parents=True, exist_ok=True)
        write_frame(votes, vote_file, VOTES)
        reliability_file = root / "votes" / f"{where}.reliability.parquet"
        write_frame(reliability, reliability_file, RELIABILITY)
        study.vote_files.append(vote_file)
        study.reliability_files.append(reliability_file)
        all_votes.append(votes)
        all_reliability.append(reliability)
        all_metrics.append(metrics)
    study.votes = pd.concat(all_votes, ignore_index=True)
    study.reliability = pd.concat(all_reliability, ignore_index=True)
    study.metrics = pd.concat(all_metrics, ignore_index=True)
    study.metrics_file = root / "metrics" / "all.parquet"
    study.metrics_file.parent.mkdir(parents=True, exist_ok=True)
    write_frame(study.metrics, study.metrics_file, METRICS)
    return study
