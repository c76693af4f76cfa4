"""The narrow interface every text backend implements.

Question generation and LLM judges both talk to a :class:`TextGenerator`: a batch of chat
requests in, one :class:`Completion` per request out, in the same order. Backends import their
heavy dependencies (torch, openai) inside their own modules, never here. It sits below
:mod:`bloomqg.api` and :mod:`bloomqg.generation`, which both speak it (``docs/architecture.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence


@dataclass(frozen=True)
class DecodingParams:
    """Sampling settings shared by all backends (names follow transformers/OpenAI)."""

    temperature: float = 0.9
    top_p: float = 1.0
    max_new_tokens: int = 500
    do_sample: bool = True
    seed: int = 0


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion to produce; ``request_id`` is unique within a call."""

    request_id: str
    messages: tuple[dict[str, str], ...]
    #: optional JSON schema the answer must follow (structured outputs where supported)
    response_schema: dict | None = None


@dataclass
class Completion:
    """What a backend returned for one request. ``text`` is None only when the call failed."""

    request_id: str
    text: str | None
    finish_reason: str  # "stop" | "length" | "error"
    n_prompt_tokens: int | None = None
    n_completion_tokens: int | None = None
    latency_s: float | None = None
    batch_index: int | None = None
    error: str | None = None
    cached: bool = False
    cost_usd: float | None = None
    extra: dict = field(default_factory=dict)


#: Called after each finished batch with its completions, so callers can checkpoint.
BatchCallback = Callable[[list[Completion]], None]


class TextGenerator(Protocol):
    """A loaded model or an API endpoint."""

    #: provenance recorded with every output (model id, revision or file sha256, dtype, ...)
    provenance: dict

    def complete(
        self,
        requests: Sequence[ChatRequest],
        params: DecodingParams,
        on_batch: BatchCallback | None = None,
    ) -> list[Completion]:
        """Complete every request; never drop one (a failure is a Completion with an error)."""
        ...

    def close(self) -> None:
        """Release the model or connections."""
        ...
