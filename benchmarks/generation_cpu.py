"""CPU generation throughput: batch 1 versus the chosen batching, SmolLM2-135M, 2 threads.

Prints one JSON document.  Tokens/s = useful completion tokens (up to, excluding, the stop
token) ÷ wall time.  Padding efficiency = useful tokens ÷ sequence-steps the decode loop
computed; for comparison it also reports what ``model.generate``'s static batches would have
computed for the same completions (every row decodes until the longest in its batch stops).

Prompts: CoT prompts over the first questions of the paper's computer-science release when it
is present (``$BLOOMQG_SHARED_DATA`` or ``<repo>/../shared/data``), else hand-written ones.
Batch 1 runs on a subset (it is slow); both runs use the same per-request seeds, so they
produce (nearly always) the same texts and the comparison is like for like.

    python benchmarks/generation_cpu.py [--prompts 32] [--batch1-prompts 8] [--max-new-tokens 128]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bloomqg.generation.base import ChatRequest, DecodingParams
from bloomqg.generation.batching import padding_efficiency, plan_batches
from bloomqg.prompts import build_prompts, messages_from_json

SYNTHETIC = [
    ("Stack", "Define a stack and list its two main operations."),
    ("Stack", "Use a stack to evaluate the postfix expression 3 4 + 2 *."),
    ("Queue", "Compare a circular queue with a linear array queue."),
    ("Queue", "Design a queue that supports getting the minimum in constant time."),
    ("Binary Tree", "List the three depth-first traversal orders of a binary tree."),
    ("Binary Tree", "Construct the binary search tree obtained by inserting 5, 3, 8, 1, 4."),
    ("Sorting", "Describe how insertion sort works on an almost sorted array."),
    ("Sorting", "Analyze the worst case of quicksort with the first element as pivot."),
]


def shared_data_dir() -> Path:
    return Path(os.environ.get("BLOOMQG_SHARED_DATA", REPO.parent / "shared" / "data"))


def benchmark_dataset(n: int) -> tuple[pd.DataFrame, str]:
    """A DATASET-shaped frame of ``n`` questions and where they came from."""
    release = shared_data_dir() / "llm-eval-release" / "dataset" / "computer" / "Data_Structure.csv"
    if release.is_file():
        raw = pd.read_csv(release).head(n)
        pairs = list(zip(raw["Topic"].astype(str), raw["Questions"].astype(str)))
        source = str(release)
    else:
        pairs = [SYNTHETIC[i % len(SYNTHETIC)] for i in range(n)]
        pairs = [(unit, f"{question} (variant {i})") for i, (unit, question) in enumerate(pairs)]
        source = "synthetic"
    frame = pd.DataFrame({
        "item_id": [f"bench-{i:04d}" for i in range(1, len(pairs) + 1)],
        "dataset": "bench",
        "source_row": range(1, len(pairs) + 1),
        "question": [q for _, q in pairs],
        "bloom_level": None,
        "bloom_source": "fixed",
        "knowledge_units": [[u] for u, _ in pairs],
    })
    return frame, source


def ensure_model_dir(model_dir: Path | None) -> Path:
    """The converted SmolLM2 directory, converting the GGUF from the default config if needed."""
    import yaml

    from bloomqg.models import materialize_model

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    if model_dir is None:
        model_dir = REPO / config.get("cache_dir", ".cache/bloomqg") / "benchmarks" / "smollm2-135m"
    if not (model_dir / "config.json").is_file():
        materialize_model(config["models"]["smollm2-135m"], model_dir)
    return model_dir


def run(generator, requests, params) -> dict:
    before = dict(generator.stats)
    started = time.perf_counter()
    completions = generator.complete(requests, params)
    wall = time.perf_counter() - started
    useful = generator.stats["useful_tokens"] - before["useful_tokens"]
    computed = generator.stats["computed_decode_steps"] - before["computed_decode_steps"]
    return {"completions": completions, "wall_s": wall, "useful_tokens": useful,
            "computed_decode_steps": computed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--batch1-prompts", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--batch-size", default="auto", help="'auto' or an integer")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model-dir", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=20240611)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    import torch

    from bloomqg.generation.hf import HFTextGenerator

    torch.set_num_threads(args.threads)
    model_dir = ensure_model_dir(args.model_dir)
    dataset, source = benchmark_dataset(args.prompts)
    prompts = build_prompts(dataset, "cot", template_path=REPO / "prompts/generation/cot.md",
                            k_exemplars=2, seed=args.seed, domain="computer science",
                            system_path=REPO / "prompts/generation/system.md")
    requests = [ChatRequest(r.prompt_id, messages_from_json(r.messages_json))
                for r in prompts.itertuples()]
    params = DecodingParams(temperature=0.9, top_p=0.95, max_new_tokens=args.max_new_tokens,
                            seed=args.seed)
    batch_size = args.batch_size if args.batch_size == "auto" else int(args.batch_size)

    single = HFTextGenerator(model_dir, dtype="float32", batch_size=1)
    subset = requests[: args.batch1_prompts]
    batch1 = run(single, subset, params)
    batched_generator = single
    batched_generator.batch_size_policy = batch_size  # same loaded model, other policy
    lengths = [len(single.encode(r)) for r in requests]
    chosen = batched_generator.batch_size_for(lengths, params.max_new_tokens)
    batched = run(batched_generator, requests, params)

    # Prefill cost, measured apart (max_new_tokens=1): batching cannot shrink it, so it bounds
    # the end-to-end speed-up; decode-only figures show what the batching itself achieves.
    prefill_params = DecodingParams(temperature=0.9, top_p=0.95, max_new_tokens=1, seed=args.seed)
    batched_generator.batch_size_policy = 1
    prefill1 = run(batched_generator, subset, prefill_params)["wall_s"]
    batched_generator.batch_size_policy = batch_size
    prefillb = run(batched_generator, requests, prefill_params)["wall_s"]
    decode1 = batch1["useful_tokens"] / max(batch1["wall_s"] - prefill1, 1e-9)
    decodeb = batched["useful_tokens"] / max(batched["wall_s"] - prefillb, 1e-9)

    # what generate() would compute: each batch decodes until its longest row stops
    completion_steps = [min(c.n_completion_tokens + (c.finish_reason == "stop"),
                            params.max_new_tokens) for c in batched["completions"]]
    naive_computed = sum(max(completion_steps[p] for p in b.positions) * len(b.positions)
                         for b in plan_batches(lengths, chosen))
    same_text = sum(a.text == b.text for a, b in zip(batch1["completions"], batched["completions"]))
    tps1 = batch1["useful_tokens"] / batch1["wall_s"]
    tpsb = batched["useful_tokens"] / batched["wall_s"]
    report = {
        "benchmark": "generation_cpu",
        "model": "SmolLM2-135M-Instruct (GGUF Q4_1 dequantised to float32)",
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "load_average_1min_at_end": os.getloadavg()[0],
        "prompt_source": source,
        "max_new_tokens": params.max_new_tokens,
        "batch1": {"prompts": len(subset), "useful_tokens": batch1["useful_tokens"],
                   "wall_s": round(batch1["wall_s"], 2), "tokens_per_s": round(tps1, 2)},
        "batched": {"prompts": len(requests), "batch_size": chosen,
                    "policy": str(batch_size),
                    "useful_tokens": batched["useful_tokens"],
                    "computed_decode_steps": batched["computed_decode_steps"],
                    "wall_s": round(batched["wall_s"], 2), "tokens_per_s": round(tpsb, 2),
                    "finish_reasons": pd.Series([c.finish_reason for c in batched["completions"]])
                    .value_counts().to_dict()},
        "speedup_batched_over_batch1": round(tpsb / tps1, 2),
        "prefill": {"prompt_tokens_batched": sum(lengths),
                    "batch1_prefill_s": round(prefill1, 2), "batched_prefill_s": round(prefillb, 2),
                    "batch1_decode_only_tokens_per_s": round(decode1, 2),
                    "batched_decode_only_tokens_per_s": round(decodeb, 2),
                    "decode_only_speedup": round(decodeb / decode1, 2)},
        "padding_efficiency": round(padding_efficiency(batched["useful_tokens"],
                                                       batched["computed_decode_steps"]), 4),
        "padding_efficiency_static_batches_estimate": round(
            padding_efficiency(batched["useful_tokens"], naive_computed), 4),
        "batch1_texts_identical_in_batched_run": f"{same_text}/{len(subset)}",
        "goals": {"speedup_min": 8.0, "padding_efficiency_min": 0.8},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
