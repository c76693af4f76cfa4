"""The ``choices`` mode of LLM judges: each criterion's options scored, not an answer written.

Instead of writing a JSON verdict token by token and reading it back, the judge's model scores
every option of every criterion as the continuation of the rubric prompt's assistant turn
(lm-evaluation-harness's ``loglikelihood`` requests; G-Eval's probability-weighted scores): the
continuation opens the answer the rubric's worked examples show, ``{"<criterion>": `` (plus the
opening quote or bracket of a string value), which is read but not scored, and the option is
scored with the token that closes its JSON value:

- unique / readable / answerable: ``true`` and ``false``;
- bloom_level: the six levels, in the order the prompt lists them (``Apply"``);
- knowledge_units: each of the dataset's units (``Photosynthesis"``); the verdict is one unit.

Every option of every criterion continues the same prompt, so the model reads the prompt once
per question (and the part all questions share once per batch:
:mod:`bloomqg.generation.hf.choices`).

Scores to probabilities.  When a criterion's options all take the same number of tokens, an
option's score is its log-probability (summed over its tokens), and the distribution is the
softmax of the scores: the model's probability of each option given that one of them is
answered.  When they differ (level and unit names of one token against three), every further
token multiplies in a probability below one, so the sum favours short names whatever they say;
there the score is the mean log-probability per token (the geometric mean of the token
probabilities; lm-evaluation-harness's ``acc_norm`` divides by bytes instead, which compares
models with different tokenizers, a need one judge does not have). The verdict is the option
with the highest probability (the first in the prompt's order on a tie); the distribution is
kept with it (the ``choice_probs`` column of :data:`bloomqg.store.frames.JUDGMENTS`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from bloomqg.inputs.chat import ChatRequest, ChoiceScorer, Continuation, ContinuationScore, ScoredPrompt
from bloomqg.store.frames import BINARY_CRITERIA
from bloomqg.judges.base import JudgedItem
from bloomqg.judges.verdict import CriterionVerdict, Verdict

#: The judge modes an LLM judge can run in.
MODES: tuple[str, ...] = ("choices", "generate")

#: How a binary criterion's options are written in the JSON answer, and what they mean.
BINARY_OPTIONS: tuple[tuple[str, bool], ...] = (("true", True), ("false", False))


@dataclass(frozen=True)
class CriterionOptions:
    """One criterion's options: their labels (the distribution's keys) and continuations."""

    criterion: str
    labels: tuple[str, ...]
    continuations: tuple[Continuation, ...]


def criterion_options(knowledge_units: Sequence[str], bloom_levels: Sequence[str]) -> list[CriterionOptions]:
    """The options of every criterion, as the rubric's JSON answer would spell them."""
    options = [
        CriterionOptions(name, tuple(label for label, _ in BINARY_OPTIONS),
                         tuple(Continuation(f'{{"{name}": ', label) for label, _ in BINARY_OPTIONS))
        for name in BINARY_CRITERIA
    ]
    options.append(CriterionOptions("bloom_level", tuple(bloom_levels),
                                    tuple(Continuation('{"bloom_level": "', f'{level}"') for level in bloom_levels)))
    options.append(CriterionOptions("knowledge_units", tuple(knowledge_units),
                                    tuple(Continuation('{"knowledge_units": ["', f'{unit}"') for unit in knowledge_units)))
    return options


def option_distribution(scores: Sequence[ContinuationScore]) -> list[float]:
    """Probabilities of a criterion's options from their scores (see the module docstring):
    softmax of the summed log-probabilities, or of the per-token means where token counts differ."""
    if not scores:
        raise ValueError("a criterion needs at least one option")
    same_length = len({score.n_tokens for score in scores}) == 1
    values = [score.logprob if same_length else score.logprob / score.n_tokens for score in scores]
    top = max(values)
    weights = [math.exp(value - top) for value in values]
    total = sum(weights)
    return [weight / total for weight in weights]


def verdict_from_scores(options: Sequence[CriterionOptions], scored: ScoredPrompt) -> Verdict:
    """The argmax option of each criterion, with the distribution, from one prompt's scores."""
    criteria: dict[str, CriterionVerdict] = {}
    start = 0
    for criterion in options:
        scores = scored.scores[start : start + len(criterion.labels)]
        start += len(criterion.labels)
        probabilities = option_distribution(scores)
        best = max(range(len(probabilities)), key=lambda index: (probabilities[index], -index))
        label = criterion.labels[best]
        value: bool | str | tuple[str, ...] = (
            dict(BINARY_OPTIONS)[label] if criterion.criterion in BINARY_CRITERIA
            else (label,) if criterion.criterion == "knowledge_units" else label)
        criteria[criterion.criterion] = CriterionVerdict.ok(value, distribution=dict(zip(criterion.labels, probabilities)))
    if start != len(scored.scores):
        raise ValueError(f"{scored.request_id}: {len(scored.scores)} scores for {start} options")
    return Verdict(criteria)


def judge_by_choices(scorer: ChoiceScorer, requests: Sequence[ChatRequest], knowledge_units: Sequence[str],
                     bloom_levels: Sequence[str]) -> list[JudgedItem]:
    """One :class:`JudgedItem` per request: every option of every criterion scored after its prompt."""
    options = criterion_options(knowledge_units, bloom_levels)
    continuations = [continuation for criterion in options for continuation in criterion.continuations]
    scored = scorer.score_continuations(requests, continuations)
    if [s.request_id for s in scored] != [r.request_id for r in requests]:
        raise RuntimeError("the scorer returned scores for other requests than it was asked")
    return [
        JudgedItem(verdict=verdict_from_scores(options, result), cached=result.cached,
                   n_prompt_tokens=result.n_prompt_tokens, n_completion_tokens=0)
        for result in scored
    ]

