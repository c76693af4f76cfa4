"""The transport of sync calls: the official ``openai`` SDK (``AsyncOpenAI`` over its aiohttp
HTTP client, ``DefaultAioHttpClient``) with the SDK's own retries off.

Its typed errors (``RateLimitError``, ``APIStatusError``, ``APITimeoutError``,
``APIConnectionError``, ...) are mapped to :mod:`bloomqg.api.retry`'s, because pacing, the
shared 429 cool-down, the ledger and the budget need to see every try. Chat calls go through the
SDK's generic ``post`` (same transport, headers and errors as ``chat.completions.create``) with
the answer read as JSON: the typed method's parameter transform and answer model cost ~1 ms of
CPU per call, which at 256 calls in flight per second is what two cores cannot spare
(``benchmarks/judging.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import TYPE_CHECKING, Any, Mapping

from bloomqg.api.retry import FatalAPIError, RetryableError, status_error
from bloomqg.inputs.api_settings import OPENAI_BASE_URL, ClientSettings
from bloomqg.store.logs import hide_in_logs

if TYPE_CHECKING:
    from openai import AsyncOpenAI


#: The header a retried call repeats so that a server or proxy that honours it answers it once
#: (OpenAI's API does not document it; the call cache and the spend ledger are what keep a
#: rerun from paying twice).
IDEMPOTENCY_HEADER = "Idempotency-Key"


def api_key_from_env(settings: ClientSettings) -> str | None:
    """The key from the environment (None when the endpoint needs none); a missing key is a
    :class:`FatalAPIError` naming the variable, before any request."""
    name = settings.api_key_env
    if name is None:
        return None
    key = key_in_environment(settings)
    if not key:
        raise FatalAPIError(
            f"environment variable {name} is not set or empty: it must hold the API key for "
            f"{settings.endpoint} (model {settings.model}). Export it before running."
        )
    return key


def key_in_environment(settings: ClientSettings) -> str | None:
    """The key in the entry's ``api_key_env`` variable, or None (none named, unset or empty);
    masked from then on in every line the job logs (:func:`bloomqg.store.logs.hide_in_logs`)."""
    key = os.environ.get(settings.api_key_env, "").strip() if settings.api_key_env else ""
    if not key:
        return None
    hide_in_logs(key)
    return key


def sdk_client(settings: ClientSettings, api_key: str | None) -> AsyncOpenAI:
    """``AsyncOpenAI`` over the SDK's aiohttp HTTP client, its own retries off (ours see
    every try), one keep-alive connection per worker."""
    import httpx2
    from openai import AsyncOpenAI, DefaultAioHttpClient

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


async def post_chat(
    sdk: Any,
    body: dict[str, Any],
    settings: ClientSettings,
    api_key: str | None,
    idempotency_key: str | None = None,
) -> Mapping[str, Any]:
    """One chat-completions POST through the SDK; return the decoded answer. The SDK's typed
    errors become :class:`~bloomqg.api.retry.RetryableError`,
    :class:`~bloomqg.api.retry.RejectedRequest` (400/422), :class:`~bloomqg.api.retry.ItemError`
    or :class:`~bloomqg.api.retry.FatalAPIError`."""
    import httpx2
    import openai

    try:
        # The SDK's timeout bounds each read; this one bounds the whole call, even a server
        # that trickles bytes forever.
        async with asyncio.timeout(settings.timeout_s):
            # The SDK's generic POST: its transport, headers and typed errors, as
            # ``chat.completions.create`` has, without the recursive transform of the
            # parameters (messages, the verdict schema) and the pydantic model of the answer:
            # those cost ~2 ms of CPU per call, most of what 256 calls per second leave on
            # two cores. The answer is read as JSON here, like a batch output line.
            response = await sdk.post(
                "/chat/completions", cast_to=_raw_response_type(), body=body,
                # The call's own identity as an Idempotency-Key header, the same on every try:
                # the SDK's own idempotency_key option is dropped on the wire (its OpenAI client
                # names no idempotency header), so the header is set here.
                options={"headers": {IDEMPOTENCY_HEADER: idempotency_key}} if idempotency_key else {},
            )
            raw = await response.aread()
    except TimeoutError:
        raise RetryableError("timeout", f"no answer within {settings.timeout_s} s") from None
    except openai.APIConnectionError as error:  # APITimeoutError included
        root = _root_cause(error)
        if isinstance(root, TimeoutError) or (
            isinstance(error, openai.APITimeoutError) and not isinstance(root, ConnectionError)
            and "Disconnected" not in type(root).__name__
        ):
            raise RetryableError("timeout", f"no answer within {settings.timeout_s} s") from None
        raise RetryableError("connection", f"connection failed ({type(root).__name__})") from None
    except openai.APIStatusError as error:
        raise status_error(
            settings, error.status_code, error.message, error.code, error.response.headers, api_key
        ) from None
    except httpx2.HTTPError as error:  # the body broke off after the status line
        raise RetryableError("connection", f"connection failed ({type(error).__name__})") from None
    try:
        decoded = json.loads(raw)
        if not isinstance(decoded, Mapping):
            raise ValueError("not a JSON object")
    except ValueError as error:  # a number past Python's int-string limit included
        raise RetryableError("invalid_response", f"HTTP 200 with a body that is not JSON ({str(error)[:200]})") from None
    except RecursionError:
        raise RetryableError("invalid_response", "HTTP 200 with a body nested too deeply to read") from None
    return decoded


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
