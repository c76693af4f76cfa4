"""The rules judge: each heuristic on questions chosen to hit (and miss) it."""

from __future__ import annotations

import pytest

from bloomqg.judges.rules import (
    DEFAULT_VERB_LIST,
    RulesJudge,
    char_ratio,
    light_stem,
    token_jaccard,
)

UNITS = ["Binary Search Tree", "Lists", "Queues", "Singly Linked List", "Stacks", "Hashing"]
ITEMS = [
    ("cs-0001", "Define the binary search tree property.", ["Binary Search Tree"]),
    ("cs-0002", "Explain why a queue serves elements in first-in first-out order.", ["Queues"]),
    ("cs-0003", "Trace the pushes and pops that reverse a word with a stack.", ["Stacks"]),
    ("cs-0004", "Describe how collisions are resolved by chaining in a hash table.", ["Hashing"]),
    ("cs-0005", "Explain how a print spooler decides which waiting job runs next.", ["Queues"]),
]


@pytest.fixture(scope="module")
def judge() -> RulesJudge:
    if not DEFAULT_VERB_LIST.is_file():
        pytest.skip(f"the project's verb list {DEFAULT_VERB_LIST} is missing")
    return RulesJudge.from_spec("rules", {"unit_aliases": {"Binary Search Tree": ["BST"]}}, ITEMS, UNITS)


def test_light_stem_joins_inflections():
    assert light_stem("Queues") == light_stem("queue")
    assert light_stem("hashing") == light_stem("hashed") == light_stem("hash")
    assert light_stem("recursion") == light_stem("recursive")


def test_unique_rejects_reordering_and_rewording_but_not_the_papers_example(judge):
    original = "What is a binary search tree?"
    assert judge.judge_unique("A binary search tree is what?", original).value is False  # reordered
    assert judge.judge_unique("What's a binary search tree?", original).value is False  # reworded
    papers_unique = "Explain the concept of a binary search tree and provide an example"
    verdict = judge.judge_unique(papers_unique, original)
    assert verdict.value is True and "token_jaccard=0.43" in verdict.reason
    assert token_jaccard(original, original) == 1.0 and char_ratio(original, original) == 1.0


def test_bloom_level_verb_rule_then_question_words_then_no_guess(judge):
    assert judge.judge_level("Design a queue that serves two priorities.").value == "Create"
    fallback = judge.judge_level("Which node is the root in a BST?")
    assert fallback.value == "Remember" and "question-word heuristic" in fallback.reason
    price = judge.judge_level("A school buys 24 balls at 86 dollars each. How much does it pay?")
    assert price.value == "Apply"
    nothing = judge.judge_level("Stack overflow, again, today?")
    assert nothing.status == "error" and nothing.value is None


@pytest.mark.parametrize(
    "question, problem",
    [
        ('{"question": "What is a stack?"}', "debris"),
        ("Explain the the the stack in detail please.", "repeated"),
        ("Stack?", "words"),
        ("Explain how a stack (LIFO works?", "unbalanced"),
        ("Explain how a hash table resolves collisions by", "does not end"),
        ("Is {[(<>)]} + {[(<>)]} = ** so?", "letters or digits"),
    ],
)
def test_unreadable_questions_name_the_failed_check(judge, question, problem):
    verdict = judge.judge_readable(question)
    assert verdict.value is False and problem in verdict.reason


def test_readable_questions_and_imperatives(judge):
    for question in (
        "How does a stack reverse the order of its elements?",
        "In your own words, explain what a node of a linked list holds.",
        "A team replaces recursion with an explicit stack. Weigh the benefits and the costs.",
        "Which traversal visits the root first? A) Preorder B) Inorder C) Postorder",
        "Evaluate the expression \"3 + (2 * 4)\" and show each step.",
        "Which operators does Python use for powers, `**` or `^`?",
        "一盒铅笔12支，3盒一共_______支。",
        "一根绳子长(8±0.2)米，最长是多少米？（填小数）",
    ):
        assert judge.judge_readable(question).value is True, question


@pytest.mark.parametrize(
    "question",
    [
        "What is the time complexity of the algorithm?",  # the paper's unanswerable example
        "Explain the output of the code above.",
        "Describe what this figure shows about the hash table.",
        "Which of the values shown below is pushed last?",
        "Explain how [insert topic] works in a queue.",
    ],
)
def test_unanswerable_questions(judge, question):
    assert judge.judge_answerable(question).value is False


@pytest.mark.parametrize(
    "question",
    [
        "What is the time complexity of searching a balanced binary search tree?",
        "Given the following code:\nfor i in range(3): print(i)\nWhat does it print?",
        "Sort the given list [3, 1, 2] with insertion sort and show each pass.",
        "Explain why a queue is used for breadth-first search.",
    ],
)
def test_answerable_questions(judge, question):
    assert judge.judge_answerable(question).value is True


def test_an_algorithm_introduced_by_the_question_is_not_unspecified(judge):
    question = "Design an algorithm that merges two sorted queues and state the time complexity of the algorithm."
    assert judge.judge_answerable(question).value is True


def test_units_by_name_most_specific_and_alias(judge):
    assert judge.judge_units("Insert 5 into a binary search tree.", None).value == ("Binary Search Tree",)
    # "List" of "Singly Linked List" does not also select the broader "Lists" unit.
    assert judge.judge_units("Reverse a singly linked list in place.", None).value == ("Singly Linked List",)
    assert judge.judge_units("Which node is the root of a BST?", None).value == ("Binary Search Tree",)
    both = judge.judge_units("Compare stacks and queues for undo histories.", None).value
    assert set(both) == {"Stacks", "Queues"}


def test_units_fall_back_to_item_vocabulary_without_the_own_item(judge):
    verdict = judge.judge_units("Which waiting print job runs next on the spooler?", None)
    assert verdict.value == ("Queues",) and "no unit name" in verdict.reason
    # Leaving out the question's own original item (cs-0005) removes the only shared words.
    assert judge.judge_units("Which print spooler job runs?", None).value == ("Queues",)
    assert judge.judge_units("Which print spooler job runs?", "cs-0005").status == "error"
    assert judge.judge_units("Zebra giraffe okapi?", None).status == "error"


def test_spec_errors_name_the_judge_and_key():
    with pytest.raises(ValueError, match="judge 'r'.*'Heaps'"):
        RulesJudge.from_spec("r", {"unit_aliases": {"Heaps": ["heap"]}}, ITEMS, UNITS)
    with pytest.raises(FileNotFoundError, match="judge 'r'"):
        RulesJudge.from_spec("r", {"verb_list": "/nonexistent/verbs.csv"}, ITEMS, UNITS)


def test_judge_returns_all_five_criteria(judge):
    verdict = judge.judge("Explain how a stack reverses a word.", "What is a stack?", "cs-0003")
    assert verdict["unique"].value is True and verdict["readable"].value is True
    assert verdict["knowledge_units"].value == ("Stacks",)


def test_chinese_questions_are_measured_by_characters():
    """The paper's K-12 math items are Chinese: no spaces, full-width punctuation."""
    units = ["总价问题--一步", "方砖铺地"]
    items = [("m-1", "每支铅笔3元，买5支铅笔一共要多少元？", ["总价问题--一步"]),
             ("m-2", "用边长0.3米的方砖铺地，需要多少块方砖？", ["方砖铺地"])]
    if not DEFAULT_VERB_LIST.is_file():
        pytest.skip(f"the project's verb list {DEFAULT_VERB_LIST} is missing")
    judge = RulesJudge.from_spec("rules", {}, items, units)
    question = "如果每瓶苹果汁的价格是18元，那么购买60瓶苹果汁的总费用是多少元？"
    assert judge.judge_readable(question).value is True
    assert judge.judge_answerable(question).value is True
    assert judge.judge_readable("如果每瓶苹果汁的价格是18元，那么购买60瓶").value is False  # cut off
    assert judge.judge_units("教室地面用方砖铺地，一共需要多少块？", None).value == ("方砖铺地",)
    fallback = judge.judge_units("买3本书一共要多少元？", None)
    assert fallback.value == ("总价问题--一步",) and "no unit name" in fallback.reason
    assert judge.judge_unique("每支铅笔3元，买5支铅笔一共需要多少元？", items[0][1]).value is False


def test_chinese_question_words_give_a_level(judge):
    verdict = judge.judge_level("一盒铅笔12支，买3盒一共多少支？")
    assert verdict.value == "Apply" and "question-word heuristic" in verdict.reason
