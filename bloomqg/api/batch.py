"""Calls through the OpenAI Batch API (``mode: batch``): half the price, answers within hours.

One :class:`BatchRunner` serves one :meth:`~bloomqg.api.client.OpenAICompatibleClient.acomplete`
of a client in batch mode (one judge job). Its calls are written as JSONL, one line per call
with ``custom_id`` = the call-cache key, uploaded with the files API and submitted as batches
(split at ``batch_max_requests`` lines and ``batch_max_bytes`` bytes, the API's limits per
batch), then polled with back-off; each poll logs ``completed / failed / total``. When a batch
ends (``completed``, ``expired``, ``cancelled`` or ``failed``), its output and error files are
downloaded and mapped back by ``custom_id``; every answer is parsed like a sync answer and
written to the call cache, so everything downstream is identical to sync mode.

Items that failed in a way another try may fix (a 429/5xx line, ``batch_expired``, no line at
all from an expired, cancelled or failed batch) go into a new batch, at most
``batch_max_rounds`` more times, or into sync calls once ``batch_sync_below`` or fewer remain;
what is still failing then is a recorded failure, never a lost row.

Never paid twice: ``<cache_dir>/batches/<digest>.json`` records the uploaded file, the batch id
and the batch's ``custom_id`` list, saved before and after each is created; the batch carries
the digest in its metadata. A killed job, rerun, first takes up every unfinished batch that
holds any of its calls not yet cached, resuming its polling (or, killed between upload and
creation, finding the batch by its metadata), and submits new batches only for the calls no
unfinished batch holds. A batch whose results were all taken is renamed ``<digest>.done.json``,
so a later round with the same calls creates a new one.

Never paid twice by two jobs at once either (a judge's job and its bias probes, two studies
sharing a cache): the job that creates a batch holds an exclusive ``flock`` on
``<digest>.lock`` until its results are cached, and every job checks the cache, scans the
unfinished batches and submits its own under one lock on the folder (``.submit.lock``). A job
whose calls a live job's batch holds waits for that lock to go, then reads their answers from
the cache, as a sync call waits on :meth:`~bloomqg.api.cache.CallCache.claim`; a batch whose
job died leaves its lock free, and the first job that needs its calls takes it over. A call a
sync job is paying for right now (its claim held) waits in the same way, and a sync job looks
for live batches before it pays (:mod:`bloomqg.api.inflight`) and takes up, through
:meth:`BatchRunner.take_up`, the batches of dead jobs that hold its calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bloomqg.api.cache import canonical_json, held_lock, try_lock
from bloomqg.api.inflight import SUBMIT_LOCK, batches_dir, claim_is_free
from bloomqg.api.retry import (
    FatalAPIError, ItemError, RejectedRequest, RetryableError, redact_error, retry_delay, status_error,
)
from bloomqg.api.sync import SyncRunner
from bloomqg.api.transport import api_key_from_env, sdk_client
from bloomqg.api.wire import Call, parse_completion, request_body
from bloomqg.store.atomic import write_text_atomic
from bloomqg.inputs.chat import BatchCallback, ChatRequest, Completion

if TYPE_CHECKING:
    from bloomqg.api.client_core import ClientCore

log = logging.getLogger(__name__)

CHAT_ENDPOINT = "/v1/chat/completions"
#: Statuses after which a batch changes no more.
TERMINAL_STATUSES = frozenset({"completed", "expired", "cancelled", "failed"})
#: Each poll waits this much longer than the last, up to ``batch_poll_max_s``.
POLL_GROWTH = 1.5
#: How many recent batches to search for one created by a killed job (by its metadata).
RESUME_SEARCH_LIMIT = 100


@dataclass
class _Part:
    """One batch: its calls, their request bodies and how JSON was asked for."""

    calls: list[Call]
    jsonl: bytes
    structured: dict[str, str | None]
    digest: str
    state_path: Path
    state: dict[str, Any] = field(default_factory=dict)
    reserved_usd: float = 0.0
    last_progress: tuple[int, int, int] | None = None
    #: the descriptor holding ``<digest>.lock`` while this job answers for the batch
    lock_fd: int | None = None


@dataclass
class _Outcome:
    """What became of one call in one round."""

    completion: Completion | None = None  # a success or a final failure
    retry_reason: str | None = None  # another round may fix it


class BatchRunner:
    """Runs one client's uncached calls through the Batch API (see the module docstring)."""

    def __init__(self, client: "ClientCore") -> None:
        if client.cache is None:
            raise ValueError("mode: batch needs a call cache: the batch ids are kept beside it")
        self.client = client
        self.settings = client.settings
        self.state_dir = batches_dir(client.cache)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._started = time.monotonic()

    async def run(
        self,
        calls: list[Call],
        requests: Sequence[ChatRequest],
        decoding: dict[str, Any],
        results: list[Completion | None],
        on_batch: BatchCallback | None,
        batch_index: int,
    ) -> int:
        """Fill ``results`` for ``calls``; fire ``on_batch`` per finished batch. Returns the
        next batch index."""
        client, settings = self.client, self.settings
        pending = list(calls)
        attempts: dict[str, int] = {call.key: 0 for call in calls}
        last_error: dict[str, str] = {}
        async with self._connected() as sdk:
            round_number = 0
            while pending:
                if round_number > 0 and len(pending) <= settings.batch_sync_below:
                    log.info("%d items left after %d batch round(s): retrying them as sync calls",
                             len(pending), round_number)
                    return await SyncRunner(client).run(pending, requests, decoding, results, on_batch, batch_index)
                if round_number > settings.batch_max_rounds:
                    group: list[Completion] = []
                    for call in pending:
                        client.counts.failed += 1
                        message = f"gave up after {attempts[call.key]} batch tries: {last_error[call.key]}"
                        log.warning("%s: %s", call.request.request_id, message)
                        client.deliver(call, client.failure(call, message, attempts[call.key], self._started),
                                       requests, results, group, batch_index)
                    if on_batch is not None and group:
                        on_batch(group)
                    return batch_index + 1
                pending, batch_index, sent = await self._round(
                    sdk, pending, requests, decoding, results, on_batch, batch_index, attempts, last_error
                )
                round_number += sent  # a round spent waiting on another job's batch is not a try
            return batch_index

    @contextlib.asynccontextmanager
    async def _connected(self) -> AsyncIterator[Any]:
        """The SDK client of one run, closed at its end. The key is read first: a missing key
        fails the job before any request."""
        self.api_key = api_key_from_env(self.settings)
        sdk = sdk_client(self.settings, self.api_key)
        try:
            yield sdk
        finally:
            await sdk.close()

    async def take_up(
        self,
        calls: list[Call],
        requests: Sequence[ChatRequest],
        decoding: dict[str, Any],
        results: list[Completion | None],
        on_batch: BatchCallback | None,
        batch_index: int,
    ) -> tuple[list[Call], int]:
        """For a sync job: wait for the unfinished batches of killed jobs that hold ``calls``
        and take their answers, submitting nothing new. Returns the calls still unanswered (a
        batch ended without them, or none holds them any more: the sync job makes them) and the
        next batch index."""
        attempts: dict[str, int] = {call.key: 0 for call in calls}
        async with self._connected() as sdk:
            retry, batch_index, _ = await self._round(
                sdk, calls, requests, decoding, results, on_batch, batch_index, attempts, {}, submit=False)
        return retry, batch_index

    # ------------------------------------------------------------------ one round
    async def _round(
        self,
        sdk: Any,
        calls: list[Call],
        requests: Sequence[ChatRequest],
        decoding: dict[str, Any],
        results: list[Completion | None],
        on_batch: BatchCallback | None,
        batch_index: int,
        attempts: dict[str, int],
        last_error: dict[str, str],
        *,
        submit: bool = True,
    ) -> tuple[list[Call], int, bool]:
        """Submit (or resume) the batches for ``calls``, wait for them and for other jobs'
        batches that hold some of them, take their results. Returns the calls to try again, the
        next batch index and whether this job sent or took up a batch (a try). With ``submit``
        false no new batch is made: calls no batch holds are returned at once."""
        client = self.client
        admitted: list[Call] = []
        stopped: list[Completion] = []
        budget = client.budget
        for call in calls:
            if budget is not None and not budget.try_reserve(client.reservation_usd(call, batch=True)):
                client.deliver(call, client.budget_failure(call), requests, results, stopped, batch_index)
                continue
            admitted.append(call)
        owned: list[_Part] = []
        watched: list[_Part] = []
        claimed: list[Call] = []
        retry: list[Call] = []
        try:
            async with held_lock(self.state_dir / SUBMIT_LOCK):
                admitted, batch_index = self._take_cached(
                    admitted, requests, results, on_batch, batch_index, reserved=True)
                owned, watched = self._unfinished_parts(admitted, decoding)
                for call in (call for part in watched for call in part.calls):
                    self._release_reservation(call)  # the job that made that batch pays for it
                taken = {call.key for part in owned + watched for call in part.calls}
                free, claimed = [], []
                for call in admitted:
                    if call.key not in taken:
                        (free if claim_is_free(client.cache, call.key) else claimed).append(call)
                for call in claimed:
                    self._release_reservation(call)  # a sync job is paying for it now
                if not submit:
                    for call in free:
                        self._release_reservation(call)
                    retry, free = free, []
                new = self._parts(free, decoding)
                for part in new:
                    await self._own(part)
                    owned.append(part)
                for part in owned:
                    part.reserved_usd = sum(client.reservation_usd(c, batch=True) for c in part.calls) if budget else 0.0
                    await self._submit(sdk, part)
            sent = bool(owned)
            unfinished = list(owned)
            delay = self.settings.batch_poll_s
            while unfinished or watched or claimed:
                answered = [call for call in claimed if claim_is_free(client.cache, call.key)]
                if answered:
                    answered_keys = {call.key for call in answered}
                    claimed = [call for call in claimed if call.key not in answered_keys]
                    unanswered, batch_index = self._take_cached(
                        answered, requests, results, on_batch, batch_index, reserved=False)
                    retry += unanswered  # that sync call failed: this job tries it next round
                for part in list(watched):
                    if not self._take_lock(part):
                        continue  # its job is still waiting for its batch
                    watched.remove(part)
                    if part.state_path.is_file():  # its job died before taking the results
                        part.state = self._read_state(part.state_path)
                        log.info("batch %s: the job that made it is gone; this job takes it up",
                                 part.state.get("batch_id") or part.digest[:16])
                        owned.append(part)
                        unfinished.append(part)
                        sent = True
                        await self._submit(sdk, part)  # paid already, or found by its metadata
                        continue
                    self._release(part)
                    waited_for, batch_index = self._take_cached(
                        part.calls, requests, results, on_batch, batch_index, reserved=False)
                    retry += waited_for  # that batch failed them: this job tries them next round
                for part in list(unfinished):
                    batch = await self._control("retrieve batch", lambda: sdk.batches.retrieve(part.state["batch_id"]))
                    self._log_progress(part, batch)
                    if batch.status not in TERMINAL_STATUSES:
                        continue
                    unfinished.remove(part)
                    retry += await self._take_results(sdk, part, batch, requests, results, on_batch, batch_index,
                                                      attempts, last_error)
                    batch_index += 1
                if unfinished or watched or claimed:
                    await asyncio.sleep(delay)
                    delay = min(delay * POLL_GROWTH, self.settings.batch_poll_max_s)
        finally:
            for part in owned + watched:
                self._release(part)
        return retry, batch_index, sent

    async def _take_results(
        self,
        sdk: Any,
        part: _Part,
        batch: Any,
        requests: Sequence[ChatRequest],
        results: list[Completion | None],
        on_batch: BatchCallback | None,
        batch_index: int,
        attempts: dict[str, int],
        last_error: dict[str, str],
    ) -> list[Call]:
        """Deliver a finished batch's answers (cached as they are read), mark it done and let
        go of it; returns its calls to try again."""
        client = self.client
        outcomes = await self._collect(sdk, part, batch)
        group: list[Completion] = []
        retry: list[Call] = []
        for call in part.calls:
            attempts[call.key] += 1
            outcome = outcomes[call.key]
            if outcome.completion is None:
                assert outcome.retry_reason is not None
                last_error[call.key] = outcome.retry_reason
                client.counts.retries[_cause(outcome.retry_reason)] += 1
                retry.append(call)
                continue
            outcome.completion.extra["attempts"] = attempts[call.key]
            outcome.completion.extra["batch_id"] = part.state["batch_id"]
            client.deliver(call, outcome.completion, requests, results, group, batch_index)
        self._mark_done(part)
        self._release(part)  # after the answers are cached: a job waiting on it reads them
        if client.budget is not None:
            client.budget.release(part.reserved_usd)
        if on_batch is not None and group:
            on_batch(group)
        return retry

    def _take_cached(
        self,
        calls: list[Call],
        requests: Sequence[ChatRequest],
        results: list[Completion | None],
        on_batch: BatchCallback | None,
        batch_index: int,
        *,
        reserved: bool,
    ) -> tuple[list[Call], int]:
        """Deliver the calls another job answered since this one looked, as cache hits (their
        budget reservations released when ``reserved``); returns the rest and the next batch
        index."""
        client = self.client
        assert client.cache is not None
        rest: list[Call] = []
        group: list[Completion] = []
        for call in calls:
            cached = client.cache.get(call.key)
            if cached is None:
                rest.append(call)
                continue
            if reserved:
                self._release_reservation(call)
            client.counts.cache_hits += 1
            client.deliver(call, client.from_cache(call.request, call.key, cached), requests, results, group,
                           batch_index)
        if group:
            if on_batch is not None:
                on_batch(group)
            batch_index += 1
        return rest, batch_index

    def _release_reservation(self, call: Call) -> None:
        if self.client.budget is not None:
            self.client.budget.release(self.client.reservation_usd(call, batch=True))

    # ------------------------------------------------------------------ who answers for a batch
    def _lock_path(self, part: _Part) -> Path:
        return self.state_dir / f"{part.digest}.lock"

    def _take_lock(self, part: _Part) -> bool:
        """Hold the part's lock if no live job does; True when this job now holds it."""
        if part.lock_fd is None:
            part.lock_fd = try_lock(self._lock_path(part))
        return part.lock_fd is not None

    async def _own(self, part: _Part) -> None:
        """Hold a new part's lock. Another job holds one of the same digest only between
        finishing that batch and letting go of it (its calls failed there): a moment's wait."""
        while not self._take_lock(part):
            await asyncio.sleep(self.settings.batch_poll_s)

    def _release(self, part: _Part) -> None:
        if part.lock_fd is not None:
            os.close(part.lock_fd)
            part.lock_fd = None

    def _parts(self, calls: list[Call], decoding: dict[str, Any]) -> list[_Part]:
        """The JSONL lines of ``calls``, split at the per-batch request and byte limits."""
        settings = self.settings
        parts: list[_Part] = []
        lines: list[bytes] = []
        part_calls: list[Call] = []
        structured: dict[str, str | None] = {}
        size = 0

        def close() -> None:
            if not part_calls:
                return
            jsonl = b"".join(lines)
            digest = hashlib.sha256(
                canonical_json({"endpoint": settings.endpoint, "jsonl": hashlib.sha256(jsonl).hexdigest()}).encode()
            ).hexdigest()
            parts.append(_Part(list(part_calls), jsonl, dict(structured), digest, self.state_dir / f"{digest}.json"))
            lines.clear()
            part_calls.clear()
            structured.clear()

        for call in calls:
            body, how = request_body(self.settings, call, decoding, text_mode=self.client.text_mode_for_schemas)
            line = (
                json.dumps(
                    {"custom_id": call.key, "method": "POST", "url": CHAT_ENDPOINT, "body": body},
                    ensure_ascii=False, separators=(",", ":"),
                ).encode("utf-8")
                + b"\n"
            )
            if len(line) > settings.batch_max_bytes:
                raise ValueError(
                    f"request {call.request.request_id} is {len(line)} bytes as a batch line, over "
                    f"batch_max_bytes={settings.batch_max_bytes}"
                )
            if part_calls and (
                len(part_calls) >= settings.batch_max_requests or size + len(line) > settings.batch_max_bytes
            ):
                close()
                size = 0
            lines.append(line)
            part_calls.append(call)
            structured[call.key] = how
            size += len(line)
        close()
        return parts

    # ------------------------------------------------------------------ submit / resume
    def _unfinished_parts(self, calls: list[Call], decoding: dict[str, Any]) -> tuple[list[_Part], list[_Part]]:
        """Unfinished batches that hold some of ``calls``, each as a part with those calls: the
        ones whose job is gone (their lock was free; this job now holds it), to be resumed rather
        than paid for again, and the ones a live job is waiting for, whose answers this job will
        read from the cache."""
        by_key = {call.key: call for call in calls}
        orphaned: list[_Part] = []
        live: list[_Part] = []
        for path in sorted(self.state_dir.glob("*.json")):
            if path.name.endswith(".done.json"):
                continue
            try:
                state = self._read_state(path)
            except FileNotFoundError:  # another job finished that batch just now
                continue
            if state.get("endpoint") != self.settings.endpoint or state.get("model") != self.settings.model:
                continue
            mine = [by_key.pop(key) for key in state["custom_ids"] if key in by_key]
            if not mine:
                continue
            structured = {
                call.key: request_body(self.settings, call, decoding, text_mode=bool(state.get("text_mode")))[1]
                for call in mine
            }
            part = _Part(mine, b"", structured, path.stem, path, state)
            if not self._take_lock(part):
                live.append(part)
            elif path.is_file():
                orphaned.append(part)
            else:  # finished between the read and the lock: its answers are cached by now
                self._release(part)
                live.append(part)
        return orphaned, live

    @staticmethod
    def _read_state(path: Path) -> dict[str, Any]:
        """A batch state file; an unreadable one stops the job (it may name a paid batch)."""
        try:
            state = json.loads(path.read_text())
            state["custom_ids"]
        except (ValueError, KeyError, TypeError) as error:  # a missing file (OSError) goes to the caller
            raise ValueError(
                f"batch state {path} is unreadable ({error}); it may name a batch already paid for: "
                "look it up in the provider's dashboard before deleting the file"
            ) from None
        return state

    def _save(self, part: _Part) -> None:
        write_text_atomic(part.state_path, json.dumps(part.state))

    def _mark_done(self, part: _Part) -> None:
        """All results taken: keep the record (it names a paid batch), out of the resume scan."""
        part.state["done"] = True
        self._save(part)
        os.replace(part.state_path, part.state_path.with_suffix(".done.json"))

    async def _submit(self, sdk: Any, part: _Part) -> None:
        """Resume the part's batch if a previous job made it; else upload and create it."""
        client = self.client
        if part.state.get("batch_id"):
            client.counts.batches_resumed += 1
            log.info("resuming batch %s (%d requests) from %s", part.state["batch_id"], len(part.calls), part.state_path)
            return
        if part.state.get("input_file_id"):
            found = await self._find_batch(sdk, part.digest)
            if found is not None:
                part.state["batch_id"] = found
                self._save(part)
                client.counts.batches_resumed += 1
                log.info("found batch %s of a killed job by its metadata", found)
                return
        else:
            uploaded = await self._control("upload the batch file", lambda: sdk.files.create(
                file=(f"bloomqg-{part.digest[:16]}.jsonl", part.jsonl), purpose="batch"))
            part.state = {
                "input_file_id": uploaded.id, "model": self.settings.model, "endpoint": self.settings.endpoint,
                "requests": len(part.calls), "created_at": round(time.time(), 3),
                "text_mode": self.client.text_mode_for_schemas,
                "custom_ids": [call.key for call in part.calls],
            }
            self._save(part)  # before the batch exists: a kill from here on is resumed, not repaid
        batch = await self._control("create the batch", lambda: sdk.batches.create(
            input_file_id=part.state["input_file_id"],
            endpoint=CHAT_ENDPOINT,
            completion_window=self.settings.batch_completion_window,
            metadata={"bloomqg_digest": part.digest[:64]},
        ))
        part.state["batch_id"] = batch.id
        self._save(part)
        client.counts.batches_created += 1
        client.counts.batch_items_sent += len(part.calls)
        client.counts.requests += len(part.calls)
        log.info("created batch %s: %d requests, %d bytes", batch.id, len(part.calls), len(part.jsonl))

    async def _find_batch(self, sdk: Any, digest: str) -> str | None:
        """The id of a recent batch carrying ``digest`` in its metadata, if any."""
        page = await self._control("list batches", lambda: sdk.batches.list(limit=RESUME_SEARCH_LIMIT))
        for batch in page.data:
            if (batch.metadata or {}).get("bloomqg_digest") == digest[:64]:
                return batch.id
        return None

    async def _control(self, what: str, send: Callable[[], Awaitable[Any]]) -> Any:
        """One files/batches call, retried like a chat call on 429, 5xx, timeouts and dropped
        connections; fatal answers (bad key, unknown path) stop the job, naming what failed."""
        import openai

        settings = self.settings
        for attempt in range(settings.max_retries + 1):
            try:
                async with asyncio.timeout(settings.timeout_s):
                    return await send()
            except openai.APIStatusError as error:
                problem = status_error(
                    settings, error.status_code, error.message, error.code, error.response.headers, self.api_key
                )
            except (TimeoutError, openai.APIConnectionError) as error:
                problem = RetryableError("connection", f"{type(error).__name__}")
            if isinstance(problem, FatalAPIError):
                raise problem
            if not isinstance(problem, RetryableError) or attempt >= settings.max_retries:
                raise FatalAPIError(f"could not {what} at {settings.endpoint}: {problem}")
            delay = retry_delay(problem, attempt, settings, self.client.rng)
            log.info("%s: %s; retry %d/%d in %.2f s", what, problem, attempt + 1, settings.max_retries, delay)
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    def _log_progress(self, part: _Part, batch: Any) -> None:
        counts = batch.request_counts
        progress = (
            (counts.completed, counts.failed, counts.total) if counts is not None else (0, 0, len(part.calls))
        )
        if (progress, batch.status) == (part.last_progress, part.state.get("last_status")):
            return
        part.last_progress = progress
        part.state["last_status"] = batch.status
        log.info("batch %s %s: %d completed / %d failed / %d total", batch.id, batch.status, *progress)

    # ------------------------------------------------------------------ results
    async def _collect(self, sdk: Any, part: _Part, batch: Any) -> dict[str, _Outcome]:
        """Map a finished batch's output and error lines back to its calls by ``custom_id``."""
        calls = {call.key: call for call in part.calls}
        outcomes: dict[str, _Outcome] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            content = await self._control(f"download file {file_id}", lambda: sdk.files.content(file_id))
            for number, line in enumerate(content.content.splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    key = record["custom_id"]
                except (ValueError, KeyError, TypeError, RecursionError):  # a huge number, deep nesting too
                    log.warning("batch %s file %s line %d is not a batch result; skipped", batch.id, file_id, number)
                    continue
                call = calls.get(key)
                if call is None:  # a resumed batch's call answered (and cached) since, or foreign
                    continue
                if key in outcomes:
                    log.warning("batch %s: custom_id %s repeated; the first line kept", batch.id, key)
                    continue
                outcomes[key] = self._outcome(call, part.structured[key], record, batch.id)
        why = f"batch {batch.id} ended {batch.status} without a result for it"
        if batch.status == "failed" and batch.errors is not None and batch.errors.data:
            errors = "; ".join(f"{e.code}: {e.message}" for e in batch.errors.data[:3])
            why += ": " + redact_error(errors, self.api_key)[:500]
        for key in calls:
            outcomes.setdefault(key, _Outcome(retry_reason=why))
        return outcomes

    def _outcome(self, call: Call, structured: str | None, record: dict[str, Any], batch_id: str) -> _Outcome:
        """One output or error line → a success, a final failure, or a reason to retry."""
        client = self.client
        response = record.get("response") or {}
        error = record.get("error")
        status = response.get("status_code")
        body = response.get("body")
        try:
            if status == 200 and isinstance(body, dict):
                cached, done = parse_completion(
                    self.settings, call, body, structured, batch=True, api_key=self.api_key
                )
                assert client.cache is not None
                client.cache.put(call.key, cached)  # before the caller sees it, as in sync mode
                client.counts.succeeded += 1
                client.record_spend(call, done, batch_id=batch_id)
                return _Outcome(completion=done)
            if isinstance(status, int):
                detail = (body or {}).get("error") if isinstance(body, dict) else None
                detail = detail if isinstance(detail, dict) else {}
                # status_error masks the key, then cuts: cut first, a key across the cut survives in part.
                raise status_error(
                    self.settings, status, str(detail.get("message") or body), detail.get("code"), None,
                    self.api_key,
                )
            code = (error or {}).get("code") if isinstance(error, dict) else None
            message = (error or {}).get("message") if isinstance(error, dict) else None
            raise RetryableError(code or "batch_error", redact_error(f"{code}: {message}", self.api_key)[:500])
        except FatalAPIError:
            raise
        except RetryableError as retryable:
            return _Outcome(retry_reason=str(retryable))
        except RejectedRequest as rejected:
            if structured == "json_schema" and self.settings.structured_outputs == "auto":
                client.fall_back_to_text(str(rejected))
                return _Outcome(retry_reason=f"rejected response_format: {rejected}")
            return self._final_failure(call, str(rejected))
        except ItemError as item_error:
            return self._final_failure(call, str(item_error))

    def _final_failure(self, call: Call, message: str) -> _Outcome:
        self.client.counts.failed += 1
        log.warning("%s: %s", call.request.request_id, message)
        return _Outcome(completion=self.client.failure(call, message, 1, self._started))


def _cause(reason: str) -> str:
    """A short retry cause for the ledger (``batch_expired``, ``HTTP 500``, ...)."""
    head = reason.split(":", 1)[0].strip()
    return head.replace(" ", "_").lower()[:40] or "error"


def batch_state_files(cache_dir: str | os.PathLike) -> list[Path]:
    """The batch state files under a cache directory, finished ones (``*.done.json``) included."""
    return sorted((Path(cache_dir) / "batches").glob("*.json"))
