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
  and 429 ``insufficient_quota`` raise :class:`FatalAPIError` at once, naming the endpoint and
  the environment variable that holds the key — never the key itself.
* **Structured outputs.** A request with a ``response_schema`` is sent with
  ``response_format={"type": "json_schema", ...}``; if the endpoint rejects that with 400/422
  while the same request without it succeeds, the client switches to JSON-in-text once (logged)
  for the rest of its life.

Transport is the official ``openai`` SDK (``AsyncOpenAI`` over its aiohttp HTTP client,
``DefaultAioHttpClient``), with the SDK's own retries off: its typed errors
(``RateLimitError``, ``APIStatusError``, ``APITimeoutError``, ``APIConnectionError``, ...) are
mapped here to retry or fail-fast, because pacing, the shared 429 cool-down, the ledger and the
budget need to see every try. Chat calls go through the SDK's generic ``post`` (same transport,
headers and errors as ``chat.completions.create``) with the answer read as JSON: the typed
method's parameter transform and answer model cost ~1 ms of CPU per call, which at 256 calls
in flight per second is what two cores cannot spare (``benchmarks/judging.py``). ``mode: batch`` sends the same calls through the Batch API instead
(:mod:`bloomqg.api.batch`); answers land in the same cache, so everything downstream is the same.
``budget_usd`` caps the spend recorded under the cache directory (:mod:`bloomqg.api.budget`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import email.utils
import json
import logging
import math
import os
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

from bloomqg.api.budget import Budget, BudgetExceededError, SpendLedger, estimate_prompt_tokens
from bloomqg.api.cache import CachedResponse, CallCache, call_cache_key
from bloomqg.generation.base import BatchCallback, ChatRequest, Completion, DecodingParams

if TYPE_CHECKING:
    from openai import AsyncOpenAI

log = logging.getLogger(__name__)
# The SDK's HTTP library logs every request at INFO: 60,000 lines per judge job. Keep its
# warnings; a user who wants the requests sets the level back.
for _name in ("httpx", "httpx2"):
    if logging.getLogger(_name).level == logging.NOTSET:
        logging.getLogger(_name).setLevel(logging.WARNING)

#: The endpoint used when ``base_url`` is None (explicit, so OPENAI_BASE_URL never redirects calls).
OPENAI_BASE_URL = "https://api.openai.com/v1"

#: HTTP statuses worth another try: request timeout, rate limit, transient server errors.
RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529})

#: Seconds a burst may spend ahead of the average rate (token-bucket capacity = rate × window).
RATE_LIMIT_BURST_WINDOW_S = 10.0

#: A batch callback fires after this many finished calls (or ``concurrency``, if larger) ...
CALLBACK_GROUP_SIZE = 32
#: ... or when this many seconds passed since the last one, whichever comes first.
CALLBACK_INTERVAL_S = 10.0


class FatalAPIError(RuntimeError):
    """No request can succeed (bad or missing key, no quota, unknown model): stop the job."""


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


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds a server asks us to wait: ``retry-after-ms``, then ``Retry-After`` as seconds or
    as an HTTP date. None when absent or unparseable; never negative."""
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = lowered.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            continue
        if math.isfinite(seconds):
            return max(0.0, seconds)
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def backoff_delay(attempt: int, *, base_s: float, max_s: float, rng: random.Random) -> float:
    """Exponential back-off with full jitter: uniform in [0, min(max_s, base_s · 2^attempt)]."""
    return rng.uniform(0.0, min(max_s, base_s * (2.0 ** min(attempt, 60))))


def estimate_tokens(messages: Sequence[Mapping[str, str]], max_tokens: int) -> int:
    """Tokens a call may use, for pacing: the prompt estimate plus the completion budget."""
    return estimate_prompt_tokens(messages) + int(max_tokens)


def redact(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` (and any ``sk-…`` token) masked: errors may echo a key."""
    if secret:
        text = text.replace(secret, "***")
    return re.sub(r"\bsk-[A-Za-z0-9_\-*]{6,}", "sk-***", text)


class TokenBucket:
    """An asyncio token bucket: ``rate_per_s`` refill, capacity ``rate × burst window``.

    A call costing more than the capacity waits for a full bucket and leaves it in debt, so a
    huge request is paced instead of deadlocking. Waiters are served first come, first served.
    """

    def __init__(self, per_minute: float, *, burst_window_s: float | None = None) -> None:
        window = RATE_LIMIT_BURST_WINDOW_S if burst_window_s is None else burst_window_s
        self.rate_per_s = per_minute / 60.0
        self.capacity = max(1.0, self.rate_per_s * window)
        self.level = self.capacity
        self._updated = time.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self._updated) * self.rate_per_s)
        self._updated = now

    async def acquire(self, cost: float) -> None:
        async with self._lock:
            self._refill()
            needed = min(cost, self.capacity)
            if self.level < needed:
                await asyncio.sleep((needed - self.level) / self.rate_per_s)
                self._refill()
            self.level -= cost


class _RetryableError(Exception):
    """One try failed in a way another try may fix."""

    def __init__(self, cause: str, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.cause = cause
        self.retry_after_s = retry_after_s


class _ItemError(Exception):
    """This item cannot succeed (e.g. 400 bad request); record it, do not retry."""


class _RejectedRequest(Exception):
    """HTTP 400/422: the endpoint rejected the request's content (maybe its response_format)."""


@dataclass
class _Call:
    """One unique call (requests with the same cache key share it)."""

    key: str
    request: ChatRequest
    request_indices: list[int]
    prompt_estimate: int
    max_tokens: int

    @property
    def estimated_tokens(self) -> int:
        """Tokens the call may use: the prompt estimate plus the whole completion budget."""
        return self.prompt_estimate + self.max_tokens


@dataclass
class _Ledger:
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
        self._ledger = _Ledger()
        self._text_mode_for_schemas = settings.structured_outputs in ("none", "json_object")
        self._rng = random.Random()
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
        except RuntimeError:
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

        Raises :class:`FatalAPIError` when no request can succeed, and
        :class:`~bloomqg.api.budget.BudgetExceededError` after the calls within ``budget_usd``
        when some were not made (those are never handed to ``on_batch``, so a rerun with a
        higher cap makes them). Every other failure is a Completion with ``finish_reason="error"``.
        """
        decoding = self._decoding(params)
        results: list[Completion | None] = [None] * len(requests)
        seen_ids: set[str] = set()
        calls: dict[str, _Call] = {}
        hits: list[Completion] = []
        for index, request in enumerate(requests):
            if request.request_id in seen_ids:
                raise ValueError(f"duplicate request_id {request.request_id!r} (row {index})")
            seen_ids.add(request.request_id)
            key = call_cache_key(
                self.settings.model, request.messages, response_schema=request.response_schema, **decoding
            )
            if key in calls:
                calls[key].request_indices.append(index)
                self._ledger.deduplicated += 1
                continue
            cached = self.cache.get(key) if self.cache is not None else None
            if cached is not None:
                results[index] = self._from_cache(request, key, cached)
                hits.append(results[index])
                self._ledger.cache_hits += 1
                continue
            calls[key] = _Call(key, request, [index], estimate_prompt_tokens(request.messages), decoding["max_tokens"])

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
                await self._run_calls(list(calls.values()), requests, decoding, results, on_batch, batch_index)
        missing = [requests[i].request_id for i, c in enumerate(results) if c is None]
        if missing:  # a bug, not an API failure: never return fewer rows than asked for
            raise RuntimeError(f"no completion for request(s) {missing[:5]}")
        self._raise_if_budget_stopped(results)  # type: ignore[arg-type]
        return results  # type: ignore[return-value]

    def ledger(self) -> dict[str, Any]:
        """What this client did so far: calls, cache hits, retries by cause, tokens, cost."""
        data = dataclasses.asdict(self._ledger)
        data["retries"] = dict(sorted(self._ledger.retries.items()))
        data["retries_total"] = sum(self._ledger.retries.values())
        data["cost_usd"] = self._ledger.cost_usd if self.settings.prices_known else None
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
        return Completion(
            request_id=request.request_id,
            text=cached.text,
            finish_reason=cached.finish_reason,
            n_prompt_tokens=cached.n_prompt_tokens,
            n_completion_tokens=cached.n_completion_tokens,
            latency_s=None,
            cached=True,
            cost_usd=0.0 if self.settings.prices_known else None,
            extra={"cache_key": key, "response_model": cached.response_model},
        )

    def _api_key(self) -> str | None:
        """The key from the environment (None when the endpoint needs none)."""
        name = self.settings.api_key_env
        if name is None:
            return None
        key = os.environ.get(name, "").strip()
        if not key:
            raise FatalAPIError(
                f"environment variable {name} is not set or empty: it must hold the API key for "
                f"{self.settings.endpoint} (model {self.settings.model}). Export it before running."
            )
        return key

    def sdk_client(self, api_key: str | None) -> "AsyncOpenAI":
        """``AsyncOpenAI`` over the SDK's aiohttp HTTP client, its own retries off (ours see
        every try), one keep-alive connection per worker."""
        import httpx2
        from openai import AsyncOpenAI, DefaultAioHttpClient

        settings = self.settings
        slots = max(settings.concurrency, 1)
        return AsyncOpenAI(
            # A keyless local server still gets a placeholder: the SDK would otherwise read
            # OPENAI_API_KEY from the environment and send the real key to it.
            api_key=api_key or "no-key",
            base_url=settings.base_url or OPENAI_BASE_URL,
            max_retries=0,
            timeout=settings.timeout_s,
            http_client=DefaultAioHttpClient(
                limits=httpx2.Limits(max_connections=slots, max_keepalive_connections=slots),
                timeout=settings.timeout_s,
            ),
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

    def budget_failure(self, call: _Call) -> Completion:
        """The recorded failure of a call the budget stopped."""
        assert self.budget is not None
        self._ledger.budget_stopped += 1
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

    def reservation_usd(self, call: _Call, *, batch: bool) -> float:
        """What a call may cost at most: the prompt estimate and the whole completion budget."""
        return self.settings.cost(call.prompt_estimate, call.max_tokens, batch=batch) or 0.0

    def record_spend(self, call: _Call, completion: Completion, *, batch_id: str | None = None) -> None:
        """Add a paid answer to the run's ledger and to the spend file under the cache (a batch
        answer once per batch, however often its output is taken)."""
        self._ledger.prompt_tokens += completion.n_prompt_tokens or 0
        self._ledger.completion_tokens += completion.n_completion_tokens or 0
        if completion.cost_usd is not None:
            self._ledger.cost_usd += completion.cost_usd
        if self.spend is not None and completion.cost_usd is not None:
            self.spend.record(
                key=call.key, model=self.settings.model, mode="sync" if batch_id is None else "batch",
                prompt_tokens=completion.n_prompt_tokens, completion_tokens=completion.n_completion_tokens,
                cost_usd=completion.cost_usd, prompt_estimate=call.prompt_estimate, batch_id=batch_id,
            )

    async def _run_calls(
        self,
        calls: list[_Call],
        requests: Sequence[ChatRequest],
        decoding: dict[str, Any],
        results: list[Completion | None],
        on_batch: BatchCallback | None,
        batch_index: int,
    ) -> int:
        """Send ``calls`` with ``concurrency`` workers; fill ``results``; fire ``on_batch``.
        Returns the next batch index."""
        api_key = self._api_key()  # before any request: a missing key fails the job at once
        settings = self.settings
        sdk = self.sdk_client(api_key)
        limits = [
            (TokenBucket(settings.rpm), lambda call: 1.0) if settings.rpm else None,
            (TokenBucket(settings.tpm), lambda call: float(call.estimated_tokens)) if settings.tpm else None,
        ]
        state = _RunState(
            sdk=sdk,
            api_key=api_key,
            decoding=decoding,
            buckets=[limit for limit in limits if limit is not None],
        )
        queue: asyncio.Queue[_Call] = asyncio.Queue()
        for call in calls:
            queue.put_nowait(call)
        finished: asyncio.Queue[tuple[_Call, Completion] | BaseException] = asyncio.Queue()
        # Cache writes go to one writer thread: creating a file can take milliseconds on a busy
        # disk, and the loop should be sending calls meanwhile. Writes run in submission order,
        # so waiting for the latest one before each hand-over (_flush_writes) guarantees that
        # whatever a caller receives is already cached. One thread: more only fight for the GIL.
        cache_writer = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="bloomqg-cache"
        )
        pending_writes: list[tuple[_Call, concurrent.futures.Future]] = []

        async def worker() -> None:
            while True:
                try:
                    call = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                try:
                    completion, to_cache = await self._call_with_retries(call, state)
                except Exception as error:  # FatalAPIError or a bug: hand it to the collector
                    finished.put_nowait(error)
                    return
                if to_cache is not None and self.cache is not None:
                    pending_writes.append((call, cache_writer.submit(self.cache.put, call.key, to_cache)))
                finished.put_nowait((call, completion))

        workers = [asyncio.create_task(worker()) for _ in range(min(settings.concurrency, len(calls)))]
        group: list[Completion] = []
        group_size = max(CALLBACK_GROUP_SIZE, settings.concurrency)
        last_flush = time.monotonic()
        try:
            for _ in range(len(calls)):
                item = await finished.get()
                if isinstance(item, BaseException):
                    if group and on_batch is not None:  # let the caller keep what finished
                        await self._flush_writes(cache_writer, pending_writes)
                        on_batch(group)
                    raise item
                call, completion = item
                self.deliver(call, completion, requests, results, group, batch_index)
                if on_batch is not None and group and (
                    len(group) >= group_size or time.monotonic() - last_flush >= CALLBACK_INTERVAL_S
                ):
                    await self._flush_writes(cache_writer, pending_writes)
                    on_batch(group)
                    group, batch_index, last_flush = [], batch_index + 1, time.monotonic()
            await self._flush_writes(cache_writer, pending_writes)
            if group and on_batch is not None:
                on_batch(group)
                batch_index += 1
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            await sdk.close()
            cache_writer.shutdown(wait=True)  # writes already started still land
        return batch_index

    def deliver(
        self,
        call: _Call,
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

    async def _flush_writes(
        self,
        cache_writer: concurrent.futures.ThreadPoolExecutor,
        pending: list[tuple[_Call, concurrent.futures.Future]],
    ) -> None:
        """Wait until every submitted cache write landed (the writer runs them in order, so one
        no-op behind them suffices); a failed write is logged and counted, the answer kept."""
        if not pending:
            return
        await asyncio.wrap_future(cache_writer.submit(lambda: None))
        for call, write in pending:
            error = write.exception()
            if error is None:
                continue
            if not isinstance(error, OSError):
                raise error
            self._ledger.cache_write_errors += 1
            log.warning("call cache: could not store %s (%s): a rerun will pay for it again", call.key, error)
        pending.clear()

    def _duplicate(self, completion: Completion, request: ChatRequest) -> Completion:
        """The answer of an identical call in the same batch, for another request id (not paid)."""
        return dataclasses.replace(
            completion,
            request_id=request.request_id,
            cached=completion.finish_reason != "error",
            cost_usd=0.0 if completion.cost_usd is not None else None,
            extra={**completion.extra, "deduplicated_with": completion.request_id},
        )

    async def _call_with_retries(
        self, call: _Call, state: _RunState
    ) -> tuple[Completion, CachedResponse | None]:
        """Try one call until it succeeds, fails for good, or runs out of retries; return the
        Completion and, for a success, what to cache."""
        reserved = 0.0
        if self.budget is not None:
            reserved = self.reservation_usd(call, batch=False)
            if not self.budget.try_reserve(reserved):
                return self.budget_failure(call), None
        try:
            return await self._call_reserved(call, state)
        finally:
            if self.budget is not None:
                self.budget.release(reserved)

    async def _call_reserved(
        self, call: _Call, state: _RunState
    ) -> tuple[Completion, CachedResponse | None]:
        settings = self.settings
        self._ledger.requests += 1
        attempt = 0
        started = time.monotonic()
        while True:
            await state.wait_for_cooldown()
            for bucket, cost in state.buckets:
                await bucket.acquire(cost(call))
            try:
                completion, to_cache = await self._attempt(call, state)
            except _RetryableError as error:
                if attempt >= settings.max_retries:
                    self._ledger.failed += 1
                    message = f"gave up after {attempt + 1} tries: {error}"
                    log.warning("%s: %s", call.request.request_id, message)
                    return self._failure(call, message, attempt + 1, started), None
                delay = (
                    min(error.retry_after_s, settings.backoff_max_s)
                    if error.retry_after_s is not None
                    else backoff_delay(
                        attempt, base_s=settings.backoff_base_s, max_s=settings.backoff_max_s, rng=self._rng
                    )
                )
                if error.cause == "rate_limit":
                    state.cool_down(delay)
                self._ledger.retries[error.cause] += 1
                attempt += 1
                log.info(
                    "%s: %s; retry %d/%d in %.2f s",
                    call.request.request_id,
                    error,
                    attempt,
                    settings.max_retries,
                    delay,
                )
                await asyncio.sleep(delay)
                continue
            except _ItemError as error:
                self._ledger.failed += 1
                log.warning("%s: %s", call.request.request_id, error)
                return self._failure(call, str(error), attempt + 1, started), None
            completion.latency_s = time.monotonic() - started
            completion.extra["attempts"] = attempt + 1
            self._ledger.succeeded += 1
            self.record_spend(call, completion)
            return completion, to_cache

    def _failure(self, call: _Call, message: str, attempts: int, started: float) -> Completion:
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

    def request_body(
        self, call: _Call, decoding: Mapping[str, Any], *, text_mode: bool
    ) -> tuple[dict[str, Any], str | None]:
        """Keyword arguments for ``chat.completions.create`` (also a batch line's ``body``) and
        how JSON was asked for."""
        schema = call.request.response_schema
        messages = [dict(m) for m in call.request.messages]
        body: dict[str, Any] = {"model": self.settings.model, **decoding}
        if body["seed"] is None:
            del body["seed"]
        structured: str | None = None
        if schema is not None:
            if text_mode:
                messages = with_schema_instruction(messages, schema)
                structured = "text"
                if self.settings.structured_outputs == "json_object":
                    body["response_format"] = {"type": "json_object"}
                    structured = "json_object"
            else:
                body["response_format"] = json_schema_response_format(schema)
                structured = "json_schema"
        body["messages"] = messages
        return body, structured

    def fall_back_to_text(self, reason: str) -> None:
        """The endpoint rejects ``response_format=json_schema``: ask for JSON in the text from
        now on (logged once)."""
        if self._text_mode_for_schemas:
            return
        self._text_mode_for_schemas = True
        self._ledger.structured_outputs_fallback = True
        log.warning(
            "%s rejected response_format=json_schema (%s); asking for JSON in the prompt text from now on",
            self.settings.endpoint,
            reason,
        )

    async def _attempt(self, call: _Call, state: _RunState) -> tuple[Completion, CachedResponse]:
        """One request (plus, at most once per client, a structured-output fallback probe)."""
        body, structured = self.request_body(call, state.decoding, text_mode=self._text_mode_for_schemas)
        try:
            response = await self._send(body, state, call.key)
        except _RejectedRequest as error:
            if structured != "json_schema" or self.settings.structured_outputs != "auto":
                raise _ItemError(str(error)) from None
            # Does the endpoint reject response_format, or this request? Ask without it.
            body, structured = self.request_body(call, state.decoding, text_mode=True)
            try:
                response = await self._send(body, state, call.key + "-text")
            except _RejectedRequest as second:
                raise _ItemError(str(second)) from None
            self.fall_back_to_text(str(error))
        cached, completion = self.parse(call, response, structured, batch=False)
        return completion, cached

    async def _send(
        self, body: dict[str, Any], state: _RunState, idempotency_key: str | None = None
    ) -> Mapping[str, Any]:
        """One chat-completions POST through the SDK; return the decoded answer. The SDK's typed
        errors become :class:`_RetryableError`, :class:`_RejectedRequest` (400/422),
        :class:`_ItemError` or :class:`FatalAPIError`."""
        import httpx2
        import openai

        self._ledger.http_requests_sent += 1
        try:
            # The SDK's timeout bounds each read; this one bounds the whole call, even a server
            # that trickles bytes forever.
            async with asyncio.timeout(self.settings.timeout_s):
                # The SDK's generic POST: its transport, headers and typed errors, as
                # ``chat.completions.create`` has, without the recursive transform of the
                # parameters (messages, the verdict schema) and the pydantic model of the answer:
                # those cost ~2 ms of CPU per call, most of what 256 calls per second leave on
                # two cores. The answer is read as JSON here, like a batch output line.
                response = await state.sdk.post(
                    "/chat/completions", cast_to=_raw_response_type(), body=body,
                    # the call's own identity, rather than a fresh uuid4 per request
                    options={"idempotency_key": idempotency_key} if idempotency_key else {},
                )
                raw = await response.aread()
        except TimeoutError:
            raise _RetryableError("timeout", f"no answer within {self.settings.timeout_s} s") from None
        except openai.APIConnectionError as error:  # APITimeoutError included
            root = _root_cause(error)
            if isinstance(root, TimeoutError) or (
                isinstance(error, openai.APITimeoutError) and not isinstance(root, ConnectionError)
                and "Disconnected" not in type(root).__name__
            ):
                raise _RetryableError("timeout", f"no answer within {self.settings.timeout_s} s") from None
            raise _RetryableError("connection", f"connection failed ({type(root).__name__})") from None
        except openai.APIStatusError as error:
            raise self.status_error(error.status_code, error.message, error.code, error.response.headers,
                                    state.api_key) from None
        except httpx2.HTTPError as error:  # the body broke off after the status line
            raise _RetryableError("connection", f"connection failed ({type(error).__name__})") from None
        try:
            decoded = json.loads(raw)
            if not isinstance(decoded, Mapping):
                raise ValueError("not a JSON object")
        except ValueError as error:
            raise _RetryableError("invalid_response", f"HTTP 200 with a body that is not JSON ({error})") from None
        return decoded

    def status_error(
        self,
        status: int,
        message: str,
        code: str | None,
        headers: Mapping[str, str] | None,
        api_key: str | None,
    ) -> Exception:
        """The error to raise for an HTTP error answer (sync call or batch item): fatal for
        401/403/404/insufficient quota, retryable for 408/409/429/5xx, otherwise an item error."""
        detail = redact(f"HTTP {status}: {message}"[:500], api_key)
        if status in (401, 403):
            return FatalAPIError(
                f"HTTP {status} from {self.settings.endpoint} (model {self.settings.model}): the endpoint "
                f"refused the API key in environment variable {self.settings.api_key_env}. Check that "
                f"variable. Server said: {detail}"
            )
        if status == 404:
            return FatalAPIError(
                f"HTTP 404 from {self.settings.endpoint}: unknown model {self.settings.model!r} or wrong "
                f"base_url. Server said: {detail}"
            )
        if status == 429 and code == "insufficient_quota":
            return FatalAPIError(
                f"HTTP 429 insufficient_quota from {self.settings.endpoint} (model {self.settings.model}): "
                f"the account behind the key in environment variable {self.settings.api_key_env} has no "
                "credit left; retrying cannot help."
            )
        if status in RETRYABLE_STATUSES:
            cause = "rate_limit" if status == 429 else "server_error"
            return _RetryableError(cause, detail, parse_retry_after(headers))
        if status in (400, 422):
            return _RejectedRequest(detail)
        return _ItemError(detail)

    def parse(
        self, call: _Call, response: Mapping[str, Any], structured: str | None, *, batch: bool
    ) -> tuple[CachedResponse, Completion]:
        """A successful chat completion (decoded JSON, from a sync answer or a batch output line)
        → (what to cache, Completion). A response without text is retried."""
        try:
            choice = response["choices"][0]
            message = choice["message"]
            text = message.get("content")
            api_finish = choice.get("finish_reason")
        except (KeyError, IndexError, TypeError, AttributeError):
            raise _RetryableError("invalid_response", "response has no choices[0].message") from None
        if not isinstance(text, str):
            if api_finish == "content_filter":
                raise _ItemError("the endpoint's content filter withheld the answer")
            raise _RetryableError(
                "invalid_response", f"no text in the message (finish_reason={api_finish!r})"
            )
        finish_reason = "length" if api_finish == "length" else "stop"
        usage = response.get("usage") if isinstance(response.get("usage"), Mapping) else {}
        prompt_tokens = _int_or_none(usage.get("prompt_tokens"))
        completion_tokens = _int_or_none(usage.get("completion_tokens"))
        cost = self.settings.cost(prompt_tokens, completion_tokens, batch=batch)
        response_model = response.get("model") if isinstance(response.get("model"), str) else None
        cached = CachedResponse(text, finish_reason, prompt_tokens, completion_tokens, response_model)
        return cached, Completion(
            request_id=call.request.request_id,
            text=text,
            finish_reason=finish_reason,
            n_prompt_tokens=prompt_tokens,
            n_completion_tokens=completion_tokens,
            cached=False,
            cost_usd=cost,
            extra={
                "cache_key": call.key,
                "response_model": response_model,
                "api_finish_reason": api_finish,
                "structured_output": structured,
                "mode": "batch" if batch else "sync",
            },
        )


def _raw_response_type() -> type:
    """The SDK's HTTP response class (``httpx2.Response`` in openai 3): ``cast_to`` it to get
    the answer unparsed."""
    import httpx2

    return httpx2.Response


def _root_cause(error: BaseException) -> BaseException:
    """The innermost exception behind ``error``: the aiohttp transport maps a dropped
    connection to a *timeout* error, so the cause tells what really happened."""
    seen = {id(error)}
    while error.__cause__ is not None and id(error.__cause__) not in seen:
        error = error.__cause__
        seen.add(id(error))
    return error


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def json_schema_response_format(schema: Mapping[str, Any]) -> dict[str, Any]:
    """OpenAI's ``response_format`` for a JSON schema; strict only when the schema forbids extras
    (strict mode rejects schemas that allow additional properties)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or "response"))[:64] or "response"
    return {
        "type": "json_schema",
        "json_schema": {
            "name": name,
            "schema": dict(schema),
            "strict": schema.get("additionalProperties") is False,
        },
    }


def with_schema_instruction(
    messages: list[dict[str, str]], schema: Mapping[str, Any]
) -> list[dict[str, str]]:
    """Messages asking for JSON in the text itself, for endpoints without structured outputs."""
    instruction = (
        "Respond with only a JSON object (no prose, no code fence) that follows this JSON schema:\n"
        + json.dumps(schema, ensure_ascii=False)
    )
    out = [dict(m) for m in messages]
    for message in reversed(out):
        if message.get("role") == "user":
            message["content"] = f"{message.get('content', '')}\n\n{instruction}"
            return out
    out.append({"role": "user", "content": instruction})
    return out


@dataclass
class _RunState:
    """What the workers of one :meth:`OpenAICompatibleClient.acomplete` share."""

    sdk: Any  # openai.AsyncOpenAI
    api_key: str | None
    decoding: dict[str, Any]
    buckets: list[tuple[TokenBucket, Any]]
    cooldown_until: float = 0.0

    def cool_down(self, seconds: float) -> None:
        """After a 429, hold every worker back until the server's retry time."""
        self.cooldown_until = max(self.cooldown_until, time.monotonic() + seconds)

    async def wait_for_cooldown(self) -> None:
        remaining = self.cooldown_until - time.monotonic()
        if remaining > 0:
            await asyncio.sleep(remaining)
