"""Calls one by one (``mode: sync``): ``concurrency`` asyncio workers over one SDK client.

One :class:`SyncRunner` serves one :meth:`~bloomqg.api.client.OpenAICompatibleClient.acomplete`
(and the few calls a Batch API run retries as sync calls). Each worker takes the next call,
waits for the pacer (:mod:`bloomqg.api.pacing`), reserves its worst-case cost against the
budget, and tries it until it succeeds, fails for good or runs out of ``max_retries``
(:mod:`bloomqg.api.retry`). Answers are written to the call cache by one writer thread before
the caller's ``on_batch`` sees them, in groups of ``CALLBACK_GROUP_SIZE`` or every
``CALLBACK_INTERVAL_S`` seconds.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bloomqg.api.cache import CachedResponse
from bloomqg.api.inflight import InFlightBatches
from bloomqg.api.pacing import Pacer
from bloomqg.api.retry import ItemError, RejectedRequest, RetryableError, retry_delay
from bloomqg.api.transport import api_key_from_env, post_chat, sdk_client
from bloomqg.api.wire import Call, parse_completion, request_body
from bloomqg.inputs.chat import BatchCallback, ChatRequest, Completion

if TYPE_CHECKING:
    from bloomqg.api.client_core import ClientCore

log = logging.getLogger(__name__)

#: A batch callback fires after this many finished calls (or ``concurrency``, if larger) ...
CALLBACK_GROUP_SIZE = 32
#: ... or when this many seconds passed since the last one, whichever comes first.
CALLBACK_INTERVAL_S = 10.0


@dataclass
class _RunState:
    """What the workers of one :meth:`SyncRunner.run` share."""

    sdk: Any  # openai.AsyncOpenAI
    api_key: str | None
    decoding: dict[str, Any]
    pacer: Pacer


class SyncRunner:
    """Runs one client's uncached calls as concurrent chat calls (see the module docstring)."""

    def __init__(self, client: ClientCore) -> None:
        self.client = client
        self.settings = client.settings
        self.batches = InFlightBatches(client.cache) if client.cache is not None else None

    async def run(
        self,
        calls: list[Call],
        requests: Sequence[ChatRequest],
        decoding: dict[str, Any],
        results: list[Completion | None],
        on_batch: BatchCallback | None,
        batch_index: int,
    ) -> int:
        """Send ``calls`` with ``concurrency`` workers; fill ``results``; fire ``on_batch``.
        Returns the next batch index."""
        client, settings = self.client, self.settings
        api_key = api_key_from_env(settings)  # before any request: a missing key fails the job at once
        sdk = sdk_client(settings, api_key)
        state = _RunState(sdk=sdk, api_key=api_key, decoding=decoding, pacer=Pacer.for_settings(settings))
        queue: asyncio.Queue[Call] = asyncio.Queue()
        for call in calls:
            queue.put_nowait(call)
        finished: asyncio.Queue[tuple[Call, Completion] | BaseException] = asyncio.Queue()
        # Cache writes go to one writer thread: creating a file can take milliseconds on a busy
        # disk, and the loop should be sending calls meanwhile. Writes run in submission order,
        # so waiting for the latest one before each hand-over (_flush_writes) guarantees that
        # whatever a caller receives is already cached. One thread: more only fight for the GIL.
        cache_writer = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="bloomqg-cache"
        )
        pending_writes: list[tuple[Call, concurrent.futures.Future]] = []

        async def worker() -> None:
            while True:
                try:
                    call = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                try:
                    completion = await self._claimed_call(call, state, cache_writer, pending_writes)
                except Exception as error:  # FatalAPIError or a bug: hand it to the collector
                    finished.put_nowait(error)
                    return
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
                client.deliver(call, completion, requests, results, group, batch_index)
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

    async def _claimed_call(
        self,
        call: Call,
        state: _RunState,
        cache_writer: concurrent.futures.ThreadPoolExecutor,
        pending_writes: list[tuple[Call, concurrent.futures.Future]],
    ) -> Completion:
        """Make ``call`` under the cache's claim on its key: a job beside this one that is paying
        for the same call is waited for and its answer read from the cache, and the claim is
        held until this answer is stored, so one call is paid once however many jobs need it.
        A live Batch API job holding the call is waited for too (:mod:`bloomqg.api.inflight`)."""
        client = self.client
        if client.cache is None:
            return (await self._call_with_retries(call, state))[0]
        async with client.cache.claim(call.key):
            cached = client.cache.get(call.key)
            if cached is None and self.batches is not None and await self.batches.wait_for(call.key):
                cached = client.cache.get(call.key)  # a batch job beside this one paid for it
            if cached is not None:  # stored by the holder we waited for
                client.counts.cache_hits += 1
                return client.from_cache(call.request, call.key, cached)
            completion, to_cache = await self._call_with_retries(call, state)
            if to_cache is not None:
                write = cache_writer.submit(client.cache.put, call.key, to_cache)
                pending_writes.append((call, write))
                # A failed write is counted by _flush_writes; the claim ends either way.
                await asyncio.wait([asyncio.wrap_future(write)])
        return completion

    async def _flush_writes(
        self,
        cache_writer: concurrent.futures.ThreadPoolExecutor,
        pending: list[tuple[Call, concurrent.futures.Future]],
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
            self.client.counts.cache_write_errors += 1
            log.warning("call cache: could not store %s (%s): a rerun will pay for it again", call.key, error)
        pending.clear()

    async def _call_with_retries(
        self, call: Call, state: _RunState
    ) -> tuple[Completion, CachedResponse | None]:
        """Try one call until it succeeds, fails for good, or runs out of retries; return the
        Completion and, for a success, what to cache."""
        client = self.client
        reserved = 0.0
        if client.budget is not None:
            reserved = client.reservation_usd(call, batch=False)
            if not client.budget.try_reserve(reserved):
                return client.budget_failure(call), None
        try:
            return await self._call_reserved(call, state)
        finally:
            if client.budget is not None:
                client.budget.release(reserved)

    async def _call_reserved(
        self, call: Call, state: _RunState
    ) -> tuple[Completion, CachedResponse | None]:
        client, settings = self.client, self.settings
        client.counts.requests += 1
        attempt = 0
        started = time.monotonic()
        while True:
            await state.pacer.admit(call)
            try:
                completion, to_cache = await self._attempt(call, state)
            except RetryableError as error:
                if attempt >= settings.max_retries:
                    client.counts.failed += 1
                    message = f"gave up after {attempt + 1} tries: {error}"
                    log.warning("%s: %s", call.request.request_id, message)
                    return client.failure(call, message, attempt + 1, started), None
                delay = retry_delay(error, attempt, settings, client.rng)
                if error.cause == "rate_limit":
                    state.pacer.cool_down(delay)
                client.counts.retries[error.cause] += 1
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
            except ItemError as error:
                client.counts.failed += 1
                log.warning("%s: %s", call.request.request_id, error)
                return client.failure(call, str(error), attempt + 1, started), None
            completion.latency_s = time.monotonic() - started
            completion.extra["attempts"] = attempt + 1
            client.counts.succeeded += 1
            client.record_spend(call, completion)
            return completion, to_cache

    async def _attempt(self, call: Call, state: _RunState) -> tuple[Completion, CachedResponse]:
        """One request (plus, at most once per client, a structured-output fallback probe)."""
        client, settings = self.client, self.settings
        body, structured = request_body(settings, call, state.decoding, text_mode=client.text_mode_for_schemas,
                                        continue_final_message=client.continue_final_message)
        try:
            response = await self._send(body, state, call.key)
        except RejectedRequest as error:
            if structured != "json_schema" or settings.structured_outputs != "auto":
                raise ItemError(str(error)) from None
            # Does the endpoint reject response_format, or this request? Ask without it.
            body, structured = request_body(settings, call, state.decoding, text_mode=True)
            try:
                response = await self._send(body, state, call.key + "-text")
            except RejectedRequest as second:
                raise ItemError(str(second)) from None
            client.fall_back_to_text(str(error))
        cached, completion = parse_completion(
            settings, call, response, structured, batch=False, api_key=state.api_key
        )
        return completion, cached

    async def _send(self, body: dict[str, Any], state: _RunState, idempotency_key: str) -> Any:
        self.client.counts.http_requests_sent += 1
        return await post_chat(state.sdk, body, self.settings, state.api_key, idempotency_key)
