"""Generation throughput of the in-process loop and of each serving engine, side by side, one run.

The same requests (CoT prompts of the default study over the paper's computer-science questions,
or hand-written ones where the release is absent; greedy, ``--max-new-tokens``) go through

- ``hf``: our loop (:class:`bloomqg.generation.hf.generator.HFTextGenerator`) at ``--batch-size``;
- ``vllm`` and ``transformers-serve``: the server the workflow would start for the model
  (:class:`bloomqg.generation.engine.EngineTextGenerator`), ``--concurrency`` requests in flight,
  with an empty call cache (every answer generated), its start-up timed apart.

Each gets ``--threads`` torch threads (the server's ``OMP_NUM_THREADS``). Tokens/s = completion
tokens ÷ the wall time of ``complete()``. The texts are compared with the loop's (how many of N
identical, how many parse), never asserted equal: kernels and batch shapes change float sums.
Prints one JSON document. On a GPU machine: ``--gpus 1 --dtype bfloat16 --model-dir DIR``.

    python benchmarks/engines.py [--prompts 64] [--max-new-tokens 64] [--concurrency 16]
        [--batch-size 16] [--threads 2] [--engines hf,vllm,transformers-serve]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from generation_cpu import benchmark_dataset, ensure_model_dir  # noqa: E402

from bloomqg.chat import ChatRequest, DecodingParams  # noqa: E402
from bloomqg.parsing import parse_generation  # noqa: E402
from bloomqg.prompts import build_prompts, messages_from_json  # noqa: E402

BACKENDS = ("hf", "vllm", "transformers-serve")


def measure(generator, requests, params) -> dict:
    started = time.perf_counter()
    completions = generator.complete(requests, params)
    wall = time.perf_counter() - started
    tokens = sum(c.n_completion_tokens or 0 for c in completions)
    return {"completions": completions, "wall_s": round(wall, 2), "completion_tokens": tokens,
            "tokens_per_s": round(tokens / wall, 1) if wall else None,
            "errors": sum(c.text is None for c in completions)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=16, help="engines: requests in flight")
    parser.add_argument("--batch-size", type=int, default=16, help="hf: the loop's batch size")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--gpus", type=int, default=0)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--engines", default=",".join(BACKENDS))
    parser.add_argument("--model-dir", type=Path, default=None)
    parser.add_argument("--model-id", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--engine-arg", action="append", default=[], help="an extra server argument (repeat)")
    parser.add_argument("--seed", type=int, default=20240611)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    chosen = [name for name in args.engines.split(",") if name]
    unknown = sorted(set(chosen) - set(BACKENDS))
    if unknown:
        parser.error(f"unknown --engines {unknown}; choose from {', '.join(BACKENDS)}")

    model_dir = args.model_dir or ensure_model_dir(None)
    dataset, source = benchmark_dataset(args.prompts)
    units = sorted({u for row in dataset["knowledge_units"] for u in row})
    prompts = build_prompts(dataset, "cot", template_path=REPO / "prompts/generation/cot.md",
                            k_exemplars=2, seed=args.seed, domain="computer science",
                            system_path=REPO / "prompts/generation/system.md")
    requests = [ChatRequest(row.prompt_id, messages_from_json(row.messages_json)) for row in prompts.itertuples()]
    params = DecodingParams(temperature=0.0, top_p=1.0, max_new_tokens=args.max_new_tokens, do_sample=False,
                            seed=args.seed)

    results: dict[str, dict] = {}
    for name in chosen:
        started = time.perf_counter()
        if name == "hf":
            from bloomqg.generation.hf.generator import HFTextGenerator

            generator = HFTextGenerator(model_dir, dtype=args.dtype, batch_size=args.batch_size,
                                        num_threads=args.threads)
            settings = {"batch_size": args.batch_size}
        else:
            from bloomqg.generation.engine import EngineTextGenerator

            spec = {"backend": "hf", "model": args.model_id, "engine": name, "dtype": args.dtype,
                    "concurrency": args.concurrency, "engine_args": list(args.engine_arg)}
            cache = tempfile.mkdtemp(prefix=f"bench-{name}-")
            generator = EngineTextGenerator(
                spec, name=f"bench-{name}", model_dir=model_dir, cache_dir=cache, threads=args.threads,
                gpus=args.gpus, log_path=Path(cache) / "serve.log", workflow_dir=REPO)
            settings = {"concurrency": args.concurrency, "engine_versions": generator.provenance["engine_versions"]}
        startup = time.perf_counter() - started
        try:
            results[name] = {**measure(generator, requests, params), "startup_s": round(startup, 1), **settings}
        finally:
            generator.close()
        # as each finishes, so a run cut short still shows what it measured
        print(json.dumps({name: {k: v for k, v in results[name].items() if k != "completions"}}),
              file=sys.stderr, flush=True)

    reference = {c.request_id: c.text for c in results["hf"]["completions"]} if "hf" in results else None
    report: dict = {
        "benchmark": "engines", "model": args.model_id, "model_dir": str(model_dir), "dtype": args.dtype,
        "prompts": len(requests), "prompt_source": source, "max_new_tokens": args.max_new_tokens,
        "threads": args.threads, "gpus": args.gpus, "backends": {},
    }
    for name, result in results.items():
        completions = result.pop("completions")
        result["parsed_ok"] = sum(parse_generation(c.text, "cot", knowledge_units=units).parse_status == "ok"
                                  for c in completions if c.text is not None)
        if reference is not None and name != "hf":
            result["identical_to_hf"] = sum(c.text == reference[c.request_id] for c in completions)
        report["backends"][name] = result
    if "hf" in results:
        base = results["hf"]["tokens_per_s"] or 0
        report["speedup_vs_hf"] = {n: round(r["tokens_per_s"] / base, 2) for n, r in results.items()
                                   if n != "hf" and base and r["tokens_per_s"]}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
