"""The one client for OpenAI-compatible chat-completion endpoints (LLM judges, API generators).

:class:`OpenAICompatibleClient` turns a batch of :class:`~bloomqg.inputs.chat.ChatRequest`
into one :class:`~bloomqg.inputs.chat.Completion` per request, in request order, and is
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

This module is the facade: the cache lookups and de-duplication, the choice of runner and the
ledger. The parts behind it, one concern each: :mod:`~bloomqg.inputs.api_settings` (the settings),
:mod:`~bloomqg.api.client_core` (the counts, the spend and the hand-over of finished rows, which
the runners share), :mod:`~bloomqg.api.sync` (concurrent calls, ``mode: sync``) or :mod:`~bloomqg.api.batch` (the
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
from typing import Any, Sequence

from bloomqg.api.budget import BudgetExceededError, estimate_prompt_tokens
from bloomqg.api.cache import call_cache_key
from bloomqg.api.client_core import ClientCore
from bloomqg.api.inflight import InFlightBatches
from bloomqg.api.wire import Call
from bloomqg.inputs.chat import BatchCallback, ChatRequest, Completion, DecodingParams

log = logging.getLogger(__name__)
# The SDK's HTTP library logs every request at INFO: 60,000 lines per judge job. Keep its
# warnings; a user who wants the requests sets the level back.
for _name in ("httpx", "httpx2"):
    if logging.getLogger(_name).level == logging.NOTSET:
        logging.getLogger(_name).setLevel(logging.WARNING)


class OpenAICompatibleClient(ClientCore):
    """Concurrent, cached, rate-limited, retrying chat completions against one model."""

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
            self.cache_model, request.messages, response_schema=request.response_schema,
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
                self.cache_model, request.messages, response_schema=request.response_schema, **decoding
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
                    results[index] = hit_rows[key] = self.from_cache(request, key, cached)
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
            if self.before_sending is not None:
                self.before_sending()
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
                await self._run_sync(list(calls.values()), requests, decoding, results, on_batch, batch_index)
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
    async def _run_sync(
        self,
        calls: list[Call],
        requests: Sequence[ChatRequest],
        decoding: dict[str, Any],
        results: list[Completion | None],
        on_batch: BatchCallback | None,
        batch_index: int,
    ) -> None:
        """Sync calls; those an unfinished batch of a killed batch job holds (the mode switched
        after a kill, or a study sharing the cache) are taken from that batch instead, which is
        paid for whether or not it is read. The rest are called meanwhile."""
        from bloomqg.api.sync import SyncRunner

        held = InFlightBatches(self.cache).held_by_dead_jobs(c.key for c in calls) if self.cache is not None else set()
        if not held:
            await SyncRunner(self).run(calls, requests, decoding, results, on_batch, batch_index)
            return
        from bloomqg.api.batch import BatchRunner

        in_batches = [call for call in calls if call.key in held]
        rest = [call for call in calls if call.key not in held]
        log.warning(
            "%d of these calls are in unfinished Batch API batches whose job was killed: this sync job "
            "waits for those batches (already paid for, answers within batch_completion_window=%s) "
            "instead of paying again; the other %d are called now",
            len(in_batches), self.settings.batch_completion_window, len(rest),
        )
        # Each group handed over carries one finished row at least: the sync calls cannot use
        # more indices than they have calls, so the batches' groups are numbered after them.
        taken_from = batch_index + len(rest) + 1
        try:
            async with asyncio.TaskGroup() as group:  # one failing stops the other
                taking = group.create_task(
                    BatchRunner(self).take_up(in_batches, requests, decoding, results, on_batch, taken_from))
                if rest:
                    calling = group.create_task(
                        SyncRunner(self).run(rest, requests, decoding, results, on_batch, batch_index))
        except BaseExceptionGroup as failed:  # the callers catch FatalAPIError, not a group of them
            raise failed.exceptions[0] from None
        unanswered, next_index = taking.result()
        if unanswered:  # a batch ended without them: pay for them now
            next_index = max(next_index, calling.result() if rest else batch_index)
            await SyncRunner(self).run(unanswered, requests, decoding, results, on_batch, next_index)

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
