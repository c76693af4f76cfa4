"""Pacing of concurrent calls: token buckets for requests/min and tokens/min, and the shared
cool-down after a 429 that holds every worker back until the server's retry time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bloomqg.api.budget import estimate_prompt_tokens

if TYPE_CHECKING:
    from bloomqg.inputs.api_settings import ClientSettings
    from bloomqg.api.wire import Call

#: Seconds a burst may spend ahead of the average rate (token-bucket capacity = rate × window).
RATE_LIMIT_BURST_WINDOW_S = 10.0


def estimate_tokens(messages: Sequence[Mapping[str, str]], max_tokens: int) -> int:
    """Tokens a call may use, for pacing: the prompt estimate plus the completion budget."""
    return estimate_prompt_tokens(messages) + int(max_tokens)


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


def _one_request(call: Call) -> float:
    return 1.0


def _call_tokens(call: Call) -> float:
    return float(call.estimated_tokens)


@dataclass
class Pacer:
    """What the workers of one run share to stay within the account's limits."""

    buckets: list[tuple[TokenBucket, Callable[[Call], float]]] = field(default_factory=list)
    cooldown_until: float = 0.0

    @classmethod
    def for_settings(cls, settings: ClientSettings) -> Pacer:
        """Buckets for the settings' ``rpm`` and ``tpm`` (none for an unset limit)."""
        buckets = []
        if settings.rpm:
            buckets.append((TokenBucket(settings.rpm), _one_request))
        if settings.tpm:
            buckets.append((TokenBucket(settings.tpm), _call_tokens))
        return cls(buckets)

    def cool_down(self, seconds: float) -> None:
        """After a 429, hold every worker back until the server's retry time."""
        self.cooldown_until = max(self.cooldown_until, time.monotonic() + seconds)

    async def admit(self, call: Call) -> None:
        """Wait out any cool-down, then take the call's cost from every bucket."""
        remaining = self.cooldown_until - time.monotonic()
        if remaining > 0:
            await asyncio.sleep(remaining)
        for bucket, cost in self.buckets:
            await bucket.acquire(cost(call))
