"""The ``choices`` judge mode: options scored, the argmax answered, the distribution kept.

The probabilities are checked against a hand computation on a tiny random-weight model with a
character tokenizer (so the six Bloom levels take 5 to 10 tokens each and are length-normalised),
through the whole judging stage; a rerun reads every score from the call cache.
"""

from __future__ import annotations

import json
import math

import pytest

from bloomqg.inputs.bloom import BLOOM_LEVELS
from bloomqg.inputs.chat import ContinuationScore, ScoredPrompt
from bloomqg.judges.choices import criterion_options, option_distribution, verdict_from_scores
from bloomqg.judges.stage import judge_questions
from tests.unit.test_judges_stage import CannedGenerator, dataset_frame, generations_frame
from tests.support.specs import judge_spec

RUBRIC = """<!-- role: system -->
Judge a ${domain} question.
<!-- role: user -->
<original_question>${original_question}</original_question> <question>${question}</question> ${knowledge_units}
"""
JUDGE = {"backend": "hf", "model_ref": "tiny"}


def test_equal_lengths_give_the_softmax_of_the_log_probabilities():
    probabilities = option_distribution([ContinuationScore(math.log(0.3), 1), ContinuationScore(math.log(0.1), 1)])
    assert probabilities == pytest.approx([0.75, 0.25])


def test_unequal_lengths_give_the_softmax_of_the_per_token_means():
    # a one-token option at p=0.2 against a three-token one at 0.5 per token (0.125 in all):
    # the sum prefers the short one, the per-token mean the long one
    scores = [ContinuationScore(math.log(0.2), 1), ContinuationScore(3 * math.log(0.5), 3)]
    assert option_distribution(scores) == pytest.approx([0.2 / 0.7, 0.5 / 0.7])


def test_the_verdict_is_each_criterions_argmax_and_keeps_the_distribution():
    units = ["Stacks", "Queues"]
    options = criterion_options(units, BLOOM_LEVELS)
    per_option = {"unique": [-2.0, -1.0], "readable": [-0.1, -3.0], "answerable": [-1.0, -1.0],
                  "bloom_level": [-5.0, -4.0, -1.0, -6.0, -6.0, -6.0], "knowledge_units": [-3.0, -0.5]}
    scores = tuple(ContinuationScore(value, 1) for criterion in options for value in per_option[criterion.criterion])
    verdict = verdict_from_scores(options, ScoredPrompt("p", scores))
    assert verdict["unique"].value is False and verdict["readable"].value is True
    assert verdict["answerable"].value is True  # a tie goes to the first option in the prompt's order
    assert verdict["bloom_level"].value == "Apply"
    assert verdict["knowledge_units"].value == ("Queues",)
    assert verdict["bloom_level"].distribution["Apply"] == pytest.approx(
        math.exp(-1.0) / sum(math.exp(v) for v in per_option["bloom_level"]))
    assert sum(verdict["knowledge_units"].distribution.values()) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="scores for"):
        verdict_from_scores(options, ScoredPrompt("p", scores[:-1]))


def test_a_generator_that_cannot_score_refuses_the_choices_mode(tmp_path):
    rubric = tmp_path / "rubric.md"
    rubric.write_text(RUBRIC)
    with pytest.raises(ValueError, match="mode 'choices' needs"):
        judge_questions(generations_frame(["Why is a queue fair?"]), judge_spec("j", {**JUDGE, "mode": "choices"}),
                        dataset=dataset_frame(), domain="cs", prompt_path=rubric,
                        text_generator=CannedGenerator(["{}"]))


def test_an_unknown_mode_is_a_config_error(tmp_path):
    with pytest.raises(ValueError, match="mode"):
        judge_questions(generations_frame(["Why?"]), judge_spec("j", {**JUDGE, "mode": "vote"}), dataset=dataset_frame(),
                        domain="cs", text_generator=CannedGenerator(["{}"]))


def hand_level_probabilities(generator, messages) -> dict[str, float]:
    """The Bloom levels' probabilities computed by hand: each full sequence in one plain forward
    pass, the per-token mean of the level's log-probabilities, a softmax."""
    torch = pytest.importorskip("torch")
    prompt = generator.encode(_request(messages))
    means = {}
    for level in BLOOM_LEVELS:
        context = generator.tokenizer('{"bloom_level": "', add_special_tokens=False)["input_ids"]
        scored = generator.tokenizer(f'{level}"', add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = generator.model(input_ids=torch.tensor([prompt + context + scored])).logits[0].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        start = len(prompt) + len(context)
        means[level] = sum(float(logprobs[start + i - 1, t]) for i, t in enumerate(scored)) / len(scored)
    total = sum(math.exp(v) for v in means.values())
    return {level: math.exp(v) / total for level, v in means.items()}


def _request(messages):
    from bloomqg.inputs.chat import ChatRequest

    return ChatRequest("hand", tuple(messages))


def test_the_stage_writes_choice_probabilities_equal_to_a_hand_computation(tmp_path):
    pytest.importorskip("transformers")
    from bloomqg.generation.cached import CachedTextGenerator
    from bloomqg.generation.hf.generator import HFTextGenerator
    from bloomqg.judges.llm import render_judge_messages
    from bloomqg.judges.rubric import load_rubric
    from tests.support.tiny_models import CHAR_VOCAB_SIZE, char_tokenizer, tiny_model

    rubric = tmp_path / "rubric.md"
    rubric.write_text(RUBRIC)
    questions = ["Explain how a stack reverses a word.", "Why is a queue fair?", None]

    def run():
        inner = HFTextGenerator.from_model(tiny_model("llama", vocab_size=CHAR_VOCAB_SIZE), char_tokenizer(),
                                           batch_size=2)
        generator = CachedTextGenerator(inner, cache_dir=tmp_path / "cache", identity={"model": "tiny-char"})
        frame = judge_questions(generations_frame(questions), judge_spec("tiny-judge", {**JUDGE, "mode": "choices"}), dataset=dataset_frame(),
                                domain="cs", prompt_path=rubric, text_generator=generator)
        return frame, inner

    first, inner = run()
    assert inner.stats["scored_batches"] == 1  # both questions in one batch
    judged = first[first["status"] == "ok"]
    assert len(judged) == 10 and first["choice_probs"].notna().sum() == 10
    assert first.loc[first["status"] == "no_question", "choice_probs"].isna().all()
    for row in judged.itertuples():
        probabilities = json.loads(row.choice_probs)
        assert sum(probabilities.values()) == pytest.approx(1.0)
        best = max(probabilities, key=probabilities.get)
        answered = {"bloom_level": row.value_level, "knowledge_units": (row.value_units or [None])[0]}.get(
            row.criterion, str(row.value_bool).lower())
        assert answered == best
    units = json.loads(judged[judged["criterion"] == "knowledge_units"].iloc[0]["choice_probs"])
    assert sorted(units) == ["Queues", "Stacks"]

    messages = render_judge_messages(load_rubric(rubric), question=questions[0],
                                     original_question=dataset_frame().iloc[0]["question"],
                                     knowledge_units=["Queues", "Stacks"], domain="cs")
    level_row = judged[(judged["criterion"] == "bloom_level")].iloc[0]
    stored = json.loads(level_row["choice_probs"])
    expected = hand_level_probabilities(inner, messages)
    assert list(stored) == list(BLOOM_LEVELS)
    for level in BLOOM_LEVELS:
        assert stored[level] == pytest.approx(expected[level], abs=1e-5)

    second, inner_again = run()
    assert inner_again.stats["scored_batches"] == 0  # every score read from the call cache
    assert second.loc[second["status"] == "ok", "cached"].all()
    assert second["choice_probs"].tolist() == first["choice_probs"].tolist()


def test_a_judge_scores_the_choices_where_its_model_can_and_generates_elsewhere():
    """Against the paper's panel on GLM's questions, scoring the choices agreed better on the Bloom
    level (configs/judge-modes-glm.yaml): it is the default wherever the model scores continuations
    in-process; an engine or API judge writes its verdict (bloomqg.judges.llm.default_mode)."""
    from bloomqg.judges.llm import default_mode

    class Scorer:
        supports_choice_scoring = True

    class Engine:
        supports_choice_scoring = False

    assert default_mode(Scorer()) == "choices"
    assert default_mode(Engine()) == "generate" and default_mode(object()) == "generate"
