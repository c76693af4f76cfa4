"""In-process generation with Hugging Face transformers: batched, resumable, reproducible.

:class:`HFTextGenerator` loads a causal LM once and completes chat requests in length-bucketed
batches (see :mod:`bloomqg.generation.batching`).  It runs its own decode loop over the model's
KV cache instead of ``model.generate``: ``generate`` keeps every sequence of a batch decoding
until the longest one stops, so with answers of very different lengths most of the computed
tokens are padding.  Here a sequence leaves the batch (and its KV cache rows are dropped) the
step it emits a stop token, so the work done tracks the useful tokens.

Prefill and cache (:mod:`bloomqg.generation.kv_cache`): the tokens all prompts of a batch start
with (chat template, system message, the strategy's instructions: 159 of ~220 CoT tokens with
the shipped templates) are computed once per batch and copied into every row's cache; the rest
is prefilled in column chunks of about ``prefill_chunk_tokens`` tokens; the cache is
preallocated for the prompt plus ``max_new_tokens`` instead of growing by concatenation.  The
shared prefix is a function of the batch's own prompts, and batches replan identically on
resume, so a rerun batch computes exactly what the uninterrupted run did.

Response prefill: a request whose last message is from the assistant is *continued*
(transformers' ``apply_chat_template(..., continue_final_message=True)``) instead of answered in
a new turn, and the completion text is that message's content followed by the continuation, so
parsers and audits see the whole answer.  :func:`bloomqg.prompts.with_response_prefill` builds
such requests; the generation stage adds them when a model entry sets ``response_prefill: true``
(:attr:`HFTextGenerator.response_prefill`).

Reproducibility: every sequence samples from its own ``torch.Generator`` seeded from the study
seed and its request id (:func:`~bloomqg.generation.batching.request_seed`), so a batch rerun
after a crash produces the same text as the uninterrupted run (same batch, same device and
library versions; bitwise equality is not promised across hardware or batch compositions).
"""

from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bloomqg.generation.base import (
    BatchCallback,
    ChatRequest,
    Completion,
    DecodingParams,
)
from bloomqg.generation.batching import (
    CPU_PREFILL_CHUNK_TOKENS,
    GPU_PREFILL_CHUNK_TOKENS,
    PlannedBatch,
    auto_batch_size_gpu,
    kv_cache_bytes_per_token,
    plan_batches,
    request_seed,
    resolve_batch_size,
    split_in_half,
    trim_completion,
)
from bloomqg.models import read_model_provenance

logger = logging.getLogger(__name__)

#: End-of-turn markers of common chat templates; those present in a tokenizer's vocabulary stop
#: generation besides its EOS token.
END_OF_TURN_TOKENS: tuple[str, ...] = (
    "<|im_end|>",  # ChatML: SmolLM2, Qwen2.5, InternLM3
    "<|eot_id|>",  # Llama 3
    "<|end_of_text|>",
    "<|endoftext|>",
    "<|end|>",
    "<|user|>",  # GLM-4 ends an assistant turn by opening the next user turn
    "<|observation|>",
    "<end_of_turn>",
    "</s>",
)


#: Candidates top-p sampling examines before falling back to sorting the whole vocabulary.
TOP_P_CANDIDATES = 512


def response_prefix_of(request: ChatRequest) -> str:
    """The assistant message a request ends with (its prefill), or "" when it ends otherwise."""
    if request.messages and request.messages[-1].get("role") == "assistant":
        return request.messages[-1].get("content", "")
    return ""


def _resolve_dtype(name: str | None, on_gpu: bool) -> Any:
    """torch dtype for a spec's dtype: "auto" = bf16 (fp16 without bf16 support) on GPU, fp32 on CPU."""
    import torch

    name = (name or "auto").lower()
    if name == "auto":
        if not on_gpu:
            return torch.float32
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    table = {
        "float32": torch.float32, "fp32": torch.float32,
        "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
        "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    }
    if name not in table:
        raise ValueError(f"model dtype {name!r} is not one of auto, {', '.join(sorted(table))}")
    return table[name]


def _nucleus_pick(sorted_probs: Any, sorted_ids: Any, uniform: Any, top_p: float) -> Any:
    """Inverse-CDF sampling within the top-p nucleus of rows sorted by descending probability.

    A token is kept while the mass strictly before it is below ``top_p`` (as transformers'
    ``TopPLogitsWarper`` does); the most likely token is always kept.
    """
    import torch

    width = sorted_probs.shape[-1]
    cumulative = sorted_probs.cumsum(dim=-1)
    threshold = torch.full((sorted_probs.shape[0], 1), top_p, dtype=cumulative.dtype,
                           device=cumulative.device)
    kept = (torch.searchsorted(cumulative, threshold) + 1).clamp(1, width)
    in_nucleus = torch.arange(width, device=cumulative.device)[None, :] < kept
    cdf = (sorted_probs * in_nucleus).cumsum(dim=-1)
    index = torch.searchsorted(cdf, (uniform[:, None] * cdf[:, -1:]).contiguous())
    index = torch.minimum(index, kept - 1)
    return sorted_ids.gather(1, index).squeeze(1)


class HFTextGenerator:
    """A transformers causal LM behind the :class:`~bloomqg.generation.base.TextGenerator` API.

    ``source`` is a local model directory (e.g. a converted GGUF), a directory holding a GGUF
    file (with ``gguf_file``), or a hub id (pinned with ``revision``).  The model loads once,
    in the constructor.

    ``response_prefill`` records the model entry's choice to start the assistant turn of
    generation requests with the opening of the expected JSON answer; the generation stage
    reads it and adds the prefix (LLM judges borrowing the same weights do not).
    """

    #: This backend continues a final assistant message (see the module docstring).
    supports_response_prefill = True

    def __init__(
        self,
        source: str | Path,
        *,
        model_id: str | None = None,
        revision: str | None = None,
        gguf_file: str | None = None,
        dtype: str | None = "auto",
        trust_remote_code: bool = False,
        batch_size: int | str | None = "auto",
        num_threads: int | None = None,
        extra_provenance: Mapping[str, Any] | None = None,
        response_prefill: bool = False,
        share_prompt_prefix: bool = True,
    ) -> None:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if num_threads is not None:
            torch.set_num_threads(int(num_threads))
        self.on_gpu = torch.cuda.is_available()
        self.device = torch.device("cuda" if self.on_gpu else "cpu")
        self.dtype = _resolve_dtype(dtype, self.on_gpu)
        self.batch_size_policy = batch_size if batch_size is not None else "auto"
        if not isinstance(response_prefill, bool):
            raise ValueError(  # noqa: TRY004 - a config value error, reported like the others
                f"model {model_id or source!r}: response_prefill must be true or "
                f"false, got {response_prefill!r}")
        self.response_prefill = response_prefill
        self.prefill_chunk_tokens = GPU_PREFILL_CHUNK_TOKENS if self.on_gpu else CPU_PREFILL_CHUNK_TOKENS
        attn = "sdpa"
        if (
            self.on_gpu
            and self.dtype in (torch.float16, torch.bfloat16)
            and importlib.util.find_spec("flash_attn") is not None
        ):
            attn = "flash_attention_2"
        load_kwargs: dict[str, Any] = {"trust_remote_code": bool(trust_remote_code)}
        if revision:
            load_kwargs["revision"] = revision
        if gguf_file:
            load_kwargs["gguf_file"] = gguf_file
        source = str(source)
        started = time.perf_counter()
        self.tokenizer = AutoTokenizer.from_pretrained(source, **load_kwargs)
        self.model = AutoModelForCausalLM.from_pretrained(
            source,
            dtype=self.dtype,
            attn_implementation=attn,
            device_map="auto" if self.on_gpu else None,
            **load_kwargs,
        )
        self.model.eval()
        if self.model.device.type != self.device.type:
            self.model.to(self.device)
        if self.tokenizer.chat_template is None:
            raise ValueError(f"model {source!r}: its tokenizer has no chat template")
        self.stop_ids = self._stop_token_ids()
        from bloomqg.generation import kv_cache

        # a shared prefix seeds every layer's cache, so it needs full attention in all of them
        self.share_prompt_prefix = bool(share_prompt_prefix) and kv_cache.all_layers_preallocated(
            kv_cache.decode_cache(self.model.config, 1))
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else min(self.stop_ids)
        logger.info(
            "loaded %s (%s, %s, attn=%s) in %.1f s; stop ids %s",
            model_id or source, self.device, self.dtype, attn,
            time.perf_counter() - started, sorted(self.stop_ids),
        )
        self.stats = {"useful_tokens": 0, "computed_decode_steps": 0, "batches": 0, "oom_splits": 0,
                      "prefill_tokens": 0, "shared_prefix_tokens_saved": 0}
        self.provenance: dict[str, Any] = {
            "backend": "hf",
            "model": model_id or source,
            "source": source,
            "revision": revision,
            "gguf_file": gguf_file,
            "dtype": str(self.dtype).removeprefix("torch."),
            "device": torch.cuda.get_device_name(0) if self.on_gpu else "cpu",
            "attn_implementation": attn,
            "batch_size_policy": self.batch_size_policy,
            "trust_remote_code": bool(trust_remote_code),
            "num_threads": torch.get_num_threads(),
            "sampling_seed": "per request: sha256(seed, request_id) -> torch.Generator",
            "transformers_version": transformers.__version__,
            "torch_version": torch.__version__,
            "response_prefill": response_prefill,
            "kv_cache": "preallocated per batch (prompt + max_new_tokens)",
            "shared_prompt_prefix": self.share_prompt_prefix,
            "prefill_chunk_tokens": self.prefill_chunk_tokens,
        }
        self.provenance.update(dict(extra_provenance or {}))

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], model_dir: str | Path | None) -> HFTextGenerator:
        """Build from a config model entry; ``model_dir`` is the materialised directory.

        A GGUF entry loads from the converted ``model_dir``; a pointer directory (hub id or
        local directory, see :func:`bloomqg.models.materialize_model`) or no ``model_dir`` loads
        ``spec["model"]`` at ``spec["revision"]``.
        """
        materialised = read_model_provenance(model_dir) if model_dir else {}
        if spec.get("gguf"):
            if not model_dir or not (Path(model_dir) / "config.json").is_file():
                raise FileNotFoundError(
                    f"model {spec.get('model')!r}: converted GGUF directory {model_dir} is missing "
                    "(run the prepare_model step / bloomqg.models.materialize_model first)"
                )
            source: str | Path = model_dir
        else:
            source = materialised.get("model") or spec.get("model")
            if not source:
                raise ValueError(f"model entry {dict(spec)!r} has no 'model'")
        return cls(
            source,
            model_id=spec.get("model"),
            revision=None if spec.get("gguf") else spec.get("revision"),
            dtype=spec.get("dtype", "auto"),
            trust_remote_code=bool(spec.get("trust_remote_code", False)),
            batch_size=spec.get("batch_size", "auto"),
            num_threads=spec.get("num_threads"),
            extra_provenance={f"weights_{k}": v for k, v in materialised.items()
                              if k in ("kind", "source_gguf_sha256", "dtype")},
            response_prefill=spec.get("response_prefill", False),
            share_prompt_prefix=bool(spec.get("share_prompt_prefix", True)),
        )

    # -- tokens --------------------------------------------------------------------------

    def _stop_token_ids(self) -> set[int]:
        ids: set[int] = set()
        eos = self.tokenizer.eos_token_id
        if eos is not None:
            ids.add(int(eos))
        config_eos = getattr(self.model.generation_config, "eos_token_id", None)
        if isinstance(config_eos, int):
            ids.add(config_eos)
        elif config_eos:
            ids.update(int(token) for token in config_eos)
        vocab = self.tokenizer.get_vocab()
        ids.update(vocab[token] for token in END_OF_TURN_TOKENS if token in vocab)
        if not ids:
            raise ValueError("the tokenizer defines no EOS or end-of-turn token to stop on")
        return ids

    def encode(self, request: ChatRequest) -> list[int]:
        """Token ids of a request rendered with the chat template plus the assistant prompt.

        A request ending with an assistant message is rendered open-ended, so the model
        continues that message (response prefill) rather than starting a new turn.
        """
        messages = list(request.messages)
        if messages and messages[-1].get("role") == "assistant":
            text = self.tokenizer.apply_chat_template(
                messages, tokenize=False, continue_final_message=True
            )
        else:
            text = self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    # -- batch size ----------------------------------------------------------------------

    def _gpu_batch_estimate(self, max_prompt_tokens: int, max_new_tokens: int) -> int:
        import torch

        config = self.model.config.get_text_config()
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        dtype_bytes = torch.tensor([], dtype=self.dtype).element_size()
        free, _total = torch.cuda.mem_get_info()
        return auto_batch_size_gpu(
            free_bytes=free,
            kv_bytes_per_token=kv_cache_bytes_per_token(
                num_layers=config.num_hidden_layers,
                num_kv_heads=getattr(config, "num_key_value_heads", None) or heads,
                head_dim=head_dim,
                dtype_bytes=dtype_bytes,
            ),
            max_prompt_tokens=max_prompt_tokens,
            max_new_tokens=max_new_tokens,
            # prefill transients of one layer at a time: MLP up/gate + attention projections
            activation_bytes_per_prompt_token=(2 * config.intermediate_size
                                               + 4 * config.hidden_size) * dtype_bytes,
            logits_bytes_per_sequence=config.vocab_size * 4,
            prefill_chunk_tokens=self.prefill_chunk_tokens,
        )

    def batch_size_for(self, prompt_lengths: Sequence[int], max_new_tokens: int) -> int:
        """The batch size this generator plans with for these prompts."""
        estimate = None
        if self.on_gpu and self.batch_size_policy in ("auto", None):
            estimate = self._gpu_batch_estimate(max(prompt_lengths, default=1), max_new_tokens)
        return resolve_batch_size(
            self.batch_size_policy, n_requests=len(prompt_lengths), on_gpu=self.on_gpu,
            gpu_estimate=estimate,
        )

    # -- generation ----------------------------------------------------------------------

    def complete(
        self,
        requests: Sequence[ChatRequest],
        params: DecodingParams,
        on_batch: BatchCallback | None = None,
    ) -> list[Completion]:
        """Complete every request, batch by batch; ``on_batch`` sees each finished batch."""
        import torch

        if not requests:
            return []
        ids = [request.request_id for request in requests]
        if len(set(ids)) != len(ids):
            raise ValueError("request ids must be unique within a call")
        encoded = [self.encode(request) for request in requests]
        lengths = [len(tokens) for tokens in encoded]
        batch_size = self.batch_size_for(lengths, params.max_new_tokens)
        plan = plan_batches(lengths, batch_size)
        self.provenance["batch_size"] = batch_size  # what "auto" resolved to, for the record
        logger.info("%d requests in %d batches of <= %d", len(requests), len(plan), batch_size)
        results: list[Completion | None] = [None] * len(requests)
        queue: list[PlannedBatch] = list(plan)
        while queue:
            batch = queue.pop(0)
            try:
                completions = self._run_batch(
                    [requests[p] for p in batch.positions],
                    [encoded[p] for p in batch.positions],
                    params,
                    batch.batch_index,
                )
            except torch.OutOfMemoryError:
                torch.cuda.empty_cache()
                if len(batch.positions) == 1:
                    logger.error("request %s does not fit in GPU memory alone",
                                 requests[batch.positions[0]].request_id)
                    request = requests[batch.positions[0]]
                    completions = [Completion(
                        request_id=request.request_id, text=None, finish_reason="error",
                        n_prompt_tokens=lengths[batch.positions[0]], batch_index=batch.batch_index,
                        error="out of GPU memory even at batch size 1",
                    )]
                else:
                    self.stats["oom_splits"] += 1
                    halves = split_in_half(batch.positions)
                    logger.warning("batch %d (%d items) ran out of memory; retrying as %d + %d",
                                   batch.batch_index, len(batch.positions),
                                   len(halves[0]), len(halves[1]))
                    queue[0:0] = [PlannedBatch(batch.batch_index, half) for half in halves]
                    continue
            for position, completion in zip(batch.positions, completions):
                results[position] = completion
            if on_batch is not None:
                on_batch(completions)
        missing = [ids[i] for i, result in enumerate(results) if result is None]
        if missing:  # cannot happen unless the loop above is broken; never return holes
            raise RuntimeError(f"no completion for requests {missing[:5]}")
        return [result for result in results if result is not None]

    def _sample(self, logits: Any, generators: list[Any], params: DecodingParams) -> Any:
        """Next token per row: greedy, or nucleus sampling with each row's own generator.

        Each row draws one uniform number from its generator and inverts the CDF of its
        (temperature-scaled, top-p truncated) distribution, so a row's token depends only on
        its logits and its own random stream.  Top-p looks at the :data:`TOP_P_CANDIDATES`
        most likely tokens first (``topk`` is far cheaper than sorting the vocabulary for every
        row at every step, which took a third of a CPU decode step); a row whose nucleus is not
        inside them falls back to a full sort, so the result is exact.
        """
        import torch

        if not params.do_sample or params.temperature <= 0:
            return logits.argmax(dim=-1)
        probs = torch.softmax(logits / params.temperature, dim=-1)
        uniform = torch.stack([
            torch.rand((), generator=generator, device=probs.device) for generator in generators
        ])
        if params.top_p >= 1.0:
            cdf = probs.cumsum(dim=-1)
            picked = torch.searchsorted(cdf, (uniform * cdf[:, -1])[:, None])
            return picked.squeeze(1).clamp(max=probs.shape[-1] - 1)
        k = min(TOP_P_CANDIDATES, probs.shape[-1])
        top_probs, top_ids = probs.topk(k, dim=-1)
        tokens = torch.empty(probs.shape[0], dtype=torch.long, device=probs.device)
        covered = top_probs.sum(dim=-1) >= params.top_p
        if bool(covered.any()):
            tokens[covered] = _nucleus_pick(top_probs[covered], top_ids[covered],
                                            uniform[covered], params.top_p)
        if not bool(covered.all()):  # flat distributions: the nucleus is wider than k
            wide = ~covered
            sorted_probs, sorted_ids = probs[wide].sort(dim=-1, descending=True)
            tokens[wide] = _nucleus_pick(sorted_probs, sorted_ids, uniform[wide], params.top_p)
        return tokens

    def _run_batch(
        self,
        requests: Sequence[ChatRequest],
        encoded: Sequence[list[int]],
        params: DecodingParams,
        batch_index: int,
    ) -> list[Completion]:
        """Prefill one left-padded batch, then decode, dropping rows as they stop."""
        import torch

        from bloomqg.generation import kv_cache

        started = time.perf_counter()
        rows = len(encoded)
        shared = kv_cache.shared_prefix_length(encoded) if self.share_prompt_prefix else 0
        if shared < kv_cache.MIN_SHARED_PREFIX_TOKENS:
            shared = 0
        suffixes = [tokens[shared:] for tokens in encoded]
        width = max(len(tokens) for tokens in suffixes)
        input_ids = torch.full((rows, width), self.pad_id, dtype=torch.long)
        suffix_mask = torch.zeros((rows, width), dtype=torch.long)
        for row, tokens in enumerate(suffixes):
            input_ids[row, width - len(tokens):] = torch.tensor(tokens, dtype=torch.long)
            suffix_mask[row, width - len(tokens):] = 1
        input_ids, suffix_mask = input_ids.to(self.device), suffix_mask.to(self.device)
        # [shared prefix][left padding][own suffix]: positions continue from the prefix
        positions = shared + (suffix_mask.cumsum(dim=-1) - 1).clamp(min=0)
        attention = torch.cat([suffix_mask.new_ones((rows, shared)), suffix_mask], dim=-1)
        capacity = shared + width + params.max_new_tokens
        generators = [
            torch.Generator(device=self.device).manual_seed(request_seed(params.seed, r.request_id))
            for r in requests
        ]
        generated: list[list[int]] = [[] for _ in range(rows)]
        active = list(range(rows))  # original row of each current batch row
        computed = 0
        with torch.inference_mode():
            if shared:
                prefix_states = kv_cache.prefill_shared_prefix(self.model, encoded[0][:shared], shared)
                cache = kv_cache.seeded_cache(self.model.config, prefix_states, rows, capacity)
            else:
                cache = kv_cache.decode_cache(self.model.config, capacity)
            # Prefill in column chunks of about prefill_chunk_tokens: one huge forward pass is
            # slower on a CPU (its activations spill out of the caches) and on a GPU its
            # transients, not the KV cache, would cap the batch size.
            columns = max(1, self.prefill_chunk_tokens // rows)
            for start in range(0, width, columns):
                end = min(width, start + columns)
                logits = self.model(
                    input_ids=input_ids[:, start:end], attention_mask=attention[:, : shared + end],
                    position_ids=positions[:, start:end], cache=cache, use_cache=True,
                    logits_to_keep=1,
                ).logits[:, -1, :].float()
            next_position = positions[:, -1] + 1
            for step in range(params.max_new_tokens):
                tokens = self._sample(logits, [generators[r] for r in active], params)
                computed += len(active)
                keep: list[int] = []
                for index, (row, token) in enumerate(zip(active, tokens.tolist())):
                    generated[row].append(token)
                    if token not in self.stop_ids and step + 1 < params.max_new_tokens:
                        keep.append(index)
                if not keep:
                    break
                if len(keep) < len(active):
                    keep_index = torch.tensor(keep, device=self.device)
                    cache.batch_select_indices(keep_index)
                    attention = attention[keep_index]
                    next_position = next_position[keep_index]
                    tokens = tokens[keep_index]
                    active = [active[index] for index in keep]
                attention = torch.cat(
                    [attention, attention.new_ones((len(active), 1))], dim=-1
                )
                logits = self.model(
                    input_ids=tokens[:, None], attention_mask=attention,
                    position_ids=next_position[:, None], cache=cache, use_cache=True,
                    logits_to_keep=1,
                ).logits[:, -1, :].float()
                next_position = next_position + 1
        latency = time.perf_counter() - started
        completions = []
        useful = 0
        for row, request in enumerate(requests):
            kept, finish = trim_completion(generated[row], self.stop_ids)
            useful += len(kept)
            continuation = self.tokenizer.decode(kept, skip_special_tokens=True)
            prefix = response_prefix_of(request)
            # a prefilled answer is the prefix plus its continuation, verbatim at the seam
            text = (prefix + continuation).rstrip() if prefix else continuation.strip()
            completions.append(Completion(
                request_id=request.request_id,
                text=text,
                finish_reason=finish,
                n_prompt_tokens=len(encoded[row]),
                n_completion_tokens=len(kept),
                latency_s=latency,
                batch_index=batch_index,
                extra={"response_prefix": prefix} if prefix else {},
            ))
        self.stats["useful_tokens"] += useful
        self.stats["prefill_tokens"] += rows * width + shared
        self.stats["shared_prefix_tokens_saved"] += max(rows - 1, 0) * shared
        self.stats["computed_decode_steps"] += computed
        self.stats["batches"] += 1
        logger.info("batch %d: %d items, %d tokens in %.1f s (%.1f tok/s)",
                    batch_index, rows, useful, latency, useful / latency if latency else 0.0)
        return completions

    def close(self) -> None:
        """Free the model (and the GPU memory it holds)."""
        import gc

        import torch

        self.model = None  # type: ignore[assignment]
        gc.collect()
        if self.on_gpu:
            torch.cuda.empty_cache()
