"""Import of published runs: manifest checks, the join's rules on tiny hand-made files, and the
GLM-4-9B reproduction of every figure ../shared/data/README.md says the release reproduces."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bloomqg.metrics.cell import score_cell
from bloomqg.metrics.rows import JUDGED_UNCATEGORIZED
from bloomqg.inputs.parsing import placeholder_reason
from bloomqg.store.parquet_io import to_table
from bloomqg.release.runs import (
    JUDGED_AGAIN,
    NO_QUESTION,
    NO_ROW,
    NOT_JUDGED,
    PLACEHOLDER_LINE,
    UNJOINED_REASONS,
    ReleaseError,
    ReleaseRun,
    import_run,
    load_manifest,
    missing_runs,
    published_vote_lines,
    split_knowledge_units,
    unjoined_lines,
    verify_run_files,
)
from bloomqg.store.provenance import sha256_file
from bloomqg.release.records import CriterionVote, GenerationRecord, VoteRecord, frame_of
from bloomqg.release.paper import (
    PaperFiguresError,
    compare_with_paper,
    load_paper_figures,
    paper_figures,
    paper_model_name,
    reproduced_counts,
)
from bloomqg.release.tables import RELEASE_TABLE_FILES, release_tables
from bloomqg.store.frames import CRITERIA, GENERATIONS, METRICS, PUBLISHED_VOTE_LINES, UNJOINED_LINES, VOTES
from tests.support.release_slice import judged

MANIFEST = Path(__file__).resolve().parents[1] / "release_glm.yaml"


# --- tiny hand-made release files ---------------------------------------------------------


CS_COT_ROWS = [
    # Topic, Category, Questions, COT_Topic, COT_Bloom, New Question, New Category
    ("Stacks", "Apply", "What is a stack?", "Stacks", "Remember", "Design a stack.", "Create"),
    ("Queues", "Uncategorized", "Queues?", "Queues, Stacks", "Compare and Contrast", "Compare queues.", "Uncategorized"),
    ("Stacks", "Remember", "Define push.", "Stacks", "Remember", "Design a stack.", "Create"),
    ("Graph", "Analyze", "Graphs?", None, None, None, None),
    ("Graph", "Create", "Build a graph.", "Graph", "Create", "Never judged.", "Apply"),
]


def write_cs_cot(folder: Path, rows=CS_COT_ROWS, drop: tuple[str, ...] = ()) -> tuple[Path, Path]:
    columns = ["Topic", "Category", "Questions", "COT_Topic", "COT_Bloom", "New Question", "New Category"]
    sheet = pd.DataFrame(rows, columns=columns).drop(columns=list(drop))
    sheet["Score"] = 10
    xlsx = folder / "gen.xlsx"
    sheet.to_excel(xlsx, index=False)
    lines = [
        judged("Design a stack.", unique=(1, 1, 0), topics=("Stacks", "Stacks", "Lists")),
        judged("Compare queues.", topics=("Queues", "Stacks", "Lists")),
        judged("Design a stack.", unique=(0, 0, 1)),  # the same text judged again, other votes
    ]
    jsonl = folder / "votes.jsonl"
    jsonl.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return xlsx, jsonl


def test_import_joins_by_line_and_keeps_every_original(tmp_path, caplog):
    xlsx, jsonl = write_cs_cot(tmp_path)
    with caplog.at_level(logging.INFO, logger="bloomqg.release"):
        generations, votes = import_run(ReleaseRun("m", "cs", "cot", xlsx, jsonl))
    to_table(generations, GENERATIONS)
    to_table(votes, VOTES)
    assert votes["item_id"].tolist() == [f"cs-{i:04d}" for i in range(1, 6)]
    assert votes["prompt_id"].tolist()[0] == "cs-0001:cot"
    # Both originals wrote "Design a stack."; each keeps its own line (1,1,0 and 0,0,1).
    assert votes.loc[[0, 2], "unique"].tolist() == [True, False]
    assert votes.loc[0, "unique_votes"] == ["1", "1", "0"] and votes.loc[2, "unique_votes"] == ["0", "0", "1"]
    assert votes.loc[0, "unique_agreement"] == pytest.approx(2 / 3)
    assert "other votes" in caplog.text
    # Uncategorized: original -> null level; judged -> null level with the judged reason.
    assert pd.isna(votes.loc[1, "original_bloom_level"])
    assert pd.isna(votes.loc[1, "bloom_level"])
    assert votes.loc[1, "bloom_level_null_reason"] == JUDGED_UNCATEGORIZED
    # No new question: failed parse, null votes saying why.
    assert generations.loc[3, "parse_status"] == "failed"
    assert generations.loc[3, "parse_error"] == NO_QUESTION
    assert votes.loc[3, ["unique", "useful"]].isna().all() and votes.loc[3, "n_judges"] == 0
    assert votes.loc[3, "unique_null_reason"] == NO_QUESTION
    # A question never judged keeps its judged level but has no usefulness votes.
    assert votes.loc[4, "parse_status"] == "ok" and pd.isna(votes.loc[4, "useful"])
    assert votes.loc[4, "readable_null_reason"] == NOT_JUDGED and votes.loc[4, "bloom_level"] == "Apply"
    # Identification: units split on commas; an unrecognised level is null, never guessed.
    assert votes.loc[1, "identified_knowledge_units"] == ["Queues", "Stacks"]
    assert pd.isna(votes.loc[1, "identified_bloom_level"])
    assert votes.loc[3, "identified_knowledge_units"] is None
    # Knowledge-unit votes: the released majority, ballots as JSON lists.
    assert votes.loc[1, "knowledge_units"] == ["Queues"]
    assert votes.loc[1, "knowledge_units_votes"] == ['["Queues"]', '["Stacks"]', '["Lists"]']
    assert votes.loc[1, "knowledge_units_agreement"] == pytest.approx(1 / 3)
    assert (generations["finish_reason"] == "imported").all() and not votes["alpha_gated"].any()


def _triples(votes: pd.DataFrame) -> list[tuple[str, ...]]:
    """Each judged row's (unique, readable, answerable) vote lists, as one hashable tuple."""
    judged = votes[votes["n_judges"] > 0]
    return sorted(zip(*(map(tuple, judged[f"{criterion}_votes"]) for criterion in ("unique", "readable", "answerable"))))


def _line_triples(run: ReleaseRun) -> list[tuple[str, ...]]:
    """The same for every line of the run's votes file as published, less the lines that judge
    a template placeholder (no question: those rows fail to parse)."""
    lines = published_vote_lines(run)
    lines = lines[[placeholder_reason(text) is None for text in lines["question"]]]
    return sorted(zip(*(map(tuple, lines[f"{criterion}_votes"]) for criterion in ("unique", "readable", "answerable"))))


def test_each_original_keeps_the_votes_of_its_own_line_when_texts_repeat(tmp_path):
    # A model that wrote one text for several originals: the release judges it once per
    # original, and the judges disagree from line to line. Joining on the text gave all four
    # the first line's votes.
    repeated = "Placeholder question."
    texts = ["Q0.", repeated, "Q2.", repeated, repeated, "Q5.", repeated, "Never judged.", "Q8."]
    rows = [("Stacks", "Apply", f"Original {i}?", "Stacks", "Apply", text, "Apply") for i, text in enumerate(texts)]
    own = {1: (1, 0, 0), 3: (1, 1, 0), 4: (0, 0, 0), 6: (0, 1, 1)}
    lines = [judged(text, unique=own.get(i, (1, 1, 1)), readable=own.get(i, (1, 1, 1))[::-1])
             for i, text in enumerate(texts) if text != "Never judged."]
    lines.append(judged("No original wrote this.", unique=(0, 1, 0)))
    xlsx, jsonl = write_cs_cot(tmp_path, rows=rows)
    jsonl.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    run = ReleaseRun("m", "cs", "cot", xlsx, jsonl)
    _, votes = import_run(run)
    for row, unique in own.items():
        assert votes.loc[row, "unique_votes"] == [str(v) for v in unique], row
        assert votes.loc[row, "readable_votes"] == [str(v) for v in unique[::-1]], row
        assert votes.loc[row, "unique"] == (sum(unique) >= 2), row
    assert votes.loc[7, "unique_null_reason"] == NOT_JUDGED and votes.loc[8, "unique_votes"] == ["1", "1", "1"]
    # Every line but the orphan is one original's, once: the imported votes are those lines'.
    lines_frame = published_vote_lines(run, votes)
    assert lines_frame["joined"].tolist() == [
        [f"cs-{i + 1:04d}:cot"] for i, text in enumerate(texts) if text != "Never judged."] + [[]]
    taken = lines_frame[lines_frame["joined"].map(len) > 0]
    assert _triples(votes) == sorted(zip(*(map(tuple, taken[f"{c}_votes"]) for c in ("unique", "readable", "answerable"))))


def test_a_placeholder_is_a_parse_failure_and_its_lines_count_in_table4_only(tmp_path):
    texts = ["Q0.", "<new_question>", "Q2.", "<new_question>", "Q4."]
    rows = [("Stacks", "Apply", f"Original {i}?", "Stacks", "Apply", text, "Apply") for i, text in enumerate(texts)]
    lines = [judged(text, unique=(1, 0, 0) if i == 1 else (0, 0, 0) if i == 3 else (1, 1, 1)) for i, text in enumerate(texts)]
    xlsx, jsonl = write_cs_cot(tmp_path, rows=rows)
    jsonl.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    run = ReleaseRun("m", "cs", "cot", xlsx, jsonl)
    generations, votes = import_run(run)
    assert generations["parse_status"].tolist() == ["ok", "failed", "ok", "failed", "ok"]
    assert generations.loc[1, "raw_text"] == "<new_question>" and pd.isna(generations.loc[1, "new_question"])
    assert "template's placeholder '<new_question>'" in generations.loc[1, "parse_error"]
    assert votes.loc[[1, 3], ["unique", "useful", "bloom_level"]].isna().all().all()
    assert votes.loc[3, "unique_null_reason"] == generations.loc[3, "parse_error"] == votes.loc[3, "bloom_level_null_reason"]
    published = published_vote_lines(run, votes)
    assert published["joined"].tolist() == [["cs-0001:cot"], [], ["cs-0003:cot"], [], ["cs-0005:cot"]]
    by_lines = score_cell(votes, None, n_resamples=20, published_lines=published).set_index("metric")
    # Table 4 is the release's, over its five lines; usability is useful / generated: the three
    # questions, all useful, and the two placeholder outputs, generated and not useful.
    assert by_lines.loc["unique", ["value", "n"]].tolist() == [60.0, 5]
    assert by_lines.loc["usability", ["value", "n"]].tolist() == [60.0, 5]


def _run_of(tmp_path: Path, texts: list[str | None], lines: list[dict]) -> ReleaseRun:
    """A CS CoT run in the release's format whose rows wrote ``texts``, judged on ``lines``."""
    rows = [("Stacks", "Apply", f"Original {i}?", "Stacks", "Apply", text, "Apply") for i, text in enumerate(texts)]
    xlsx, jsonl = write_cs_cot(tmp_path, rows=rows)
    jsonl.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return ReleaseRun("m", "cs", "cot", xlsx, jsonl)


def test_a_question_in_the_slots_brackets_is_kept_without_them_and_keeps_its_line(tmp_path):
    # Spark3.5-Max's CS FGP run wrote five questions as "<...?>", and its votes file judged them
    # so: each is a question, joined to its own line (Table 6 of that run needs their votes).
    bracketed = '<How can doubly linked lists enhance the "undo" and "redo" operations of a text editor?>'
    run = _run_of(tmp_path, ["Q0.", bracketed, "<新问题>"],
                  [judged("Q0."), judged(bracketed, unique=(0, 1, 1)), judged("<新问题>", unique=(0, 0, 1))])
    generations, votes = import_run(run)
    assert generations["parse_status"].tolist() == ["ok", "ok", "failed"]
    assert generations.loc[1, "new_question"] == bracketed[1:-1] and generations.loc[1, "raw_text"] == bracketed
    assert votes.loc[1, "unique_votes"] == ["0", "1", "1"] and votes.loc[1, "useful"] is True
    assert votes["answered"].tolist() == [True, True, True]
    lines = published_vote_lines(run, votes)
    assert lines["joined"].tolist() == [["cs-0001:cot"], ["cs-0002:cot"], []]
    assert unjoined_lines(generations, lines)["reason"].tolist() == [PLACEHOLDER_LINE]


def test_the_import_report_gives_every_unjoined_line_its_reason(tmp_path):
    texts = ["Q0.", "<new_question>", "Twice.", "<new_question>", "Twice.", None, "Q6."]
    lines = [judged("Q0."), judged("<new_question>", unique=(1, 0, 0)), judged("Twice."),
             judged("<new_question>"), judged("Twice."), judged("Twice.", unique=(0, 0, 0)),
             judged("Q6."), judged("<new_question>"), judged("No original wrote this.")]
    run = _run_of(tmp_path, texts, lines)
    generations, votes = import_run(run)
    report = unjoined_lines(generations, published_vote_lines(run, votes))
    to_table(report, UNJOINED_LINES)
    assert set(report["reason"]) == set(UNJOINED_REASONS)
    assert report[["line", "reason"]].values.tolist() == [
        [2, PLACEHOLDER_LINE], [4, PLACEHOLDER_LINE], [6, JUDGED_AGAIN], [8, PLACEHOLDER_LINE], [9, NO_ROW]]
    # The k-th placeholder line judges the k-th row that wrote it; a third has no row left.
    assert report["rows"].tolist() == [["cs-0002:cot"], ["cs-0004:cot"], ["cs-0003:cot", "cs-0005:cot"], [], []]
    assert "row cs-0002:cot wrote it and is a parse failure" in report.loc[0, "detail"]
    assert "no row that wrote it is left" in report.loc[3, "detail"]
    assert (report[["dataset", "strategy", "model"]].values == ["cs", "cot", "m"]).all()
    # Every line is accounted for: joined to its own original, or listed here.
    joined = published_vote_lines(run, votes)["joined"].map(len)
    assert sorted(report["line"].tolist() + [i + 1 for i, n in enumerate(joined) if n]) == list(range(1, len(lines) + 1))
    with pytest.raises(ValueError, match="lines without their join"):
        unjoined_lines(generations, published_vote_lines(run))
    with pytest.raises(ValueError, match="of one run"):
        unjoined_lines(generations.assign(model="other"), published_vote_lines(run, votes))
    # paper_comparison counts them per reason and run.
    metrics = score_cell(votes, None, n_resamples=5, published_lines=published_vote_lines(run, votes))
    release_tables(metrics, tmp_path / "tables", unjoined=report)
    note = (tmp_path / "tables" / "paper_comparison.md").read_text(encoding="utf-8")
    assert ("Vote lines that give their votes to no generated question: 5, by reason: judged_again 1 (m cs/cot 1); "
            "no_row 1 (m cs/cot 1); placeholder 3 (m cs/cot 3).") in note


def test_a_line_judged_out_of_place_still_goes_to_its_own_original(tmp_path):
    # The release's lines follow the rows' order; one judged late (moved to the end) still
    # pairs with the row that wrote it, and a repeated text's lines stay one per original.
    texts = ["A.", "B.", "A.", "C.", "D."]
    rows = [("Stacks", "Apply", f"Original {i}?", "Stacks", "Apply", text, "Apply") for i, text in enumerate(texts)]
    lines = [judged("A.", unique=(1, 0, 0)), judged("A.", unique=(0, 0, 0)), judged("C.", unique=(0, 1, 1)),
             judged("D.", unique=(1, 0, 1)), judged("B.", unique=(1, 1, 0))]
    xlsx, jsonl = write_cs_cot(tmp_path, rows=rows)
    jsonl.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    run = ReleaseRun("m", "cs", "cot", xlsx, jsonl)
    _, votes = import_run(run)
    assert votes["unique_votes"].tolist() == [["1", "0", "0"], ["1", "1", "0"], ["0", "0", "0"], ["0", "1", "1"], ["1", "0", "1"]]
    assert _triples(votes) == _line_triples(run)
    assert published_vote_lines(run, votes)["joined"].tolist() == [
        ["cs-0001:cot"], ["cs-0003:cot"], ["cs-0004:cot"], ["cs-0005:cot"], ["cs-0002:cot"]]


def test_imported_votes_score_with_uncategorized_matching(tmp_path):
    xlsx, jsonl = write_cs_cot(tmp_path)
    _, votes = import_run(ReleaseRun("m", "cs", "cot", xlsx, jsonl))
    result = score_cell(votes, None, n_resamples=50).set_index("metric")
    # Useful: rows 1 and 2 (uncategorized pair: a match); row 3's own line is not unique -> 1/2.
    assert result.loc["catcons", ["value", "n"]].tolist() == [50.0, 2]
    assert result.loc["knowledge_id_acc", ["value", "n"]].tolist() == [60.0, 5]
    assert result.loc["unique", "n"] == 3


def test_table4_counts_every_published_line_the_other_metrics_keep_the_join(tmp_path):
    # "Design a stack." is judged on lines 1 (unique) and 3 (not unique); two originals wrote it.
    xlsx, jsonl = write_cs_cot(tmp_path)
    run = ReleaseRun("m", "cs", "cot", xlsx, jsonl)
    _, votes = import_run(run)
    lines = published_vote_lines(run, votes)
    to_table(lines, PUBLISHED_VOTE_LINES)
    assert lines["line"].tolist() == [1, 2, 3] and lines["unique"].tolist() == [True, True, False]
    # Each line's judges and agreement, and the original whose own line it is.
    assert lines["unique_votes"].tolist() == [["1", "1", "0"], ["1", "1", "1"], ["0", "0", "1"]]
    assert lines["unique_agreement"].tolist() == pytest.approx([2 / 3, 1, 2 / 3])
    assert lines.loc[1, "knowledge_units"] == ["Queues"] and lines.loc[1, "knowledge_units_agreement"] == pytest.approx(1 / 3)
    assert lines["joined"].tolist() == [["cs-0001:cot"], ["cs-0002:cot"], ["cs-0003:cot"]]
    assert published_vote_lines(run)["joined"].isna().all(), "without the votes, the join is unknown"
    by_join = score_cell(votes, None, n_resamples=50).set_index("metric")
    by_lines = score_cell(votes, None, n_resamples=50, published_lines=lines).set_index("metric")
    # The join: three judged originals, each with its own line -> the lines' 2 of 3 here.
    assert by_join.loc["unique", ["value", "n"]].tolist() == [pytest.approx(200 / 3), 3]
    # The paper's rule: 2 of the 3 lines as published.
    assert by_lines.loc["unique", ["value", "n"]].tolist() == [pytest.approx(200 / 3), 3]
    assert by_lines.loc["unique", "ci_low"] <= by_lines.loc["unique", "value"] <= by_lines.loc["unique", "ci_high"]
    assert by_lines.loc["readable", "value"] == 100.0
    # Everything past Table 4 is the join's.
    others = [name for name in by_join.index if name not in ("unique", "readable", "answerable")]
    pd.testing.assert_frame_equal(by_join.loc[others], by_lines.loc[others])
    with pytest.raises(ValueError, match="published_lines are of cell"):
        score_cell(votes, None, n_resamples=50, published_lines=lines.assign(model="other"))


def test_import_reports_a_missing_column_and_a_bad_vote_line(tmp_path):
    xlsx, jsonl = write_cs_cot(tmp_path, drop=("COT_Bloom",))
    with pytest.raises(ReleaseError, match=r"gen\.xlsx: missing columns \['COT_Bloom'\]"):
        import_run(ReleaseRun("m", "cs", "cot", xlsx, jsonl))
    import_run(ReleaseRun("m", "cs", "fgp", xlsx, jsonl))  # FGP needs no COT_* columns
    xlsx, jsonl = write_cs_cot(tmp_path)
    with open(jsonl, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({**judged("x"), "readable_votes": [1, 2, 1]}) + "\n")
    with pytest.raises(ReleaseError, match=r"votes\.jsonl: line 4: 'readable_votes'"):
        import_run(ReleaseRun("m", "cs", "cot", xlsx, jsonl))
    jsonl.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(ReleaseError, match="line 1: not valid JSON"):
        import_run(ReleaseRun("m", "cs", "cot", xlsx, jsonl))


def test_import_refuses_an_unknown_original_level(tmp_path):
    rows = [("Stacks", "Aply", "Q?", "Stacks", "Apply", "N?", "Apply")]
    xlsx, jsonl = write_cs_cot(tmp_path, rows=rows)
    with pytest.raises(ReleaseError, match=r"row 2: column 'Category'.*'Aply'"):
        import_run(ReleaseRun("m", "cs", "cot", xlsx, jsonl))


def test_split_knowledge_units():
    assert split_knowledge_units("圆柱--体积的计算\xa0") == ["圆柱--体积的计算"]
    assert split_knowledge_units("正数、负数--表示相对标准量") == ["正数、负数--表示相对标准量"]
    assert split_knowledge_units("A; B ;A;") == ["A", "B"]
    assert split_knowledge_units(None) == [] and split_knowledge_units(float("nan")) == []


def test_record_types_have_the_schemas_columns_in_order():
    generation = GenerationRecord(
        "cs-0001:cot", "cs-0001", "cs", "cot", "m", "Q?", "Apply", ["Stacks"], "N?", "N?", None, None,
        "ok", None, "imported",
    )
    assert [field.name for field in dataclasses.fields(GenerationRecord)] == GENERATIONS.names
    criteria = {criterion: CriterionVote.missing("why") for criterion in CRITERIA}
    votes = VoteRecord(generation, 0, criteria)
    assert list(votes.as_row()) == VOTES.names
    assert list(frame_of([votes], VOTES).columns) == VOTES.names
    with pytest.raises(ValueError, match=r"criteria .* in order"):
        VoteRecord(generation, 0, dict(reversed(list(criteria.items()))))


def test_frame_of_names_the_columns_a_record_type_lacks():
    generation = GenerationRecord("p", "i", "cs", "cot", "m", "Q?", None, ["U"], None, None, None, None,
                                  "failed", None, "imported")
    with pytest.raises(ValueError, match=r"GenerationRecord rows do not match the schema: missing \['answered', 'n_judges'"):
        frame_of([generation], VOTES)


# --- manifests ----------------------------------------------------------------------------


def _manifest(tmp_path: Path, document: object) -> Path:
    (tmp_path / "data").mkdir(exist_ok=True)
    for name in ("a.xlsx", "a.jsonl"):
        (tmp_path / "data" / name).write_bytes(b"")
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


RUN = {"model": "m", "dataset": "cs", "strategy": "cot", "generations": "a.xlsx", "votes": "a.jsonl"}


def test_manifest_resolves_paths_against_its_folder(tmp_path):
    runs = load_manifest(_manifest(tmp_path, {"release_root": "data", "runs": [RUN]}))
    assert runs == [ReleaseRun("m", "cs", "cot", tmp_path / "data" / "a.xlsx", tmp_path / "data" / "a.jsonl",
                               manifest=tmp_path / "manifest.yaml")]
    no_root = load_manifest(_manifest(tmp_path, {"runs": [{**RUN, "generations": "data/a.xlsx", "votes": "data/a.jsonl"}]}))
    assert no_root[0].generations == tmp_path / "data" / "a.xlsx"


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"release_root": "data", "runs": [RUN], "extra": 1}, r"unknown keys \['extra'\]"),
        ({"release_root": "data", "runs": [{**RUN, "judge": "x"}]}, r"runs\[0\]: unknown keys \['judge'\]"),
        ({"release_root": "data", "runs": [{**RUN, "dataset": "bio"}]}, r"runs\[0\]: dataset 'bio'"),
        ({"release_root": "data", "runs": [{**RUN, "strategy": "zero"}]}, r"runs\[0\]: strategy 'zero'"),
        ({"release_root": "data", "runs": [{k: v for k, v in RUN.items() if k != "model"}]}, r"runs\[0\]: key 'model'"),
        ({"release_root": "data", "runs": [RUN, {**RUN, "votes": "b.jsonl"}]}, r"runs\[1\]: run .* repeats runs\[0\]"),
        ({"release_root": "data", "runs": [{**RUN, "votes": "missing.jsonl"}]}, r"runs\[0\]: key 'votes': file .*missing\.jsonl not found"),
        ({"release_root": "data", "runs": [{**RUN, "votes": "a.xlsx"}]}, r"key 'votes' must name a \.jsonl file"),
        ({"release_root": "nowhere", "runs": [RUN]}, "release_root .*nowhere is not a directory"),
        ({"release_root": "data", "runs": []}, "'runs' must be a non-empty list"),
        ({"release_root": "data", "runs": ["cs"]}, r"runs\[0\]: expected a mapping"),
        (["runs"], "expected a mapping"),
    ],
)
def test_malformed_manifests_name_what_is_wrong(tmp_path, document, message):
    path = _manifest(tmp_path, document)
    with pytest.raises(ReleaseError, match=message) as error:
        load_manifest(path)
    assert str(path) in str(error.value)


def test_manifest_that_is_not_yaml_or_missing(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("runs: [unclosed", encoding="utf-8")
    with pytest.raises(ReleaseError, match="not valid YAML"):
        load_manifest(path)
    with pytest.raises(ReleaseError, match="manifest not found"):
        load_manifest(tmp_path / "absent.yaml")


# --- paper tables -------------------------------------------------------------------------


def test_paper_tables_hold_all_six_models():
    PAPER_TABLES, PAPER_MODELS = paper_figures().tables, paper_figures().models
    sizes = {name: len(figures) for name, figures in PAPER_TABLES.items()}
    assert sizes == {"table4": 54, "table5": 48, "table6": 36, "table7": 36, "table8": 36}
    glm = {(f.dataset, f.strategy, f.metric): f.value for f in PAPER_TABLES["table6"] if f.model == "GLM-4-9B"}
    assert glm[("cs", "fgp", "cogleap")] == 58.96
    spark = {(f.dataset, f.metric): f.value for f in PAPER_TABLES["table5"] if f.model == "Spark3.5-Max" and f.dataset == "math"}
    assert spark == {("math", "usability"): 97.48, ("math", "knowcov"): 82.15}
    assert {paper_model_name(name) for name in ("glm-4-9b-chat", "Qwen2.5-7B-Instruct", "baichaun",
            "llama3-8b-chinese", "internlm3", "spark-max")} == set(PAPER_MODELS)
    assert paper_model_name("smollm2-135m") is None


# --- the GLM-4-9B reproduction ------------------------------------------------------------


@pytest.fixture(scope="module")
def glm_manifest(tmp_path_factory, release_dir) -> Path:
    """tests/release_glm.yaml with its release_root pointed at the shared data found."""
    if not (release_dir / "generated" / "glm").is_dir():
        pytest.skip(f"the GLM-4-9B run of the paper's release is not at {release_dir / 'generated' / 'glm'}")
    document = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    document["release_root"] = str(release_dir)
    path = tmp_path_factory.mktemp("manifest") / "release_glm.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def glm(glm_manifest, tmp_path_factory) -> dict:
    runs = load_manifest(glm_manifest)
    imported = {(run.dataset, run.strategy): import_run(run) for run in runs}
    lines = {(run.dataset, run.strategy): published_vote_lines(run, imported[(run.dataset, run.strategy)][1])
             for run in runs}
    all_metrics = pd.concat(
        [score_cell(votes, None, n_resamples=100, published_lines=lines[cell]) for cell, (_, votes) in imported.items()],
        ignore_index=True,
    )
    unjoined = pd.concat([unjoined_lines(imported[cell][0], lines[cell]) for cell in imported], ignore_index=True)
    out = tmp_path_factory.mktemp("tables")
    written = release_tables(all_metrics, out, unjoined=unjoined)
    tables = {path.stem: pd.read_csv(path) for path in written if path.suffix == ".csv"}
    return {"imported": imported, "metrics": all_metrics, "written": written, "tables": tables, "out": out,
            "lines": lines, "unjoined": unjoined}


def _cell(table: pd.DataFrame, dataset: str, strategy: str) -> pd.Series:
    rows = table[(table["dataset"] == dataset) & (table["strategy"] == strategy)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_committed_manifest_resolves_relative_to_its_folder(release_dir):
    default = (MANIFEST.parent / "../../shared/data/llm-eval-release").resolve()
    if default != release_dir.resolve():
        pytest.skip(f"shared data is at {release_dir}, not where tests/release_glm.yaml points ({default})")
    runs = load_manifest(MANIFEST)
    assert [(r.model, r.dataset, r.strategy) for r in runs] == [
        ("glm-4-9b", "cs", "cot"), ("glm-4-9b", "cs", "fgp"), ("glm-4-9b", "math", "fgp")]


def test_glm_frames_fit_the_schemas_with_one_row_per_original(glm):
    for (dataset, strategy), (generations, votes) in glm["imported"].items():
        to_table(generations, GENERATIONS)
        to_table(votes, VOTES)
        assert len(votes) == {"cs": 1416, "math": 438}[dataset]
        assert votes["item_id"].is_unique
    # The two computer-science runs hold the same originals in the same order.
    cot, fgp = glm["imported"][("cs", "cot")][1], glm["imported"][("cs", "fgp")][1]
    assert (cot["item_id"] == fgp["item_id"]).all()
    assert (cot["original_question"] == fgp["original_question"]).all()
    # Judged questions: every jsonl line, duplicates included, is one judged row or a repeat.
    assert cot["unique"].notna().sum() == 1409 and fgp["unique"].notna().sum() == 1414
    assert glm["imported"][("math", "fgp")][1]["unique"].notna().sum() == 437


def test_glm_every_vote_line_is_its_own_originals_and_no_output_is_a_placeholder(glm):
    # GLM-4-9B wrote no placeholder and no question in brackets; its 4 CS CoT rows without an
    # output are no answer, so usability does not count them (the paper does not either).
    assert glm["unjoined"].empty
    for (dataset, strategy), (generations, votes) in glm["imported"].items():
        outputs = generations["raw_text"].dropna()
        assert not outputs.map(lambda text: text.strip().startswith("<")).any()
        assert not generations["parse_error"].fillna("").str.contains("placeholder").any()
        assert glm["lines"][(dataset, strategy)]["joined"].map(len).eq(1).all()
        failed = votes["parse_status"] == "failed"
        assert failed.sum() == (4 if (dataset, strategy) == ("cs", "cot") else 0)
        assert not votes.loc[failed, "answered"].any()
    note = (glm["out"] / "paper_comparison.md").read_text(encoding="utf-8")
    assert "Every line of the imported votes files gives its votes to its own generated question" in note


# The figures ../shared/data/README.md says this release reproduces (percent, to 0.01).
TABLE4 = {
    ("cs", "cot"): (90.77, 100.00, 99.86),
    ("cs", "fgp"): (99.50, 100.00, 99.93),
    ("math", "fgp"): (97.71, 100.00, 100.00),
}


@pytest.mark.parametrize(("cell", "expected"), TABLE4.items())
def test_glm_table4_unique_readable_answerable(glm, cell, expected):
    row = _cell(glm["tables"]["table4"], *cell)
    assert tuple(row[["unique", "readable", "answerable"]]) == pytest.approx(expected, abs=0.005)


def test_glm_table5_usability_catcons_knowcov(glm):
    cot = _cell(glm["tables"]["table5"], "cs", "cot")
    fgp = _cell(glm["tables"]["table5"], "cs", "fgp")
    # CoT usability: the paper prints 90.40; the release's useful share is 90.70 (README).
    assert tuple(cot[["usability", "catcons", "knowcov"]]) == pytest.approx((90.70, 37.17, 85.45), abs=0.005)
    # FGP KnowCov: the paper prints 92.82, what giving each repeated text its first line's units
    # gives; each original with its own line gives 92.75 (configs/paper-figures.yaml says so).
    assert tuple(fgp[["usability", "catcons", "knowcov"]]) == pytest.approx((99.43, 51.42, 92.75), abs=0.005)
    math_row = _cell(glm["tables"]["table5"], "math", "fgp")
    assert math_row["usability"] == pytest.approx(97.71, abs=0.005)
    assert math.isnan(math_row["catcons"])  # no judged level for math: empty cell
    # KnowCov for math is not reproducible from the release (README): the paper says 85.13.
    assert 0 < math_row["knowcov"] < 100


def test_glm_table6_cognitive_shifts(glm):
    table = glm["tables"]["table6"]
    assert tuple(_cell(table, "cs", "cot")[["cogreg", "cogdrift", "cogleap"]]) == pytest.approx((18.54, 33.42, 48.05), abs=0.005)
    assert tuple(_cell(table, "cs", "fgp")[["cogreg", "cogdrift", "cogleap"]]) == pytest.approx((9.55, 31.49, 58.96), abs=0.005)


def test_glm_knowledge_identification_accuracy(glm):
    aux = glm["tables"]["aux_tasks"]
    assert _cell(aux, "cs", "cot")["knowledge_id_acc"] == pytest.approx(83.8, abs=0.05)
    assert math.isnan(_cell(aux, "cs", "fgp")["knowledge_id_acc"])


def test_glm_tables_compare_with_the_paper(glm):
    table6 = compare_with_paper(glm["tables"]["table6"], "table6")
    assert len(table6) == 6 and set(table6["paper_model"]) == {"GLM-4-9B"}
    assert table6["difference"].abs().max() < 0.005
    table5 = compare_with_paper(glm["tables"]["table5"], "table5").set_index(["dataset", "strategy", "metric"])
    assert table5.loc[("cs", "cot", "usability"), "difference"] == pytest.approx(0.30, abs=0.005)
    assert table5.loc[("cs", "fgp", "catcons"), "difference"] == pytest.approx(0.0, abs=0.005)


def test_glm_release_tables_write_csv_and_markdown(glm):
    assert sorted(path.name for path in glm["written"]) == sorted(RELEASE_TABLE_FILES)
    markdown = (glm["out"] / "table5.md").read_text(encoding="utf-8")
    assert "| glm-4-9b | cs | cot | 90.70 [89.1, 92.2] (n=1409 of 1416) | 37.17 [34.5, 39.9] (n=1278 of 1416) |" in markdown
    assert "| glm-4-9b | math | fgp | 97.71 [95.8, 98.9] (n=437 of 438) |  |" in markdown
    to_table(glm["metrics"], METRICS)


# --- the full manifest, pins and the paper's figures ------------------------------------------

FULL_MANIFEST = Path(__file__).resolve().parents[2] / "configs" / "llm-eval-release-manifest.yaml"


def test_full_manifest_takes_release_dir_and_pins_every_file(tmp_path, release_dir):
    with pytest.raises(ReleaseError, match=r"release_root '\{release_dir\}' needs release_dir"):
        load_manifest(FULL_MANIFEST, check_files=False)
    runs = load_manifest(FULL_MANIFEST, release_dir=release_dir, check_files=False)
    assert len(runs) == 18 and {run.model for run in runs} == {
        "glm-4-9b", "qwen25-7b", "baichuan2-7b", "llama3-8b-chinese", "internlm3-8b", "spark35-max"}
    assert all(run.pinned["commit"] == "7635ce2b72c262e3d9ad5b014875896598471afe" for run in runs)
    missing = {(run.model, run.dataset, run.strategy) for run, _ in missing_runs(runs)}
    glm = [run for run in runs if run.model == "glm-4-9b"]
    assert not missing & {(run.model, run.dataset, run.strategy) for run in glm}
    for run in glm:  # the shared files are the pinned ones
        assert verify_run_files(run) == {key: run.pinned[key] for key in ("generations", "votes")}
    if missing:  # the shared copy holds GLM-4-9B only: every other run is named at once
        with pytest.raises(ReleaseError) as error:
            load_manifest(FULL_MANIFEST, release_dir=release_dir)
        assert str(error.value).count("not found") == 2 * len(missing)


def _manifest_cells() -> list[tuple[str, str, str]]:
    runs = yaml.safe_load(FULL_MANIFEST.read_text(encoding="utf-8"))["runs"]
    return [(run["model"], run["dataset"], run["strategy"]) for run in runs]


@pytest.mark.parametrize("cell", _manifest_cells(), ids="/".join)
def test_every_published_line_keeps_its_votes_on_import(cell, release_dir):
    # The multiset of imported (unique, readable, answerable) vote triples is the release's, run
    # by run: no line's votes are copied onto another's row, none lost. Runs not downloaded skip.
    runs = load_manifest(FULL_MANIFEST, release_dir=release_dir, check_files=False)
    run = next(run for run in runs if (run.model, run.dataset, run.strategy) == cell)
    if missing_runs([run]):
        pytest.skip(f"{cell}: not in the shared copy of the release at {release_dir}")
    _, votes = import_run(run)
    assert _triples(votes) == _line_triples(run)


def test_a_file_that_is_not_the_pinned_one_is_refused(tmp_path):
    xlsx, jsonl = write_cs_cot(tmp_path)
    pinned = {"repository": "wmm228/LLM-Eval", "commit": "abc", "generations": sha256_file(xlsx), "votes": "0" * 64}
    run = ReleaseRun("m", "cs", "cot", xlsx, jsonl, pinned=pinned)
    with pytest.raises(ReleaseError, match=rf"{jsonl}: sha256 {sha256_file(jsonl)} differs from the 0{{64}} pinned for wmm228/LLM-Eval at abc"):
        verify_run_files(run)
    assert verify_run_files(ReleaseRun("m", "cs", "cot", xlsx, jsonl)) == {
        "generations": sha256_file(xlsx), "votes": sha256_file(jsonl)}


def test_manifest_pins_must_list_each_run_file(tmp_path):
    path = _manifest(tmp_path, {"release_root": "data", "pins": "pins.yaml", "runs": [RUN]})
    (tmp_path / "pins.yaml").write_text(yaml.safe_dump(
        {"commit": "abc", "archive_url": "x", "files": {"a.xlsx": {"source": "a.xlsx", "sha256": "1" * 64}}}))
    with pytest.raises(ReleaseError, match=r"runs\[0\]: key 'votes': 'a.jsonl' is not among the pinned files"):
        load_manifest(path)


def test_the_comparison_keeps_printed_slips_and_shows_what_they_read_as():
    figures = paper_figures()
    # Baichuan2-7B's CS CoT and FGP rows of Table 4 are printed swapped: a reproduction that
    # gives CoT the printed FGP figures matches what the table reads as, not as printed.
    table4 = pd.DataFrame([
        {"model": "baichuan2-7b", "dataset": "cs", "strategy": "cot", "unique": 88.89, "readable": 99.74, "answerable": 99.47},
        {"model": "baichuan2-7b", "dataset": "cs", "strategy": "fgp", "unique": 85.31, "readable": 99.15, "answerable": 96.68},
        {"model": "baichuan2-7b", "dataset": "math", "strategy": "fgp", "unique": 97.03, "readable": 100.0, "answerable": 98.63},
    ])
    compared = compare_with_paper(table4, "table4", figures=figures).set_index(["dataset", "strategy", "metric"])
    assert compared.loc[("cs", "cot", "unique"), ["paper", "paper_reads", "difference"]].tolist() == [85.31, 88.89, 0.0]
    assert "swapped" in compared.loc[("cs", "cot", "unique"), "note"]
    assert compared["difference"].abs().max() < 1e-9
    assert pd.isna(compared.loc[("math", "fgp", "unique"), "note"])
    # InternLM3-8B's CoT CogLeap: printed 53.63, the release (and its row's sum) 52.63.
    table6 = pd.DataFrame([{"model": "internlm3-8b", "dataset": "cs", "strategy": "cot",
                            "cogreg": 15.99, "cogdrift": 31.39, "cogleap": 52.63}])
    leap = compare_with_paper(table6, "table6", figures=figures).set_index("metric").loc["cogleap"]
    assert (leap["paper"], leap["paper_reads"], leap["difference"]) == (53.63, 52.63, 0.0)
    assert "101.01" in leap["note"]
    assert reproduced_counts(compare_with_paper(table6, "table6", figures=figures)) == {"table6": (3, 3)}


def test_a_malformed_figures_file_names_the_key(tmp_path):
    path = tmp_path / "figures.yaml"
    path.write_text(yaml.safe_dump({"tables": {"table4": {"cites": "T4", "columns": ["cs/cot/unique"], "rows": {"A": [1, 2]}}}}))
    with pytest.raises(PaperFiguresError, match=rf"{path}: tables.table4.rows.A: expected 1 numbers"):
        load_paper_figures(path)
    path.write_text(yaml.safe_dump({"tables": {"table4": {"cites": "T4", "columns": ["cs/cot/unique"], "rows": {"A": [1]}}},
                                    "slips": [{"table": "table4", "model": "A", "cell": "cs/cot/unique", "printed": 2, "reads": 1, "note": "n"}]}))
    with pytest.raises(PaperFiguresError, match=r"slips\[0\]: 'printed' 2 is not the table's 1.0"):
        load_paper_figures(path)


def test_glm_release_tables_carry_daggers_n_and_intervals_as_the_workflow_gates_them(glm_manifest, tmp_path):
    # The workflow's path: each run's votes through the gate (release_reliability), then its
    # metrics. Every yes/no criterion but cs Unique holds ≥ 90% "yes", where the gate reads AC1
    # only if the judges' agreement beyond chance shows (α's interval above 0): it does not in any
    # of them. Readable: no two judges ever call the same question unreadable. cs Answerable (α
    # 0.18 and 0.08, AC1 0.99): two judges share a "not answerable" on 2 and 1 of 1,409 questions,
    # and α's interval reaches 0. math Unique (AC1 0.83, α 0.03 [-0.03, …]): judges share "not
    # unique" on 10 of 437, no more than chance. So all three carry the dagger in every run where
    # they hold ≥ 90%; cs Unique (81–89% "yes", α near zero) is unreliable outright.
    from bloomqg.release.reliability import release_reliability

    frames = []
    for run in load_manifest(glm_manifest):
        _, votes = import_run(run)
        gated, reliability = release_reliability(votes, n_resamples=50)
        frames.append(score_cell(gated, reliability, n_resamples=50, published_lines=published_vote_lines(run)))
    written = release_tables(pd.concat(frames, ignore_index=True), tmp_path)
    for name in ("table4", "table5"):
        markdown = (tmp_path / f"{name}.md").read_text(encoding="utf-8")
        rows = [line for line in markdown.splitlines()
                if line.startswith("| glm-4-9b | cs | cot") and re.search(r"\d\.\d\d", line)]
        assert rows and all("†" in row for row in rows), (name, rows)
        assert all(re.search(r"\d\.\d\d \[\d+\.\d, \d+\.\d\] \(n=\d+", row) for row in rows), rows
        assert "failed the reliability gate" in markdown
    table4 = pd.read_csv(tmp_path / "table4.csv").set_index(["dataset", "strategy"])
    for criterion in ("unique", "readable", "answerable"):
        assert table4[f"{criterion}_alpha_gated"].astype(bool).all(), criterion
    assert (table4["unique_n"] > 0).all()
    assert {path.name for path in written} == set(RELEASE_TABLE_FILES)


def test_every_miss_of_the_comparison_says_why_or_that_it_is_unexplained(glm):
    # A cell the reproduction misses never stands without a note: a known slip or caveat of
    # configs/paper-figures.yaml, or the plain statement that no rule was found.
    from bloomqg.release.paper import REPRODUCED_WITHIN, UNEXPLAINED_NOTE

    comparison = pd.read_csv(glm["out"] / "paper_comparison.csv")
    missed = comparison[comparison["difference"].abs() > REPRODUCED_WITHIN + 1e-9]
    assert len(missed) and missed["note"].notna().all(), missed
    usability = missed[(missed["strategy"] == "cot") & (missed["metric"] == "usability")].iloc[0]
    assert "1,278 useful lines of 1,409" in usability["note"]
    invented = pd.DataFrame([{"model": "glm-4-9b", "dataset": "cs", "strategy": "cot",
                              "unique": 80.0, "readable": 100.0, "answerable": 99.86}])
    compared = compare_with_paper(invented, "table4").set_index("metric")
    assert compared.loc["unique", "note"] == UNEXPLAINED_NOTE and pd.isna(compared.loc["readable", "note"])
