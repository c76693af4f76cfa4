"""Parse rate of SmolLM2-135M generations with and without an assistant-turn JSON prefill.

Prints one JSON document.  For the embedded datasets of the default config (``data/cs``,
``data/math``, ``data/social``), builds CoT and FGP prompts as the default study does
(k = 2 exemplars, seed 20240611, the dataset's domain), takes up to ``--per-strategy`` prompts
per strategy spread evenly over the datasets that run it, and generates for the *same* prompts
twice with the default study's decoding (temperature 0.9, top-p 0.95, 128 new tokens): once
plain, once with the response prefill (:func:`bloomqg.inputs.prompts.with_response_prefill`).

Figures per strategy and condition:

- ``parse_rate``: share of answers :func:`bloomqg.inputs.parsing.parse_generation` reads a question from;
- ``cot_level_rate`` / ``cot_unit_rate`` (CoT): share whose identified Bloom level / knowledge unit
  is recognised;
- ``tokens_per_s``: generated tokens ÷ wall time (2 CPU threads, shared machine: noisy);
- ``tokens_after_object``: generated tokens after the answer's first complete JSON object
  closes, i.e. what a stop at brace depth 0 would have saved (0 where no object closes).

    python benchmarks/parse_rate.py [--per-strategy 24] [--max-new-tokens 128] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bloomqg.inputs.datasets import dataset_knowledge_units, load_dataset
from bloomqg.inputs.chat import ChatRequest, DecodingParams
from bloomqg.inputs.strategies import BUILTIN_STRATEGIES
from bloomqg.inputs.parsing import parse_generation
from bloomqg.inputs.prompts import (
    build_prompts,
    default_template_paths,
    messages_from_json,
    with_response_prefill,
)

DATASETS = ("cs", "math", "social")


def ensure_model_dir(config: dict, model_dir: Path | None) -> Path:
    """The converted SmolLM2 directory, converting the default config's GGUF if needed."""
    from bloomqg.inputs.models import materialize_model

    if model_dir is None:
        model_dir = REPO / config.get("cache_dir", ".cache/bloomqg") / "benchmarks" / "smollm2-135m"
    if not (model_dir / "config.json").is_file():
        materialize_model(config["models"]["smollm2-135m"], model_dir)
    return model_dir


def benchmark_prompts(config: dict, per_strategy: int, seed: int) -> dict[str, list[tuple]]:
    """Per strategy: (prompts row, knowledge units of its dataset), spread over the datasets."""
    chosen: dict[str, list[tuple]] = {}
    for strategy in ("cot", "fgp"):
        names = [n for n in DATASETS if strategy in config["datasets"][n].get(
            "strategies", config["strategies"])]
        share = -(-per_strategy // len(names))  # ceiling: an even spread
        rows: list[tuple] = []
        for name in names:
            spec = config["datasets"][name]
            dataset = load_dataset(name, spec, base_dir=REPO)
            template, system = default_template_paths(strategy, REPO)
            prompts = build_prompts(dataset, strategy, template_path=template, k_exemplars=2,
                                    seed=seed, domain=spec["domain"], system_path=system)
            units = dataset_knowledge_units(dataset)
            rows += [(row, units) for row in prompts.head(share).itertuples()]
        chosen[strategy] = rows[:per_strategy]
    return chosen


def first_object_end(text: str) -> int | None:
    """Index just past the first complete JSON object starting at a ``{``, or None."""
    decoder = json.JSONDecoder()
    for start in (i for i, char in enumerate(text) if char == "{"):
        try:
            _value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        return end
    return None


def measure(generator, rows: list[tuple], params: DecodingParams, prefill: bool) -> dict:
    """Generate for ``rows`` and summarise parsing and speed."""
    requests = []
    for row, _units in rows:
        messages = messages_from_json(row.messages_json, prompt_id=row.prompt_id)
        if prefill:
            messages, _prefix = with_response_prefill(messages, prompt_id=row.prompt_id)
        requests.append(ChatRequest(row.prompt_id, messages))
    started = time.perf_counter()
    completions = generator.complete(requests, params)
    wall = time.perf_counter() - started
    parsed = [parse_generation(c.text, BUILTIN_STRATEGIES[row.strategy].answer_fields, knowledge_units=units)
              for c, (row, units) in zip(completions, rows)]
    tokens = sum(c.n_completion_tokens or 0 for c in completions)
    after_object = 0
    for completion in completions:
        end = first_object_end(completion.text or "")
        if end is not None:
            tail = (completion.text or "")[end:]
            after_object += len(generator.tokenizer(tail, add_special_tokens=False)["input_ids"])
    n = len(completions)
    ok = [p for p in parsed if p.parse_status == "ok"]
    summary = {
        "n": n,
        "parsed": len(ok),
        "parse_rate": round(len(ok) / n, 3) if n else None,
        "finish_length": sum(c.finish_reason == "length" for c in completions),
        "completion_tokens": tokens,
        "tokens_after_object": after_object,
        "wall_s": round(wall, 1),
        "tokens_per_s": round(tokens / wall, 1) if wall else None,
        "failure_reasons": pd.Series([p.parse_error for p in parsed if p.parse_status != "ok"],
                                     dtype=object).value_counts().to_dict(),
        "sample": (completions[0].text or "")[:300] if completions else None,
    }
    if rows and rows[0][0].strategy == "cot":
        summary["cot_level_rate"] = round(sum(p.identified_bloom_level is not None for p in ok) / n, 3)
        summary["cot_unit_rate"] = round(
            sum(p.identified_knowledge_units is not None for p in ok) / n, 3)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-strategy", type=int, default=24)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--batch-size", default="auto", help="'auto' or an integer")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model-dir", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=20240611)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    import torch

    from bloomqg.generation.hf.generator import HFTextGenerator

    torch.set_num_threads(args.threads)
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    generation = config["models"]["smollm2-135m"]["generation"]
    params = DecodingParams(temperature=generation["temperature"], top_p=generation["top_p"],
                            max_new_tokens=args.max_new_tokens, seed=args.seed)
    batch_size = args.batch_size if args.batch_size == "auto" else int(args.batch_size)
    generator = HFTextGenerator(ensure_model_dir(config, args.model_dir), dtype="float32",
                                batch_size=batch_size)
    chosen = benchmark_prompts(config, args.per_strategy, args.seed)
    results: dict[str, dict] = {}
    for strategy, rows in chosen.items():
        results[strategy] = {
            "datasets": sorted({row.dataset for row, _units in rows}),
            "plain": measure(generator, rows, params, prefill=False),
            "prefill": measure(generator, rows, params, prefill=True),
        }
    all_n = sum(r["plain"]["n"] for r in results.values())
    print(json.dumps({
        "model": "SmolLM2-135M-Instruct (GGUF Q4_1 -> float32), CPU",
        "threads": torch.get_num_threads(),
        "decoding": {"temperature": params.temperature, "top_p": params.top_p,
                     "max_new_tokens": params.max_new_tokens, "seed": params.seed},
        "batch_size": generator.provenance.get("batch_size"),
        "by_strategy": results,
        "overall": {
            condition: round(sum(r[condition]["parsed"] for r in results.values()) / all_n, 3)
            for condition in ("plain", "prefill")
        },
    }, indent=2, ensure_ascii=False))
    generator.close()


if __name__ == "__main__":
    main()
