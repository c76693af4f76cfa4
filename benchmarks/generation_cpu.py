"""CPU generation throughput: batch 1 versus the chosen batching, SmolLM2-135M, 2 threads.

Prints one JSON document.  Tokens/s = useful completion tokens (up to, excluding, the stop
token) ÷ wall time.  Padding efficiency = useful tokens ÷ sequence-steps the decode loop
computed; for comparison it also reports what ``model.generate``'s static batches would have
computed for the same completions (every row decodes until the longest in its batch stops).

Requests: what the default study sends its model: CoT prompts (k = 2 exemplars, response
prefill and decoding from ``config.yaml``) over the first questions of the paper's
computer-science release when it is present (``$BLOOMQG_SHARED_DATA`` or
``<repo>/../shared/data``), else over hand-written ones.

Both sides run the same engine (:class:`bloomqg.generation.hf.generator.HFTextGenerator`): batch 1 is one
prompt at a time (nothing to share between prompts); the chosen batching is "auto" (64 on a
CPU): length-bucketed rows that leave the batch when they stop, the batch's shared prompt
prefix computed once, a chunked prefill and a preallocated KV cache.  Batch 1 runs on a subset
(it is slow), split over ``--rounds`` rounds interleaved with repeats of the batched run, so
drifts in the shared machine's speed fall on both sides of the ratio.  Per-request seeds make
the texts comparable: both runs produce (nearly always) the same ones.

    python benchmarks/generation_cpu.py [--prompts 64] [--batch1-prompts 8] [--rounds 2]
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

from bloomqg.inputs.chat import ChatRequest, DecodingParams
from bloomqg.generation.hf.batching import padding_efficiency, plan_batches
from bloomqg.inputs.prompts import build_prompts, messages_from_json, with_response_prefill

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

    from bloomqg.inputs.models import materialize_model

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
    delta = {key: generator.stats[key] - before[key] for key in generator.stats}
    return {"completions": completions, "wall_s": wall, "useful_tokens": delta["useful_tokens"],
            "computed_decode_steps": delta["computed_decode_steps"],
            "prefill_tokens": delta["prefill_tokens"],
            "shared_prefix_tokens_saved": delta["shared_prefix_tokens_saved"]}


def merge_runs(runs: list[dict]) -> dict:
    """Several runs of one configuration as one: summed tokens and time, completions in order."""
    keys = ("wall_s", "useful_tokens", "computed_decode_steps", "prefill_tokens",
            "shared_prefix_tokens_saved")
    merged = {key: sum(run[key] for run in runs) for key in keys}
    merged["completions"] = [c for run in runs for c in run["completions"]]
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--batch1-prompts", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2,
                        help="interleave this many rounds of (a share of batch 1, the batched run)")
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="default: the default study's (config.yaml)")
    parser.add_argument("--batch-size", default="auto", help="'auto' or an integer")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model-dir", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=20240611)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    import torch
    import yaml

    from bloomqg.generation.hf.generator import HFTextGenerator

    torch.set_num_threads(args.threads)
    model_dir = ensure_model_dir(args.model_dir)
    study_model = yaml.safe_load((REPO / "config.yaml").read_text())["models"]["smollm2-135m"]
    decoding = study_model["generation"]
    dataset, source = benchmark_dataset(args.prompts)
    prompts = build_prompts(dataset, "cot", template_path=REPO / "prompts/generation/cot.md",
                            k_exemplars=2, seed=args.seed, domain="computer science",
                            system_path=REPO / "prompts/generation/system.md")
    # the requests the default study sends: with its response prefill when it is on
    prefill = bool(study_model.get("response_prefill", False))
    requests = []
    for row in prompts.itertuples():
        messages = messages_from_json(row.messages_json)
        if prefill:
            messages, _ = with_response_prefill(messages, prompt_id=row.prompt_id)
        requests.append(ChatRequest(row.prompt_id, messages))
    params = DecodingParams(temperature=decoding["temperature"], top_p=decoding["top_p"],
                            max_new_tokens=args.max_new_tokens or decoding["max_new_tokens"],
                            seed=args.seed)
    batch_size = args.batch_size if args.batch_size == "auto" else int(args.batch_size)

    # One loaded model, two batch-size policies.  The rounds interleave the two so that the
    # machine's drifts (other tenants, clocks) fall on both sides of the ratio.
    generator = HFTextGenerator(model_dir, dtype="float32", batch_size=1)
    subset = requests[: args.batch1_prompts]
    lengths = [len(generator.encode(r)) for r in requests]
    generator.batch_size_policy = batch_size
    chosen = generator.batch_size_for(lengths, params.max_new_tokens)
    batch1_runs, batched_runs = [], []
    for round_index in range(args.rounds):
        generator.batch_size_policy = 1
        batch1_runs.append(run(generator, subset[round_index :: args.rounds], params))
        generator.batch_size_policy = batch_size
        batched_runs.append(run(generator, requests, params))
    batch1 = merge_runs(batch1_runs)
    batch1["completions"] = sorted(batch1["completions"], key=lambda c: c.request_id)
    # every round runs the same requests: one round's counts, the mean round's time
    batched = dict(batched_runs[0], wall_s=sum(r["wall_s"] for r in batched_runs) / args.rounds)
    same_every_round = all([c.text for c in run_["completions"]] ==
                           [c.text for c in batched_runs[0]["completions"]] for run_ in batched_runs)
    batched_generator = generator
    # Prefill cost, measured apart (max_new_tokens=1): batching cannot shrink it, so it bounds
    # the end-to-end speed-up; decode-only figures show what the batching itself achieves.
    prefill_params = DecodingParams(temperature=params.temperature, top_p=params.top_p,
                                    max_new_tokens=1, seed=args.seed)
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
    batched_text = {c.request_id: c.text for c in batched["completions"]}
    same_text = sum(c.text == batched_text[c.request_id] for c in batch1["completions"])
    tps1 = batch1["useful_tokens"] / batch1["wall_s"]
    tpsb = batched["useful_tokens"] / batched["wall_s"]
    report = {
        "benchmark": "generation_cpu",
        "model": "SmolLM2-135M-Instruct (GGUF Q4_1 dequantised to float32)",
        "prompt_template": "prompts/generation/cot.md",
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "load_average_1min_at_end": os.getloadavg()[0],
        "prompt_source": source,
        "max_new_tokens": params.max_new_tokens,
        "response_prefill": prefill,
        "rounds": args.rounds,
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
                    "prompt_tokens_computed_batched": batched["prefill_tokens"],
                    "shared_prefix_tokens_saved_batched": batched["shared_prefix_tokens_saved"],
                    "chunk_tokens": batched_generator.prefill_chunk_tokens,
                    "batch1_prefill_s": round(prefill1, 2), "batched_prefill_s": round(prefillb, 2),
                    "batch1_decode_only_tokens_per_s": round(decode1, 2),
                    "batched_decode_only_tokens_per_s": round(decodeb, 2),
                    "decode_only_speedup": round(decodeb / decode1, 2)},
        "padding_efficiency": round(padding_efficiency(batched["useful_tokens"],
                                                       batched["computed_decode_steps"]), 4),
        "padding_efficiency_static_batches_estimate": round(
            padding_efficiency(batched["useful_tokens"], naive_computed), 4),
        "batch1_texts_identical_in_batched_run": f"{same_text}/{len(subset)}",
        "batched_texts_identical_every_round": same_every_round,
        "goals": {"speedup_min": 8.0, "padding_efficiency_min": 0.8},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
