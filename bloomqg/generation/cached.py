"""Answers of any :class:`~bloomqg.inputs.chat.TextGenerator`, cached by content.

In-process models (an ``hf`` judge) answer through :class:`CachedTextGenerator`, which keeps
every successful answer in the same on-disk cache as API answers (:class:`bloomqg.api.cache.CallCache`
under the study's ``cache_dir``), keyed by what determines it: the generator's identity (model,
weights, dtype, device, library versions: its provenance without scheduling details), the
decoding settings and the messages. A forced rerun of the job then asks the model nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bloomqg.api.cache import CachedResponse, CallCache, call_cache_key, canonical_json
from bloomqg.inputs.chat import (
    BatchCallback,
    ChatRequest,
    Completion,
    Continuation,
    ContinuationScore,
    DecodingParams,
    ScoredPrompt,
    TextGenerator,
)

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

    @property
    def supports_choice_scoring(self) -> bool:
        """Whether the wrapped generator scores continuations (the ``choices`` judge mode)."""
        return bool(getattr(self.inner, "supports_choice_scoring", False))

    def choice_key(self, request: ChatRequest, continuations: Sequence[Continuation]) -> str:
        """The cache key of one request's continuation scores: the generator, the messages and
        the continuations (as the key's schema field: the call's fixed part besides the messages)."""
        model = canonical_json({"generator": self.identity, "mode": "choices"})
        return call_cache_key(model, request.messages, temperature=0.0, top_p=1.0, max_tokens=0, seed=None,
                              response_schema={"continuations": [[c.context, c.scored] for c in continuations]})

    def score_continuations(
        self, requests: Sequence[ChatRequest], continuations: Sequence[Continuation]
    ) -> list[ScoredPrompt]:
        """One :class:`ScoredPrompt` per request, in order; only the requests not cached are scored
        (the scores are stored as a JSON list of ``[logprob, n_tokens]``)."""
        keys = {request.request_id: self.choice_key(request, continuations) for request in requests}
        answers: dict[str, ScoredPrompt] = {}
        missing: list[ChatRequest] = []
        for request in requests:
            hit = self.cache.get(keys[request.request_id])
            if hit is None:
                missing.append(request)
                continue
            scores = tuple(ContinuationScore(float(lp), int(n)) for lp, n in json.loads(hit.text))
            answers[request.request_id] = ScoredPrompt(request.request_id, scores, hit.n_prompt_tokens, cached=True)
        logger.info("choice scores cache: %d of %d prompts cached", len(answers), len(requests))
        if missing:
            for result in self.inner.score_continuations(missing, continuations):  # type: ignore[attr-defined]
                text = json.dumps([[score.logprob, score.n_tokens] for score in result.scores])
                self.cache.put(keys[result.request_id], CachedResponse(text, "scored", result.n_prompt_tokens, 0))
                answers[result.request_id] = result
        return [answers[request.request_id] for request in requests]

    def close(self) -> None:
        self.inner.close()
