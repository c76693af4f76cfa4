"""Tables: content, formatting, gating marks and well-formed CSV / Markdown / LaTeX."""

from __future__ import annotations

import re
import shutil
import subprocess

import pandas as pd
import pytest

from bloomqg.store.parquet_io import to_table
from bloomqg.reporting.tables.builders import dataset_table, metric_table, reliability_table
from bloomqg.reporting.tables.human import human_agreement
from bloomqg.reporting.tables.latex import latex_escape, render_latex
from bloomqg.reporting.tables.markdown import _md_escape, render_markdown
from bloomqg.reporting.tables.model import (
    GATED_NOTE,
    MAX_COLUMNS_WITH_CI,
    NO_CI_NOTE,
    Cell,
    Table,
    TableInputError,
    format_value,
    interval_note,
)
from bloomqg.reporting.tables.view import read_view, render_view
from bloomqg.reporting.tables.write import HUMAN_TABLE_FILES, TABLE_FILES, build_tables, write_tables
from bloomqg.store.frames import METRICS
from tests.support.synthetic import synthetic_study

ODD_MODEL = "my_model&co 50%#1"  # characters that LaTeX and Markdown must escape


def metric_rows(rows: list[tuple]) -> pd.DataFrame:
    """METRICS frame from (model, dataset, strategy, metric, value, low, high, gated) tuples."""
    frame = pd.DataFrame(
        [{"model": m, "dataset": d, "strategy": s, "metric": k, "value": v, "ci_low": lo, "ci_high": hi,
          "n": 100, "ci_method": "wilson", "alpha_gated": g} for m, d, s, k, v, lo, hi, g in rows]
    )
    to_table(frame, METRICS)  # the hand-made frame must fit the real schema
    return frame


@pytest.fixture(scope="module")
def study():
    return synthetic_study(n_models=3, n_items=12)


@pytest.fixture(scope="module")
def written(study, tmp_path_factory):
    out = tmp_path_factory.mktemp("tables")
    agreement = human_agreement(study.votes, study.human_annotations)
    paths = write_tables(study.metrics, study.datasets, study.reliability, out, paired=study.paired, human=agreement)
    return out, paths


def test_writes_exactly_the_declared_files(written):
    out, paths = written
    names = sorted(p.name for p in paths)
    assert names == sorted(TABLE_FILES + HUMAN_TABLE_FILES)
    assert sorted(p.name for p in out.iterdir()) == names  # no temp files left behind
    assert all(p.stat().st_size > 0 for p in paths)


def test_without_optional_inputs_still_writes_every_declared_file(study, tmp_path):
    paths = write_tables(study.metrics, study.datasets, study.reliability, tmp_path)
    assert sorted(p.name for p in paths) == sorted(TABLE_FILES)
    paired = read_view(tmp_path / "table_paired.json")
    assert paired.rows == [] and any("No paired comparison" in note for note in paired.notes)


def test_value_with_interval_and_separate_csv_columns(tmp_path):
    metrics = metric_rows([
        ("glm", "cs", "cot", "usability", 90.4, 88.1, 92.3, False),
        ("glm", "cs", "cot", "catcons", 37.17, 33.0, 41.0, True),
    ])
    table = metric_table(metrics, ("usability", "catcons"), name="t", caption="c")
    assert table.rows[0][1].text == "90.40 [88.1, 92.3] (n=100)"
    assert table.rows[0][2].gated and not table.rows[0][1].gated
    row = table.data.iloc[0]
    assert (row["usability"], row["usability_ci_low"], row["usability_ci_high"]) == (90.4, 88.1, 92.3)
    assert bool(row["catcons_alpha_gated"]) is True
    markdown = render_markdown(table)
    assert "| glm | 90.40 [88.1, 92.3] (n=100) | 37.17 [33.0, 41.0] (n=100)† |" in markdown
    assert GATED_NOTE in markdown
    assert r"37.17 [33.0, 41.0] (n=100)$^{\dagger}$" in render_latex(table)


def test_wide_tables_leave_intervals_to_the_csv():
    study = synthetic_study(n_models=2, n_items=6)
    table4 = next(t for t in build_tables(study.metrics, study.datasets, study.reliability) if t.name == "table4_quality")
    assert len(table4.columns) > MAX_COLUMNS_WITH_CI
    assert not any("[" in cell.text for row in table4.rows for cell in row[1:])
    assert NO_CI_NOTE in table4.notes
    assert {"unique_ci_low", "unique_ci_high"} <= set(table4.data.columns)


def test_missing_value_is_a_dash_not_a_number():
    assert format_value(None) == "–"
    assert format_value(float("nan"), 1.0, 2.0) == "–"
    assert format_value(5, None, 7) == "5.00"


def test_table1_counts_levels_uncategorized_and_units():
    frame = pd.DataFrame({
        "item_id": ["a-1", "a-2", "a-3", "a-4"],
        "bloom_level": ["Remember", "Remember", None, "Create"],
        "knowledge_units": [["stack"], ["queue", "stack"], ["heap"], ["stack"]],
    })
    table = dataset_table({"a": frame})
    record = table.data.iloc[0]
    assert (record["total"], record["Remember"], record["Create"], record["Apply"]) == (4, 2, 1, 0)
    assert (record["uncategorized"], record["knowledge_units"]) == (1, 3)
    assert [c.text for c in table.rows[0]][:4] == ["a", "4", "2", "0"]


def test_table1_names_the_item_with_an_unknown_level():
    frame = pd.DataFrame({"item_id": ["a-7"], "bloom_level": ["Memorise"], "knowledge_units": [["x"]]})
    with pytest.raises(TableInputError, match=r"datasets\['a'\]: item a-7"):
        dataset_table({"a": frame})


def test_bad_inputs_name_the_frame_and_column(study, tmp_path):
    with pytest.raises(TableInputError, match=r"all_metrics: missing column\(s\) \['alpha_gated'\]"):
        write_tables(study.metrics.drop(columns="alpha_gated"), study.datasets, study.reliability, tmp_path)
    duplicated = pd.concat([study.metrics, study.metrics.head(1)])
    with pytest.raises(TableInputError, match="duplicate rows"):
        write_tables(duplicated, study.datasets, study.reliability, tmp_path)


def test_per_dataset_views_cover_every_dataset(written, study):
    out, _ = written
    view = read_view(out / "table7_quality_by_dataset.json")
    assert [label for label, _ in view.groups if label] == ["CoT", "FGP"]
    datasets = {row[0] for row in view.rows}
    assert datasets == set(study.datasets)
    math_rows = [row for row in view.rows if row[0] == "math"]  # math runs under FGP only
    # a strategy the dataset does not run is "—", and a note says why (issue 32 point 6)
    assert all(cell == "—" for row in math_rows for cell in row[2:5])
    assert any("— (long dash): not run (math does not run CoT)" in note for note in view.notes)
    assert all(cell != "–" for row in math_rows for cell in row[5:])


def test_reliability_table_says_which_gates_failed_without_marking_its_own_coefficients(study):
    table = reliability_table(study.reliability)
    failing = study.reliability[(study.reliability["judge"].isna()) & (~study.reliability["gate_passed"].astype(bool))]
    assert len(failing) >= 1
    # † means "built on a flagged criterion": a coefficient is the flag's measure, not built on it
    assert not any(cell.gated for row in table.rows for cell in row)
    statuses = [cell.text for row in table.rows for cell in row[3:] if cell.text.startswith(("unreliable", "not measured"))]
    assert len(statuses) == len(failing)
    assert any("Failed the gate or not measured, per cell" in note for note in table.notes)


def test_human_agreement_is_exact_on_hand_made_labels():
    votes = pd.DataFrame({
        "prompt_id": ["p1", "p2", "p3"], "model": "m", "dataset": "social", "strategy": "cot",
        "unique": [True, False, None], "readable": True, "answerable": True,
        "bloom_level": ["Apply", "Create", "Remember"],
    })
    annotations = pd.DataFrame({
        "prompt_id": ["p1", "p2", "p3", "p1", "p2"], "model": "m", "dataset": "social", "strategy": "cot",
        "criterion": ["unique", "unique", "unique", "bloom_level", "bloom_level"],
        "value": ["yes", "1", "0", "apply", "Evaluate"],
    })
    result = human_agreement(votes, annotations).set_index("criterion")
    assert result.loc["unique", "agreement"] == 50.0 and result.loc["unique", "n"] == 2  # p3 has no majority
    assert result.loc["bloom_level", "agreement"] == 50.0
    bad = annotations.assign(value=["maybe", "1", "0", "apply", "Evaluate"])
    with pytest.raises(TableInputError, match="row 0: 'maybe' is not a yes/no label"):
        human_agreement(votes, bad)


def test_table9_ends_with_a_row_pooled_over_items(written):
    out, _ = written
    table9 = read_view(out / "table9_human_agreement.json")
    assert table9.header == ["Model", "Dataset", "Prompt", "Bloom", "Unique", "Readable", "Answerable"]
    assert table9.rows[-1][0] == "All items (pooled)"


# --------------------------------------------------------------------------- Markdown


def _unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def test_markdown_rows_have_the_header_width_of_the_tables_view(written):
    out, _ = written
    for path in sorted(out.glob("*.md")):
        lines = [line for line in path.read_text().splitlines() if line.startswith("|")]
        widths = {_unescaped_pipes(line) for line in lines}
        assert len(widths) == 1, f"{path.name}: rows differ in cell count"
        view = read_view(path.with_suffix(".json"))
        assert len(view.header) == len(view.align) == _unescaped_pipes(lines[0]) - 1
        assert len(lines) == len(view.rows) + 2, path.name  # header, alignment, one line per row
        assert all(len(row) == len(view.header) for row in view.rows), path.name


def test_markdown_renders_as_a_table_when_a_renderer_is_installed(written):
    markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py is not installed")
    out, _ = written
    path = out / "table5_usability.md"
    html = markdown_it.MarkdownIt("commonmark").enable("table").render(path.read_text())
    assert html.count("<table>") == 1
    assert html.count("<tr>") == len(read_view(path.with_suffix(".json")).rows) + 1
    assert html.count("<p>") >= 3  # caption and one paragraph per footnote


def test_special_characters_are_escaped(tmp_path):
    metrics = metric_rows([(ODD_MODEL, "cs", "cot", "unique", 50.0, 40.0, 60.0, False)])
    table = metric_table(metrics, ("unique",), name="t", caption="c")
    tex = render_latex(table)
    assert r"my\_model\&co 50\%\#1" in tex
    piped = table.__class__("t", "a | b", ["Model"], ["x"], [[Cell("a|b"), Cell("1")]], pd.DataFrame())
    markdown = render_markdown(piped)
    assert "**a \\| b**" in markdown and "| a\\|b | 1 |" in markdown
    (tmp_path / "t.json").write_text(render_view(piped))
    view = read_view(tmp_path / "t.json")
    assert view.caption == "a | b" and view.rows == [["a|b", "1"]]
    assert latex_escape("α ≥ 0.7 – x_1 {y} ~^\\") == (
        r"$\alpha$ $\geq$ 0.7 -- x\_1 \{y\} \textasciitilde{}\textasciicircum{}\textbackslash{}"
    )


# --------------------------------------------------------------------------- LaTeX


def _strip_escapes(text: str) -> str:
    return re.sub(r"\\[{}&%$#_]", "", text)


def check_latex_structure(text: str, name: str) -> None:
    """Balanced braces, booktabs rules, and the same number of cells in every row."""
    body = _strip_escapes(text)
    depth = 0
    for char in body:
        depth += {"{": 1, "}": -1}.get(char, 0)
        assert depth >= 0, f"{name}: '}}' before its '{{'"
    assert depth == 0, f"{name}: unbalanced braces"
    for rule in (r"\toprule", r"\midrule", r"\bottomrule"):
        assert text.count(rule) == 1, f"{name}: {rule} missing or repeated"
    spec = re.search(r"\\begin\{tabular\}\{([lrc]+)\}", text).group(1)
    rows = re.findall(r"^(.*)\\\\$", body, flags=re.MULTILINE)
    assert rows, f"{name}: no rows"
    for row in rows:
        spans = [int(n) for n in re.findall(r"\\multicolumn\{(\d+)\}", row)]
        cells = row.count("&") + 1 - len(spans) + sum(spans)
        assert cells == len(spec), f"{name}: row has {cells} cells, tabular has {len(spec)}: {row[:80]}"


def test_latex_tables_are_well_formed(written):
    out, _ = written
    for path in sorted(out.glob("*.tex")):
        check_latex_structure(path.read_text(), path.name)


def compile_latex(tables, tmp_path) -> None:
    """Compile ``tables`` (paths of .tex tables) into one document with pdflatex or tectonic; skip
    when neither is installed."""
    engine = shutil.which("pdflatex") or shutil.which("tectonic")
    if engine is None:
        pytest.skip("no LaTeX engine (pdflatex or tectonic) installed (`make test-tex-deps` installs "
                    "Debian's, as root); structure is checked by test_latex_tables_are_well_formed")
    inputs = "\n".join(f"\\input{{{p}}}\\clearpage" for p in tables)
    document = tmp_path / "all.tex"
    document.write_text("\\documentclass{article}\n\\usepackage[T1]{fontenc}\n\\usepackage{booktabs}\n"
                        "\\usepackage[margin=1cm,landscape]{geometry}\n\\begin{document}\n" + inputs + "\n\\end{document}\n")
    command = [engine, "-interaction=nonstopmode", "-halt-on-error", document.name] if engine.endswith("pdflatex") \
        else [engine, document.name]
    result = subprocess.run(command, check=False, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]


def test_latex_tables_compile_when_an_engine_is_installed(written, tmp_path):
    out, _ = written
    compile_latex(sorted(out.glob("*.tex")), tmp_path)


#: Labels a config or a model may hand the tables: a blank line inside a \multicolumn argument
#: (LaTeX: "Paragraph ended before \multicolumn was complete"), a link, backticks, a lone CR.
HOSTILE_LABEL = "Fine\n\ngrained [x](javascript:alert(1)) `code` a\rb \x00end"


def _hostile_table() -> Table:
    return Table("hostile", f"caption {HOSTILE_LABEL}", [f"Model {HOSTILE_LABEL}"], ["u", f"r {HOSTILE_LABEL}"],
                 [[Cell(HOSTILE_LABEL), Cell("1"), Cell(f"2 {HOSTILE_LABEL}")]], pd.DataFrame(),
                 groups=[(HOSTILE_LABEL, 2)], notes=[f"note {HOSTILE_LABEL}"])


def test_a_label_with_blank_lines_stays_inside_its_latex_cell():
    tex = render_latex(_hostile_table())
    check_latex_structure(tex, "hostile")
    assert "\n\n" not in tex and "\r" not in tex and "\x00" not in tex
    assert "\\multicolumn{2}{c}{Fine grained [x](javascript:alert(1)) `code` a b end}" in tex


def test_a_table_of_hostile_labels_compiles_when_an_engine_is_installed(tmp_path):
    path = tmp_path / "hostile.tex"
    path.write_text(render_latex(_hostile_table()))
    compile_latex([path], tmp_path)


def test_links_and_backticks_in_a_markdown_table_are_text():
    markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py is not installed")
    text = render_markdown(_hostile_table())
    assert "[x\\](javascript:alert(1)) \\`code\\`" in text
    assert _md_escape("[x]: javascript:alert(1)") == "\\[x\\]: javascript:alert(1)"  # a definition
    assert _md_escape("![i](x.png) [1, 2] (n=3)") == "![i\\](x.png) [1, 2] (n=3)"  # intervals read as written
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert len(rows) == 3 and all(_unescaped_pipes(line) == 4 for line in rows)
    html = markdown_it.MarkdownIt("commonmark").enable("table").render(text)
    assert "<a " not in html and "<code>" not in html and "javascript:alert(1)" in html
    assert html.count("<tr>") == 2


def test_a_malformed_table_view_is_a_clear_error(tmp_path):
    path = tmp_path / "t.json"
    path.write_text("{not json")
    with pytest.raises(TableInputError, match=r"t.json: not a table view \(invalid JSON"):
        read_view(path)
    path.write_text('{"name": "t", "caption": "c"}')
    with pytest.raises(TableInputError, match=r"t.json: a table view has the keys .*found \['caption', 'name'\]"):
        read_view(path)
    piped = Table("t", "c", ["Model"], ["x"], [[Cell("m"), Cell("1")]], pd.DataFrame())
    path.write_text(render_view(piped).replace('"1"', '"1", "2"'))
    with pytest.raises(TableInputError, match=r"t.json: 'rows'\[0\] has 3 cells, the header 2"):
        read_view(path)


THREE_LABELS = {"cot": "CoT", "fgp": "FGP", "refine": "Refine", "zeroshot": "Zero-shot"}


def test_three_strategies_are_shown_by_label_in_defined_order_with_raw_and_holm_p():
    from bloomqg.reporting.tables.model import format_p
    from bloomqg.reporting.tables.write import build_tables

    study = synthetic_study(n_models=2, n_items=8, cells={"cs": ("zeroshot", "fgp", "cot"), "math": ("fgp",)})
    tables = {t.name: t for t in build_tables(study.metrics, study.datasets, study.reliability,
                                              paired=study.paired, strategy_labels=THREE_LABELS)}
    assert [label for label, _ in tables["table4_quality"].groups] == ["cs, CoT", "cs, FGP", "cs, Zero-shot", "math, FGP"]
    by_dataset = tables["table7_quality_by_dataset"]
    assert [label for label, _ in by_dataset.groups] == ["CoT", "FGP", "Zero-shot"]
    math_row = next(row for row in by_dataset.rows if row[0].text == "math")
    assert [c.text for c in math_row[2:5]] == ["—"] * 3 and [c.text for c in math_row[-3:]] == ["—"] * 3
    assert any("math does not run CoT; math does not run Zero-shot" in note for note in by_dataset.notes)
    paired = tables["table_paired"]
    assert paired.columns[paired.columns.index("p") + 1] == "p (Holm)"
    pairs = {row[3].text for row in paired.rows}
    assert pairs == {"FGP − CoT", "Zero-shot − CoT"}
    holm = [row[paired.columns.index("p (Holm)") + 3].text for row in paired.rows]
    assert holm == [format_p(p) for p in study.paired["p_adjusted"]]
    assert any("Holm" in note and "family" in note for note in paired.notes)
    # without labels a strategy is named as written, never upper-cased from its key
    plain = {t.name: t for t in build_tables(study.metrics, study.datasets, study.reliability)}
    assert "cs, zeroshot" in [label for label, _ in plain["table4_quality"].groups]


def test_a_difference_that_rounds_to_zero_has_no_sign():
    from bloomqg.reporting.tables.model import format_difference, format_number

    assert format_number(-0.001) == "0.00" and format_number(-0.5) == "-0.50"
    assert format_value(-0.001, -0.004, -0.0001) == "0.00 [0.0, 0.0]"
    assert format_difference(-0.001, -0.004, -0.0001) == "0.00"  # "-0.00 [-0.00, -0.00]" once
    assert format_difference(-0.5, -1.0, 0.02) == "-0.50 [-1.0, 0.0]"
    assert format_difference(0.001, -0.3, 0.2) == "0.00 [-0.3, 0.2]"


def test_the_note_says_when_a_clustered_interval_had_fewer_units_than_measured():
    plain = interval_note(["clopper_pearson_clustered_unit", "clopper_pearson_bounded_mean_clustered_unit"])
    few = interval_note(["clopper_pearson_clustered_unit", "clopper_pearson_clustered_unit_few_clusters"])
    assert "clustered by unit" in plain and "fewer than" not in plain
    assert "clustered by unit" in few and "fewer than 6 clusters" in few and "unit_few" not in few


def test_the_report_turns_repeated_column_groups_into_rows_and_leaves_other_tables_alone():
    from bloomqg.reporting.tables.view import TableView, long_form

    wide = TableView(
        name="t", caption="c", groups=[("", 1), ("cs, CoT", 2), ("cs, FGP", 2), ("math, CoT", 2)],
        header=["Model", "Unique", "Readable", "Unique", "Readable", "Unique", "Readable"],
        rows=[["m", "1", "2", "3", "4", "—", "—"]], notes=["n"], align=["left"] + ["right"] * 6,
        sources=[[None, ["m", "cs", "cot", "unique"], ["m", "cs", "cot", "readable"], ["m", "cs", "fgp", "unique"],
                  ["m", "cs", "fgp", "readable"], None, None]],
        group_title="Dataset, strategy")
    long = long_form(wide)
    assert long.header == ["Model", "Dataset, strategy", "Unique", "Readable"]
    # math, CoT was not run (all —): no row
    assert long.rows == [["m", "cs, CoT", "1", "2"], ["m", "cs, FGP", "3", "4"]]
    assert long.sources == [[None, None, ["m", "cs", "cot", "unique"], ["m", "cs", "cot", "readable"]],
                            [None, None, ["m", "cs", "fgp", "unique"], ["m", "cs", "fgp", "readable"]]]
    assert long.align == ["left", "left", "right", "right"] and long.groups == [("", 4)] and long.notes == ["n"]
    # groups of different columns, or no title: as it was
    mixed = TableView(name="t", caption="c", groups=[("", 1), ("A", 2), ("B", 1)], header=["M", "x", "y", "x"],
                      rows=[["m", "1", "2", "3"]], notes=[], align=["left"] + ["right"] * 3, group_title="G")
    assert long_form(mixed) is mixed
    assert long_form(TableView(**{**wide.__dict__, "group_title": ""})) == TableView(**{**wide.__dict__, "group_title": ""})


def test_a_paired_difference_fed_by_a_gated_cell_carries_the_dagger():
    from bloomqg.reporting.tables.builders import paired_table

    row = {"model": "m", "dataset": "cs", "metric": "catcons", "strategy_a": "cot", "strategy_b": "fgp",
           "n_pairs": 4, "n_differing": 1, "value_a": 0.0, "value_b": 25.0, "diff": 25.0, "ci_low": -20.0,
           "ci_high": 60.0, "ci_method": "tango", "test": "mcnemar", "p_value": 0.5, "p_adjusted": 1.0, "family_size": 2,
           "effect_size": 1.05, "effect_size_name": "cohen_h"}
    paired = pd.DataFrame([row, {**row, "dataset": "social"}])
    table = paired_table(paired, gated={("m", "cs", "fgp", "catcons")})
    assert [r[7].gated for r in table.rows] == [True, False]
    assert GATED_NOTE in table.notes
    assert GATED_NOTE not in paired_table(paired).notes


def test_an_effect_size_is_shown_only_where_enough_pairs_differ():
    """KnowCov in the default study: 10 pairs, 3 of them differing, rank-biserial r 1.00 beside a
    Wilcoxon p of 0.25: the size was three questions' (reading 35). Counted on the pairs that
    differ, as the tests' power is."""
    from bloomqg.reporting.tables.builders import paired_table

    row = {"model": "m", "dataset": "cs", "metric": "knowcov", "strategy_a": "cot", "strategy_b": "fgp",
           "n_pairs": 10, "n_differing": 3, "value_a": 70.0, "value_b": 95.0, "diff": 25.0, "ci_low": -10.2,
           "ci_high": 55.7, "ci_method": "mover", "test": "wilcoxon", "p_value": 0.25, "p_adjusted": 0.25,
           "family_size": 1, "effect_size": 1.0, "effect_size_name": "rank_biserial"}
    few, enough = paired_table(pd.DataFrame([row, {**row, "dataset": "social", "n_differing": 6}])).rows
    assert few[-1].text == "–" and enough[-1].text.startswith("1.00 (")
