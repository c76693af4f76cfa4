"""Which failures of a call another try may fix, how long to wait, and which stop the job.

An HTTP error answer (a sync call's, or one line of a batch's output) becomes one of four
exceptions (:func:`status_error`): :class:`FatalAPIError` (401/403, 404, 429
``insufficient_quota``: nothing can succeed), :class:`RetryableError` (408/409/429/5xx, with the
server's ``Retry-After``), :class:`RejectedRequest` (400/422: maybe its ``response_format``) or
:class:`ItemError` (this item cannot succeed). Waits are exponential back-off with full jitter,
or the server's retry time, capped at ``backoff_max_s``.
"""

from __future__ import annotations

import email.utils
import math
import random
import re
import time
from typing import TYPE_CHECKING, Mapping

from bloomqg.store.stored_text import redact

if TYPE_CHECKING:
    from bloomqg.inputs.api_settings import ClientSettings

#: HTTP statuses worth another try: request timeout, rate limit, transient server errors.
RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529})


class FatalAPIError(RuntimeError):
    """No request can succeed (bad or missing key, no quota, unknown model): stop the job."""

    #: First line of the failed job's log (bloomqg.store.logs).
    what_to_do = ("the API cannot be used as configured: export the API key in the environment variable "
                  "named below (the entry's api_key_env), or fix the key, account or model it names, then run "
                  "the workflow again; answers already received are cached.")


class RetryableError(Exception):
    """One try failed in a way another try may fix; ``cause`` names the kind for the ledger."""

    def __init__(self, cause: str, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.cause = cause
        self.retry_after_s = retry_after_s


class ItemError(Exception):
    """This item cannot succeed (e.g. 400 bad request); record it, do not retry."""


class RejectedRequest(Exception):
    """HTTP 400/422: the endpoint rejected the request's content (maybe its response_format)."""


def redact_error(text: str, secret: str | None) -> str:
    """An error text with ``secret`` and any key-shaped word masked (errors may echo a key; an
    ``sk-…`` word in one is never content): :func:`bloomqg.store.stored_text.redact`. Mask the whole
    text before cutting it: a cut through the key leaves a part the mask cannot match."""
    return redact(text, [secret], key_tokens=True)


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


def retry_delay(error: RetryableError, attempt: int, settings: ClientSettings, rng: random.Random) -> float:
    """Seconds before the next try: the server's retry time, else back-off; at most
    ``backoff_max_s`` either way."""
    if error.retry_after_s is not None:
        return min(error.retry_after_s, settings.backoff_max_s)
    return backoff_delay(attempt, base_s=settings.backoff_base_s, max_s=settings.backoff_max_s, rng=rng)


def status_error(
    settings: ClientSettings,
    status: int,
    message: str,
    code: str | None,
    headers: Mapping[str, str] | None,
    api_key: str | None,
) -> Exception:
    """The error to raise for an HTTP error answer (sync call or batch item): fatal for
    401/403/404/insufficient quota, retryable for 408/409/429/5xx, otherwise an item error."""
    detail = redact_error(f"HTTP {status}: {message}", api_key)[:500]
    if status in (401, 403):
        return FatalAPIError(
            f"HTTP {status} from {settings.endpoint} (model {settings.model}): the endpoint "
            f"refused the API key in environment variable {settings.api_key_env}. Check that "
            f"variable. Server said: {detail}"
        )
    if status == 404:
        return FatalAPIError(
            f"HTTP 404 from {settings.endpoint}: unknown model {settings.model!r} or wrong "
            f"base_url. Server said: {detail}"
        )
    if status == 429 and code == "insufficient_quota":
        return FatalAPIError(
            f"HTTP 429 insufficient_quota from {settings.endpoint} (model {settings.model}): "
            f"the account behind the key in environment variable {settings.api_key_env} has no "
            "credit left; retrying cannot help."
        )
    if status in RETRYABLE_STATUSES:
        cause = "rate_limit" if status == 429 else "server_error"
        return RetryableError(cause, detail, parse_retry_after(headers))
    if status in (400, 422):
        return RejectedRequest(detail)
    return ItemError(detail)
