"""Dataset loaders: the embedded format, the release's CS csv and math xlsx, errors, sample data."""

from __future__ import annotations

import json
import logging
import zipfile
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from bloomqg.inputs.bloom import BLOOM_LEVELS
from bloomqg.inputs.datasets import (
    PAPER_MATH_EXCLUDED_ROWS,
    DatasetError,
    clean_markup,
    dataset_knowledge_units,
    load_dataset,
)
from bloomqg.store.parquet_io import to_table
from bloomqg.store.frames import DATASET

VERBS_CSV = (
    "Remember,Understand,Apply,Analyze,Evaluate,Create\nlist,explain,use,compare,justify,design\n"
)


def _csv(tmp_path: Path, text: str, name: str = "q.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _check_schema(frame: pd.DataFrame) -> None:
    assert list(frame.columns) == DATASET.names
    to_table(frame, DATASET)  # raises on nulls in required columns or bad types


# ---- embedded ------------------------------------------------------------------------------


def test_embedded_csv_labels_units_and_numbering(tmp_path: Path) -> None:
    _csv(
        tmp_path,
        "question,knowledge_units,bloom_level,notes\n"
        '"Define a stack, briefly.",Stacks,remember,ignored\n'
        "\n"  # blank row: skipped, but still counted
        "Compare A and B.,Lists ; Nodes;Lists,,\n"
        "Say something.,Graph,Uncategorized,\n",
    )
    frame = load_dataset("toy", {"loader": "embedded", "path": "q.csv"}, base_dir=tmp_path)
    _check_schema(frame)
    assert frame["item_id"].tolist() == ["toy-0001", "toy-0003", "toy-0004"]
    assert frame["source_row"].tolist() == [1, 3, 4]
    assert frame["question"].tolist() == [
        "Define a stack, briefly.",
        "Compare A and B.",
        "Say something.",
    ]
    assert frame["bloom_level"].tolist() == ["Remember", None, None]
    assert frame["bloom_source"].tolist() == ["label", "label", "label"]
    assert frame["knowledge_units"].tolist() == [["Stacks"], ["Lists", "Nodes"], ["Graph"]]
    assert set(frame["dataset"]) == {"toy"}


def test_embedded_empty_labels_are_annotated_with_the_verb_list(tmp_path: Path) -> None:
    _csv(tmp_path, VERBS_CSV, "verbs.csv")
    _csv(
        tmp_path,
        "question,knowledge_units,bloom_level\n"
        "Compare A and B.,Lists,\n"
        "Explain A.,Lists,Create\n"
        "Nothing here.,Lists,\n",
    )
    spec = {"loader": "embedded", "path": "q.csv", "verb_list": "verbs.csv"}
    frame = load_dataset("toy", spec, base_dir=tmp_path)
    assert frame["bloom_level"].tolist() == ["Analyze", "Create", None]
    assert frame["bloom_source"].tolist() == ["verb_list", "label", "verb_list"]


def test_embedded_csv_without_label_column(tmp_path: Path) -> None:
    _csv(tmp_path, "knowledge_units,question\nStacks,Use a stack.\n")
    frame = load_dataset("t", {"loader": "embedded", "path": str(tmp_path / "q.csv")}, base_dir="/")
    assert frame["bloom_level"].tolist() == [None]
    assert frame["question"].tolist() == ["Use a stack."]


def test_embedded_jsonl(tmp_path: Path) -> None:
    lines = [
        {"question": "Justify X.", "knowledge_units": ["Hashing", " Graph "]},
        {},
        {"question": "List Y.", "knowledge_units": "Stacks;Queues", "bloom_level": "Remember"},
    ]
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(json.dumps(line) if line else "" for line in lines) + "\n")
    _csv(tmp_path, VERBS_CSV, "verbs.csv")
    spec = {"loader": "embedded", "path": "q.jsonl", "verb_list": "verbs.csv"}
    frame = load_dataset("j", spec, base_dir=tmp_path)
    _check_schema(frame)
    assert frame["source_row"].tolist() == [1, 3]
    assert frame["knowledge_units"].tolist() == [["Hashing", "Graph"], ["Stacks", "Queues"]]
    assert frame["bloom_level"].tolist() == ["Evaluate", "Remember"]
    assert frame["bloom_source"].tolist() == ["verb_list", "label"]


def test_jsonl_errors_name_line(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "A", "knowledge_units": "x"}\n{not json\n')
    with pytest.raises(DatasetError, match=r"q\.jsonl, row 2: invalid JSON"):
        load_dataset("j", {"loader": "embedded", "path": str(path)}, base_dir=tmp_path)
    path.write_text('{"question": "A", "knowledge_units": ["x", 3]}\n')
    with pytest.raises(DatasetError, match=r"row 1, column 'knowledge_units'.*3"):
        load_dataset("j", {"loader": "embedded", "path": str(path)}, base_dir=tmp_path)
    path.write_text('{"question": "A"}\n')
    with pytest.raises(DatasetError, match=r"missing required column 'knowledge_units'"):
        load_dataset("j", {"loader": "embedded", "path": str(path)}, base_dir=tmp_path)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (
            "question,bloom_level\nA,Apply\n",
            r"q\.csv: missing required column\(s\) 'knowledge_units'",
        ),
        ("knowledge_units\nStacks\n", r"q\.csv: missing required column\(s\) 'question'"),
        (
            "question,knowledge_units,bloom_level\nA,Stacks,Apply\nB,Stacks,Aply\n",
            r"q\.csv, row 2, column 'bloom_level': unknown Bloom level 'Aply'",
        ),
        (
            "question,knowledge_units\nA,Stacks\nB,\n",
            r"q\.csv, row 2, column 'knowledge_units': empty knowledge unit",
        ),
        (
            "question,knowledge_units\nA,Stacks;;Queues\n",
            r"q\.csv, row 1, column 'knowledge_units': empty knowledge unit in 'Stacks;;Queues'",
        ),
        (
            "question,knowledge_units\n  ,Stacks\n",
            r"q\.csv, row 1, column 'question': empty or non-text question",
        ),
    ],
)
def test_embedded_errors_name_file_row_column(tmp_path: Path, text: str, pattern: str) -> None:
    path = _csv(tmp_path, text)
    with pytest.raises(DatasetError, match=pattern) as info:
        load_dataset("toy", {"loader": "embedded", "path": "q.csv"}, base_dir=tmp_path)
    assert str(path) in str(info.value)


def test_missing_files_and_keys(tmp_path: Path) -> None:
    with pytest.raises(
        DatasetError, match=r"nowhere\.csv: data file of dataset 'toy' not found"
    ) as info:
        load_dataset("toy", {"loader": "embedded", "path": "sub/nowhere.csv"}, base_dir=tmp_path)
    assert str(tmp_path / "sub" / "nowhere.csv") in str(info.value)
    _csv(tmp_path, "question,knowledge_units\nA,B\n")
    with pytest.raises(DatasetError, match=r"missing\.csv: verb list of dataset 'toy' not found"):
        load_dataset(
            "toy",
            {"loader": "embedded", "path": "q.csv", "verb_list": "missing.csv"},
            base_dir=tmp_path,
        )
    with pytest.raises(DatasetError, match=r"missing required key 'path'"):
        load_dataset("toy", {"loader": "embedded"}, base_dir=tmp_path)
    with pytest.raises(DatasetError, match=r"missing required key 'loader'"):
        load_dataset("toy", {"path": "q.csv"}, base_dir=tmp_path)
    with pytest.raises(DatasetError, match=r"unknown loader 'excel'"):
        load_dataset("toy", {"loader": "excel", "path": "q.csv"}, base_dir=tmp_path)


def test_bad_verb_list_is_a_dataset_error(tmp_path: Path) -> None:
    _csv(tmp_path, "question,knowledge_units\nA,B\n")
    _csv(tmp_path, "Remember,Understand\nx,y\n", "verbs.csv")
    with pytest.raises(DatasetError, match=r"verbs\.csv: missing column\(s\) for Apply"):
        load_dataset(
            "t",
            {"loader": "embedded", "path": "q.csv", "verb_list": "verbs.csv"},
            base_dir=tmp_path,
        )


def test_fixed_level_and_conflicts(tmp_path: Path) -> None:
    _csv(tmp_path, "question,knowledge_units,bloom_level\nA,U,\nB,U,Apply\n")
    frame = load_dataset(
        "m",
        {"loader": "embedded", "path": "q.csv", "bloom_level": "application"},
        base_dir=tmp_path,
    )
    assert frame["bloom_level"].tolist() == ["Apply", "Apply"]
    assert frame["bloom_source"].tolist() == ["fixed", "fixed"]
    _csv(tmp_path, "question,knowledge_units,bloom_level\nA,U,\nB,U,Create\n")
    with pytest.raises(
        DatasetError, match=r"row 2, column 'bloom_level': label 'Create' contradicts"
    ):
        load_dataset(
            "m", {"loader": "embedded", "path": "q.csv", "bloom_level": "Apply"}, base_dir=tmp_path
        )
    with pytest.raises(DatasetError, match=r"key 'bloom_level'"):
        load_dataset(
            "m", {"loader": "embedded", "path": "q.csv", "bloom_level": "Hard"}, base_dir=tmp_path
        )


def test_exclude_rows(tmp_path: Path) -> None:
    _csv(tmp_path, "question,knowledge_units\nA,U\nB,U\nC,U\n")
    spec = {"loader": "embedded", "path": "q.csv", "exclude_rows": [2]}
    frame = load_dataset("x", spec, base_dir=tmp_path)
    assert frame["item_id"].tolist() == ["x-0001", "x-0003"]
    with pytest.raises(DatasetError, match=r"names row\(s\) \[9\]"):
        load_dataset("x", {**spec, "exclude_rows": [9]}, base_dir=tmp_path)
    with pytest.raises(DatasetError, match="list of row numbers"):
        load_dataset("x", {**spec, "exclude_rows": "2"}, base_dir=tmp_path)


def test_dataset_knowledge_units_sorted_unique() -> None:
    frame = pd.DataFrame({"knowledge_units": [["b", "a"], ["a"], ["c"]]})
    assert dataset_knowledge_units(frame) == ["a", "b", "c"]


# ---- release_cs ----------------------------------------------------------------------------


def test_release_cs_loader_on_a_tmp_file(tmp_path: Path) -> None:
    (tmp_path / "Blooms_Taxonomy.csv").write_text(VERBS_CSV, encoding="utf-8-sig")
    (tmp_path / "Data_Structure.csv").write_text(
        "Topic,Score,Questions\r\nStacks,10,Compare a stack with a list.\r\n"
        'Queues,9,\r\nGraph,8,"Hello, world?"\r\n',
        encoding="utf-8-sig",
    )
    frame = load_dataset(
        "cs", {"loader": "release_cs", "path": "Data_Structure.csv"}, base_dir=tmp_path
    )
    _check_schema(frame)
    assert frame["source_row"].tolist() == [1, 3]  # the empty question row is skipped, counted
    assert frame["bloom_level"].tolist() == ["Analyze", None]
    assert set(frame["bloom_source"]) == {"verb_list"}
    assert frame["knowledge_units"].tolist() == [["Stacks"], ["Graph"]]


def test_release_cs_errors(tmp_path: Path) -> None:
    (tmp_path / "Data_Structure.csv").write_text("Topic,Questions\nStacks,A\n")
    with pytest.raises(
        DatasetError, match=r"Blooms_Taxonomy\.csv: verb list of dataset 'cs' not found"
    ):
        load_dataset(
            "cs", {"loader": "release_cs", "path": "Data_Structure.csv"}, base_dir=tmp_path
        )
    (tmp_path / "Blooms_Taxonomy.csv").write_text(VERBS_CSV)
    (tmp_path / "Data_Structure.csv").write_text("Topic,Score,Question\nStacks,1,A\n")
    with pytest.raises(DatasetError, match=r"missing required column\(s\) 'Questions'"):
        load_dataset(
            "cs", {"loader": "release_cs", "path": "Data_Structure.csv"}, base_dir=tmp_path
        )
    (tmp_path / "Data_Structure.csv").write_text("Topic,Score,Questions\nStacks,1,A\n ,1,B\n")
    with pytest.raises(DatasetError, match=r"row 2, column 'Topic': empty knowledge unit"):
        load_dataset(
            "cs", {"loader": "release_cs", "path": "Data_Structure.csv"}, base_dir=tmp_path
        )


def test_release_cs_reproduces_table_1(release_dir: Path) -> None:
    spec = {
        "loader": "release_cs",
        "path": str(release_dir / "dataset/computer/Data_Structure.csv"),
    }
    frame = load_dataset("cs", spec, base_dir=".")
    _check_schema(frame)
    assert len(frame) == 1416
    assert frame["item_id"].iloc[-1] == "cs-1416"
    counts = Counter(frame["bloom_level"])
    expected = {
        "Remember": 231,
        "Understand": 103,
        "Apply": 362,
        "Analyze": 288,
        "Evaluate": 98,
        "Create": 322,
        None: 12,
    }
    for level, count in expected.items():
        assert abs(counts[level] - count) <= 3, (level, counts[level])
    assert len(dataset_knowledge_units(frame)) == 12


# ---- release_math --------------------------------------------------------------------------


def test_clean_markup_strips_tags_entities_and_images_but_keeps_latex() -> None:
    text, images = clean_markup(
        "[p]一瓶橙汁14元，买104瓶需要_______元[/p][br][img=sourceuuid=ab]https://x/y.png[/img]"
        '<p style="a">重[i]g[/i][color=#333]量[/color]</p>'
        "\\[f(x) = 0 &amp;lt; x\\]\u00a0\u3000 ok[font=&amp;quot]a[/font]"
    )
    assert images == 1
    assert text == "一瓶橙汁14元，买104瓶需要_______元\n重g量\n\\[f(x) = 0 < x\\] oka"
    assert clean_markup("\\[x \\in \\left[ {0,4} \\right]\\]") == (
        "\\[x \\in \\left[ {0,4} \\right]\\]",
        0,
    )


def _math_workbook(path: Path, rows: list[tuple[object, object]]) -> Path:
    pd.DataFrame(
        {
            "题目序号": [f"id{i}" for i in range(len(rows))],
            "正答率": 0.5,
            "知识点名称": [unit for unit, _ in rows],
            "题目内容": [question for _, question in rows],
            "年级": 4,
        }
    ).to_excel(path, index=False)
    return path


def test_release_math_loader_on_a_tmp_workbook(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _math_workbook(
        tmp_path / "m.xlsx",
        [
            ("总价问题--一步", "[p]一瓶橙汁14元，买104瓶需要_______元[/p]"),
            ("正数、负数--表示相对标准量\u00a0", "<p>温度&amp;lt;0</p>"),
            ("总价问题--一步", "[p]一瓶橙汁14元，买104瓶需要_______元[/p]"),
        ],
    )
    with caplog.at_level(logging.INFO, logger="bloomqg.inputs.datasets"):
        frame = load_dataset(
            "math", {"loader": "release_math", "path": "m.xlsx"}, base_dir=tmp_path
        )
    _check_schema(frame)
    assert frame["question"].tolist() == [
        "一瓶橙汁14元，买104瓶需要_______元",
        "温度<0",
        "一瓶橙汁14元，买104瓶需要_______元",
    ]
    # "、" and "--" belong to the unit's name: one unit per row, not split.
    assert frame["knowledge_units"].tolist() == [
        ["总价问题--一步"],
        ["正数、负数--表示相对标准量"],
        ["总价问题--一步"],
    ]
    assert set(frame["bloom_level"]) == {"Apply"} and set(frame["bloom_source"]) == {"fixed"}
    assert "(1, 3)" in caplog.text  # the repeated question is kept and logged


def test_release_math_errors(tmp_path: Path) -> None:
    _math_workbook(tmp_path / "m.xlsx", [("单元", "题"), (None, "[p]题二[/p]")])
    with pytest.raises(
        DatasetError, match=r"m\.xlsx, row 2, column '知识点名称': empty knowledge unit"
    ):
        load_dataset("math", {"loader": "release_math", "path": "m.xlsx"}, base_dir=tmp_path)
    _math_workbook(tmp_path / "m.xlsx", [("单元", "[p][/p]")])
    with pytest.raises(
        DatasetError, match=r"row 1, column '题目内容': question is empty once markup"
    ):
        load_dataset("math", {"loader": "release_math", "path": "m.xlsx"}, base_dir=tmp_path)
    pd.DataFrame({"知识点名称": ["a"]}).to_excel(tmp_path / "m.xlsx", index=False)
    with pytest.raises(DatasetError, match=r"m\.xlsx: missing required column\(s\) '题目内容'"):
        load_dataset("math", {"loader": "release_math", "path": "m.xlsx"}, base_dir=tmp_path)
    (tmp_path / "bad.xlsx").write_text("not a workbook")
    with pytest.raises(DatasetError, match=r"bad\.xlsx: cannot be read as an xlsx"):
        load_dataset("math", {"loader": "release_math", "path": "bad.xlsx"}, base_dir=tmp_path)


def test_release_math_on_the_release(release_dir: Path) -> None:
    path = release_dir / "dataset" / "k12-math" / "multi_knowledge_point_examples.xlsx"
    if not path.exists():
        pytest.skip(f"{path} is not in the release copy")
    frame = load_dataset("math", {"loader": "release_math", "path": str(path)}, base_dir=".")
    _check_schema(frame)
    assert len(frame) == 465
    assert len(dataset_knowledge_units(frame)) == 20
    assert all(len(units) == 1 for units in frame["knowledge_units"])
    joined = "\n".join(frame["question"])
    for markup in ("[p]", "[/p]", "[br]", "[img", "<p", "&amp;", "&lt;", "[align", "[i]", "\u00a0"):
        assert markup not in joined, markup
    assert "\\[f(x)\\]" in joined  # LaTeX kept
    subset = load_dataset(
        "math",
        {
            "loader": "release_math",
            "path": str(path),
            "exclude_rows": list(PAPER_MATH_EXCLUDED_ROWS),
        },
        base_dir=".",
    )
    assert len(subset) == 438  # the paper's item count
    assert len(dataset_knowledge_units(subset)) == 20


def test_paper_math_subset_matches_the_glm_run(release_dir: Path) -> None:
    """The 438 rows left after PAPER_MATH_EXCLUDED_ROWS are the ones the GLM run generated from."""
    import re

    path = release_dir / "dataset" / "k12-math" / "multi_knowledge_point_examples.xlsx"
    glm_path = release_dir / "generated" / "glm" / "glm_math_fine.xlsx"
    if not (path.exists() and glm_path.exists()):
        pytest.skip(f"{path} or {glm_path} is not in the release copy")
    spec = {
        "loader": "release_math",
        "path": str(path),
        "exclude_rows": list(PAPER_MATH_EXCLUDED_ROWS),
    }
    subset = load_dataset("math", spec, base_dir=".")
    glm = pd.read_excel(glm_path, usecols=["知识点名称", "题目内容"])

    def key(unit: object, question: object) -> tuple[str, str]:
        # The GLM file cleaned the text its own way (LaTeX dropped): compare Chinese characters.
        return str(unit).strip(), re.sub(r"[^\u4e00-\u9fff]", "", str(question))

    ours = Counter(
        key(u[0], q) for u, q in zip(subset["knowledge_units"], subset["question"], strict=True)
    )
    theirs = Counter(key(u, q) for u, q in zip(glm["知识点名称"], glm["题目内容"], strict=True))
    assert ours == theirs


# ---- the embedded sample data --------------------------------------------------------------

CS_UNITS = [
    "Binary Search Tree",
    "Doubly Linked List",
    "Graph",
    "Hashing",
    "Lists",
    "Nodes",
    "Pointers",
    "Python Review",
    "Queues",
    "Recursion",
    "Singly Linked List",
    "Stacks",
]
SOCIAL_UNITS = [
    "Group Processes & Organizational Behavior",
    "Attitudes, Persuasion & Social Influence",
    "Inequality, Class & Mobility",
    "Culture, Norms & Socialization",
    "Causal Inference & Research Design",
]
# The paper's Table 10 K-12 math units.
MATH_UNITS = {
    "Total cost problems – one-step",
    "Find volume given base perimeter and surface area",
    "Find length, width, height from volume",
    "Base area of a rectangular prism",
    "Cube coloring problems",
    "Applications of prime numbers",
    "Inverse proportion problems – tiling with square bricks",
    "Find height of cylinder and cone",
    "Solve fraction problems by tracking invariants",
    "Volume calculation of a cylinder",
    "Positive and negative numbers – expressing relative quantities",
    "Identifying properties of lines, rays, and segments",
    "Quadrants of a directly proportional function – find variable range",
    "Concepts related to cones",
    "Apply periodicity to compute function values",
    "Angles with terminal sides on the same line",
    "Use derivative of a tangent curve to find parameters",
    "Number of intersection points between a line and a hyperbola",
    "Exponent strategies via permutation problems",
    "Application of combination formulas – evaluation",
}


def _embedded(repo: Path, name: str) -> pd.DataFrame:
    frame = load_dataset(
        name, {"loader": "embedded", "path": f"data/{name}/questions.csv"}, base_dir=repo
    )
    _check_schema(frame)
    assert frame["question"].is_unique
    return frame


def _unit_counts(frame: pd.DataFrame) -> Counter[str]:
    return Counter(unit for units in frame["knowledge_units"] for unit in units)


def test_embedded_cs_sample_covers_units_and_levels(repo: Path) -> None:
    frame = _embedded(repo, "cs")
    assert 36 <= len(frame) <= 45
    assert dataset_knowledge_units(frame) == sorted(CS_UNITS)
    assert min(_unit_counts(frame).values()) >= 3
    levels = Counter(frame["bloom_level"])
    assert set(levels) == set(BLOOM_LEVELS) and min(levels.values()) >= 5
    assert set(frame["bloom_source"]) == {"label"}


def test_embedded_math_sample_is_apply_over_table_10_units(repo: Path) -> None:
    frame = _embedded(repo, "math")
    assert 12 <= len(frame) <= 16
    assert set(frame["bloom_level"]) == {"Apply"}
    units = set(dataset_knowledge_units(frame))
    assert units <= MATH_UNITS and len(units) >= 4
    assert any(len(u) >= 2 for u in frame["knowledge_units"])


def test_embedded_social_sample_covers_units_and_levels(repo: Path) -> None:
    frame = _embedded(repo, "social")
    assert 24 <= len(frame) <= 30
    assert dataset_knowledge_units(frame) == sorted(SOCIAL_UNITS)
    levels = Counter(frame["bloom_level"])
    assert set(levels) == set(BLOOM_LEVELS) and min(levels.values()) >= 4


def test_default_config_datasets_load(repo: Path) -> None:
    import yaml

    config = yaml.safe_load((repo / "config.yaml").read_text())
    for name, spec in config["datasets"].items():
        assert len(load_dataset(name, spec, base_dir=repo)) > 0


# ---- input limits (issue 33, point 7) --------------------------------------------------------


def test_an_xlsx_that_inflates_past_the_cap_is_refused_before_parsing(tmp_path: Path) -> None:
    # A zip member of zeros: 70 MB uncompressed, a few KB on disk, so the test stays fast.
    path = tmp_path / "bomb.xlsx"
    _math_workbook(path, [("单元", "[p]题[/p]")])
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("xl/media/padding.bin", b"\0" * 70_000_000)
    assert path.stat().st_size < 1_000_000
    size = sum(member.file_size for member in zipfile.ZipFile(path).infolist())
    with pytest.raises(DatasetError, match=rf"bomb\.xlsx: {size:,} bytes uncompressed .*max_file_mb = 64"):
        load_dataset("math", {"loader": "release_math", "path": "bomb.xlsx"}, base_dir=tmp_path)
    frame = load_dataset("math", {"loader": "release_math", "path": "bomb.xlsx"}, base_dir=tmp_path,
                         limits={"max_file_mb": 100})
    assert frame["question"].tolist() == ["题"]


def test_a_csv_or_jsonl_over_the_file_cap_is_refused(tmp_path: Path) -> None:
    path = _csv(tmp_path, "question,knowledge_units\n" + "Define a stack.,Stacks\n" * 100_000)
    with pytest.raises(DatasetError, match=r"q\.csv: 2,\d{3},\d{3} bytes uncompressed .*max_file_mb = 1\b"):
        load_dataset("toy", {"loader": "embedded", "path": "q.csv"}, base_dir=tmp_path, limits={"max_file_mb": 1})


def test_a_field_over_the_length_cap_names_file_row_and_column(tmp_path: Path) -> None:
    _csv(tmp_path, "question,knowledge_units\nDefine a stack.,Stacks\n" + "x" * 20_001 + ",Stacks\n")
    with pytest.raises(DatasetError, match=r"q\.csv, row 2, column 'question': 20,001 characters, above input_limits\.max_field_chars = 20,000"):
        load_dataset("toy", {"loader": "embedded", "path": "q.csv"}, base_dir=tmp_path)
    (tmp_path / "q.jsonl").write_text(json.dumps({"question": "Define it.", "knowledge_units": ["y" * 51]}) + "\n")
    with pytest.raises(DatasetError, match=r"q\.jsonl, row 1, column 'knowledge_units': 51 characters"):
        load_dataset("toy", {"loader": "embedded", "path": "q.jsonl"}, base_dir=tmp_path, limits={"max_field_chars": 50})
    _csv(tmp_path, "Topic,Score,Questions\nStacks,1,Define a stack " + "z" * 60 + "\n", name="cs.csv")
    (tmp_path / "Blooms_Taxonomy.csv").write_text(VERBS_CSV)
    with pytest.raises(DatasetError, match=r"cs\.csv, row 1, column 'Questions': 75 characters"):
        load_dataset("cs", {"loader": "release_cs", "path": "cs.csv"}, base_dir=tmp_path, limits={"max_field_chars": 50})


def test_text_is_read_in_one_normal_form(tmp_path: Path) -> None:
    """A unit written with a combining accent in one row and precomposed in another is one unit,
    and a question's length is counted in the characters a reader sees (NFC), not code points."""
    decomposed, composed = "Re\u0301sume\u0301s", "R\u00e9sum\u00e9s"
    _csv(tmp_path, f"question,knowledge_units\nDefine a stack.,{decomposed}\nWhat is a queue?,{composed}; {decomposed}\n"
                   "Define " + "e\u0301" * 30 + ",Stacks\n")
    frame = load_dataset("toy", {"loader": "embedded", "path": "q.csv"}, base_dir=tmp_path, limits={"max_field_chars": 40})
    assert dataset_knowledge_units(frame) == [composed, "Stacks"]
    assert frame["knowledge_units"].tolist()[1] == [composed]
    assert frame["question"].tolist()[2] == "Define " + "\u00e9" * 30  # 37 characters read, 67 code points written


def test_a_dataset_read_without_limits_is_read_within_the_schemas_defaults(tmp_path) -> None:
    """load_dataset fills an absent input_limits key from the schema (one place for the defaults):
    a field one character over the schema's max_field_chars is refused with no limits given."""
    from bloomqg.store.config_schema import file_schema

    longest = int(file_schema().default_of("input_limits", "max_field_chars"))
    _csv(tmp_path, "Topic,Score,Questions\nStacks,1,Define " + "z" * (longest - 6) + "\n", name="cs.csv")
    (tmp_path / "Blooms_Taxonomy.csv").write_text(VERBS_CSV)
    with pytest.raises(DatasetError, match=rf"cs\.csv, row 1, column 'Questions': {longest + 1:,} characters"):
        load_dataset("cs", {"loader": "release_cs", "path": "cs.csv"}, base_dir=tmp_path)
