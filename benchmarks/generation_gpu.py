"""GPU decode throughput for a 7B-shaped model: batch 1 versus a large batch, against the roofline.

For a machine with one NVIDIA GPU and no network: the model has Qwen2.5-7B-Instruct's shapes
(hidden 3584, 28 layers, 28 heads, 4 KV heads, intermediate 18944, vocab 152064) with random
bf16 weights allocated directly on the GPU, so nothing is downloaded.  Output lengths are fixed
(``min_new_tokens = max_new_tokens``, no EOS) so every run decodes the same number of tokens.

Prints one JSON document: prefill and decode times, decode tokens/s at batch 1 and at the
chosen batch, their ratio, and batch 1's share of the HBM roofline, where one decode step must
read all weights plus the KV cache so far::

    roofline tokens/s (batch 1) = bandwidth / (weight bytes + mean KV-cache bytes per step)

Goals: batched ÷ batch 1 >= 20; batch 1 >= 0.5 of the roofline.

    python benchmarks/generation_gpu.py                # needs CUDA; a few minutes
    python benchmarks/generation_gpu.py --tiny         # smoke test of the script on a CPU
    python benchmarks/generation_gpu.py --cache dynamic  # eager decoding, no CUDA graphs

``--cache static`` (default) makes ``generate`` use a static KV cache, which transformers
compiles with ``torch.compile(mode="reduce-overhead")`` (CUDA graphs) on a GPU: this removes the
per-step Python/launch overhead that otherwise dominates batch-1 decoding.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bloomqg.generation.batching import auto_batch_size_gpu, kv_cache_bytes_per_token

QWEN25_7B_SHAPES = {"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28,
                        "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064}
TINY_SHAPES = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                   "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 512}


def build_model(shapes: dict, device, dtype):
    """A Qwen2 model with random weights, created in place on ``device``."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    config = Qwen2Config(**shapes, max_position_embeddings=32768, tie_word_embeddings=False,
                         bos_token_id=0, eos_token_id=None, pad_token_id=0)
    with torch.device(device):
        # allocating on the device skips a CPU init and a host-to-device copy of 15 GB
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    model.eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def timed_generate(model, batch: int, prompt_tokens: int, new_tokens: int, cache: str, device,
                   cache_tokens: int | None = None):
    """Wall time of one fixed-length greedy generate() call.

    ``cache_tokens`` fixes the static cache length, so the 1-token (prefill-only) calls reuse
    the graphs compiled for the full-length calls instead of compiling new shapes.
    """
    import torch

    generator = torch.Generator(device="cpu").manual_seed(batch)
    input_ids = torch.randint(1, model.config.vocab_size, (batch, prompt_tokens),
                              generator=generator).to(device)
    kwargs = {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens, "do_sample": False,
                  "attention_mask": torch.ones_like(input_ids)}
    if cache == "static":
        kwargs["cache_implementation"] = "static"
        kwargs["max_cache_len"] = cache_tokens or prompt_tokens + new_tokens
    synchronize(device)
    started = time.perf_counter()
    with torch.inference_mode():
        output = model.generate(input_ids, **kwargs)
    synchronize(device)
    wall = time.perf_counter() - started
    produced = output.shape[1] - prompt_tokens
    if produced != new_tokens:
        raise RuntimeError(f"expected {new_tokens} new tokens, generate returned {produced}")
    return wall


def measure(model, batch, prompt_tokens, new_tokens, cache, device, repeats) -> dict:
    """Decode time = time(prompt + N new tokens) - time(prompt + 1 new token), best of repeats."""
    length = prompt_tokens + new_tokens
    timed_generate(model, batch, prompt_tokens, new_tokens, cache, device)  # warm-up / compile
    timed_generate(model, batch, prompt_tokens, 1, cache, device, length)
    full = min(timed_generate(model, batch, prompt_tokens, new_tokens, cache, device)
               for _ in range(repeats))
    prefill = min(timed_generate(model, batch, prompt_tokens, 1, cache, device, length)
                  for _ in range(repeats))
    decode = max(full - prefill, 1e-9)
    return {"batch": batch, "wall_s": round(full, 4), "prefill_s": round(prefill, 4),
            "decode_s": round(decode, 4),
            "decode_tokens_per_s": round(batch * (new_tokens - 1) / decode, 2),
            "end_to_end_tokens_per_s": round(batch * new_tokens / full, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true",
                        help="tiny config, runs on a CPU: checks the script, not the GPU")
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--batch-size", default="auto",
                        help="'auto' (from free memory, bloomqg's policy) or an integer")
    parser.add_argument("--bandwidth-tbps", type=float, default=4.8,
                        help="HBM bandwidth in TB/s (H200 4.8, H100 SXM 3.35, A100 80GB 2.0)")
    parser.add_argument("--cache", choices=["static", "dynamic"], default="static")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    import torch

    on_gpu = torch.cuda.is_available()
    if not on_gpu and not args.tiny:
        print("generation_gpu.py: no CUDA GPU available; run it on a machine with an NVIDIA GPU, "
              "or pass --tiny for a CPU smoke test of the script", file=sys.stderr)
        sys.exit(2)
    device = torch.device("cuda" if on_gpu else "cpu")
    dtype = torch.bfloat16 if on_gpu else torch.float32
    shapes = TINY_SHAPES if args.tiny else QWEN25_7B_SHAPES
    if args.tiny:
        args.prompt_tokens, args.new_tokens = min(args.prompt_tokens, 16), min(args.new_tokens, 8)
    started = time.perf_counter()
    model = build_model(shapes, device, dtype)
    build_s = time.perf_counter() - started
    dtype_bytes = torch.tensor([], dtype=dtype).element_size()
    weight_bytes = sum(p.numel() for p in model.parameters()) * dtype_bytes
    kv_per_token = kv_cache_bytes_per_token(
        num_layers=shapes["num_hidden_layers"], num_kv_heads=shapes["num_key_value_heads"],
        head_dim=shapes["hidden_size"] // shapes["num_attention_heads"], dtype_bytes=dtype_bytes)

    if args.batch_size == "auto":
        if on_gpu:
            free, _total = torch.cuda.mem_get_info()
            batch = auto_batch_size_gpu(
                free_bytes=free, kv_bytes_per_token=kv_per_token,
                max_prompt_tokens=args.prompt_tokens, max_new_tokens=args.new_tokens,
                activation_bytes_per_prompt_token=(2 * shapes["intermediate_size"]
                                                   + 4 * shapes["hidden_size"]) * dtype_bytes,
                logits_bytes_per_sequence=shapes["vocab_size"] * 4)
        else:
            batch = 8
    else:
        batch = int(args.batch_size)

    single = measure(model, 1, args.prompt_tokens, args.new_tokens, args.cache, device, args.repeats)
    batched = measure(model, batch, args.prompt_tokens, args.new_tokens, args.cache, device,
                      args.repeats)
    mean_context = args.prompt_tokens + args.new_tokens / 2
    bytes_per_step = weight_bytes + kv_per_token * mean_context
    roofline_tps = args.bandwidth_tbps * 1e12 / bytes_per_step
    report = {
        "benchmark": "generation_gpu",
        "device": torch.cuda.get_device_name(0) if on_gpu else "cpu (--tiny smoke test)",
        "model_shapes": shapes,
        "dtype": str(dtype).removeprefix("torch."),
        "weight_gb": round(weight_bytes / 1e9, 3),
        "kv_cache_bytes_per_token": kv_per_token,
        "build_s": round(build_s, 2),
        "cache": args.cache,
        "prompt_tokens": args.prompt_tokens,
        "new_tokens": args.new_tokens,
        "batch1": single,
        "batched": batched,
        "speedup_batched_over_batch1": round(
            batched["decode_tokens_per_s"] / single["decode_tokens_per_s"], 2),
        "roofline": {"bandwidth_tbps": args.bandwidth_tbps,
                     "bytes_per_decode_step_batch1": int(bytes_per_step),
                     "batch1_tokens_per_s": round(roofline_tps, 2),
                     "batch1_share": round(single["decode_tokens_per_s"] / roofline_tps, 4)},
        "goals": {"speedup_min": 20.0, "batch1_roofline_share_min": 0.5},
    }
    if on_gpu:
        report["max_memory_allocated_gb"] = round(torch.cuda.max_memory_allocated() / 1e9, 2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
