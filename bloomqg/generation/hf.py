"""In-process generation with Hugging Face transformers: batched, resumable, reproducible.

:class:`HFTextGenerator` loads a causal LM once and completes chat requests in length-bucketed
batches (see :mod:`bloomqg.generation.batching`).  It runs its own decode loop over the model's
KV cache instead of ``model.generate``: ``generate`` keeps every sequence of a batch decoding
until the longest one stops, so with answers of very different lengths most of the computed
tokens are padding.  Here a sequence that emits a stop token is dead: its cache rows are
dropped when enough rows are dead (at once on a CPU, where every row costs compute; when a
quarter of the batch is dead on a GPU, where each drop copies the whole cache), so the work
done tracks the useful tokens.

What is settled before the weights load (code, decode loop, attention, chat template,
tokenizer extras) is in :mod:`bloomqg.generation.model_support`.  Native models use the
``cached`` loop; remote-code models (Baichuan2) the ``legacy`` loop, which feeds the model's
own cache back as it returned it.  The cached loop checks after its first forward pass that
the model filled the cache it was given, so a model that ignores it fails loudly instead of
writing text computed without context.

Prefill and cache (:mod:`bloomqg.generation.kv_cache`): the tokens all prompts of a batch start
with (chat template, system message, the strategy's instructions: 159 of ~220 CoT tokens with
the shipped templates) are computed once per batch and copied into every row's cache; the rest
is prefilled in column chunks of about ``prefill_chunk_tokens`` tokens; the cache is
preallocated for the prompt plus ``max_new_tokens`` instead of growing by concatenation.  The
shared prefix is a function of the batch's own prompts, and batches replan identically on
resume (the stage stores the resolved batch size in its checkpoint), so a rerun batch computes
exactly what the uninterrupted run did.

Response prefill: a request whose last message is from the assistant is *continued*
(transformers' ``apply_chat_template(..., continue_final_message=True)``) instead of answered in
a new turn, and the completion text is that message's content followed by the continuation, so
parsers and audits see the whole answer.  :func:`bloomqg.prompts.with_response_prefill` builds
such requests; the generation stage adds them when a model entry sets ``response_prefill: true``
(:attr:`HFTextGenerator.response_prefill`).

Reproducibility: every sequence samples from its own random stream, a CPU ``torch.Generator``
seeded from the study seed and its request id (:func:`~bloomqg.generation.batching.request_seed`);
a batch draws all its rows' uniforms once, before decoding, so a row's text does not depend on
the other rows, on the device its logits live on, or on per-step host round trips.  Bitwise
equality is not promised across hardware or batch compositions (batched matrix products differ
in the last bits).

Devices: with ``device_map="auto"`` over several GPUs the inputs go to the embedding's device,
the logits come from the output head's, and each cache layer selects its rows with indices moved
to its own device.
"""

from __future__ import annotations

import json
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
    SAMPLING_BYTES_PER_LOGIT,
    TOP_P_SAMPLING_BYTES_PER_LOGIT,
    DeviceMemory,
    PlannedBatch,
    auto_batch_size_devices,
    kv_cache_bytes_per_token,
    plan_batches,
    request_seed,
    resolve_batch_size,
    split_in_half,
    split_to_cap,
    trim_completion,
)
from bloomqg.generation.model_support import (
    NATIVE_SINCE,
    TRANSFORMERS_TESTED,
    LoadPlan,
    ModelSupportError,
    cache_not_filled_error,
    check_chat_template,
    plan_for_model,
    plan_loading,
    tokenizer_dependency_error,
)
from bloomqg.models import read_model_provenance

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]

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


def _layer_devices(model: Any, default: Any) -> dict[Any, int]:
    """Decoder layers per device: from ``hf_device_map`` when the model is split, else all on one."""
    import re

    import torch

    config = model.config.get_text_config()
    layers = int(config.num_hidden_layers)
    device_map = getattr(model, "hf_device_map", None) or {}
    counts: dict[Any, int] = {}
    for name, device in device_map.items():
        if re.search(r"(?:^|\.)(?:layers|h|blocks|encoder\.layers)\.\d+$", name):
            key = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
            counts[key] = counts.get(key, 0) + 1
    if not counts or sum(counts.values()) != layers:
        return {default: layers}
    return counts


class HFTextGenerator:
    """A transformers causal LM behind the :class:`~bloomqg.generation.base.TextGenerator` API.

    ``source`` is a local model directory (e.g. a converted GGUF), a directory holding a GGUF
    file (with ``gguf_file``), or a hub id (pinned with ``revision``).  The model loads once,
    in the constructor, after :func:`~bloomqg.generation.model_support.plan_loading` has settled
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
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.dynamic_module_utils import get_class_from_dynamic_module

        if num_threads is not None:
            torch.set_num_threads(int(num_threads))
        on_gpu = torch.cuda.is_available()
        torch_dtype = _resolve_dtype(dtype, on_gpu)
        load_kwargs: dict[str, Any] = {"trust_remote_code": bool(trust_remote_code)}
        if revision:
            load_kwargs["revision"] = revision
        if gguf_file:
            load_kwargs["gguf_file"] = gguf_file
        source = str(source)
        started = time.perf_counter()
        config = self._load_config(source, load_kwargs)
        plan = plan_loading(
            config, source=source, trust_remote_code=bool(trust_remote_code),
            resolve_remote_class=lambda ref: get_class_from_dynamic_module(ref, source, revision=revision),
            decode_loop=decode_loop, attn_implementation=attn_implementation, on_gpu=on_gpu,
            half_precision=torch_dtype in (torch.float16, torch.bfloat16),
        )
        try:
            tokenizer = AutoTokenizer.from_pretrained(source, **load_kwargs)
        except (ImportError, ValueError, OSError, AttributeError, TypeError) as error:
            clear = tokenizer_dependency_error(source, error)
            if clear is not None:
                raise clear from error
            raise
        template_origin = check_chat_template(source, tokenizer, chat_template,
                                              base_dirs=(Path.cwd(), REPO_ROOT))
        model = AutoModelForCausalLM.from_pretrained(
            source,
            dtype=torch_dtype,
            attn_implementation=plan.attn_implementation,
            device_map="auto" if on_gpu else None,
            **load_kwargs,
        )
        logger.info("loaded %s (%s, %s) in %.1f s", model_id or source, plan.model_class,
                    plan.attn_implementation, time.perf_counter() - started)
        self._setup(
            model, tokenizer, plan, model_id=model_id or source, batch_size=batch_size,
            response_prefill=response_prefill, share_prompt_prefix=share_prompt_prefix,
            provenance={"source": source, "revision": revision, "gguf_file": gguf_file,
                        "trust_remote_code": bool(trust_remote_code),
                        "chat_template": template_origin, **dict(extra_provenance or {})},
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

    @staticmethod
    def _load_config(source: str, load_kwargs: Mapping[str, Any]) -> Any:
        """The model's config, or an error that says why transformers cannot build it."""
        from transformers import AutoConfig, PretrainedConfig

        try:
            return AutoConfig.from_pretrained(source, **load_kwargs)
        except ValueError as error:
            import transformers

            try:
                raw, _ = PretrainedConfig.get_config_dict(
                    source, **{k: v for k, v in load_kwargs.items() if k != "trust_remote_code"})
            except (OSError, ValueError):
                raise error from None
            model_type = raw.get("model_type")
            if raw.get("auto_map") and not load_kwargs.get("trust_remote_code"):
                raise ModelSupportError(
                    f"model {source!r} (model type {model_type!r}) is not implemented in "
                    f"transformers {transformers.__version__}; it ships its own code: set "
                    "trust_remote_code: true to run it, or upgrade transformers where a native "
                    "port exists") from error
            since = NATIVE_SINCE.get(str(model_type))
            raise ModelSupportError(
                f"model {source!r}: transformers {transformers.__version__} does not know model "
                f"type {model_type!r}" + (f" (native from transformers {since})" if since else "")
                + f"; upgrade transformers (tested: {' '.join(TRANSFORMERS_TESTED)})"
            ) from error

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

        from bloomqg.generation import kv_cache

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
        self.share_prompt_prefix = (
            bool(share_prompt_prefix) and plan.decode_loop == "cached"
            and kv_cache.all_layers_preallocated(kv_cache.decode_cache(model.config, 1)))
        self._encoded: dict[str, tuple[str, list[int]]] = {}
        self.stats = {"useful_tokens": 0, "computed_decode_steps": 0, "batches": 0, "oom_splits": 0,
                      "prefill_tokens": 0, "shared_prefix_tokens_saved": 0, "cache_compactions": 0}
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
                         else "the model's own (legacy loop)"),
            "shared_prompt_prefix": self.share_prompt_prefix,
            "prefill_chunk_tokens": self.prefill_chunk_tokens,
            "cache_compact_fraction": self.compact_fraction,
        }
        self.provenance.update(dict(provenance))

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

    def _memory_terms(self, params: DecodingParams | None) -> dict[str, int]:
        """Per-token KV bytes per layer, prefill activation bytes and logits bytes per row."""
        import torch

        config = self.model.config.get_text_config()
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        dtype_bytes = torch.tensor([], dtype=self.dtype).element_size()
        top_p = params.top_p if params is not None else 1.0
        per_logit = TOP_P_SAMPLING_BYTES_PER_LOGIT if top_p < 1.0 else SAMPLING_BYTES_PER_LOGIT
        return {
            "kv_bytes_per_token_per_layer": kv_cache_bytes_per_token(
                num_layers=1, num_kv_heads=getattr(config, "num_key_value_heads", None) or heads,
                head_dim=head_dim, dtype_bytes=dtype_bytes),
            # prefill transients of one layer at a time: MLP up/gate + attention projections
            "activation_bytes_per_prompt_token": (2 * config.intermediate_size + 4 * config.hidden_size)
            * dtype_bytes,
            "logits_bytes_per_sequence": config.vocab_size * per_logit,
        }

    def estimated_batch_bytes(self, rows: int, max_prompt_tokens: int, params: DecodingParams) -> int:
        """Bytes a batch of ``rows`` is estimated to take beyond the weights (one device)."""
        terms = self._memory_terms(params)
        layers = self.model.config.get_text_config().num_hidden_layers
        per_row = (terms["kv_bytes_per_token_per_layer"] * layers * (max_prompt_tokens + params.max_new_tokens)
                   + terms["logits_bytes_per_sequence"])
        return rows * per_row + terms["activation_bytes_per_prompt_token"] * self.prefill_chunk_tokens

    def _gpu_batch_estimate(self, max_prompt_tokens: int, params: DecodingParams | None,
                            max_new_tokens: int) -> int:
        import torch

        output_device = self.model.get_output_embeddings().weight.device
        layers = _layer_devices(self.model, self.input_device)
        devices = []
        for device in sorted(set(layers) | {output_device}, key=str):
            if device.type != "cuda":
                continue
            free, _total = torch.cuda.mem_get_info(device)
            devices.append(DeviceMemory(free_bytes=free, num_layers=layers.get(device, 0),
                                        holds_logits=device == output_device))
        terms = self._memory_terms(params)
        return auto_batch_size_devices(
            devices, max_prompt_tokens=max_prompt_tokens, max_new_tokens=max_new_tokens,
            prefill_chunk_tokens=self.prefill_chunk_tokens, **terms)

    def batch_size_for(self, prompt_lengths: Sequence[int], max_new_tokens: int,
                       params: DecodingParams | None = None) -> int:
        """The batch size this generator plans with for these prompts."""
        estimate = None
        if self.on_gpu and self.batch_size_policy in ("auto", None):
            estimate = self._gpu_batch_estimate(max(prompt_lengths, default=1), params, max_new_tokens)
        chosen = resolve_batch_size(
            self.batch_size_policy, n_requests=len(prompt_lengths), on_gpu=self.on_gpu,
            gpu_estimate=estimate,
        )
        if self.plan.decode_loop == "legacy" and not self.plan.takes_position_ids and chosen > 1:
            # left padding shifts positions in a model that cannot be told them: rows run alone
            logger.warning("%s: forward takes no position_ids; generating one request at a time",
                           self.model_id)
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

    def _uniforms(self, requests: Sequence[ChatRequest], params: DecodingParams, device: Any) -> Any:
        """One row of ``max_new_tokens`` uniform draws per request, from its own CPU stream."""
        import torch

        if not params.do_sample or params.temperature <= 0:
            return None
        draws = [torch.rand(params.max_new_tokens,
                            generator=torch.Generator().manual_seed(request_seed(params.seed, r.request_id)))
                 for r in requests]
        return torch.stack(draws).to(device)

    def _sample(self, logits: Any, uniform: Any, params: DecodingParams) -> Any:
        """Next token per row: greedy, or nucleus sampling with each row's own uniform draw.

        Each row inverts the CDF of its (temperature-scaled, top-p truncated) distribution at
        its uniform, so a row's token depends only on its logits and its own random stream.
        Top-p looks at the :data:`TOP_P_CANDIDATES` most likely tokens first (``topk`` is far
        cheaper than sorting the vocabulary for every row at every step, which took a third of a
        CPU decode step); rows whose nucleus is not inside them fall back to a full sort, so the
        result is exact.  The only host round trip is that check, and only under top-p.
        """
        import torch

        if uniform is None:
            return logits.argmax(dim=-1)
        probs = torch.softmax(logits / params.temperature, dim=-1)
        if params.top_p >= 1.0:
            cdf = probs.cumsum(dim=-1)
            picked = torch.searchsorted(cdf, (uniform * cdf[:, -1])[:, None])
            return picked.squeeze(1).clamp(max=probs.shape[-1] - 1)
        k = min(TOP_P_CANDIDATES, probs.shape[-1])
        top_probs, top_ids = probs.topk(k, dim=-1)
        tokens = _nucleus_pick(top_probs, top_ids, uniform, params.top_p)
        wide = top_probs.sum(dim=-1) < params.top_p
        if bool(wide.any()):  # flat distributions: the nucleus is wider than k
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
        started = time.perf_counter()
        if self.plan.decode_loop == "legacy":
            generated, prefill_tokens, computed = self._decode_legacy(requests, encoded, params)
            shared = 0
        else:
            generated, prefill_tokens, computed, shared = self._decode_cached(requests, encoded, params)
        return self._completions(requests, encoded, generated, batch_index, started,
                                 prefill_tokens=prefill_tokens, computed=computed, shared=shared)

    def _left_padded(self, sequences: Sequence[Sequence[int]]) -> tuple[Any, Any]:
        """Left-padded ids and their mask (1 = real token) on the input device."""
        import torch

        width = max(len(tokens) for tokens in sequences)
        input_ids = torch.full((len(sequences), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, tokens in enumerate(sequences):
            input_ids[row, width - len(tokens):] = torch.tensor(tokens, dtype=torch.long)
            mask[row, width - len(tokens):] = 1
        return input_ids.to(self.input_device), mask.to(self.input_device)

    def _forward(self, cache: Any, **inputs: Any) -> Any:
        """Last-position float logits of one forward pass, the cache passed as the model takes it."""
        return self.model(**inputs, **{self.plan.cache_keyword: cache}, use_cache=True,
                          logits_to_keep=1).logits[:, -1, :].float()

    def _check_cache_filled(self, cache: Any, expected_tokens: int) -> None:
        filled = cache.get_seq_length()
        if filled != expected_tokens:
            raise cache_not_filled_error(self.model, self.plan.cache_keyword, filled, expected_tokens)

    def _decode_cached(self, requests: Sequence[ChatRequest], encoded: Sequence[list[int]],
                       params: DecodingParams) -> tuple[list[list[int]], int, int, int]:
        """Prefill one left-padded batch into a preallocated cache, then decode, dropping dead rows."""
        import torch

        from bloomqg.generation import kv_cache

        rows = len(encoded)
        shared = kv_cache.shared_prefix_length(encoded) if self.share_prompt_prefix else 0
        if shared < kv_cache.MIN_SHARED_PREFIX_TOKENS:
            shared = 0
        input_ids, suffix_mask = self._left_padded([tokens[shared:] for tokens in encoded])
        width = input_ids.shape[1]
        # [shared prefix][left padding][own suffix]: positions continue from the prefix
        positions = shared + (suffix_mask.cumsum(dim=-1) - 1).clamp(min=0)
        attention = torch.cat([suffix_mask.new_ones((rows, shared)), suffix_mask], dim=-1)
        capacity = shared + width + params.max_new_tokens
        generated: list[list[int]] = [[] for _ in range(rows)]
        batch_rows = list(range(rows))  # original row of each cache row; -1 once it is dead
        dead = 0
        computed = 0
        with torch.inference_mode():
            if shared:
                prefix_states = kv_cache.prefill_shared_prefix(
                    self.model, encoded[0][:shared], shared, cache_keyword=self.plan.cache_keyword)
                cache = kv_cache.seeded_cache(self.model.config, prefix_states, rows, capacity)
            else:
                cache = kv_cache.decode_cache(self.model.config, capacity)
            # Prefill in column chunks of about prefill_chunk_tokens: one huge forward pass is
            # slower on a CPU (its activations spill out of the caches) and on a GPU its
            # transients, not the KV cache, would cap the batch size.
            columns = max(1, self.prefill_chunk_tokens // rows)
            for start in range(0, width, columns):
                end = min(width, start + columns)
                logits = self._forward(cache, input_ids=input_ids[:, start:end],
                                       attention_mask=attention[:, : shared + end],
                                       position_ids=positions[:, start:end])
                if start == 0:
                    self._check_cache_filled(cache, shared + end)
            uniforms = self._uniforms(requests, params, logits.device)
            next_position = positions[:, -1] + 1
            for step in range(params.max_new_tokens):
                tokens = self._sample(logits, None if uniforms is None else uniforms[:, step], params)
                computed += len(batch_rows)
                for index, token in enumerate(tokens.tolist()):  # the step's one host sync
                    row = batch_rows[index]
                    if row < 0:
                        continue
                    generated[row].append(token)
                    if token in self.stop_ids or step + 1 >= params.max_new_tokens:
                        batch_rows[index] = -1
                        dead += 1
                if dead == len(batch_rows):
                    break
                if dead and dead >= self.compact_fraction * len(batch_rows):
                    keep = [index for index, row in enumerate(batch_rows) if row >= 0]
                    kv_cache.select_rows(cache, torch.tensor(keep))
                    keep_index = torch.tensor(keep, device=attention.device)
                    attention = attention[keep_index]
                    next_position = next_position[keep_index]
                    tokens = tokens[keep_index.to(tokens.device)]
                    if uniforms is not None:
                        uniforms = uniforms[keep_index.to(uniforms.device)]
                    batch_rows = [batch_rows[index] for index in keep]
                    dead = 0
                    self.stats["cache_compactions"] += 1
                attention = torch.cat([attention, attention.new_ones((len(batch_rows), 1))], dim=-1)
                logits = self._forward(cache, input_ids=tokens[:, None].to(self.input_device),
                                       attention_mask=attention, position_ids=next_position[:, None])
                next_position = next_position + 1
        return generated, rows * width + shared, computed, shared

    def _decode_legacy(self, requests: Sequence[ChatRequest], encoded: Sequence[list[int]],
                       params: DecodingParams) -> tuple[list[list[int]], int, int]:
        """Decode with the model's own cache, fed back as returned (remote code, see module doc).

        Rows cannot leave an opaque cache, so the batch decodes until its last row stops; the
        padding this costs is counted in ``computed_decode_steps``.
        """
        import torch
        import transformers

        rows = len(encoded)
        input_ids, attention = self._left_padded(encoded)
        extra: dict[str, Any] = {}
        positions = (attention.cumsum(dim=-1) - 1).clamp(min=0)
        if self.plan.takes_position_ids:
            extra["position_ids"] = positions
        generated: list[list[int]] = [[] for _ in range(rows)]
        alive = [True] * rows
        computed = 0
        with torch.inference_mode():
            output = self.model(input_ids=input_ids, attention_mask=attention, use_cache=True, **extra)
            state = getattr(output, "past_key_values", None)
            if state is None:
                raise ModelSupportError(
                    f"{type(self.model).__name__} returned no past_key_values with use_cache=True "
                    f"(transformers {transformers.__version__}); the legacy decode loop needs the "
                    "model's own cache")
            logits = output.logits[:, -1, :].float()
            uniforms = self._uniforms(requests, params, logits.device)
            next_position = positions[:, -1] + 1
            for step in range(params.max_new_tokens):
                tokens = self._sample(logits, None if uniforms is None else uniforms[:, step], params)
                computed += rows
                for row, token in enumerate(tokens.tolist()):
                    if not alive[row]:
                        continue
                    generated[row].append(token)
                    if token in self.stop_ids or step + 1 >= params.max_new_tokens:
                        alive[row] = False
                if not any(alive):
                    break
                attention = torch.cat([attention, attention.new_ones((rows, 1))], dim=-1)
                if self.plan.takes_position_ids:
                    extra["position_ids"] = next_position[:, None]
                output = self.model(input_ids=tokens[:, None].to(self.input_device),
                                    attention_mask=attention, past_key_values=state, use_cache=True,
                                    **extra)
                state = output.past_key_values
                logits = output.logits[:, -1, :].float()
                next_position = next_position + 1
        return generated, rows * input_ids.shape[1], computed

    def _completions(self, requests: Sequence[ChatRequest], encoded: Sequence[list[int]],
                     generated: list[list[int]], batch_index: int, started: float, *,
                     prefill_tokens: int, computed: int, shared: int) -> list[Completion]:
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
        rows = len(requests)
        self.stats["useful_tokens"] += useful
        self.stats["prefill_tokens"] += prefill_tokens
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
