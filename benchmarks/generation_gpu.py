"""GPU generation through our own path (HFTextGenerator) on a 7B-shaped model: figures as JSON.

For a machine with one NVIDIA GPU, torch and transformers, and no network: the model has
Qwen2.5-7B-Instruct's shapes (hidden 3584, 28 layers, 28 heads, 4 KV heads, intermediate 18944,
vocab 152064) with random bf16 weights allocated on the GPU; the tokenizer is a word-level one
built in memory (tests/support/tiny_models.py).  Every request shares a ~160-token prefix
(system message) and has its own ~60-token suffix, as the paper's prompts do; decoding uses the
paper's settings (temperature 0.9, top-p 1.0, 500 new tokens) with stop tokens disabled, so
every row decodes the same number of tokens.

It measures, in one run (< 8 minutes on an H200):

- tokens/s at batch 1 and at ``batch_size: auto`` (one batch of the size the memory estimate
  allows), their ratio (goal >= 20), and batch 1's share of the HBM roofline, weights only,
  embedding excluded: ``bandwidth / (non-embedding weight bytes)`` tokens/s (goal >= 0.5);
- peak memory of the batched run beyond the weights against
  :meth:`HFTextGenerator.estimated_batch_bytes` (goal: within 10%);
- an fp32 equivalence check on the GPU: greedy texts of a tiny Llama through our loop (shared
  prefix, early-stopping rows) against ``model.generate``;
- a forced oversized batch: memory capped with ``torch.cuda.set_per_process_memory_fraction``
  so the planned batch cannot fit; it must halve and return every item.

    python benchmarks/generation_gpu.py            # needs CUDA
    python benchmarks/generation_gpu.py --tiny     # CPU smoke test of the script

Writes the JSON to stdout and to ``$OUT/generation_gpu.json`` when ``OUT`` is set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

QWEN25_7B_SHAPES = {"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28,
                    "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064}
TINY_SHAPES = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
               "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 512}


def build_model(shapes: dict, device, dtype):
    """A Qwen2 model with random weights, created in place on ``device``."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    config = Qwen2Config(**shapes, max_position_embeddings=32768, tie_word_embeddings=False,
                         bos_token_id=None, eos_token_id=3, pad_token_id=0)
    with torch.device(device):
        # allocating on the device skips a CPU init and a host-to-device copy of 15 GB
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    return model.eval()


def requests(count: int, shared_words: int, own_words: int, vocab: int):
    """Chat requests with a common system prefix and a distinct suffix each."""
    import random

    from bloomqg.chat import ChatRequest

    rng = random.Random(7)
    words = min(vocab - 10, 20000)
    system = " ".join(f"w{rng.randrange(words)}" for _ in range(shared_words))
    return [ChatRequest(f"q{i}", ({"role": "system", "content": system},
                                  {"role": "user", "content": " ".join(f"w{rng.randrange(words)}"
                                                                       for _ in range(own_words))}))
            for i in range(count)]


def synchronize(on_gpu: bool) -> None:
    import torch

    if on_gpu:
        torch.cuda.synchronize()


def timed(generator, reqs, params, on_gpu, batch_size=None) -> dict:
    synchronize(on_gpu)
    before = dict(generator.stats)
    started = time.perf_counter()
    completions = generator.complete(reqs, params, batch_size=batch_size)
    synchronize(on_gpu)
    wall = time.perf_counter() - started
    tokens = sum(c.n_completion_tokens or 0 for c in completions)
    delta = {key: generator.stats[key] - before[key] for key in generator.stats}
    return {"requests": len(reqs), "wall_s": round(wall, 3), "tokens": tokens,
            "tokens_per_s": round(tokens / wall, 2), "errors": sum(c.text is None for c in completions),
            "stats": delta}


def equivalence_check(device) -> dict:
    """Greedy fp32 texts of a tiny Llama through our loop against model.generate, on ``device``."""
    from bloomqg.chat import ChatRequest, DecodingParams
    from bloomqg.generation.hf.generator import HFTextGenerator
    from tests.support.tiny_models import chat_tokenizer, generate_reference, tiny_model

    model = tiny_model("llama").to(device)
    generator = HFTextGenerator.from_model(model, chat_tokenizer(), batch_size=4)
    system = " ".join(f"w{i}" for i in range(10, 30))
    reqs = [ChatRequest(f"r{i}", ({"role": "system", "content": system},
                                  {"role": "user", "content": " ".join(f"w{40 + i + j}" for j in range(i + 1))}))
            for i in range(6)]
    want = [generator.tokenizer.decode(kept, skip_special_tokens=True).strip()
            for kept in generate_reference(generator, reqs, 12)]
    got = [c.text for c in generator.complete(reqs, DecodingParams(do_sample=False, max_new_tokens=12))]
    return {"requests": len(reqs), "identical": sum(a == b for a, b in zip(got, want)),
            "shared_prefix_tokens_saved": generator.stats["shared_prefix_tokens_saved"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="tiny model on a CPU: checks the script")
    parser.add_argument("--new-tokens", type=int, default=500)
    parser.add_argument("--shared-words", type=int, default=150, help="system-prefix words (~160 tokens)")
    parser.add_argument("--own-words", type=int, default=60)
    parser.add_argument("--bandwidth-tbps", type=float, default=4.8,
                        help="HBM bandwidth in TB/s (H200 4.8, H100 SXM 3.35, A100 80GB 2.0)")
    args = parser.parse_args()

    import torch

    from bloomqg.chat import DecodingParams
    from bloomqg.generation.hf.generator import HFTextGenerator
    from tests.support.tiny_models import chat_tokenizer

    on_gpu = torch.cuda.is_available()
    if not on_gpu and not args.tiny:
        print("generation_gpu.py: no CUDA GPU available; run it on a machine with an NVIDIA GPU, "
              "or pass --tiny for a CPU smoke test of the script", file=sys.stderr)
        sys.exit(2)
    device = torch.device("cuda" if on_gpu else "cpu")
    dtype = torch.bfloat16 if on_gpu else torch.float32
    shapes = TINY_SHAPES if args.tiny else QWEN25_7B_SHAPES
    if args.tiny:
        args.new_tokens, args.shared_words, args.own_words = min(args.new_tokens, 8), 20, 6
    report: dict = {"benchmark": "generation_gpu", "path": "bloomqg HFTextGenerator",
                    "device": torch.cuda.get_device_name(0) if on_gpu else "cpu (--tiny smoke test)",
                    "torch": torch.__version__, "transformers": __import__("transformers").__version__,
                    "model_shapes": shapes, "dtype": str(dtype).removeprefix("torch."),
                    "new_tokens": args.new_tokens}
    started = time.perf_counter()
    report["equivalence_fp32"] = equivalence_check(device)

    model = build_model(shapes, device, dtype)
    report["build_s"] = round(time.perf_counter() - started, 2)
    generator = HFTextGenerator.from_model(model, chat_tokenizer(vocab_size=shapes["vocab_size"]),
                                           model_id="qwen2.5-7b-shaped-random", batch_size="auto")
    generator.stop_ids = {shapes["vocab_size"] + 1}  # no id stops: every row decodes new_tokens
    params = DecodingParams(temperature=0.9, top_p=1.0, max_new_tokens=args.new_tokens, do_sample=True, seed=1)
    dtype_bytes = torch.tensor([], dtype=dtype).element_size()
    embedding = model.get_input_embeddings().weight.numel()
    weight_bytes = (sum(p.numel() for p in model.parameters()) - embedding) * dtype_bytes
    report["weight_gb_without_embedding"] = round(weight_bytes / 1e9, 3)

    timed(generator, requests(2, args.shared_words, args.own_words, shapes["vocab_size"]),
          DecodingParams(max_new_tokens=4), on_gpu)  # warm-up: kernels, allocator
    single = timed(generator, requests(1, args.shared_words, args.own_words, shapes["vocab_size"]), params, on_gpu)
    probe = requests(1024, args.shared_words, args.own_words, shapes["vocab_size"])
    auto = generator.resolve_batch_size(probe, params)
    batch_reqs = probe[:auto]
    prompt_tokens = max(len(generator.encode(r)) for r in batch_reqs)
    if on_gpu:
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    batched = timed(generator, batch_reqs, params, on_gpu, batch_size=auto)
    estimate = generator.estimated_batch_bytes(auto, prompt_tokens, params)
    report.update({
        "batch1": single, "batched": batched, "auto_batch_size": auto, "prompt_tokens_max": prompt_tokens,
        "speedup_batched_over_batch1": round(batched["tokens_per_s"] / single["tokens_per_s"], 2),
        "roofline": {"bandwidth_tbps": args.bandwidth_tbps,
                     "batch1_tokens_per_s": round(args.bandwidth_tbps * 1e12 / weight_bytes, 2),
                     "batch1_share": round(single["tokens_per_s"] * weight_bytes / (args.bandwidth_tbps * 1e12), 4)},
    })
    if on_gpu:
        peak = torch.cuda.max_memory_allocated() - base
        report["memory"] = {"peak_beyond_weights_gb": round(peak / 1e9, 3),
                            "estimate_gb": round(estimate / 1e9, 3),
                            "peak_over_estimate": round(peak / estimate, 3)}
        # forced oversized batch: leave room for about half the planned batch, then run it
        oversized = min(auto, 256)
        room = generator.estimated_batch_bytes(oversized // 2, prompt_tokens, DecodingParams(max_new_tokens=8))
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.empty_cache()
        torch.cuda.set_per_process_memory_fraction((torch.cuda.memory_allocated() + room) / total)
        try:
            before_splits = generator.stats["oom_splits"]
            forced = timed(generator, probe[:oversized], DecodingParams(max_new_tokens=8, seed=2), on_gpu,
                           batch_size=oversized)
        finally:
            torch.cuda.set_per_process_memory_fraction(1.0)
        report["forced_oom"] = {"planned_batch": oversized, "returned": forced["requests"],
                                "errors": forced["errors"],
                                "oom_splits": generator.stats["oom_splits"] - before_splits,
                                "learned_batch_cap": generator.batch_cap}
    report["goals"] = {"speedup_min": 20.0, "batch1_roofline_share_min": 0.5, "peak_within": 0.10,
                       "equivalence": "all identical", "forced_oom": "halves, no item lost"}
    report["total_s"] = round(time.perf_counter() - started, 1)
    text = json.dumps(report, indent=2)
    print(text)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "generation_gpu.json").write_text(text)


if __name__ == "__main__":
    main()
