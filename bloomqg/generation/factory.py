"""Building a text generator and its decoding settings from a config model entry."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bloomqg.generation.base import DecodingParams, TextGenerator

logger = logging.getLogger(__name__)

_DECODING_KEYS = {"temperature", "top_p", "max_new_tokens", "do_sample"}


def make_text_generator(
    spec: Mapping[str, Any],
    *,
    model_dir: str | Path | None,
    cache_dir: str | Path,
    num_threads: int | None = None,
) -> TextGenerator:
    """A loaded generator for a ``models.<name>`` (or LLM judge) config entry.

    ``backend: hf`` -> :class:`bloomqg.generation.hf.generator.HFTextGenerator` (``model_dir`` is the
    directory ``materialize_model`` prepared; it holds the converted weights of a GGUF entry);
    ``backend: openai`` -> ``bloomqg.generation.openai_api.OpenAITextGenerator`` with the call
    cache under ``cache_dir``. ``num_threads`` (the job's thread count) sets torch's CPU threads
    for in-process models unless the entry pins its own.
    """
    backend = spec.get("backend")
    if backend == "hf":
        from bloomqg.generation.hf.generator import HFTextGenerator

        if num_threads is not None and "num_threads" not in spec:
            spec = {**spec, "num_threads": num_threads}
        return HFTextGenerator.from_spec(spec, model_dir)
    if backend == "openai":
        from bloomqg.generation.openai_api import OpenAITextGenerator

        return OpenAITextGenerator(spec, cache_dir=cache_dir)
    raise ValueError(f"model entry {spec.get('model')!r}: unknown backend {backend!r} "
                     "(expected 'hf' or 'openai')")


def decoding_params(spec_generation: Mapping[str, Any] | None, seed: int) -> DecodingParams:
    """:class:`DecodingParams` from a ``generation:`` block; unknown keys are an error."""
    spec_generation = dict(spec_generation or {})
    unknown = sorted(set(spec_generation) - _DECODING_KEYS)
    if unknown:
        raise ValueError(f"generation settings: unknown keys {unknown}; "
                         f"allowed: {sorted(_DECODING_KEYS)}")
    defaults = DecodingParams()
    temperature = float(spec_generation.get("temperature", defaults.temperature))
    top_p = float(spec_generation.get("top_p", defaults.top_p))
    max_new_tokens = spec_generation.get("max_new_tokens", defaults.max_new_tokens)
    do_sample = spec_generation.get("do_sample", defaults.do_sample)
    if temperature < 0:
        raise ValueError(f"generation.temperature must be >= 0, got {temperature}")
    if not 0 < top_p <= 1:
        raise ValueError(f"generation.top_p must be in (0, 1], got {top_p}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(
            f"generation.max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    if not isinstance(do_sample, bool):
        raise ValueError(  # noqa: TRY004 - a config value error, reported like the others
            f"generation.do_sample must be true or false, got {do_sample!r}")
    return DecodingParams(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                          do_sample=do_sample, seed=int(seed))
