"""The one client for OpenAI-compatible chat-completion endpoints (LLM judges, API generators).

:class:`OpenAICompatibleClient` turns a batch of :class:`~bloomqg.generation.base.ChatRequest`
into one :class:`~bloomqg.generation.base.Completion` per request, in request order, and is
built for long, paid runs:

* **Never paid twice.** Every successful answer is stored in a content-addressed
  :class:`~bloomqg.api.cache.CallCache` before it is handed back; a rerun (or a duplicate
  request in the same batch) costs no call.
* **Fast.** Up to ``concurrency`` calls in flight (``asyncio``, one keep-alive connection per
  worker), paced by token buckets for requests/min and tokens/min.
* **Robust.** 408/429/5xx answers, timeouts, dropped connections and malformed answers are
  retried with exponential back-off and full jitter, honouring ``Retry-After`` /
  ``retry-after-ms``; a 429 also pauses every worker until the server's retry time. After
  ``max_retries`` the item becomes a recorded failure (``finish_reason="error"``), never a crash
  and never a lost or duplicated row.
* **Fails fast when nothing can succeed.** A missing key, 401/403, 404 (unknown model or path)
  and 429 ``insufficient_quota`` raise :class:`~bloomqg.api.retry.FatalAPIError` at once, naming the endpoint and
  the environment variable that holds the key — never the key itself.
* **Structured outputs.** A request with a ``response_schema`` is sent with
  ``response_format={"type": "json_schema", ...}``; if the endpoint rejects that with 400/422
  while the same request without it succeeds, the client switches to JSON-in-text once (logged)
  for the rest of its life.

This module is the facade: the settings, the cache lookups and de-duplication, the counts, the
spend and the hand-over of finished rows. The parts behind it, one concern each:
:mod:`~bloomqg.api.sync` (concurrent calls, ``mode: sync``) or :mod:`~bloomqg.api.batch` (the
Batch API, ``mode: batch``; answers land in the same cache, so everything downstream is the
same), :mod:`~bloomqg.api.transport` (the official ``openai`` SDK, its errors mapped),
:mod:`~bloomqg.api.retry` (what is retried, how long to wait, what is fatal),
:mod:`~bloomqg.api.pacing` (token buckets, the 429 cool-down), :mod:`~bloomqg.api.wire` (request
bodies and answers) and :mod:`~bloomqg.api.budget` (``budget_usd`` caps the spend recorded under
the cache directory).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

from bloomqg.api.budget import Budget, BudgetExceededError, SpendLedger, estimate_prompt_tokens
from bloomqg.api.cache import CachedResponse, CallCache, call_cache_key
from bloomqg.api.transport import OPENAI_BASE_URL
from bloomqg.api.wire import Call
from bloomqg.generation.base import BatchCallback, ChatRequest, Completion, DecodingParams

log = logging.getLogger(__name__)
# The SDK's HTTP library logs every request at INFO: 60,000 lines per judge job. Keep its
# warnings; a user who wants the requests sets the level back.
for _name in ("httpx", "httpx2"):
    if logging.getLogger(_name).level == logging.NOTSET:
        logging.getLogger(_name).setLevel(logging.WARNING)


@dataclass(frozen=True)
class ClientSettings:
    """How to reach one model behind an OpenAI-compatible endpoint and how hard to push it.

    ``api_key_env`` names the environment variable holding the key (None: the endpoint needs no
    key, e.g. a local server). ``rpm``/``tpm`` are the account's limits; ``None`` means unpaced.
    ``backoff_max_s`` caps every wait between tries, a server's ``Retry-After`` included.
    """

    model: str
    base_url: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    concurrency: int = 8
    rpm: float | None = None
    tpm: float | None = None
    timeout_s: float = 60.0
    max_retries: int = 8
    backoff_base_s: float = 0.5
    backoff_max_s: float = 60.0
    price_per_million_input: float | None = None
    price_per_million_output: float | None = None
    structured_outputs: str = "auto"
    mode: str = "sync"
    #: Batch API prices; None: the sync prices (an upper bound: OpenAI charges half)
    batch_price_per_million_input: float | None = None
    batch_price_per_million_output: float | None = None
    batch_completion_window: str = "24h"
    batch_poll_s: float = 30.0
    batch_poll_max_s: float = 600.0
    #: the Batch API's limits per batch: requests and input file bytes (split above them)
    batch_max_requests: int = 50_000
    batch_max_bytes: int = 200_000_000
    #: new batches for failed or expired items, after the first
    batch_max_rounds: int = 2
    #: this many failed items or fewer are retried as sync calls instead of a new batch
    batch_sync_below: int = 20
    #: stop calls once the spend recorded under the cache directory would pass this (USD)
    budget_usd: float | None = None

    def __post_init__(self) -> None:
        # The config schema's $defs/api_settings is the one definition of valid settings; code
        # that builds settings itself (tests, benchmarks) is held to the same rules as a config.
        from bloomqg.config import schema_problems

        problems = [] if isinstance(self.model, str) and self.model.strip() else [
            f"model: {self.model!r} is not a non-empty string"]
        settings = {key: value for key, value in dataclasses.asdict(self).items() if key != "model"}
        problems += schema_problems(settings, "#/$defs/api_settings")
        if self.budget_usd is not None and not self.prices_known:
            problems.append("budget_usd needs price_per_million_input and price_per_million_output: "
                            "without prices the spend cannot be counted")
        if problems:
            raise ValueError("client settings: " + "; ".join(problems))

    @property
    def prices_known(self) -> bool:
        return self.price_per_million_input is not None and self.price_per_million_output is not None

    def prices(self, *, batch: bool) -> tuple[float, float] | None:
        """USD per million (input, output) tokens for sync or batch calls; None when unknown."""
        if not self.prices_known:
            return None
        if batch:
            return (
                self.price_per_million_input if self.batch_price_per_million_input is None
                else self.batch_price_per_million_input,
                self.price_per_million_output if self.batch_price_per_million_output is None
                else self.batch_price_per_million_output,
            )  # type: ignore[return-value]
        return self.price_per_million_input, self.price_per_million_output  # type: ignore[return-value]

    def cost(self, prompt_tokens: int | None, completion_tokens: int | None, *, batch: bool) -> float | None:
        """USD of one call at the configured prices; None when prices or usage are unknown."""
        prices = self.prices(batch=batch)
        if prices is None or prompt_tokens is None or completion_tokens is None:
            return None
        return (prompt_tokens * prices[0] + completion_tokens * prices[1]) / 1e6

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> "ClientSettings":
        """Build settings from a config mapping; an unknown or missing key is a clear error."""
        if not isinstance(spec, Mapping):
            raise TypeError(f"client settings must be a mapping, got {type(spec).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(spec) - known)
        if unknown:
            raise ValueError(
                f"client settings: unknown key(s) {', '.join(map(repr, unknown))}; "
                f"known keys: {', '.join(sorted(known))}"
            )
        if "model" not in spec:
            raise ValueError("client settings: key 'model' is required")
        return cls(**dict(spec))

    @property
    def endpoint(self) -> str:
        """The base URL calls go to, with any user:password or query removed (safe to print)."""
        return redact_url(self.base_url or OPENAI_BASE_URL)

    def public_dict(self) -> dict[str, Any]:
        """The settings for provenance: the endpoint without credentials, the key's variable NAME."""
        values = dataclasses.asdict(self)
        values["base_url"] = self.endpoint
        return values


def redact_url(url: str) -> str:
    """``url`` without user info, query string or fragment (where credentials sometimes hide)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))



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


class OpenAICompatibleClient:
    """Concurrent, cached, rate-limited, retrying chat completions against one model."""

    def __init__(self, settings: ClientSettings, *, cache: CallCache | str | os.PathLike | None) -> None:
        """``cache``: a :class:`CallCache`, a directory for one, or None (no caching: tests only).

        With a cache, every paid call is also appended to ``<cache>/spend.jsonl`` (what
        ``budget_usd`` is checked against) and batch jobs are remembered in ``<cache>/batches``.
        """
        self.settings = settings
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

    # ----------------------------------------------------------------------------- public API
    def complete(
        self,
        requests: Sequence[ChatRequest],
        params: DecodingParams,
        on_batch: BatchCallback | None = None,
    ) -> list[Completion]:
        """Complete every request (in request order); see :meth:`acomplete`."""
        coroutine = self.acomplete(requests, params, on_batch)
        try:
            asyncio.get_running_loop()
            in_a_loop = True
        except RuntimeError:
            in_a_loop = False
        # Outside the except block: an error of the run (a budget stop) must not read as raised
        # "during handling of" the no-running-loop RuntimeError.
        if not in_a_loop:
            return asyncio.run(coroutine)
        # Called from inside an event loop (a notebook): run ours in a thread of its own.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, coroutine).result()

    def cache_key(self, request: ChatRequest, params: DecodingParams) -> str:
        """The call-cache key of ``request`` under ``params`` (also the batch ``custom_id``)."""
        return call_cache_key(
            self.settings.model, request.messages, response_schema=request.response_schema,
            **self._decoding(params),
        )

    async def acomplete(
        self,
        requests: Sequence[ChatRequest],
        params: DecodingParams,
        on_batch: BatchCallback | None = None,
    ) -> list[Completion]:
        """Cache lookups first, then the misses over the network (or the Batch API); ``on_batch``
        receives finished completions in groups (cache hits first) so a caller can checkpoint.

        Raises :class:`~bloomqg.api.retry.FatalAPIError` when no request can succeed, and
        :class:`~bloomqg.api.budget.BudgetExceededError` after the calls within ``budget_usd``
        when some were not made (those are never handed to ``on_batch``, so a rerun with a
        higher cap makes them). Every other failure is a Completion with ``finish_reason="error"``.
        """
        decoding = self._decoding(params)
        results: list[Completion | None] = [None] * len(requests)
        seen_ids: set[str] = set()
        calls: dict[str, Call] = {}
        hits: list[Completion] = []
        hit_rows: dict[str, Completion] = {}
        for index, request in enumerate(requests):
            if request.request_id in seen_ids:
                raise ValueError(f"duplicate request_id {request.request_id!r} (row {index})")
            seen_ids.add(request.request_id)
            key = call_cache_key(
                self.settings.model, request.messages, response_schema=request.response_schema, **decoding
            )
            if key in calls:
                calls[key].request_indices.append(index)
                self.counts.deduplicated += 1
                continue
            cached = self.cache.get(key) if self.cache is not None else None
            if cached is not None:
                if key in hit_rows:  # the same call twice in this batch: its cost once
                    results[index] = self._duplicate(hit_rows[key], request)
                    self.counts.deduplicated += 1
                else:
                    results[index] = hit_rows[key] = self._from_cache(request, key, cached)
                    self.counts.cache_hits += 1
                hits.append(results[index])
                continue
            calls[key] = Call(key, request, [index], estimate_prompt_tokens(request.messages), decoding["max_tokens"])

        batch_index = 0
        if hits and on_batch is not None:
            for completion in hits:
                completion.batch_index = batch_index
            on_batch(list(hits))
            batch_index += 1
        if calls:
            log.info(
                "%s @ %s: %d cache hits, %d calls to make (%s mode, %d concurrent)",
                self.settings.model,
                self.settings.endpoint,
                len(hits),
                len(calls),
                self.settings.mode,
                self.settings.concurrency,
            )
            if self.settings.mode == "batch":
                from bloomqg.api.batch import BatchRunner

                await BatchRunner(self).run(list(calls.values()), requests, decoding, results, on_batch, batch_index)
            else:
                from bloomqg.api.sync import SyncRunner

                await SyncRunner(self).run(list(calls.values()), requests, decoding, results, on_batch, batch_index)
        missing = [requests[i].request_id for i, c in enumerate(results) if c is None]
        if missing:  # a bug, not an API failure: never return fewer rows than asked for
            raise RuntimeError(f"no completion for request(s) {missing[:5]}")
        self._raise_if_budget_stopped(results)  # type: ignore[arg-type]
        return results  # type: ignore[return-value]

    def ledger(self) -> dict[str, Any]:
        """What this client did so far: calls, cache hits, retries by cause, tokens, cost."""
        data = dataclasses.asdict(self.counts)
        data["retries"] = dict(sorted(self.counts.retries.items()))
        data["retries_total"] = sum(self.counts.retries.values())
        data["cost_usd"] = self.counts.cost_usd if self.settings.prices_known else None
        data["model"] = self.settings.model
        data["endpoint"] = self.settings.endpoint
        data["mode"] = self.settings.mode
        return data

    def close(self) -> None:
        """Nothing to release: each :meth:`complete` opens and closes its own connections."""

    # ------------------------------------------------------------------------------ internals
    @staticmethod
    def _decoding(params: DecodingParams) -> dict[str, Any]:
        """The decoding fields sent (and keyed): greedy decoding is temperature 0, top_p 1."""
        if params.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {params.max_new_tokens}")
        return {
            "temperature": float(params.temperature) if params.do_sample else 0.0,
            "top_p": float(params.top_p) if params.do_sample else 1.0,
            "max_tokens": int(params.max_new_tokens),
            "seed": int(params.seed) if params.seed is not None else None,
        }

    def _from_cache(self, request: ChatRequest, key: str, cached: CachedResponse) -> Completion:
        """A cached answer costs what the spend ledger says was paid for it (an earlier attempt
        that stopped at the budget cap, a killed job): the ledger is the one record of what was
        paid, so a study's cost is the same however many attempts it took. ``paid_earlier``
        marks those; an answer the ledger does not know (another cache) costs 0 here."""
        paid = self.spend.paid_for(key) if self.spend is not None else None
        cost = (paid or 0.0) if self.settings.prices_known else paid
        return Completion(
            request_id=request.request_id,
            text=cached.text,
            finish_reason=cached.finish_reason,
            n_prompt_tokens=cached.n_prompt_tokens,
            n_completion_tokens=cached.n_completion_tokens,
            latency_s=None,
            cached=True,
            cost_usd=cost,
            extra={"cache_key": key, "response_model": cached.response_model, "paid_earlier": paid is not None},
        )

    def _raise_if_budget_stopped(self, results: Sequence[Completion]) -> None:
        stopped = [c for c in results if c.extra.get("failure_reason") == "budget"]
        if not stopped or self.budget is None:
            return
        for completion in stopped:
            log.warning("%s: not called (reason budget)", completion.request_id)
        raise BudgetExceededError(
            f"budget_usd cap reached for {self.settings.model}: spent ${self.budget.spent():.4f} of the "
            f"${self.budget.cap_usd:g} cap (spend recorded in {self.budget.ledger.path}); "
            f"{len(stopped)} of {len(results)} calls were not made (reason budget, listed in the log). "
            "Raise budget_usd and rerun: answered calls are cached, only the missing ones are paid."
        )

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
