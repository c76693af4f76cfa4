"""What a model needs, decided before its weights load: code, decode loop, attention, chat template.

A 7-9B checkpoint takes minutes and ~16 GB to load, so everything that can make a run fail or
silently go wrong is settled first, from the model's config, its tokenizer and its class
(no weights):

- **Code.**  A model type transformers knows (``CONFIG_MAPPING``) runs transformers' own
  implementation; a type it does not know needs ``trust_remote_code: true`` and runs the
  repository's code.  A known type whose repository also ships code runs that code only when the
  entry asks for it (``trust_remote_code: true``): InternLM3's remote files were written for
  transformers 4.x, its native port exists from 5.23 (:data:`NATIVE_SINCE`).
- **Decode loop.**  ``cached``: our loop over a preallocated, row-selectable KV cache
  (:mod:`bloomqg.generation.hf.kv_cache`), passed under the keyword the model's ``forward`` takes
  (``cache`` from transformers 5.24, ``past_key_values`` before).  ``legacy``: for remote code,
  whose ``forward`` may swallow unknown keywords and return its own (tuple) cache; the loop then
  feeds that cache back as it came (:func:`bloomqg.generation.hf.decode.decode_legacy`).
- **Attention.**  The entry's ``attn_implementation``, else FlashAttention-2 on a GPU in half
  precision when installed and supported, else SDPA when the class supports it, else eager.
- **Chat template.**  The tokenizer's, else the file the entry names (``chat_template:``, e.g.
  ``prompts/chat_templates/baichuan2.jinja``); neither is an error before loading weights.
- **Tokenizer extras.**  Tokenizers that need ``sentencepiece`` or ``tiktoken`` fail with the
  pip extra to install (:data:`TOKENIZER_EXTRA`).
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

#: transformers versions the decode loop is tested on (tests/integration/test_transformers_range.py
#: runs the equivalence tests on the lowest; pyproject.toml and envs/generation.yaml state the same).
TRANSFORMERS_TESTED = (">=5.2", "<5.25")
#: Model types the paper preset uses whose native port is newer than the lowest tested version.
NATIVE_SINCE = {"internlm3": "5.23"}
#: The optional dependency group (pyproject.toml) that brings the tokenizer libraries below.
TOKENIZER_EXTRA = "tokenizers"
#: pip name -> module name of the libraries slow or remote tokenizers import
TOKENIZER_PACKAGES = {"sentencepiece": "sentencepiece", "tiktoken": "tiktoken", "protobuf": "google.protobuf"}

DecodeLoop = Literal["cached", "legacy"]
ATTENTION_CHOICES = ("auto", "sdpa", "eager", "flash_attention_2")


@dataclass(frozen=True)
class LoadPlan:
    """How a model will be loaded and driven; recorded in the generation's provenance."""

    model_type: str
    code: Literal["native", "remote"]
    model_class: str
    decode_loop: DecodeLoop
    #: keyword under which ``forward`` takes the cache ("cache" or "past_key_values")
    cache_keyword: str
    attn_implementation: str
    #: whether ``forward`` takes ``position_ids`` (left-padded batches need them)
    takes_position_ids: bool

    def as_provenance(self) -> dict[str, Any]:
        return {"model_type": self.model_type, "code": self.code, "model_class": self.model_class,
                "decode_loop": self.decode_loop, "cache_keyword": self.cache_keyword,
                "attn_implementation": self.attn_implementation}


class ModelSupportError(RuntimeError):
    """A model that cannot run as configured; the message says what to do."""


def forward_parameters(model_class: type) -> set[str]:
    """Names ``model_class.forward`` takes (decorators that keep ``__wrapped__`` are seen through)."""
    return set(inspect.signature(model_class.forward).parameters)


def cache_keyword(model_class: type) -> str:
    """The keyword ``forward`` takes the KV cache under, from its signature."""
    names = forward_parameters(model_class)
    for keyword in ("cache", "past_key_values"):
        if keyword in names:
            return keyword
    import transformers

    raise ModelSupportError(
        f"{model_class.__name__}.forward takes neither 'cache' nor 'past_key_values' "
        f"(transformers {transformers.__version__}): the decode loop cannot pass it a KV cache")


def cache_not_filled_error(model: Any, keyword: str, filled: int, expected: int) -> ModelSupportError:
    """The error for a model that left the cache it was given (almost) empty."""
    import transformers

    return ModelSupportError(
        f"{type(model).__name__} did not fill the KV cache passed as {keyword}= (transformers "
        f"{transformers.__version__}): {filled} tokens cached after a forward pass over {expected}; "
        "decoding on would compute every token without its context. Use a tested transformers "
        f"version ({' '.join(TRANSFORMERS_TESTED)}), or decode_loop: legacy for remote code")


def choose_attention(model_class: type, requested: str | None, *, on_gpu: bool, half_precision: bool) -> str:
    """The attention implementation to load with (see the module docstring)."""
    requested = requested or "auto"
    if requested not in ATTENTION_CHOICES:
        raise ModelSupportError(f"attn_implementation {requested!r} is not one of {', '.join(ATTENTION_CHOICES)}")
    supports_flash = bool(getattr(model_class, "_supports_flash_attn", False)
                          or getattr(model_class, "_supports_flash_attn_2", False))
    supports_sdpa = bool(getattr(model_class, "_supports_sdpa", False))
    if requested == "auto":
        if on_gpu and half_precision and supports_flash and _installed("flash_attn"):
            return "flash_attention_2"
        return "sdpa" if supports_sdpa else "eager"
    if requested == "sdpa" and not supports_sdpa:
        raise ModelSupportError(f"{model_class.__name__} does not support SDPA attention; "
                                "set attn_implementation: eager (or auto)")
    if requested == "flash_attention_2" and not supports_flash:
        raise ModelSupportError(f"{model_class.__name__} does not support FlashAttention-2; "
                                "set attn_implementation: sdpa, eager or auto")
    return requested


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package (google) is missing
        return False


def tokenizer_dependency_error(source: str, error: BaseException) -> ModelSupportError | None:
    """A clear error when a tokenizer failed for want of an optional library, else None."""
    text = str(error).lower()
    for package, module in TOKENIZER_PACKAGES.items():
        if package in text and not _installed(module):
            return ModelSupportError(
                f"model {source!r}: its tokenizer needs the Python package {package!r}, which is not "
                f"installed; install the extra: pip install -e '.[{TOKENIZER_EXTRA}]'")
    return None


def read_chat_template(path: str | Path, *, base_dirs: tuple[Path, ...] = ()) -> str:
    """The text of a chat-template file, resolved as given or against ``base_dirs``."""
    candidates = [Path(path)] + [base / path for base in base_dirs if not Path(path).is_absolute()]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    raise ModelSupportError(f"chat_template file {str(path)!r} not found "
                            f"(looked in {', '.join(str(c) for c in candidates)})")


def check_chat_template(source: str, tokenizer: Any, template_file: str | Path | None,
                        *, base_dirs: tuple[Path, ...] = ()) -> str:
    """Give ``tokenizer`` the entry's template when it has none; return where the template came from.

    Run between loading the tokenizer and the weights, so a model without a template fails in
    seconds, not after its weights load.
    """
    if getattr(tokenizer, "chat_template", None):
        if template_file:
            # the entry's file wins: a user names one to replace a tokenizer's faulty template
            tokenizer.chat_template = read_chat_template(template_file, base_dirs=base_dirs)
            return str(template_file)
        return "tokenizer"
    if not template_file:
        raise ModelSupportError(
            f"model {source!r}: its tokenizer has no chat template; name one in the model entry "
            "(chat_template: prompts/chat_templates/<model>.jinja)")
    tokenizer.chat_template = read_chat_template(template_file, base_dirs=base_dirs)
    return str(template_file)


def _native_since_hint(model_type: str) -> str:
    since = NATIVE_SINCE.get(model_type)
    return f" (transformers has it natively from {since})" if since else ""


def _decode_loop(requested: str | None, code: str, source: str) -> DecodeLoop:
    """The entry's decode loop; "auto" (or none) is cached for native code, legacy for remote code."""
    loop = requested or "auto"
    if loop == "auto":
        return "legacy" if code == "remote" else "cached"
    if loop not in ("cached", "legacy"):
        raise ModelSupportError(f"model {source!r}: decode_loop {requested!r} is not auto, cached or legacy")
    return loop  # type: ignore[return-value]


def plan_loading(
    config: Any,
    *,
    source: str,
    trust_remote_code: bool,
    resolve_remote_class: Callable[[str], type] | None = None,
    decode_loop: str | None = None,
    attn_implementation: str | None = None,
    on_gpu: bool = False,
    half_precision: bool = False,
) -> LoadPlan:
    """Decide code, class, decode loop and attention for a loaded config (no weights yet).

    ``resolve_remote_class`` turns an ``auto_map`` reference into the repository's class
    (:func:`transformers.dynamic_module_utils.get_class_from_dynamic_module` in production).
    """
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    model_type = getattr(config, "model_type", "") or ""
    auto_map = getattr(config, "auto_map", None) or {}
    remote_ref = auto_map.get("AutoModelForCausalLM")
    native = model_type in CONFIG_MAPPING_NAMES and type(config) in MODEL_FOR_CAUSAL_LM_MAPPING
    if remote_ref and trust_remote_code:
        if resolve_remote_class is None:
            raise ModelSupportError(f"model {source!r}: no way to resolve its remote class {remote_ref!r}")
        model_class = resolve_remote_class(remote_ref)
        code: Literal["native", "remote"] = "remote"
    elif native:
        model_class = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
        code = "native"
    elif remote_ref:
        raise ModelSupportError(
            f"model {source!r} (model type {model_type!r}) is not implemented in transformers "
            f"{transformers.__version__}{_native_since_hint(model_type)}; it ships its own code: set "
            "trust_remote_code: true to run it, or upgrade transformers where a native port exists")
    else:
        raise ModelSupportError(
            f"model {source!r}: transformers {transformers.__version__} has no causal-LM class for "
            f"model type {model_type!r}{_native_since_hint(model_type)}")
    return LoadPlan(
        model_type=model_type, code=code, model_class=model_class.__name__,
        decode_loop=_decode_loop(decode_loop, code, source),
        cache_keyword=cache_keyword(model_class),
        attn_implementation=choose_attention(model_class, attn_implementation, on_gpu=on_gpu,
                                             half_precision=half_precision),
        takes_position_ids="position_ids" in forward_parameters(model_class),
    )


def plan_for_model(model: Any, *, decode_loop: str | None = None) -> LoadPlan:
    """The plan of a model already in memory (built from a config, as tests and benchmarks do)."""
    config = model.config
    model_class = type(model)
    auto_map = getattr(config, "auto_map", None) or {}
    code: Literal["native", "remote"] = "remote" if "AutoModelForCausalLM" in auto_map else "native"
    return LoadPlan(
        model_type=getattr(config, "model_type", ""), code=code, model_class=model_class.__name__,
        decode_loop=_decode_loop(decode_loop, code, model_class.__name__),
        cache_keyword=cache_keyword(model_class),
        attn_implementation=str(getattr(config, "_attn_implementation", None) or "eager"),
        takes_position_ids="position_ids" in forward_parameters(model_class),
    )
