"""Generation throughput of the in-process loop and of each serving engine, side by side, one run.

The same requests (CoT or, ``--strategy fgp``, FGP prompts of the default study over the paper's computer-science questions,
or hand-written ones where the release is absent; greedy, ``--max-new-tokens``) go through

- ``hf``: our loop (:class:`bloomqg.generation.hf.generator.HFTextGenerator`) at ``--batch-size``;
- ``vllm`` and ``transformers-serve``: the server the workflow would start for the model
  (:class:`bloomqg.generation.engine.EngineTextGenerator`), ``--concurrency`` requests in flight,
  with an empty call cache (every answer generated), its start-up (with one warm-up request:
  transformers serve loads the model at its first) timed apart.

Each gets ``--threads`` torch threads (the server's ``OMP_NUM_THREADS``). Tokens/s = completion
tokens ÷ the wall time of ``complete()``. The texts are compared with the loop's (how many of N
identical, how many parse), never asserted equal: kernels and batch shapes change float sums;
the offline rules judge scores each side's questions (usable, unit-consistent), and the
difference from the loop is printed in points (``metric_difference_vs_hf``). As in the default
study, answers start with the JSON example's opening (response prefill) where the backend can
continue a final assistant message (the loop, vLLM; not transformers serve, which is then not
compared text for text); ``--no-response-prefill`` sends the bare prompts to all.
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

from bloomqg.inputs.chat import ChatRequest, DecodingParams  # noqa: E402
from bloomqg.judges.rules import RulesJudge  # noqa: E402
from bloomqg.inputs.parsing import parse_generation  # noqa: E402
from bloomqg.inputs.prompts import build_prompts, messages_from_json, with_response_prefill  # noqa: E402
from bloomqg.inputs.strategies import BUILTIN_STRATEGIES  # noqa: E402


BACKENDS = ("hf", "vllm", "transformers-serve")


def measure(generator, requests, params) -> dict:
    started = time.perf_counter()
    completions = generator.complete(requests, params)
    wall = time.perf_counter() - started
    tokens = sum(c.n_completion_tokens or 0 for c in completions)
    return {"completions": completions, "wall_s": round(wall, 2), "completion_tokens": tokens,
            "tokens_per_s": round(tokens / wall, 1) if wall else None,
            "errors": sum(c.text is None for c in completions)}


#: The rates :func:`judged_rates` gives, in percent of the prompts (usable) or of the usable ones.
RATES = ("usable_pct", "unit_consistent_pct")


def judged_rates(judge, parsed: dict, originals: dict) -> dict:
    """The offline rules judge (the default study's) on each parsed question: the share of all
    prompts that is usable (unique, readable and answerable: the study's usability) and, of the
    usable, the share whose judged knowledge units hold the original's (CatCons of the unit).
    A judge-free stand-in for the study's metrics: the same on both sides, so a difference is
    the engine's."""
    usable = consistent = 0
    for prompt_id, result in parsed.items():
        if result.parse_status != "ok" or not result.new_question:
            continue
        row = originals[prompt_id]
        verdict = judge.judge(result.new_question, row.original_question, row.item_id)
        if all(verdict[c].value is True for c in ("unique", "readable", "answerable")):
            usable += 1
            judged_units = set(verdict["knowledge_units"].value or ())
            consistent += bool(judged_units & set(row.original_knowledge_units))
    n = len(originals)
    return {"usable": usable, "usable_pct": round(100 * usable / n, 2) if n else None,
            "unit_consistent": consistent,
            "unit_consistent_pct": round(100 * consistent / usable, 2) if usable else None}


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
    parser.add_argument("--no-response-prefill", dest="response_prefill", action="store_false",
                        help="send the prompts without the default study's response prefill")
    parser.add_argument("--strategy", default="cot", choices=["cot", "fgp"],
                        help="the built-in strategy whose prompts are sent (FGP's answers parse more often)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    chosen = [name for name in args.engines.split(",") if name]
    unknown = sorted(set(chosen) - set(BACKENDS))
    if unknown:
        parser.error(f"unknown --engines {unknown}; choose from {', '.join(BACKENDS)}")

    model_dir = args.model_dir or ensure_model_dir(None)
    dataset, source = benchmark_dataset(args.prompts)
    units = sorted({u for row in dataset["knowledge_units"] for u in row})
    strategy = BUILTIN_STRATEGIES[args.strategy]
    prompts = build_prompts(dataset, strategy, template_path=REPO / strategy.passes[0].template,
                            k_exemplars=2, seed=args.seed, domain="computer science",
                            system_path=REPO / "prompts/generation/system.md")
    plain = [ChatRequest(row.prompt_id, messages_from_json(row.messages_json)) for row in prompts.itertuples()]
    # the default study's response prefill: the answer starts with the opening of the prompt's
    # JSON example, for the backends that continue a final assistant message (the loop, vLLM)
    prefilled = [ChatRequest(r.request_id, with_response_prefill(r.messages, prompt_id=r.request_id)[0])
                 for r in plain]
    params = DecodingParams(temperature=0.0, top_p=1.0, max_new_tokens=args.max_new_tokens, do_sample=False,
                            seed=args.seed)

    results: dict[str, dict] = {}
    # each engine's call cache and server log; removed when the benchmark exits, failed or not
    scratch = tempfile.TemporaryDirectory(prefix="bench-engines-")
    for name in chosen:
        started = time.perf_counter()
        if name == "hf":
            from bloomqg.generation.hf.generator import HFTextGenerator

            generator = HFTextGenerator(model_dir, dtype=args.dtype, batch_size=args.batch_size,
                                        num_threads=args.threads, response_prefill=args.response_prefill)
            settings = {"batch_size": args.batch_size}
        else:
            from bloomqg.generation.engine import EngineTextGenerator

            spec = {"backend": "hf", "model": args.model_id, "engine": name, "dtype": args.dtype,
                    "concurrency": args.concurrency, "engine_args": list(args.engine_arg),
                    "response_prefill": args.response_prefill and name == "vllm"}
            cache = tempfile.mkdtemp(prefix=f"bench-{name}-", dir=scratch.name)
            generator = EngineTextGenerator(
                spec, name=f"bench-{name}", model_dir=model_dir, cache_dir=cache, threads=args.threads,
                gpus=args.gpus, log_path=Path(cache) / "serve.log", workflow_dir=REPO)
            settings = {"concurrency": args.concurrency, "engine_versions": generator.provenance["engine_versions"]}
            try:
                generator.start()  # the server's start-up, timed apart from the requests, and one
                # request: transformers serve loads the model at its first
                generator.complete([ChatRequest("warm-up", ({"role": "user", "content": "Say hi."},))], params)
            except BaseException:
                generator.close()
                raise
        startup = time.perf_counter() - started
        prefill = args.response_prefill and generator.supports_response_prefill
        try:
            results[name] = {**measure(generator, prefilled if prefill else plain, params),
                             "startup_s": round(startup, 1), "response_prefill": prefill, **settings}
        finally:
            generator.close()
        # as each finishes, so a run cut short still shows what it measured
        print(json.dumps({name: {k: v for k, v in results[name].items() if k != "completions"}}),
              file=sys.stderr, flush=True)

    scratch.cleanup()
    reference = {c.request_id: c.text for c in results["hf"]["completions"]} if "hf" in results else None
    report: dict = {
        "benchmark": "engines", "model": args.model_id, "model_dir": str(model_dir), "dtype": args.dtype,
        "prompts": len(plain), "strategy": args.strategy, "prompt_source": source, "max_new_tokens": args.max_new_tokens,
        "threads": args.threads, "gpus": args.gpus, "backends": {},
    }
    judge = RulesJudge.from_spec("rules", {"backend": "rules"}, list(zip(
        dataset["item_id"], dataset["question"], dataset["knowledge_units"])), units)
    originals = {row.prompt_id: row for row in prompts.itertuples()}
    for name, result in results.items():
        completions = result.pop("completions")
        parsed = {c.request_id: parse_generation(c.text, strategy.answer_fields, knowledge_units=units)
                  for c in completions if c.text is not None}
        result["parsed_ok"] = sum(p.parse_status == "ok" for p in parsed.values())
        result.update(judged_rates(judge, parsed, originals))
        if reference is not None and name != "hf" and result["response_prefill"] == results["hf"]["response_prefill"]:
            result["identical_to_hf"] = sum(c.text == reference[c.request_id] for c in completions)
        report["backends"][name] = result
    if "hf" in report["backends"]:
        hf = report["backends"]["hf"]
        # points, engine − loop: what switching engines changes in the numbers a study reports
        report["metric_difference_vs_hf"] = {
            n: {k: None if r[k] is None or hf[k] is None else round(r[k] - hf[k], 2) for k in RATES}
            for n, r in report["backends"].items() if n != "hf" and r["response_prefill"] == hf["response_prefill"]}
    if "hf" in results:
        base = results["hf"]["tokens_per_s"] or 0
        report["speedup_vs_hf"] = {n: round(r["tokens_per_s"] / base, 2) for n, r in results.items()
                                   if n != "hf" and base and r["tokens_per_s"]}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
