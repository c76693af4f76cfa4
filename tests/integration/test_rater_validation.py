"""The rater-validation targets on the GLM-4-9B slice of the paper's release (../shared/data):
judge_validation with the rules judge, then export_annotation, two filled sheets,
import_annotations, calibrate and annotation_plan; every figure is checked against a computation
made here from the files (the calibrated intervals against ppi-python's)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from bloomqg.store.parquet_io import read_frame
from bloomqg.store.frames import (
    ANNOTATION_ITEMS,
    ANNOTATION_PLAN,
    CALIBRATION_ESTIMATES,
    CALIBRATION_ITEMS,
    JUDGMENTS,
    RATER_AGREEMENT,
    VOTES,
)
from tests.support.release_slice import rater_validation_study, run_study

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ITEMS_PER_RUN = 20
ANNOTATED_PER_RUN = 3


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, release_dir) -> Path:
    if not (release_dir / "generated" / "glm").is_dir():
        pytest.skip(f"the GLM-4-9B run of the paper's release is not at {release_dir / 'generated' / 'glm'}")
    workdir = tmp_path_factory.mktemp("raters")
    config = yaml.safe_load((REPO / "configs" / "rater-validation.yaml").read_text(encoding="utf-8"))
    config["judge_validation"].update({"judges": ["rules"], "items_per_cell": ITEMS_PER_RUN})
    config["annotation"]["items_per_cell"] = ANNOTATED_PER_RUN
    rater_validation_study(workdir, release_dir, judge_validation=config["judge_validation"],
                           annotation=config["annotation"],
                           calibration={})  # calibrate from the annotations/ round the test fills
    return workdir


def snakemake(workdir: Path, *targets: str) -> None:
    run_study(workdir, *targets)


def test_judge_validation_agrees_with_a_direct_count(workdir):
    snakemake(workdir, "judge_validation")
    out = workdir / "results" / "judge_validation"
    agreement = read_frame(out / "agreement.parquet", RATER_AGREEMENT)
    for run in ("cs/cot", "cs/fgp", "math/fgp"):
        dataset, strategy = run.split("/")
        judgments = read_frame(out / dataset / strategy / "glm-4-9b" / "rules.parquet", JUDGMENTS)
        votes = read_frame(workdir / "results" / "release" / "votes" / dataset / strategy / "glm-4-9b.parquet", VOTES)
        assert judgments["prompt_id"].nunique() == ITEMS_PER_RUN
        for criterion, column in (("unique", "value_bool"), ("bloom_level", "value_level")):
            mine = judgments[(judgments["criterion"] == criterion) & (judgments["status"] == "ok")]
            joined = mine.merge(votes[["prompt_id", criterion]], on="prompt_id").dropna(subset=[criterion])
            row = agreement[(agreement["dataset"] == dataset) & (agreement["strategy"] == strategy)
                            & (agreement["criterion"] == criterion) & (agreement["statistic"] == "percent_agreement")]
            assert len(row) == 1
            row = row.iloc[0]
            assert row["n"] == len(joined)
            if len(joined):
                expected = 100.0 * (joined[column] == joined[criterion]).mean()
                assert row["value"] == pytest.approx(expected)
                assert row["ci_low"] <= row["value"] <= row["ci_high"]
        if dataset == "math":  # the math release holds no judged Bloom level
            assert row["n"] == 0
    pooled = agreement[(agreement["model"] == "all") & (agreement["criterion"] == "unique")
                       & (agreement["statistic"] == "percent_agreement")].iloc[0]
    assert pooled["n"] == 3 * ITEMS_PER_RUN
    throughput = pd.read_parquet(out / "throughput.parquet")
    assert (throughput["seconds_per_1000"] > 0).all() and (throughput["cost_usd"] == 0).all()
    confusion = pd.read_parquet(out / "confusion.parquet")
    bloom = agreement[(agreement["model"] == "all") & (agreement["criterion"] == "bloom_level")
                      & (agreement["statistic"] == "percent_agreement")].iloc[0]
    pooled_confusion = confusion[confusion["model"] == "all"]
    assert pooled_confusion["count"].sum() == bloom["n"]
    diagonal = pooled_confusion[pooled_confusion["panel_level"] == pooled_confusion["judge_level"]]["count"].sum()
    assert 100.0 * diagonal / bloom["n"] == pytest.approx(bloom["value"])
    assert "Judge rules" in (out / "summary.md").read_text(encoding="utf-8")


def test_export_fill_and_import_annotations(workdir):
    snakemake(workdir, "export_annotation", "import_annotations")
    folder = workdir / "results" / "annotation"
    table = (folder / "table9_human_agreement.md").read_text(encoding="utf-8")
    assert "No annotations yet" in table
    items = read_frame(folder / "items.parquet", ANNOTATION_ITEMS)
    assert len(items) == 3 * ANNOTATED_PER_RUN
    assert items.groupby(["dataset", "strategy"]).size().eq(ANNOTATED_PER_RUN).all()
    assert "Download CSV" in (folder / "form.html").read_text(encoding="utf-8")

    # Two annotators fill the blank sheet: "a" says yes/Apply/original units everywhere, "b" the same
    # but "no" to unique on every item.
    sheet = pd.read_csv(folder / "sheet.csv", encoding="utf-8-sig", dtype=str, keep_default_na=False)
    (workdir / "annotations").mkdir()
    for who, unique in (("a", "yes"), ("b", "no")):
        filled = sheet.assign(annotator=who, unique=unique, readable="yes", answerable="yes", bloom_level="Apply",
                              knowledge_units=sheet["original_knowledge_units"])
        filled.to_csv(workdir / "annotations" / f"{who}.csv", index=False)
    snakemake(workdir, "import_annotations")
    agreement = read_frame(folder / "agreement.parquet", RATER_AGREEMENT)
    cells = agreement[agreement["model"] != "all"]
    for (dataset, strategy), group in items.groupby(["dataset", "strategy"]):
        rows = cells[(cells["dataset"] == dataset) & (cells["strategy"] == strategy)].set_index(
            ["criterion", "rater", "statistic"])
        readable = rows.loc[("readable", "human majority", "percent_agreement")]
        assert readable["value"] == pytest.approx(100.0 * group["panel_readable"].mean())
        # a and b split on unique: no human majority on any item.
        assert rows.loc[("unique", "human majority", "percent_agreement")]["n"] == 0
        assert {"a", "b"} <= set(rows.xs("cohen_kappa", level="statistic").index.get_level_values("rater"))
    table = (folder / "table9_human_agreement.md").read_text(encoding="utf-8")
    assert "No annotations yet" not in table and "2 annotator(s), 2 sheet(s)" in table
    # the alternative annotator test needs three annotators: written, and says it did not run
    assert "Not run: 2 annotator(s)" in (folder / "alt_test.md").read_text(encoding="utf-8")


def test_calibrate_corrects_the_release_runs_with_the_filled_sheets(workdir):
    if not (workdir / "annotations").is_dir():
        test_export_fill_and_import_annotations(workdir)
    ppi_reference = pytest.importorskip("tests.support.ppi_reference")
    pytest.importorskip("ppi_py")
    snakemake(workdir, "calibrate", "annotation_plan")
    folder = workdir / "results" / "calibration"
    items = read_frame(workdir / "results" / "annotation" / "items.parquet", ANNOTATION_ITEMS)
    joined = read_frame(folder / "items.parquet", CALIBRATION_ITEMS)
    # the sheets' rule: a and b say readable, answerable, Apply and the original units; b says no to unique
    labelled = joined[joined["annotation_id"].notna()]
    original = items.set_index("annotation_id")["original_bloom_level"]
    assert (labelled["n_annotators"] == 2).all() and len(labelled["annotation_id"].unique()) == len(items)
    by_metric = {metric: part for metric, part in labelled.groupby("metric")}
    assert (by_metric["unique"]["human"] == 0.5).all() and (by_metric["readable"]["human"] == 1.0).all()
    assert (by_metric["share_apply"]["human"] == 1.0).all() and (by_metric["share_middle_order"]["human"] == 1.0).all()
    level = by_metric["catcons_level"]
    assert (level["human"] == (original.loc[level["annotation_id"]].to_numpy() == "Apply")).all()
    estimates = read_frame(folder / "estimates.parquet", CALIBRATION_ESTIMATES)
    compared = ppi_reference.check_estimates_against_ppi_python(estimates, joined)
    assert compared > 0
    assert "PPI++ (calibrated)" in (folder / "calibrated_estimates.md").read_text(encoding="utf-8")
    plan = read_frame(folder / "plan.parquet", ANNOTATION_PLAN)
    assert len(plan) and (plan["n_needed"] >= 2).all()
    assert "Calibrated table" in (workdir / "results" / "annotation" / "table9_human_agreement.md").read_text(
        encoding="utf-8")
    # On the release: its report carries the calibrated section with n and N, beside Table 9.
    snakemake(workdir, "results/release/report.html")
    report = (workdir / "results" / "release" / "report.html").read_text(encoding="utf-8")
    assert 'id="table-calibrated_estimates"' in report and "PPI++ (calibrated)" in report
    assert "n labelled / N judged" in report and 'id="table-annotation_plan"' in report
    assert 'id="table-table9_human_agreement"' in report
