"""What one client's runners share: its settings, cache, counts, spend and budget, and the
recording and hand-over of each finished call.

:class:`ClientCore` is the part of :class:`~bloomqg.api.client.OpenAICompatibleClient` that
:mod:`~bloomqg.api.sync` and :mod:`~bloomqg.api.batch` work on; the facade in
:mod:`bloomqg.api.client` adds the public API (cache lookups, de-duplication, the choice of
runner, the ledger) and imports the runners, which import this module and never the facade.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

from bloomqg.api.budget import Budget, SpendLedger
from bloomqg.api.cache import CachedResponse, CallCache
from bloomqg.store.stored_text import redact, storable_text
from bloomqg.inputs.api_settings import ClientSettings
from bloomqg.api.transport import key_in_environment
from bloomqg.api.wire import Call
from bloomqg.inputs.chat import ChatRequest, Completion

log = logging.getLogger(__name__)


@dataclass
class CallCounts:
    """What one client did so far (:meth:`OpenAICompatibleClient.ledger`); its runners count here."""

    requests: int = 0  # unique calls that needed the network
    http_requests_sent: int = 0
    cache_hits: int = 0
    deduplicated: int = 0
    succeeded: int = 0
    failed: int = 0
    retries: Counter = field(default_factory=Counter)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    structured_outputs_fallback: bool = False
    cache_write_errors: int = 0
    batches_created: int = 0
    batches_resumed: int = 0
    batch_items_sent: int = 0
    budget_stopped: int = 0


class ClientCore:
    """One client's state and the bookkeeping of its calls (see the module docstring)."""

    def __init__(self, settings: ClientSettings, *, cache: CallCache | str | os.PathLike | None) -> None:
        """``cache``: a :class:`CallCache`, a directory for one, or None (no caching: tests only).

        With a cache, every paid call is also appended to ``<cache>/spend.jsonl`` (what
        ``budget_usd`` is checked against) and batch jobs are remembered in ``<cache>/batches``.
        """
        self.settings = settings
        #: what the call cache keys calls by: the model's name, or (a served engine) the name
        #: with the engine that answers it, so that switching engines reruns and mixes nothing
        self.cache_model: str = settings.model
        #: continue a request's trailing assistant message (a response prefill): vLLM servers only
        self.continue_final_message = False
        #: called before the first request is sent, once the cache has answered what it could
        #: (a served engine starts its server here, so a fully cached run starts none)
        self.before_sending: Callable[[], None] | None = None
        self.cache = cache if (cache is None or isinstance(cache, CallCache)) else CallCache(cache)
        self.counts = CallCounts()
        #: ask for JSON in the prompt text instead of ``response_format`` (set once the endpoint rejects it)
        self.text_mode_for_schemas = settings.structured_outputs in ("none", "json_object")
        #: jitter of the back-off waits
        self.rng = random.Random()
        self.spend = SpendLedger(self.cache.directory / "spend.jsonl") if self.cache is not None else None
        if settings.budget_usd is not None and self.spend is None:
            raise ValueError("budget_usd needs a call cache: the spend is recorded beside it")
        self.budget = Budget(settings.budget_usd, self.spend) if settings.budget_usd is not None else None
        #: masked in cached answers too: an entry written before answers were masked may hold it
        self.key_in_use = key_in_environment(settings)

    def budget_failure(self, call: Call) -> Completion:
        """The recorded failure of a call the budget stopped."""
        assert self.budget is not None
        self.counts.budget_stopped += 1
        return Completion(
            request_id=call.request.request_id,
            text=None,
            finish_reason="error",
            error=(
                f"budget: not called, the spend would pass budget_usd ${self.budget.cap_usd:g} "
                f"(spent ${self.budget.spent():.4f})"
            ),
            extra={"cache_key": call.key, "attempts": 0, "failure_reason": "budget"},
        )

    def reservation_usd(self, call: Call, *, batch: bool) -> float:
        """What a call may cost at most: the prompt estimate and the whole completion budget."""
        return self.settings.cost(call.prompt_estimate, call.max_tokens, batch=batch) or 0.0

    def record_spend(self, call: Call, completion: Completion, *, batch_id: str | None = None) -> None:
        """Add a paid answer to the run's ledger and to the spend file under the cache (a batch
        answer once per batch, however often its output is taken)."""
        self.counts.prompt_tokens += completion.n_prompt_tokens or 0
        self.counts.completion_tokens += completion.n_completion_tokens or 0
        if completion.cost_usd is not None:
            self.counts.cost_usd += completion.cost_usd
        if self.spend is not None and completion.cost_usd is not None:
            self.spend.record(
                key=call.key, model=self.settings.model, mode="sync" if batch_id is None else "batch",
                prompt_tokens=completion.n_prompt_tokens, completion_tokens=completion.n_completion_tokens,
                cost_usd=completion.cost_usd, prompt_estimate=call.prompt_estimate, batch_id=batch_id,
            )

    def from_cache(self, request: ChatRequest, key: str, cached: CachedResponse) -> Completion:
        """A cached answer costs what the spend ledger says was paid for it (an earlier attempt
        that stopped at the budget cap, a killed job): the ledger is the one record of what was
        paid, so a study's cost is the same however many attempts it took. ``paid_earlier``
        marks those; an answer the ledger does not know (another cache) costs 0 here."""
        paid = self.spend.paid_for(key) if self.spend is not None else None
        cost = (paid or 0.0) if self.settings.prices_known else paid
        # the same steps as a fresh answer (api.wire.parse_completion): storable, then masked; the
        # parser reads it as untrusted either way
        text = redact(storable_text(cached.text).text, [self.key_in_use])
        if text != cached.text and self.cache is not None:  # cached before answers were masked
            self._scrub(key, dataclasses.replace(cached, text=text))
        return Completion(
            request_id=request.request_id,
            text=text,
            finish_reason=cached.finish_reason,
            n_prompt_tokens=cached.n_prompt_tokens,
            n_completion_tokens=cached.n_completion_tokens,
            latency_s=None,
            cached=True,
            cost_usd=cost,
            extra={"cache_key": key, "response_model": cached.response_model, "paid_earlier": paid is not None},
        )

    def _scrub(self, key: str, masked: CachedResponse) -> None:
        """Rewrite an entry whose answer holds the key in use, masked, so the key stays in no
        file: entries written before answers were masked are cleaned as a study reads them."""
        assert self.cache is not None
        try:
            path = self.cache.put(key, masked)
        except OSError as error:
            log.warning("call cache: the entry for %s holds the API key and could not be rewritten (%s); "
                        "delete it or the cache", key, error)
            return
        log.warning("call cache: %s held the API key in its answer (cached before answers were masked); "
                    "rewritten with the key masked", path)

    def deliver(
        self,
        call: Call,
        completion: Completion,
        requests: Sequence[ChatRequest],
        results: list[Completion | None],
        group: list[Completion],
        batch_index: int,
    ) -> None:
        """Put a call's completion (and its duplicates') into ``results`` and, unless the budget
        stopped it, into the ``group`` for the next callback."""
        for position, index in enumerate(call.request_indices):
            row = completion if position == 0 else self._duplicate(completion, requests[index])
            results[index] = row
            row.batch_index = batch_index
            if completion.extra.get("failure_reason") != "budget":
                group.append(row)

    def _duplicate(self, completion: Completion, request: ChatRequest) -> Completion:
        """The answer of an identical call in the same batch, for another request id (not paid)."""
        return dataclasses.replace(
            completion,
            request_id=request.request_id,
            cached=completion.finish_reason != "error",
            cost_usd=0.0 if completion.cost_usd is not None else None,
            extra={**completion.extra, "deduplicated_with": completion.request_id},
        )

    def failure(self, call: Call, message: str, attempts: int, started: float) -> Completion:
        """The recorded failure of a call that cannot succeed (or ran out of retries)."""
        return Completion(
            request_id=call.request.request_id,
            text=None,
            finish_reason="error",
            latency_s=time.monotonic() - started,
            error=message,
            cached=False,
            cost_usd=None,
            extra={"cache_key": call.key, "attempts": attempts},
        )

    def fall_back_to_text(self, reason: str) -> None:
        """The endpoint rejects ``response_format=json_schema``: ask for JSON in the text from
        now on (logged once)."""
        if self.text_mode_for_schemas:
            return
        self.text_mode_for_schemas = True
        self.counts.structured_outputs_fallback = True
        log.warning(
            "%s rejected response_format=json_schema (%s); asking for JSON in the prompt text from now on",
            self.settings.endpoint,
            reason,
        )
