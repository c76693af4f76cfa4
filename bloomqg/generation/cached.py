"""Answers of any :class:`~bloomqg.chat.TextGenerator`, cached by content.

In-process models (an ``hf`` judge) answer through :class:`CachedTextGenerator`, which keeps
every successful answer in the same on-disk cache as API answers (:class:`bloomqg.api.cache.CallCache`
under the study's ``cache_dir``), keyed by what determines it: the generator's identity (model,
weights, dtype, device, library versions: its provenance without scheduling details), the
decoding settings and the messages. A forced rerun of the job then asks the model nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bloomqg.api.cache import CachedResponse, CallCache, call_cache_key, canonical_json
from bloomqg.chat import BatchCallback, ChatRequest, Completion, DecodingParams, TextGenerator

logger = logging.getLogger(__name__)


class CachedTextGenerator:
    """Wraps ``inner``: cached answers come back with ``cached=True``, the rest are asked for.

    ``identity`` says which generator answered (it is part of every key); pass what changes the
    answers and nothing that does not (thread counts, batch sizes), or no answer is ever reused.
    """

    def __init__(self, inner: TextGenerator, *, cache_dir: str | Path, identity: Mapping[str, Any]) -> None:
        self.inner = inner
        self.cache = CallCache(cache_dir)
        self.identity = dict(identity)
        #: the inner generator's own record (the same dict: what it adds while running shows)
        self.provenance = inner.provenance

    def key(self, request: ChatRequest, params: DecodingParams) -> str:
        """The cache key of one request under ``params``."""
        # do_sample is not an API parameter, so it joins the identity rather than the key's fields
        model = canonical_json({"generator": self.identity, "do_sample": params.do_sample})
        return call_cache_key(
            model, request.messages, temperature=params.temperature, top_p=params.top_p,
            max_tokens=params.max_new_tokens, seed=params.seed, response_schema=request.response_schema,
        )

    def complete(
        self,
        requests: Sequence[ChatRequest],
        params: DecodingParams,
        on_batch: BatchCallback | None = None,
    ) -> list[Completion]:
        """One Completion per request, in order; only the requests not cached reach ``inner``."""
        keys = [self.key(request, params) for request in requests]
        answers: dict[str, Completion] = {}
        missing: list[ChatRequest] = []
        for request, key in zip(requests, keys):
            hit = self.cache.get(key)
            if hit is None:
                missing.append(request)
            else:
                answers[request.request_id] = Completion(
                    request.request_id, hit.text, hit.finish_reason, n_prompt_tokens=hit.n_prompt_tokens,
                    n_completion_tokens=hit.n_completion_tokens, cached=True,
                )
        logger.info("text generator cache: %d of %d answers cached", len(answers), len(requests))
        if answers and on_batch is not None:
            on_batch(list(answers.values()))
        if missing:
            key_of = dict(zip((r.request_id for r in requests), keys))
            for completion in self.inner.complete(missing, params, on_batch):
                if completion.text is not None and completion.finish_reason != "error":
                    self.cache.put(key_of[completion.request_id], CachedResponse(
                        completion.text, completion.finish_reason,
                        completion.n_prompt_tokens, completion.n_completion_tokens,
                    ))
                answers[completion.request_id] = completion
        return [
            answers.get(r.request_id) or Completion(r.request_id, None, "error", error="no completion returned")
            for r in requests
        ]

    def close(self) -> None:
        self.inner.close()
