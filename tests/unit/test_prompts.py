"""Prompt rendering: schema, exemplar choice (same unit, never the item, deterministic), hashes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from bloomqg.store.parquet_io import to_table
from bloomqg.inputs.prompts import (
    TemplateError,
    build_prompts,
    choose_exemplars,
    load_template,
    messages_from_json,
    prompt_hash,
    render_template,
    response_prefix,
    template_hash,
    with_response_prefill,
)
from bloomqg.store.frames import PROMPTS

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "prompts" / "generation"


def make_dataset() -> pd.DataFrame:
    """Seven hand-written items: four on Stack, two on Queue, one alone on Hashing."""
    rows = [
        ("Stack", "Define a stack.", "Remember"),
        ("Stack", "Explain why recursion uses a stack.", "Understand"),
        ("Stack", "Use a stack to reverse the string ABC.", "Apply"),
        ("Stack", "Design a stack with a max operation.", "Create"),
        ("Queue", "What does FIFO mean?", "Remember"),
        ("Queue", "Compare a deque with a queue.", None),
        ("Hashing", "Evaluate linear probing for a full table.", "Evaluate"),
    ]
    return pd.DataFrame({
        "item_id": [f"cs-{i:04d}" for i in range(1, len(rows) + 1)],
        "dataset": "cs",
        "source_row": range(1, len(rows) + 1),
        "question": [q for _, q, _ in rows],
        "bloom_level": [level for _, _, level in rows],
        "bloom_source": "label",
        "knowledge_units": [[unit] for unit, _, _ in rows],
    })


def build(strategy: str, dataset: pd.DataFrame | None = None, **kwargs) -> pd.DataFrame:
    options = {"template_path": TEMPLATES / f"{strategy}.md", "k_exemplars": 2, "seed": 3,
                   "domain": "computer science", "system_path": TEMPLATES / "system.md"}
    options.update(kwargs)
    return build_prompts(make_dataset() if dataset is None else dataset, strategy, **options)


@pytest.mark.parametrize("strategy", ["cot", "fgp"])
def test_prompts_fit_the_schema(strategy):
    frame = build(strategy)
    assert list(frame.columns) == PROMPTS.names
    to_table(frame, PROMPTS)  # raises on a missing column or a null in a non-null column
    assert frame["prompt_id"].tolist() == [f"cs-{i:04d}:{strategy}" for i in range(1, 8)]
    assert set(frame["strategy"]) == {strategy}


def test_exemplars_share_the_unit_and_never_include_the_item():
    dataset = make_dataset()
    units = dict(zip(dataset["item_id"], dataset["knowledge_units"]))
    frame = build("cot", dataset)
    for item_id, exemplar_ids in zip(frame["item_id"], frame["exemplar_ids"]):
        assert item_id not in exemplar_ids
        for other in exemplar_ids:
            assert set(units[other]) & set(units[item_id])
    by_item = dict(zip(frame["item_id"], frame["exemplar_ids"]))
    assert len(by_item["cs-0001"]) == 2  # three candidates, k = 2
    assert by_item["cs-0005"] == ["cs-0006"]  # only one other Queue item
    assert by_item["cs-0007"] == []  # alone on its unit


def test_exemplar_choice_is_deterministic_and_depends_on_the_seed():
    dataset = make_dataset()
    first = [choose_exemplars(dataset, "cs-0001", 2, seed) for seed in range(20)]
    again = [choose_exemplars(dataset, "cs-0001", 2, seed) for seed in range(20)]
    assert first == again
    assert len({tuple(choice) for choice in first}) > 1  # the seed matters


def test_exemplars_appear_in_the_prompt_and_the_original_is_shown_once():
    frame = build("fgp")
    dataset = make_dataset().set_index("item_id")
    row = frame.iloc[0]
    messages = messages_from_json(row["messages_json"])
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    for exemplar in row["exemplar_ids"]:
        assert dataset.loc[exemplar, "question"] in user
    assert user.count("Define a stack.") == 1
    assert "Target knowledge unit: Stack\nTarget Bloom level: Remember" in user  # FGP targets
    assert '{"question": "<your new question>"}' in user  # JSON example kept verbatim
    assert "computer science" in messages[0]["content"]
    assert "<!--" not in user  # the documentation comment is stripped


def test_cot_lists_the_datasets_units_and_leaves_targets_null():
    frame = build("cot")
    user = messages_from_json(frame.iloc[0]["messages_json"])[-1]["content"]
    assert "Hashing, Queue, Stack" in user
    assert frame["target_bloom_level"].isna().all()
    assert frame["target_knowledge_units"].isna().all()


def test_fgp_targets_are_the_originals_and_a_missing_level_is_stated():
    frame = build("fgp").set_index("item_id")
    assert frame.loc["cs-0003", "target_bloom_level"] == "Apply"
    assert frame.loc["cs-0003", "target_knowledge_units"] == ["Stack"]
    assert pd.isna(frame.loc["cs-0006", "target_bloom_level"])
    user = messages_from_json(frame.loc["cs-0006", "messages_json"])[-1]["content"]
    assert "the same as the original question" in user


def test_hash_changes_when_the_template_changes(tmp_path):
    for name in ("fgp.md", "system.md"):
        shutil.copy(TEMPLATES / name, tmp_path / name)
    template = tmp_path / "fgp.md"
    before = build("fgp", template_path=template, system_path=tmp_path / "system.md")
    assert before["prompt_hash"].nunique() == 1
    assert template_hash(template) == template_hash(TEMPLATES / "fgp.md")
    template.write_text(template.read_text() + "\nKeep it short.\n")
    after = build("fgp", template_path=template, system_path=tmp_path / "system.md")
    assert after["prompt_hash"].iloc[0] != before["prompt_hash"].iloc[0]
    assert "Keep it short." in messages_from_json(after["messages_json"].iloc[0])[-1]["content"]
    (tmp_path / "system.md").write_text("You are terse about {domain}.")
    changed_system = build("fgp", template_path=template, system_path=tmp_path / "system.md")
    assert changed_system["prompt_hash"].iloc[0] != after["prompt_hash"].iloc[0]
    assert len(template_hash(template)) == 16
    assert prompt_hash(template) == template_hash(template)


def test_unknown_placeholder_names_the_file(tmp_path):
    template = tmp_path / "bad.md"
    template.write_text("Write about {topic_name}.")
    with pytest.raises(TemplateError, match=r"bad\.md.*\{topic_name\}"):
        build("fgp", template_path=template, system_path=None)


def test_render_leaves_json_braces_alone():
    assert render_template('{"a": 1} {x}', {"x": "y"}) == '{"a": 1} y'


def test_empty_or_missing_template_is_an_error(tmp_path):
    empty = tmp_path / "empty.md"
    empty.write_text("<!-- only a comment -->\n")
    with pytest.raises(TemplateError, match="empty"):
        load_template(empty)
    with pytest.raises(TemplateError, match="does not exist"):
        load_template(tmp_path / "missing.md")


def test_bad_input_is_reported():
    dataset = make_dataset()
    with pytest.raises(ValueError, match="strategy"):
        build("zero-shot")
    with pytest.raises(ValueError, match="knowledge_units"):
        build("cot", dataset.drop(columns=["knowledge_units"]))
    dataset.at[2, "knowledge_units"] = []
    with pytest.raises(ValueError, match="cs-0003"):
        build("cot", dataset)


def test_messages_json_is_validated():
    with pytest.raises(ValueError, match="p1"):
        messages_from_json("not json", prompt_id="p1")
    with pytest.raises(ValueError, match="role, content"):
        messages_from_json(json.dumps([{"role": "user"}]), prompt_id="p1")


@pytest.mark.parametrize(("strategy", "prefix"), [
    ("cot", '{"knowledge_unit": "'),
    ("fgp", '{"question": "'),
])
def test_response_prefix_is_the_opening_of_the_templates_json_example(strategy, prefix):
    assert response_prefix(load_template(TEMPLATES / f"{strategy}.md")) == prefix
    # the rendered prompt yields the same prefix as its template
    user = json.loads(build(strategy)["messages_json"].iloc[0])[-1]["content"]
    assert response_prefix(user) == prefix


@pytest.mark.parametrize("strategy", ["cot", "fgp"])
def test_item_text_after_the_example_cannot_replace_it(strategy):
    """The templates show the JSON example before the item's text (for the shared prefix);
    an original question or exemplar that is itself JSON must not become the prefill."""
    dataset = make_dataset()
    dataset.loc[:, "question"] = '{"question": "x"}\n{"bloom_level": "Create"} as a question?'
    prompts = build(strategy, dataset)
    expected = response_prefix(load_template(TEMPLATES / f"{strategy}.md"))
    for messages_json in prompts["messages_json"]:
        user = json.loads(messages_json)[-1]["content"]
        assert '{"bloom_level": "Create"}' in user and response_prefix(user) == expected


def test_instructions_come_before_the_items_own_text():
    """Everything before the exemplars is the same for every item of a dataset and strategy."""
    for strategy in ("cot", "fgp"):
        users = [json.loads(m)[-1]["content"] for m in build(strategy)["messages_json"]]
        heads = {user.split("Example computer science questions")[0] for user in users}
        assert len(heads) == 1 and "JSON" in heads.pop()


def test_response_prefix_follows_an_edited_example_and_its_spacing():
    assert response_prefix('Reply in JSON:\n{ "new_question" :  "<q>"}') == '{ "new_question" :  "'
    # a non-string first value: the prefix stops before the value
    assert response_prefix('Answer:\n{"score": 3, "why": "<text>"}') == '{"score": '
    # the last example line wins; a quoted object mid-line or on a bullet is not the example
    text = ('Original question:\nParse {"a": "b"} in Python.\n- {"x": "y"} as an exemplar\n'
            'Form:\n  {"question": "<q>", "bloom_level": "<l>"}')
    assert response_prefix(text) == '{"question": "'
    assert response_prefix("Reply with the question only.") is None
    assert response_prefix("Reply as {} please") is None


def test_with_response_prefill_appends_an_assistant_message():
    messages = ({"role": "system", "content": "Be brief."},
                {"role": "user", "content": 'Write a question.\n{"question": "<q>"}'})
    prefilled, prefix = with_response_prefill(messages, prompt_id="cs-0001:fgp")
    assert prefix == '{"question": "'
    assert prefilled[:2] == messages
    assert prefilled[-1] == {"role": "assistant", "content": prefix}
    assert len(messages) == 2  # the input is left as it was


def test_with_response_prefill_refuses_prompts_it_cannot_prefill():
    with pytest.raises(ValueError, match=r"cs-0009:fgp.*no JSON example"):
        with_response_prefill([{"role": "user", "content": "Write a question."}],
                              prompt_id="cs-0009:fgp")
    with pytest.raises(ValueError, match=r"cs-0009:fgp.*already ends with an assistant"):
        with_response_prefill([{"role": "user", "content": '{"question": "<q>"}'},
                               {"role": "assistant", "content": "{"}], prompt_id="cs-0009:fgp")
    with pytest.raises(ValueError, match="no messages"):
        with_response_prefill([], prompt_id="x")


def test_a_strategy_defined_as_data_renders_its_own_template_and_exemplar_count(tmp_path):
    from bloomqg.inputs.strategies import PassSpec, StrategySpec

    template = tmp_path / "zeroshot.md"
    template.write_text("Write a {domain} question at level {target_bloom_level}.\n"
                        '{"question": "<q>"}\nOriginal question: {original_question}\n')
    spec = StrategySpec("zeroshot", "Zero-shot", (PassSpec("generate", str(template)),), exemplars=0)
    frame = build_prompts(make_dataset(), spec, k_exemplars=2, seed=3, domain="computer science")
    assert set(frame["strategy"]) == {"zeroshot"} and frame["prompt_id"].iloc[0] == "cs-0001:zeroshot"
    assert all(len(ids) == 0 for ids in frame["exemplar_ids"])  # its own 0 beats the study's 2
    assert frame["target_bloom_level"].iloc[0] == "Remember"  # it uses {target_bloom_level}: gives targets
    assert json.loads(frame["passes_json"].iloc[0]) == [{"name": "generate", "answer_fields": []}]
    assert "computer science" in messages_from_json(frame["messages_json"].iloc[0])[0]["content"]


def test_refine_renders_its_second_pass_with_the_draft_left_to_fill():
    from bloomqg.inputs.prompts import fill_later_pass, prompt_passes

    frame = build("refine", template_path=None)
    first, second = prompt_passes(frame.iloc[0].to_dict())
    assert (first["name"], second["name"]) == ("generate", "revise") and "messages" not in first
    user = second["messages"][-1]["content"]
    assert "{previous_question}" in user and "Target Bloom level: Remember" in user
    filled = fill_later_pass(second["messages"], previous_question="What is {x} a stack?", previous_answer="{}")
    assert "Draft question: What is {x} a stack?" in filled[-1]["content"]
    assert frame["target_bloom_level"].iloc[0] == "Remember"
    # the hash covers the second pass's template: editing it rebuilds the prompts
    assert frame["prompt_hash"].iloc[0] != build("fgp")["prompt_hash"].iloc[0]


def test_limited_items_draws_every_level_and_unit_the_limit_allows_and_the_same_for_each_strategy():
    from bloomqg.inputs.prompts import limited_items

    # a file ordered by unit: the first 8 rows are one unit and one level
    rows = [{"item_id": f"cs-{i:04d}", "dataset": "cs", "bloom_level": level, "knowledge_units": [unit]}
            for i, (unit, level) in enumerate((u, lv) for u in ("Stack", "Queue", "Tree", "Hash")
                                              for lv in ("Remember", "Apply", "Create") for _ in range(4))]
    dataset = pd.DataFrame(rows)
    first = limited_items(dataset, 8, by="first")
    assert first == [f"cs-{i:04d}" for i in range(8)]
    drawn = limited_items(dataset, 8, seed=3)
    picked = dataset[dataset["item_id"].isin(drawn)]
    assert len(drawn) == 8 and drawn == sorted(drawn)
    assert set(picked["bloom_level"]) == {"Remember", "Apply", "Create"}
    assert {units[0] for units in picked["knowledge_units"]} == {"Stack", "Queue", "Tree", "Hash"}
    assert limited_items(dataset, 8, seed=3) == drawn  # seeded: every strategy gets these items
    assert limited_items(dataset, 8, seed=4) != drawn
    many = dataset[dataset["item_id"].isin(limited_items(dataset, 36, seed=3))]
    assert many.groupby("bloom_level").size().tolist() == [12, 12, 12]  # in proportion
    assert limited_items(dataset, 100) == dataset["item_id"].tolist()
    with pytest.raises(ValueError, match="limit_items_by"):
        limited_items(dataset, 3, by="last")
