"""A serving engine against our loop at batch 64 on one GPU, for a 7B-shaped model: JSON.

Issue 31's goal on a GPU: an engine generates at least 1.5 × our loop's tokens/s at batch 64 for
a 7B model. For a machine with one NVIDIA GPU and no network (``benchmarks/gpu_check.sh`` runs
it as its ``engines`` step):

- the model is Llama-3-8B-shaped (the paper's ``llama3-8b-chinese``) with random bf16 weights,
  saved with the word-level chat tokenizer (``tests/support/tiny_models.chat_tokenizer``) to a
  temporary folder, since a server loads its model from disk. Llama, not Qwen2 (whose shapes
  ``generation_gpu.py`` uses): a server loads the tokenizer with ``AutoTokenizer``, which for a
  ``qwen2`` config builds Qwen2's byte-level BPE from the folder and reads none of the word-level
  vocabulary (every prompt became the same five framing tokens; transformers 5.17 and 5.24);
  for ``llama`` it loads the folder's tokenizer as saved;
- the same ``--requests`` requests (a ~160-token system prefix they share and ~60 tokens of
  their own, as the paper's prompts have), greedy, at most ``--new-tokens`` each, go through
  1. ``loop``: our decode loop (:class:`~bloomqg.generation.hf.generator.HFTextGenerator`) at
     batch ``--requests``, on the model in memory;
  2. each engine this interpreter can run, as the workflow runs it
     (:class:`~bloomqg.generation.engine.EngineTextGenerator`: the server started on loopback on
     the job's GPU, every request through the OpenAI client, ``--requests`` in flight, an empty
     call cache): ``transformers-serve`` (continuous batching and paged attention from the
     installed transformers; the serving packages it and our client need travel to the lent
     machine as wheels, ``benchmarks/gpu_wheels.py``) and ``vllm`` when this interpreter has it
     (the lent machine's image does not, and its CUDA wheel is too large to carry).

Each timed run follows a warm-up of a few requests (kernels, allocator, the server's first
batch); the server's start-up is timed apart. Tokens/s = completion tokens ÷ wall time of one
``complete`` call. Texts are compared with the loop's (how many identical), never asserted equal.
``goals``: every engine that ran answered every request, and the fastest engine's tokens/s over
the loop's (judged on a GPU only).

    python benchmarks/engine_gpu.py            # needs CUDA
    python benchmarks/engine_gpu.py --tiny     # CPU: a tiny model, the same path, goals not judged

Writes the JSON to stdout, to ``--json PATH`` when given, and to ``$OUT/engine_gpu.json`` when
``OUT`` is set.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for path in (REPO, REPO / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from generation_gpu import (  # noqa: E402
    TINY_SHAPES, Completeness, Goals, finish, public, requests, synchronize,
)

#: The issue's goal: the engine's tokens/s over our loop's, at batch 64, 7B model, one GPU.
ENGINE_SPEEDUP_MIN = 1.5
WARMUP_REQUESTS = 4
MODEL_NAME = "llama3-8b-shaped-random"
#: Meta-Llama-3-8B's shapes (the paper's llama3-8b-chinese): 8.0B parameters, 16 GB in bf16.
LLAMA3_8B_SHAPES = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                    "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256}


def build_llama(shapes: dict[str, int], device: Any, dtype: Any) -> Any:
    """A Llama model with random weights, created in place on ``device`` (no 16 GB host copy)."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(**shapes, max_position_embeddings=8192, rope_theta=500000.0, tie_word_embeddings=False,
                         bos_token_id=None, eos_token_id=3, pad_token_id=0)  # the chat tokenizer's <|im_end|>
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    return model.eval()


def timed_complete(generator: Any, reqs: Sequence[Any], params: Any, on_gpu: bool, completeness: Completeness,
                   run: str) -> dict[str, Any]:
    """One ``complete`` call over ``reqs``: wall time, completion tokens, tokens/s, checked."""
    synchronize(on_gpu)
    started = time.perf_counter()
    completions = generator.complete(reqs, params)
    synchronize(on_gpu)
    wall = time.perf_counter() - started
    tokens = sum(c.n_completion_tokens or 0 for c in completions)
    return {"requests": len(reqs), "wall_s": round(wall, 3), "completion_tokens": tokens,
            "tokens_per_s": round(tokens / wall, 2) if wall else None,
            "completeness": completeness.check(run, reqs, completions), "completions": completions}


def save_random_model(model: Any, tokenizer: Any, folder: Path) -> dict[str, Any]:
    """Weights, config, generation config and tokenizer in ``folder``, as a hub snapshot is."""
    started = time.perf_counter()
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    size = sum(path.stat().st_size for path in folder.iterdir() if path.is_file())
    return {"saved_s": round(time.perf_counter() - started, 1), "folder_gb": round(size / 1e9, 2)}


def available_engines(requested: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The requested engines this interpreter can run, and why the others cannot."""
    from transformers.utils.import_utils import is_serve_available

    can, cannot = [], {}
    for engine in requested:
        if engine == "transformers-serve" and not is_serve_available():
            cannot[engine] = ("transformers serve's packages are missing (pydantic, fastapi, uvicorn, openai): "
                              "carry them as wheels, benchmarks/gpu_wheels.py")
        elif engine == "vllm" and importlib.util.find_spec("vllm") is None:
            cannot[engine] = f"vllm is not installed for {sys.executable}"
        elif importlib.util.find_spec("openai") is None:
            cannot[engine] = "the openai client is missing: carry it as a wheel, benchmarks/gpu_wheels.py"
        else:
            can.append(engine)
    return can, cannot


def engine_run(engine: str, model_dir: Path, work: Path, reqs: Sequence[Any], warm: Sequence[Any], params: Any,
               on_gpu: bool, dtype: str, threads: int, completeness: Completeness) -> dict[str, Any]:
    """Start ``engine`` on the saved model as a generate_on_engine job would, warm it, time it."""
    from bloomqg.generation.engine import EngineTextGenerator

    spec: dict[str, Any] = {"backend": "hf", "model": MODEL_NAME, "engine": engine, "dtype": dtype,
                            "concurrency": len(reqs), "timeout_s": 900, "engine_ready_timeout_s": 400}
    if engine == "vllm":
        spec["engine_python"] = sys.executable  # the interpreter that has it (no .venv-vllm there)
    folder = work / engine
    folder.mkdir()
    started = time.perf_counter()
    generator = EngineTextGenerator(spec, name=f"engine_gpu-{engine}", model_dir=model_dir, cache_dir=folder / "cache",
                                    threads=threads, gpus=1 if on_gpu else 0, log_path=folder / "serve.log",
                                    workflow_dir=REPO)
    try:
        generator.start()  # the model's load and the server's start-up, timed apart from the requests
        startup = time.perf_counter() - started
        timed_complete(generator, warm, params, on_gpu, completeness, f"{engine}_warmup")
        run = timed_complete(generator, reqs, params, on_gpu, completeness, engine)
        run.update({"startup_s": round(startup, 1), "engine_versions": generator.provenance["engine_versions"],
                    "engine_command": generator.provenance["engine_command"]})
        return run
    except Exception:
        log = folder / "serve.log"
        if log.is_file():
            print(f"--- {engine} server log (last lines) ---\n" + "\n".join(log.read_text().splitlines()[-30:]),
                  file=sys.stderr)
        raise
    finally:
        generator.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a tiny model on the CPU: the same path, no GPU")
    parser.add_argument("--requests", type=int, default=64, help="requests; the loop's batch and the engines' "
                        "requests in flight")
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--shared-words", type=int, default=150, help="system-prefix words (~160 tokens)")
    parser.add_argument("--own-words", type=int, default=60)
    parser.add_argument("--engines", default="transformers-serve,vllm")
    parser.add_argument("--threads", type=int, default=min(8, os.cpu_count() or 1),
                        help="CPU threads of the server (the job's granted cores)")
    parser.add_argument("--json", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)

    import torch

    from bloomqg.inputs.chat import DecodingParams
    from bloomqg.generation.hf.generator import HFTextGenerator
    from tests.support.tiny_models import chat_tokenizer

    on_gpu = torch.cuda.is_available() and not args.tiny
    if not torch.cuda.is_available() and not args.tiny:
        print("engine_gpu.py: no CUDA GPU available; pass --tiny for the CPU run of the same path", file=sys.stderr)
        return 2
    if args.tiny:
        args.requests, args.new_tokens = min(args.requests, 8), min(args.new_tokens, 8)
        args.shared_words, args.own_words = 20, 6
    shapes = TINY_SHAPES if args.tiny else LLAMA3_8B_SHAPES
    device = torch.device("cuda" if on_gpu else "cpu")
    dtype = torch.bfloat16 if on_gpu else torch.float32
    dtype_name = str(dtype).removeprefix("torch.")
    report: dict[str, Any] = {
        "benchmark": "engine_gpu", "device": torch.cuda.get_device_name(0) if on_gpu else "cpu (--tiny)",
        "torch": torch.__version__, "transformers": __import__("transformers").__version__, "dtype": dtype_name,
        "model_shapes": shapes, "requests": args.requests, "new_tokens": args.new_tokens, "greedy": True}
    goals, completeness = Goals(), Completeness()
    started = time.perf_counter()
    engines, missing = available_engines([name for name in args.engines.split(",") if name])
    reqs = requests(args.requests, args.shared_words, args.own_words, shapes["vocab_size"])
    warm = requests(WARMUP_REQUESTS, args.shared_words, args.own_words, shapes["vocab_size"], "warm")
    params = DecodingParams(temperature=0.0, top_p=1.0, max_new_tokens=args.new_tokens, do_sample=False, seed=1)
    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="engine_gpu-") as scratch:
        work = Path(scratch)
        model_dir = work / "model"
        try:
            build_started = time.perf_counter()
            model = build_llama(shapes, device, dtype)
            tokenizer = chat_tokenizer(vocab_size=shapes["vocab_size"])
            report["model"] = {"build_s": round(time.perf_counter() - build_started, 1),
                               **save_random_model(model, tokenizer, model_dir)}
            loop = HFTextGenerator.from_model(model, tokenizer, model_id=MODEL_NAME, batch_size=args.requests)
            timed_complete(loop, warm, params, on_gpu, completeness, "loop_warmup")
            runs["loop"] = timed_complete(loop, reqs, params, on_gpu, completeness, "loop")
            runs["loop"]["batch_size"] = args.requests
            loop.close()
            del loop, model
            gc.collect()
            if on_gpu:
                torch.cuda.empty_cache()  # the server gets the whole card
        except Exception as error:  # noqa: BLE001 - recorded as a failed goal
            report["loop_error"] = f"{type(error).__name__}: {error}"
            goals.add("loop_ran", "the loop answers every request", report["loop_error"], False)
        for engine in engines if "loop" in runs else []:
            try:
                runs[engine] = engine_run(engine, model_dir, work, reqs, warm, params, on_gpu, dtype_name,
                                          args.threads, completeness)
            except Exception as error:  # noqa: BLE001 - recorded as a failed goal; the next engine still runs
                runs[engine] = {"error": f"{type(error).__name__}: {error}"[:2000]}
    reference = {c.request_id: c.text for c in runs["loop"]["completions"]} if "loop" in runs else {}
    for name, run in runs.items():
        if name != "loop" and "completions" in run:
            run["identical_to_loop"] = sum(c.text == reference.get(c.request_id) for c in run["completions"])
    report["runs"] = {name: public(run) for name, run in runs.items()}
    report["engines_not_run"] = missing
    cpu_note = "" if on_gpu else "CPU --tiny run: the speed-up is judged on a GPU only"
    for engine in engines:
        run = runs.get(engine, {})
        goals.add(f"{engine}_answered_every_request", "one completion per request, ids in order, no errors",
                  run.get("error") or run.get("completeness", {}).get("returned"),
                  bool(run.get("completeness", {}).get("ok")))
    for engine, why in missing.items():
        goals.add(f"{engine}_answered_every_request", "one completion per request, ids in order, no errors", None,
                  None, f"not run: {why}")
    loop_rate = runs.get("loop", {}).get("tokens_per_s")
    speedups = {name: round(run["tokens_per_s"] / loop_rate, 2) for name, run in runs.items()
                if name != "loop" and loop_rate and run.get("tokens_per_s")}
    report["speedup_vs_loop"] = speedups
    best = max(speedups.items(), key=lambda item: item[1]) if speedups else None
    goals.add("engine_speedup_vs_loop_batch64",
              f">= {ENGINE_SPEEDUP_MIN} x the loop's tokens/s at batch {args.requests}",
              {"engine": best[0], "speedup": best[1]} if best else None,
              (best is not None and best[1] >= ENGINE_SPEEDUP_MIN) if on_gpu else None,
              cpu_note or ("" if best else "no engine ran"))
    return finish(report, goals, completeness, started, args.json)


if __name__ == "__main__":
    sys.exit(main())
