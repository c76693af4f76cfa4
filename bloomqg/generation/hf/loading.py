"""Loading a transformers model for :class:`~bloomqg.generation.hf.generator.HFTextGenerator`:
its config (or a clear error why transformers cannot build it), the loading plan settled before
the weights (:func:`~bloomqg.generation.hf.model_support.plan_loading`), the tokenizer and its
chat template, then the weights in the resolved dtype."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bloomqg.generation.hf.model_support import (
    NATIVE_SINCE,
    TRANSFORMERS_TESTED,
    LoadPlan,
    ModelSupportError,
    check_chat_template,
    plan_loading,
    tokenizer_dependency_error,
)
from bloomqg.generation.hf.remote_code import RebuiltTensors, meta_tensors, rebuild_init_tensors
from bloomqg.store.provenance import REPO_ROOT

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedModel:
    """A model in memory, its tokenizer and plan, and where its chat template came from."""

    model: Any
    tokenizer: Any
    plan: LoadPlan
    chat_template_origin: Any
    #: remote code: what :func:`~bloomqg.generation.hf.remote_code.rebuild_init_tensors` rebuilt
    rebuilt: RebuiltTensors | None = None


def load_pretrained(
    source: str,
    *,
    model_id: str,
    revision: str | None,
    gguf_file: str | None,
    dtype: str | None,
    trust_remote_code: bool,
    attn_implementation: str | None,
    chat_template: str | Path | None,
    decode_loop: str | None,
) -> LoadedModel:
    """Load ``source`` (a local directory, a GGUF's directory, or a hub id at ``revision``)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    on_gpu = torch.cuda.is_available()
    torch_dtype = resolve_dtype(dtype, on_gpu)
    load_kwargs: dict[str, Any] = {"trust_remote_code": bool(trust_remote_code)}
    if revision:
        load_kwargs["revision"] = revision
    if gguf_file:
        load_kwargs["gguf_file"] = gguf_file
    started = time.perf_counter()
    config = load_config(source, load_kwargs)
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
    rebuilt = None
    if plan.code == "remote":
        # its __init__ tables were built on the meta device: rebuild them where the model runs
        rebuilt = rebuild_init_tensors(model, model_id)
        if rebuilt.count:
            logger.info("%s: rebuilt %d tensors its code computes in __init__ (%d left on the meta device "
                        "by loading, %d uninitialised): %s", model_id, rebuilt.count, rebuilt.left_on_meta,
                        rebuilt.differed, ", ".join(rebuilt.names))
    else:
        left = meta_tensors(model)
        if left:
            raise ModelSupportError(f"model {model_id!r}: {len(left)} tensors are still on the meta device "
                                    f"after loading (first: {left[0]})")
    logger.info("loaded %s (%s, %s) in %.1f s", model_id, plan.model_class,
                plan.attn_implementation, time.perf_counter() - started)
    return LoadedModel(model, tokenizer, plan, template_origin, rebuilt)


def cpu_computes_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware (AVX512-BF16 or AMX). There a bf16 matmul ran
    2.2 times as fast as an fp32 one on 2 cores; where bf16 is emulated it ran at half fp32's speed
    (AVX-512 without BF16) or a sixtieth (AVX2). torch reports the features through ``torch.cpu``'s
    underscored probes; a torch without them counts as no."""
    import torch

    return any(getattr(torch.cpu, probe, lambda: False)() for probe in ("_is_avx512_bf16_supported",
                                                                        "_is_amx_tile_supported"))


def resolve_dtype(name: str | None, on_gpu: bool) -> Any:
    """torch dtype for a spec's dtype: "auto" = bf16 (fp16 without bf16 support) on GPU; on a CPU,
    bf16 where it computes bf16 in hardware (:func:`cpu_computes_bf16`), else fp32."""
    import torch

    name = (name or "auto").lower()
    if name == "auto":
        if not on_gpu:
            return torch.bfloat16 if cpu_computes_bf16() else torch.float32
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    table = {
        "float32": torch.float32, "fp32": torch.float32,
        "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
        "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    }
    if name not in table:
        raise ValueError(f"model dtype {name!r} is not one of auto, {', '.join(sorted(table))}")
    return table[name]


def load_config(source: str, load_kwargs: Mapping[str, Any]) -> Any:
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
