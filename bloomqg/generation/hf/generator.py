"""The transformers backend's :class:`~bloomqg.inputs.chat.TextGenerator`: a causal LM loaded
once, requests encoded with its chat template, planned into length-bucketed batches, each batch
run through a decode loop (:mod:`~bloomqg.generation.hf.decode`) and turned into completions; a
batch that runs out of accelerator memory is halved and later batches capped. The design is in
:mod:`bloomqg.generation.hf`."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bloomqg.inputs.chat import BatchCallback, ChatRequest, Completion, Continuation, DecodingParams, ScoredPrompt
from bloomqg.generation.hf.batching import (
    CPU_PREFILL_CHUNK_TOKENS,
    GPU_PREFILL_CHUNK_TOKENS,
    PlannedBatch,
    plan_batches,
    resolve_batch_size,
    split_in_half,
    split_to_cap,
    trim_completion,
)
from bloomqg.generation.hf.decode import DecodeResult, decode_cached, decode_legacy, forward
from bloomqg.generation.hf.loading import load_pretrained
from bloomqg.generation.hf.memory import estimated_batch_bytes, gpu_batch_estimate
from bloomqg.generation.hf.model_support import LoadPlan, ModelSupportError, plan_for_model
from bloomqg.generation.hf.remote_code import PaddingProbe, probe_left_padding
from bloomqg.inputs.models import read_model_provenance

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


#: The request whose prompt probes whether left padding changes a legacy-loop model's outputs.
PADDING_PROBE_REQUEST = ChatRequest("padding-probe", ({"role": "user", "content": "Write one question about stacks."},))


#: Share of a batch's rows that must be dead before the cache is compacted on a GPU.  A drop
#: copies every live row's cache (about 10 GB at batch 256 for Qwen2.5-7B shapes, roughly one
#: decode step); compacting at a quarter keeps the copies to ~20 per batch while dead rows add
#: at most a third to a step's rows.  On a CPU a dead row costs as much as a live one, and the
#: copy is small against a step, so rows leave at once (fraction 0).
GPU_COMPACT_FRACTION = 0.25


def response_prefix_of(request: ChatRequest) -> str:
    """The assistant message a request ends with (its prefill), or "" when it ends otherwise."""
    if request.messages and request.messages[-1].get("role") == "assistant":
        return request.messages[-1].get("content", "")
    return ""


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is an accelerator out-of-memory error.

    torch raises ``torch.OutOfMemoryError`` from its allocator, but kernels and libraries
    (cuBLAS workspaces, some attention kernels) raise a plain ``RuntimeError`` saying
    "CUDA out of memory" or "CUDA error: out of memory".
    """
    import torch

    if isinstance(error, torch.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


class HFTextGenerator:
    """A transformers causal LM behind the :class:`~bloomqg.inputs.chat.TextGenerator` API.

    ``source`` is a local model directory (e.g. a converted GGUF), a directory holding a GGUF
    file (with ``gguf_file``), or a hub id (pinned with ``revision``).  The model loads once,
    in the constructor, after :func:`~bloomqg.generation.hf.model_support.plan_loading` has settled
    what can be settled without its weights.  :meth:`from_model` wraps a model already in
    memory (tests and benchmarks build them from a config).

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
        attn_implementation: str | None = None,
        chat_template: str | Path | None = None,
        decode_loop: str | None = None,
    ) -> None:
        import torch

        if num_threads is not None:
            torch.set_num_threads(int(num_threads))
        source = str(source)
        loaded = load_pretrained(
            source, model_id=model_id or source, revision=revision, gguf_file=gguf_file, dtype=dtype,
            trust_remote_code=trust_remote_code, attn_implementation=attn_implementation,
            chat_template=chat_template, decode_loop=decode_loop,
        )
        self._setup(
            loaded.model, loaded.tokenizer, loaded.plan, model_id=model_id or source, batch_size=batch_size,
            response_prefill=response_prefill, share_prompt_prefix=share_prompt_prefix,
            provenance={"source": source, "revision": revision, "gguf_file": gguf_file,
                        "trust_remote_code": bool(trust_remote_code),
                        "chat_template": loaded.chat_template_origin,
                        **({"rebuilt_init_tensors": loaded.rebuilt.as_provenance()} if loaded.rebuilt else {}),
                        **dict(extra_provenance or {})},
        )

    @classmethod
    def from_model(
        cls,
        model: Any,
        tokenizer: Any,
        *,
        model_id: str = "in-memory",
        batch_size: int | str | None = "auto",
        response_prefill: bool = False,
        share_prompt_prefix: bool = True,
        decode_loop: str | None = None,
    ) -> HFTextGenerator:
        """Wrap a model and tokenizer already in memory (same decode loops as a loaded model)."""
        if not getattr(tokenizer, "chat_template", None):
            raise ModelSupportError(f"model {model_id!r}: its tokenizer has no chat template")
        generator = cls.__new__(cls)
        generator._setup(
            model, tokenizer, plan_for_model(model, decode_loop=decode_loop),
            model_id=model_id, batch_size=batch_size, response_prefill=response_prefill,
            share_prompt_prefix=share_prompt_prefix, provenance={"source": "in-memory"},
        )
        return generator

    def _setup(
        self,
        model: Any,
        tokenizer: Any,
        plan: LoadPlan,
        *,
        model_id: str,
        batch_size: int | str | None,
        response_prefill: bool,
        share_prompt_prefix: bool,
        provenance: Mapping[str, Any],
    ) -> None:
        import torch
        import transformers

        from bloomqg.generation.hf import kv_cache

        if not isinstance(response_prefill, bool):
            raise ValueError(  # noqa: TRY004 - a config value error, reported like the others
                f"model {model_id!r}: response_prefill must be true or false, got {response_prefill!r}")
        self.model = model
        self.model.eval()
        self.tokenizer = tokenizer
        self.plan = plan
        self.model_id = model_id
        self.response_prefill = response_prefill
        self.batch_size_policy = batch_size if batch_size is not None else "auto"
        self.input_device = model.get_input_embeddings().weight.device
        self.on_gpu = self.input_device.type == "cuda"
        self.dtype = next(model.parameters()).dtype
        self.prefill_chunk_tokens = GPU_PREFILL_CHUNK_TOKENS if self.on_gpu else CPU_PREFILL_CHUNK_TOKENS
        self.compact_fraction = GPU_COMPACT_FRACTION if self.on_gpu else 0.0
        #: largest batch known to fit, learned from an out-of-memory halving (None: no limit seen)
        self.batch_cap: int | None = None
        self.stop_ids = self._stop_token_ids()
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else min(self.stop_ids)
        # a shared prefix seeds every layer's cache, so it needs full attention in all of them
        full_attention = kv_cache.all_layers_preallocated(kv_cache.decode_cache(model.config, 1))
        self.share_prompt_prefix = bool(share_prompt_prefix) and plan.decode_loop == "cached" and full_attention
        #: the choices judge mode seeds a shared prefix into its own cache, which needs the cached
        #: loop's full-attention layers (sliding-window and remote-code models judge by generating)
        self.supports_choice_scoring = plan.decode_loop == "cached" and full_attention
        self._encoded: dict[str, tuple[str, list[int]]] = {}
        self.stats = {"useful_tokens": 0, "computed_decode_steps": 0, "batches": 0, "oom_splits": 0,
                      "prefill_tokens": 0, "shared_prefix_tokens_saved": 0, "cache_compactions": 0,
                      "scored_batches": 0, "scored_rows": 0}
        logger.info("%s: decode loop %s (cache as %s=), attention %s, stop ids %s",
                    model_id, plan.decode_loop, plan.cache_keyword, plan.attn_implementation,
                    sorted(self.stop_ids))
        self.provenance: dict[str, Any] = {
            "backend": "hf",
            "model": model_id,
            **plan.as_provenance(),
            "dtype": str(self.dtype).removeprefix("torch."),
            "device": torch.cuda.get_device_name(self.input_device) if self.on_gpu else "cpu",
            "batch_size_policy": self.batch_size_policy,
            "num_threads": torch.get_num_threads(),
            "sampling_seed": "per request: sha256(seed, request_id) -> CPU torch.Generator, "
                             "uniforms drawn once per batch",
            "transformers_version": transformers.__version__,
            "torch_version": torch.__version__,
            "response_prefill": response_prefill,
            "kv_cache": ("preallocated per batch (prompt + max_new_tokens)" if plan.decode_loop == "cached"
                         else "the model's own (legacy loop), stopped rows dropped when its format "
                              "allows"),
            "shared_prompt_prefix": self.share_prompt_prefix,
            "prefill_chunk_tokens": self.prefill_chunk_tokens,
            "cache_compact_fraction": self.compact_fraction,
        }
        self.provenance.update(dict(provenance))
        #: whether left padding leaves this model's outputs alone (legacy loop only; see
        #: :mod:`bloomqg.generation.hf.remote_code`); None for the cached loop, which passes positions
        self.left_padding: PaddingProbe | None = None
        if plan.decode_loop == "legacy":
            self.left_padding = self._probe_left_padding()
            self.provenance["left_padding"] = self.left_padding.as_provenance()
            if self.left_padding.exact:
                logger.info("%s: batched decoding is exact: %s", model_id, self.left_padding.reason)
            else:
                logger.warning("%s: batched decoding would change its outputs, so it generates one "
                               "request at a time: %s", model_id, self.left_padding.reason)

    def _probe_left_padding(self) -> PaddingProbe:
        prompt = self.encode(PADDING_PROBE_REQUEST)
        self._encoded.pop(PADDING_PROBE_REQUEST.request_id, None)
        return probe_left_padding(self.model, prompt, pad_id=self.pad_id,
                                  takes_position_ids=self.plan.takes_position_ids, input_device=self.input_device)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], model_dir: str | Path | None) -> HFTextGenerator:
        """Build from a config model entry; ``model_dir`` is the materialised directory.

        A GGUF entry loads from the converted ``model_dir``; a pointer directory (hub id or
        local directory, see :func:`bloomqg.inputs.models.materialize_model`) or no ``model_dir`` loads
        ``spec["model"]`` at ``spec["revision"]``.
        """
        materialised = read_model_provenance(model_dir) if model_dir else {}
        if spec.get("gguf"):
            if not model_dir or not (Path(model_dir) / "config.json").is_file():
                raise FileNotFoundError(
                    f"model {spec.get('model')!r}: converted GGUF directory {model_dir} is missing "
                    "(run the prepare_model step / bloomqg.inputs.models.materialize_model first)"
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
            attn_implementation=spec.get("attn_implementation"),
            chat_template=spec.get("chat_template"),
            decode_loop=spec.get("decode_loop"),
        )

    # -- tokens --------------------------------------------------------------------------

    def _stop_token_ids(self) -> set[int]:
        ids: set[int] = set()
        eos = self.tokenizer.eos_token_id
        if eos is not None:
            ids.add(int(eos))
        config_eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
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
        continues that message (response prefill) rather than starting a new turn.  Encodings
        are remembered per request id (for the same messages), so planning and generating the
        same requests tokenises them once.
        """
        key = json.dumps(request.messages, sort_keys=True)
        remembered = self._encoded.get(request.request_id)
        if remembered is not None and remembered[0] == key:
            return remembered[1]
        messages = list(request.messages)
        if messages and messages[-1].get("role") == "assistant":
            text = self.tokenizer.apply_chat_template(
                messages, tokenize=False, continue_final_message=True
            )
        else:
            text = self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
        tokens = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        self._encoded[request.request_id] = (key, tokens)
        return tokens

    # -- batch size ----------------------------------------------------------------------

    def estimated_batch_bytes(self, rows: int, max_prompt_tokens: int, params: DecodingParams) -> int:
        """Bytes a batch of ``rows`` is estimated to take beyond the weights (one device)."""
        return estimated_batch_bytes(self.model, self.dtype, self.prefill_chunk_tokens, rows, max_prompt_tokens, params)

    def batch_size_for(self, prompt_lengths: Sequence[int], max_new_tokens: int,
                       params: DecodingParams | None = None) -> int:
        """The batch size this generator plans with for these prompts."""
        estimate = None
        if self.on_gpu and self.batch_size_policy in ("auto", None):
            estimate = gpu_batch_estimate(
                self.model, self.input_device, self.dtype, self.prefill_chunk_tokens,
                max_prompt_tokens=max(prompt_lengths, default=1), params=params, max_new_tokens=max_new_tokens)
        chosen = resolve_batch_size(
            self.batch_size_policy, n_requests=len(prompt_lengths), on_gpu=self.on_gpu,
            gpu_estimate=estimate,
        )
        if self.left_padding is not None and not self.left_padding.exact and chosen > 1:
            # left padding changes this model's outputs (measured at load): rows run alone
            logger.warning("%s: generating one request at a time: %s", self.model_id, self.left_padding.reason)
            return 1
        return chosen

    def resolve_batch_size(self, requests: Sequence[ChatRequest], params: DecodingParams) -> int:
        """The batch size :meth:`complete` would plan these requests with (stored on resume)."""
        return self.batch_size_for([len(self.encode(r)) for r in requests], params.max_new_tokens, params)

    # -- generation ----------------------------------------------------------------------

    def complete(
        self,
        requests: Sequence[ChatRequest],
        params: DecodingParams,
        on_batch: BatchCallback | None = None,
        batch_size: int | None = None,
    ) -> list[Completion]:
        """Complete every request, batch by batch; ``on_batch`` sees each finished batch.

        ``batch_size`` replaces the policy's choice (a resumed job passes the size its first
        run resolved, so the remaining batches are the ones that run would have run).
        """
        import torch

        if not requests:
            return []
        ids = [request.request_id for request in requests]
        if len(set(ids)) != len(ids):
            raise ValueError("request ids must be unique within a call")
        encoded = [self.encode(request) for request in requests]
        lengths = [len(tokens) for tokens in encoded]
        if batch_size is None:
            batch_size = self.batch_size_for(lengths, params.max_new_tokens, params)
        plan = plan_batches(lengths, batch_size)
        self.provenance["batch_size"] = batch_size  # what "auto" resolved to, for the record
        logger.info("%d requests in %d batches of <= %d", len(requests), len(plan), batch_size)
        results: list[Completion | None] = [None] * len(requests)
        queue: list[PlannedBatch] = [
            PlannedBatch(batch.batch_index, piece)
            for batch in plan for piece in split_to_cap(batch.positions, self.batch_cap)]
        while queue:
            batch = queue.pop(0)
            try:
                completions = self._run_batch(
                    [requests[p] for p in batch.positions],
                    [encoded[p] for p in batch.positions],
                    params,
                    batch.batch_index,
                )
            except (torch.OutOfMemoryError, RuntimeError) as error:
                if not is_out_of_memory(error):
                    raise
                if self.on_gpu:
                    torch.cuda.empty_cache()
                if len(batch.positions) == 1:
                    logger.error("request %s does not fit in memory alone",
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
                    self.batch_cap = len(halves[0]) if self.batch_cap is None else min(self.batch_cap, len(halves[0]))
                    self.provenance["learned_batch_cap"] = self.batch_cap
                    logger.warning("batch %d (%d items) ran out of memory; retrying as %d + %d and "
                                   "capping later batches at %d", batch.batch_index,
                                   len(batch.positions), len(halves[0]), len(halves[1]), self.batch_cap)
                    later = [PlannedBatch(queued.batch_index, piece) for queued in queue
                             for piece in split_to_cap(queued.positions, self.batch_cap)]
                    queue = [PlannedBatch(batch.batch_index, half) for half in halves] + later
                    continue
            for position, completion in zip(batch.positions, completions):
                results[position] = completion
            if on_batch is not None:
                on_batch(completions)
        missing = [ids[i] for i, result in enumerate(results) if result is None]
        if missing:  # cannot happen unless the loop above is broken; never return holes
            raise RuntimeError(f"no completion for requests {missing[:5]}")
        return [result for result in results if result is not None]

    def score_continuations(
        self, requests: Sequence[ChatRequest], continuations: Sequence[Continuation]
    ) -> list[ScoredPrompt]:
        """Every continuation's log-probability after every request's prompt (the ``choices``
        judge mode; :mod:`~bloomqg.generation.hf.choices`), in length-bucketed batches of the
        generator's batch size. The prompts are encoded as for generation (chat template plus
        the assistant turn's opening)."""
        from bloomqg.generation.hf.choices import row_tokens_beyond_prompt, score_batch, tokenize_continuation

        if not self.supports_choice_scoring:
            raise ModelSupportError(f"model {self.model_id!r}: scoring continuations needs the cached decode "
                                    "loop and full attention in every layer")
        if not requests:
            return []
        tokenized = [tokenize_continuation(self.tokenizer, continuation) for continuation in continuations]
        encoded = [self.encode(request) for request in requests]
        batch_size = self.batch_size_for([len(tokens) for tokens in encoded],
                                         row_tokens_beyond_prompt(self, tokenized))
        self.provenance["choice_batch_size"] = batch_size
        results: list[ScoredPrompt | None] = [None] * len(requests)
        for batch in plan_batches([len(tokens) for tokens in encoded], batch_size):
            started = time.perf_counter()
            scores = score_batch(self, [encoded[p] for p in batch.positions], tokenized)
            for position, row_scores in zip(batch.positions, scores):
                results[position] = ScoredPrompt(requests[position].request_id, tuple(row_scores),
                                                 n_prompt_tokens=len(encoded[position]))
            self.stats["scored_batches"] += 1
            self.stats["scored_rows"] += len(batch.positions) * len(tokenized)
            logger.info("scored batch %d: %d prompts x %d continuations in %.1f s", batch.batch_index,
                        len(batch.positions), len(tokenized), time.perf_counter() - started)
        return [result for result in results if result is not None]

    def _run_batch(
        self,
        requests: Sequence[ChatRequest],
        encoded: Sequence[list[int]],
        params: DecodingParams,
        batch_index: int,
    ) -> list[Completion]:
        started = time.perf_counter()
        decode = decode_legacy if self.plan.decode_loop == "legacy" else decode_cached
        result = decode(self, requests, encoded, params)
        return self._completions(requests, encoded, result, batch_index, started)

    def forward(self, cache: Any, **inputs: Any) -> Any:
        """Last-position float logits of one forward pass (what the decode loops call)."""
        return forward(self.model, self.plan, cache, **inputs)

    def _completions(self, requests: Sequence[ChatRequest], encoded: Sequence[list[int]],
                     result: DecodeResult, batch_index: int, started: float) -> list[Completion]:
        """The batch's completions (prefill prefix + decoded continuation), its stats counted."""
        latency = time.perf_counter() - started
        completions = []
        useful = 0
        for row, request in enumerate(requests):
            kept, finish = trim_completion(result.generated[row], self.stop_ids)
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
        rows = len(requests)
        self.stats["useful_tokens"] += useful
        self.stats["prefill_tokens"] += result.prefill_tokens
        self.stats["shared_prefix_tokens_saved"] += max(rows - 1, 0) * result.shared_prefix_tokens
        self.stats["computed_decode_steps"] += result.computed_decode_steps
        self.stats["batches"] += 1
        if result.rows_dropped is not None:
            self.provenance["legacy_stopped_rows"] = (
                "dropped from the model's cache" if result.rows_dropped
                else "kept to the batch's end (its cache format is not row-selectable)")
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
