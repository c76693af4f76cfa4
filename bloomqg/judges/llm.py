"""The LLM judge: one chat call per generated question, all five criteria in one JSON answer.

Works with any :class:`bloomqg.inputs.chat.TextGenerator` (transformers in-process, or an
OpenAI-compatible API). The rubric prompt is a template file (``prompts/judge/rubric.md`` by
default) made of chat messages, each introduced by a ``<!-- role: system|user|assistant -->``
line (the default has the rubric as system message, one worked example as a user/assistant pair
so that small models see the answer format, then the question to judge), and
``${name}`` placeholders (:class:`string.Template`), so JSON braces in the template need no
escaping (read and checked by :mod:`bloomqg.judges.rubric`). The lists the judge chooses from
are data too: ``${knowledge_units}`` and ``${bloom_levels}`` are rendered in the order the
caller gives (the dataset's and :data:`bloomqg.inputs.bloom.BLOOM_LEVELS` by default), so the order
probe of :mod:`bloomqg.judges.bias` can present them permuted without another template. The judged texts go inside ``<question>`` / ``<original_question>`` tags and the prompt
says that text inside is data; tag look-alikes inside the data are escaped so the data cannot
close its own tag. The verdict JSON schema travels with every request as
``ChatRequest.response_schema`` (structured output where the backend supports it); the answer is
read by :func:`bloomqg.judges.verdict.parse_verdict` either way.

That is the ``generate`` mode, every judge's default. In the ``choices`` mode (opt-in, for a
model run in-process) the same messages are not answered but continued: each criterion's options are
scored by their log-probability and the verdict is the likeliest (:mod:`bloomqg.judges.choices`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bloomqg.inputs.bloom import BLOOM_LEVELS
from bloomqg.inputs.chat import (
    ChatRequest,
    Completion,
    DecodingParams,
    TextGenerator,
)
from bloomqg.judges.base import JudgedItem, JudgeItem
from bloomqg.judges.choices import MODES, judge_by_choices
from bloomqg.judges.rubric import RubricTemplate
from bloomqg.judges.verdict import (
    CALL_FAILED,
    CriterionVerdict,
    Verdict,
    parse_verdict,
    verdict_schema,
)

if TYPE_CHECKING:
    from bloomqg.judges.registry import JudgeContext

logger = logging.getLogger(__name__)

_DATA_TAG = re.compile(r"<(/?)\s*(question|original_question)\s*>", re.IGNORECASE)


def escape_data(text: str) -> str:
    """Neutralise tag look-alikes (``</question>``) so judged text stays inside its tag."""
    return _DATA_TAG.sub(lambda m: f"&lt;{m.group(1)}{m.group(2)}&gt;", text)


def render_judge_messages(
    template: RubricTemplate,
    *,
    question: str,
    original_question: str,
    knowledge_units: Sequence[str],
    domain: str,
    bloom_levels: Sequence[str] = BLOOM_LEVELS,
) -> tuple[dict[str, str], ...]:
    """The chat messages asking the judge about one generated question; both lists are
    rendered in the order given."""
    values = {
        "domain": domain,
        "question": escape_data(question),
        "original_question": escape_data(original_question),
        "knowledge_units": "; ".join(knowledge_units),
        "bloom_levels": ", ".join(bloom_levels),
    }
    return tuple(
        {"role": role, "content": tpl.substitute(values)} for role, tpl in template.parts
    )


def verdict_from_completion(completion: Completion, knowledge_units: Sequence[str]) -> Verdict:
    """Parse one completion; a failed call is status ``error`` on every criterion."""
    if completion.text is None:
        return Verdict.uniform(
            CriterionVerdict.error(f"{CALL_FAILED}: {completion.error or completion.finish_reason}")
        )
    verdict = parse_verdict(completion.text, knowledge_units)
    if completion.finish_reason == "length":
        # Say why a field is missing when the answer was cut off by the token limit.
        verdict = Verdict(
            {
                name: (
                    CriterionVerdict.failed(f"{cv.reason} (answer cut at max_new_tokens)")
                    if cv.status == "parse_failed"
                    else cv
                )
                for name, cv in verdict.criteria.items()
            },
            verdict.raw_text,
        )
    return verdict


class LLMJudge:
    """Asks a :class:`TextGenerator` for one JSON verdict per generated question."""

    def __init__(
        self,
        text_generator: TextGenerator,
        knowledge_units: Sequence[str],
        domain: str,
        *,
        template: RubricTemplate,
        decoding: DecodingParams,
        bloom_levels: Sequence[str] = BLOOM_LEVELS,
        mode: str = "generate",
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
        if mode == "choices" and not getattr(text_generator, "supports_choice_scoring", False):
            raise ValueError("mode 'choices' needs a model that scores continuations in-process "
                             "(an hf judge without an engine, on a full-attention model); use mode 'generate'")
        if sorted(bloom_levels) != sorted(BLOOM_LEVELS):
            raise ValueError(f"bloom_levels must be an order of {list(BLOOM_LEVELS)}, got {list(bloom_levels)}")
        self.text_generator = text_generator
        #: in the order the prompt lists them (the order probe permutes both lists)
        self.knowledge_units = list(knowledge_units)
        self.bloom_levels = list(bloom_levels)
        self.domain = domain
        self.template = template
        self.decoding = decoding
        self.schema = verdict_schema(self.knowledge_units, self.bloom_levels)
        #: "generate": write the JSON verdict and parse it; "choices": score each option
        #: (:mod:`bloomqg.judges.choices`)
        self.mode = mode

    def requests(self, items: Sequence[JudgeItem]) -> list[ChatRequest]:
        """One chat request per item, its prompt_id as the request id."""
        return [
            ChatRequest(
                request_id=item.prompt_id,
                messages=render_judge_messages(
                    self.template,
                    question=item.question,
                    original_question=item.original_question,
                    knowledge_units=self.knowledge_units,
                    domain=self.domain,
                    bloom_levels=self.bloom_levels,
                ),
                response_schema=self.schema,
            )
            for item in items
        ]

    def judge_batch(self, items: Sequence[JudgeItem]) -> list[JudgedItem]:
        """One :class:`JudgedItem` per item, in order (a missing completion is an error)."""
        requests = self.requests(items)
        if self.mode == "choices":
            return judge_by_choices(self.text_generator, requests, self.knowledge_units,  # type: ignore[arg-type]
                                    self.bloom_levels)
        completions = self.text_generator.complete(requests, self.decoding)
        by_id = {completion.request_id: completion for completion in completions}
        results = []
        for request in requests:
            completion = by_id.get(request.request_id)
            if completion is None:
                logger.error("judge backend returned no completion for %s", request.request_id)
                completion = Completion(request.request_id, None, "error", error="no completion returned")
            results.append(
                JudgedItem(
                    verdict=verdict_from_completion(completion, self.knowledge_units),
                    cached=completion.cached,
                    n_prompt_tokens=completion.n_prompt_tokens,
                    n_completion_tokens=completion.n_completion_tokens,
                    cost_usd=completion.cost_usd,
                    cache_key=completion.extra.get("cache_key"),
                )
            )
        return results


def build_llm_judge(context: "JudgeContext") -> LLMJudge:
    """The LLM judge of a backend with ``needs_rubric`` and a text generator (``hf``, ``openai``)."""
    if context.text_generator is None or context.rubric is None:
        raise ValueError(f"judge {context.judge_name!r}: an LLM judge needs a text generator and the rubric")
    # ``mode`` is the hf backend's choices/generate; an openai entry's ``mode`` (sync/batch) says
    # how its calls are sent, not how the verdict is read
    mode = (context.spec.get("mode") if context.spec.get("backend", "hf") == "hf" else None) \
        or default_mode(context.text_generator)
    return LLMJudge(
        context.text_generator, context.knowledge_units, context.domain, template=context.rubric,
        decoding=context.decoding,
        bloom_levels=context.bloom_levels, mode=mode,
    )


def default_mode(text_generator: object) -> str:
    """``choices`` where the model scores continuations in-process, else ``generate`` (an engine,
    an API, sliding-window layers). Measured against the paper's panel on 600 of GLM-4-9B's
    computer-science questions (``configs/judge-modes-glm.yaml``, target judge_validation), SmolLM2
    agrees on the Bloom level 30.2% [26.5, 34.0] of the time scoring the choices against 17.3%
    [14.2, 20.6] writing its verdict (which answers Apply to 541 of 574), and on unique 77.3% against
    6.8%; on the knowledge unit 26.3% of 600 against 31.4% of the 423 generate answered. On the
    default study it takes 54% of generate's job-seconds (``benchmarks/judge_modes.py``)."""
    return "choices" if getattr(text_generator, "supports_choice_scoring", False) else "generate"
