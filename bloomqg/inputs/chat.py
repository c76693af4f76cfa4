"""The narrow interface every text backend implements.

Question generation and LLM judges both talk to a :class:`TextGenerator`: a batch of chat
requests in, one :class:`Completion` per request out, in the same order. Backends import their
heavy dependencies (torch, openai) inside their own modules, never here. It sits below
:mod:`bloomqg.api` and :mod:`bloomqg.generation`, which both speak it (``docs/architecture.md``).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from bloomqg.store.config_schema import file_schema

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DecodingParams:
    """Sampling settings shared by all backends (names follow transformers/OpenAI)."""

    temperature: float = 0.9
    top_p: float = 1.0
    max_new_tokens: int = 500
    do_sample: bool = True
    seed: int = 0


def decoding_params(
    spec_generation: Mapping[str, Any] | None, seed: int, *, where: str = "generation"
) -> DecodingParams:
    """:class:`DecodingParams` from a ``generation:`` block (a model's or an LLM judge's).

    The one decoding validator: the block is checked against the config schema's
    ``$defs/generation`` (unknown keys and bad values are errors naming ``where``), and the
    keys it leaves out take that schema's ``default:``.
    """
    schema = file_schema()
    spec_generation = dict(spec_generation or {})
    problems = schema.problems(spec_generation, "#/$defs/generation", prefix=where.split("."))
    if problems:
        raise ValueError("generation settings: " + "; ".join(problems))
    properties = schema.schema["$defs"]["generation"]["properties"]
    values = {key: spec_generation.get(key, prop["default"]) for key, prop in properties.items()}
    return DecodingParams(temperature=float(values["temperature"]), top_p=float(values["top_p"]),
                          max_new_tokens=int(values["max_new_tokens"]), do_sample=bool(values["do_sample"]),
                          seed=int(seed))


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


@dataclass(frozen=True)
class Continuation:
    """Text to score after a request's prompt (the assistant turn's opening).

    ``context`` is read but not scored (a JSON key such as ``{"bloom_level": "``, the same for
    every option of a criterion); ``scored`` is the option whose tokens are scored (``Apply"``).
    """

    context: str
    scored: str


@dataclass(frozen=True)
class ContinuationScore:
    """The log-probability (natural log, summed over its tokens) of a continuation's scored text
    after the prompt and its context, and how many tokens that text took."""

    logprob: float
    n_tokens: int


@dataclass(frozen=True)
class ScoredPrompt:
    """One request's continuation scores, in the order the continuations were given."""

    request_id: str
    scores: tuple[ContinuationScore, ...]
    n_prompt_tokens: int | None = None
    #: read back from the call cache instead of computed
    cached: bool = False


class ChoiceScorer(Protocol):
    """A model that scores continuations instead of writing them (the ``choices`` judge mode)."""

    #: whether this model can score continuations (a wrapper says so for what it wraps)
    supports_choice_scoring: bool

    def score_continuations(
        self, requests: Sequence[ChatRequest], continuations: Sequence[Continuation]
    ) -> list[ScoredPrompt]:
        """One :class:`ScoredPrompt` per request, in order: a score per continuation."""
        ...


class AnswerRateError(RuntimeError):
    """A generator's or judge's calls failed on more of its items than ``min_answer_rate`` allows."""


def refuse_low_answer_rate(role: str, name: str, *, asked: int, failure_reasons: Sequence[str | None],
                      min_answer_rate: float, items: str, error: type[AnswerRateError]) -> None:
    """Refuse a generator or judge (``role``: "model" / "judge") whose calls failed (no answer,
    not an answer that did not parse) on more than ``1 - min_answer_rate`` of the ``asked``
    ``items`` ("prompts" / "questions"), one reason per failed item: the study would go on as if
    its work had been done. Below the floor raises ``error`` naming the commonest causes and the
    fix; at or above it, failures are only logged (they are kept as errors)."""
    if not asked:
        return
    answered = asked - len(failure_reasons)
    if answered >= min_answer_rate * asked:
        if failure_reasons:
            logger.warning("%s %s: %d of %d calls failed (kept as errors)", role, name, len(failure_reasons), asked)
        return
    causes = Counter(reason or "no reason recorded" for reason in failure_reasons)
    said = "; ".join(f"{count} × {reason}" for reason, count in causes.most_common(3))
    kind = "generator" if role == "model" else role
    raise error(
        f"{role} {name!r}: {answered} of {asked} {items} answered, below min_answer_rate "
        f"{min_answer_rate:g} ({said}). Check the {role}'s endpoint (base_url, the server, the key in its "
        "api_key_env) and rerun: answered calls are cached, only the failed ones are sent again; "
        f"lower min_answer_rate to keep a {kind} that fails this often."
    )
