"""parse_generation on hand-written edge cases and on real SmolLM2-135M outputs (fixtures).

The fixture file holds answers SmolLM2-135M-Instruct actually wrote for the shipped CoT/FGP
templates (hand-written sample questions, temperature 0.9, see the file's "produced_by"), with
the parse result a reviewer checked by reading each answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bloomqg.inputs.strategies import BUILTIN_STRATEGIES
from bloomqg.inputs.parsing import (
    ParsedGeneration,
    answered,
    parse_generation,
    placeholder_reason,
    prompt_example_questions,
    unbracketed,
)

UNITS = ["Stack", "Queue", "Binary Tree", "Sorting"]
COT_FIELDS = BUILTIN_STRATEGIES["cot"].answer_fields
FIELDS = {name: spec.answer_fields for name, spec in BUILTIN_STRATEGIES.items()}
FIXTURES = Path(__file__).parent / "fixtures" / "smollm2_generations.json"


def cot(text):
    return parse_generation(text, COT_FIELDS, knowledge_units=UNITS)


def fgp(text):
    return parse_generation(text, (), knowledge_units=UNITS)


def test_plain_json_cot():
    parsed = cot('{"knowledge_unit": "Stack", "bloom_level": "Apply", '
                 '"question": "Use a stack to check the brackets in ((a)[b])."}')
    assert parsed == ParsedGeneration("Use a stack to check the brackets in ((a)[b]).", "Apply",
                                      ["Stack"], "ok", None)


def test_fenced_json_with_prose_and_key_variants():
    text = ("Sure! Here is my answer:\n```json\n{\n  \"Knowledge Unit\": \"binary tree\",\n"
            "  \"Bloom Level\": \"analysis\",\n  \"New Question\": \"Why is a skewed BST slow?\"\n}\n```\n"
            "Hope this helps.")
    parsed = cot(text)
    assert parsed.new_question == "Why is a skewed BST slow?"
    assert parsed.identified_bloom_level == "Analyze"
    assert parsed.identified_knowledge_units == ["Binary Tree"]
    assert parsed.parse_status == "ok" and parsed.parse_error is None


def test_json_embedded_in_prose_first_object_with_a_question_wins():
    text = 'Step 1 {"note": "thinking"} then {"question": "What is a queue?"} and {"question": "x?"}'
    assert fgp(text).new_question == "What is a queue?"


def test_truncated_json_falls_back_to_key_value_pairs():
    text = '```json\n{"knowledge_unit": "Queue", "bloom_level": "Remember", "question": "What is FIFO?", "expl'
    parsed = cot(text)
    assert (parsed.new_question, parsed.identified_bloom_level,
            parsed.identified_knowledge_units) == ("What is FIFO?", "Remember", ["Queue"])


def test_labelled_lines_with_markdown_and_next_line_values():
    text = ("**Knowledge unit:** sorting\n**Bloom's level:** Level 5 - Evaluate\n"
            "**Question:**\nIs merge sort better than heap sort for external data?\n")
    parsed = cot(text)
    assert parsed.new_question == "Is merge sort better than heap sort for external data?"
    assert parsed.identified_bloom_level == "Evaluate"
    assert parsed.identified_knowledge_units == ["Sorting"]


def test_labelled_question_with_numbering_and_quotes():
    assert fgp('Question: "1. Define a deque."').new_question == "Define a deque."
    assert fgp("QUESTION :\n1. Define a deque.").new_question == "Define a deque."


def test_several_units_are_matched_case_insensitively_in_list_order_of_the_answer():
    parsed = cot('{"knowledge_unit": ["queue", "STACK"], "bloom_level": 3, "question": "Q?"}')
    assert parsed.identified_knowledge_units == ["Queue", "Stack"]
    assert parsed.identified_bloom_level == "Apply"
    parsed = cot('{"knowledge_unit": "Queue, stack", "bloom_level": "apply", "question": "Q?"}')
    assert parsed.identified_knowledge_units == ["Queue", "Stack"]


def test_cot_unknown_level_and_unit_keep_the_question_with_a_note():
    parsed = cot('{"knowledge_unit": "Graphs", "bloom_level": "Synthesize deeply", "question": "Q?"}')
    assert parsed.parse_status == "ok" and parsed.new_question == "Q?"
    assert parsed.identified_bloom_level is None and parsed.identified_knowledge_units is None
    assert "Synthesize deeply" in parsed.parse_error and "graphs" in parsed.parse_error


def test_cot_missing_identification_is_noted():
    parsed = cot('{"question": "What is a heap?"}')
    assert parsed.parse_status == "ok"
    assert parsed.parse_error == ("no Bloom level given for the original; "
                                  "no knowledge unit given for the original")


def test_fgp_ignores_identification_fields():
    parsed = fgp('{"knowledge_unit": "Stack", "bloom_level": "Apply", "question": "Q?"}')
    assert parsed == ParsedGeneration("Q?", None, None, "ok", None)


@pytest.mark.parametrize("text, reason", [
    (None, "empty answer"),
    ("   \n", "empty answer"),
    ('{"question": "<your new question>"}', "placeholder"),
    ('{"knowledge_unit": "...", "bloom_level": "...", "question": "..."}', "placeholder"),
    ('{"name": "x", "message": "y"}', "none has a question field"),
    ("A stack is a LIFO structure. I hope this answers your question.", "no JSON object"),
    ('Here: {"question": ', "no JSON object"),
])
def test_failures_carry_a_reason(text, reason):
    parsed = cot(text)
    assert parsed.parse_status == "failed" and parsed.new_question is None
    assert reason in parsed.parse_error


@pytest.mark.parametrize("text", [
    "<new_question>",  # what InternLM3-8B wrote for 104 CS CoT items of the paper's release
    "  <your new question>\n",
    "Question: <new_question>",
    '"<new_question>"',
    '{"question": "<新问题>"}',  # Meta-Llama-3-8B's 9 K-12 math outputs in the release
    '{"question": "<insert question here>"}',
    '{"question": "<>"}',
])
def test_a_template_placeholder_is_no_question(text):
    parsed = cot(text)
    assert parsed.parse_status == "failed" and parsed.new_question is None
    assert "placeholder" in parsed.parse_error


# Questions the paper's release holds written in the slot's brackets (Spark3.5-Max's CS FGP has
# five such, its K-12 math FGP 41, InternLM3-8B one in CS CoT and one in K-12 math).
BRACKETED_QUESTIONS = [
    'How can doubly linked lists enhance the performance of the "undo" and "redo" operations in a text editor?',
    "What are some common Python libraries used in data analysis and machine learning?",
    "In what ways can stacks be utilized to implement a call stack in a programming language's runtime environment?",
    "学校组织一次春游，租了5辆大巴车，每辆大巴车的租金是2500元。学校这次春游一共需要支付多少租金？",
    "求值：\\(C_m^{3 - m} + C_{m + 1}^{8 - m} = \\)_______.（填数字）",
    "一个长方体盒子的体积是多少",  # no punctuation, but longer than a slot's eight ideographs
    "Explain why a queue suits breadth first search",  # no punctuation, but more than five words
]


@pytest.mark.parametrize("question", BRACKETED_QUESTIONS)
def test_a_question_in_the_slots_brackets_is_a_question_without_them(question):
    assert placeholder_reason(f"<{question}>") is None
    assert unbracketed(f" <{question}> ") == question
    for answer in (json.dumps({"question": f"<{question}>"}, ensure_ascii=False), f"Question: <{question}>"):
        parsed = fgp(answer)
        assert parsed.parse_status == "ok" and parsed.new_question == question, answer


def test_unbracketed_leaves_slots_and_other_texts_as_they_are():
    for text in ("<new_question>", "<your new question>", "<新问题>", "<>", "What is a <tag> in HTML?",
                 "<a> and <b>?", "Is 2 < 3 > 1?"):
        assert unbracketed(text) == text
    # The line between the two: up to five words of letters, no punctuation or digits, is a slot;
    # one sign of a sentence makes it a question.
    assert placeholder_reason("<What is a stack>") and placeholder_reason("<What is a stack?>") is None


def test_answered_means_the_answer_has_text():
    assert answered("<new_question>") and answered("no JSON here")
    assert not answered(None) and not answered("") and not answered(" \n") and not answered(float("nan"))


def test_the_prompts_own_example_answer_is_no_question():
    prompt = ('Reply with JSON only, in this form:\n'
              '{"knowledge_unit": "Stack", "bloom_level": "Apply", "question": "How would you reverse a string with a stack?"}\n'
              "Original question: What is a stack?")
    examples = prompt_example_questions(prompt)
    assert examples == ["How would you reverse a string with a stack?"]
    echoed = parse_generation('{"knowledge_unit": "Stack", "bloom_level": "Apply", '
                              '"question": "How would you reverse a string  with a stack?"}',
                              COT_FIELDS, knowledge_units=UNITS, example_questions=examples)
    assert echoed.parse_status == "failed" and "prompt's own example question" in echoed.parse_error
    other = parse_generation('{"question": "How would you check brackets with a stack?"}', (),
                             knowledge_units=UNITS, example_questions=examples)
    assert other.parse_status == "ok"
    assert placeholder_reason("What is a <tag> in HTML?") is None, "a question that mentions one is a question"


def test_shipped_templates_example_answers_are_placeholders():
    from bloomqg.inputs.prompts import default_template_paths
    from bloomqg.store.provenance import REPO_ROOT

    for strategy in ("cot", "fgp"):
        template = default_template_paths(strategy, REPO_ROOT)[0].read_text(encoding="utf-8")
        assert [placeholder_reason(q) is not None for q in prompt_example_questions(template)] == [True]


def test_parsing_follows_answer_fields_not_a_strategy_name():
    with pytest.raises(TypeError, match="answer_fields"):
        parse_generation("{}", "cot", knowledge_units=UNITS)  # a name is no field list
    with pytest.raises(ValueError, match="unknown answer field"):
        parse_generation("{}", ["topic"], knowledge_units=UNITS)
    answer = '{"knowledge_unit": "Stack", "bloom_level": "Apply", "question": "How would a stack reverse a list?"}'
    level_only = parse_generation(answer, ["bloom_level"], knowledge_units=UNITS)
    assert (level_only.identified_bloom_level, level_only.identified_knowledge_units) == ("Apply", None)
    units_only = parse_generation(answer, ["knowledge_unit"], knowledge_units=UNITS)
    assert (units_only.identified_bloom_level, units_only.identified_knowledge_units) == (None, ["Stack"])
    assert parse_generation(answer, [], knowledge_units=UNITS).identified_bloom_level is None


def _fixture_cases():
    data = json.loads(FIXTURES.read_text())
    return [pytest.param(case, id=case["prompt_id"]) for case in data["cases"]]


@pytest.mark.parametrize("case", _fixture_cases())
def test_real_smollm2_outputs(case):
    parsed = parse_generation(case["text"], FIELDS[case["strategy"]], knowledge_units=UNITS)
    expected = case["expected"]
    assert parsed.parse_status == expected["parse_status"]
    assert parsed.new_question == expected["new_question"]
    assert parsed.identified_bloom_level == expected.get("identified_bloom_level")
    assert parsed.identified_knowledge_units == expected.get("identified_knowledge_units")
    if parsed.parse_status == "failed":
        assert parsed.parse_error


def test_fixtures_cover_both_outcomes_and_strategies():
    cases = json.loads(FIXTURES.read_text())["cases"]
    outcomes = {(c["strategy"], c["expected"]["parse_status"]) for c in cases}
    assert {("cot", "ok"), ("cot", "failed"), ("fgp", "ok"), ("fgp", "failed")} <= outcomes


def test_prefilled_answers_real_smollm2():
    """Answers SmolLM2-135M wrote after an assistant-turn prefill (benchmarks/parse_rate.py):
    raw text = prefix + continuation.  An FGP object is read; a CoT object the model closed
    after its first key carries no question, and the failure says so."""
    assert fgp('{"question": "Appreciate the new question!"}').new_question == (
        "Appreciate the new question!")
    early_close = ('{"knowledge_unit": "remainder"}\n\nYour code needs to pass the following '
                   "test:\n```python\ndef is_binary_search_tree(lst):\n    for index, value in")
    parsed = cot(early_close)
    assert parsed.parse_status == "failed"
    assert parsed.parse_error == "JSON object(s) found, but none has a question field"
    # cut off at max_new_tokens inside the question's string: no closed value, no guess
    assert fgp('{"question": "Explain how a stack differs from a').parse_status == "failed"


def test_a_generation_that_echoes_its_prompts_example_fails_to_parse():
    # Our own generations follow the same rule as the release's import: the stage hands the
    # parser the example answer its prompt showed.
    from bloomqg.inputs.chat import Completion
    from bloomqg.generation.stage import completion_row

    example = "How would you reverse a string with a stack?"
    prompt = {
        "prompt_id": "cs-0001:fgp", "item_id": "cs-0001", "dataset": "cs", "strategy": "fgp",
        "original_question": "What is a stack?", "original_bloom_level": "Remember",
        "original_knowledge_units": ["Stack"], "prompt_hash": "0" * 16,
        "passes_json": json.dumps([{"name": "generate", "answer_fields": []}]),
        "messages_json": json.dumps([{"role": "system", "content": "Be brief."}, {
            "role": "user", "content": f'Reply in this form:\n{{"question": "{example}"}}\nOriginal question: What is a stack?'}]),
    }
    echoed = completion_row(prompt, Completion("cs-0001:fgp", json.dumps({"question": example}), "stop"), "m", 0, UNITS)
    assert echoed["parse_status"] == "failed" and echoed["new_question"] is None
    assert "prompt's own example question" in echoed["parse_error"]
    placeholder = completion_row(prompt, Completion("cs-0001:fgp", "<new_question>", "stop"), "m", 0, UNITS)
    assert placeholder["parse_status"] == "failed" and "placeholder" in placeholder["parse_error"]
    fresh = completion_row(prompt, Completion("cs-0001:fgp", '{"question": "Why is a stack LIFO?"}', "stop"), "m", 0, UNITS)
    assert fresh["parse_status"] == "ok" and fresh["new_question"] == "Why is a stack LIFO?"
