"""The workflow end to end on the test study (.test/config) with the real SmolLM2, in a temp dir.

Runs ``snakemake -s REPO/Snakefile --directory TMP`` as a user would, then checks schemas, row
counts, the report, that a second run does nothing, and that editing the FGP template reruns
only FGP work.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bloomqg.store.parquet_io import read_frame, read_provenance
from bloomqg.store.frames import DATASET, GENERATIONS, JUDGMENTS, METRICS, PROMPTS, RELIABILITY, VOTES
from bloomqg.metrics.intervals import BETTING_MEAN

from tests.conftest import REPO

pytestmark = pytest.mark.integration

SNAKEMAKE = [sys.executable, "-m", "snakemake"]
TEST_CONFIG = REPO / ".test" / "config" / "config.yaml"
LIMIT = 3


def tiny_config(workdir: Path, datasets: tuple[str, ...] | None = None) -> Path:
    """The test study (.test/config/config.yaml: the default study cut to 3 items per dataset,
    short completions), its cache in ``workdir`` and its FGP template a copy there; only
    ``datasets`` of its datasets when given."""
    config = yaml.safe_load(TEST_CONFIG.read_text())
    assert config["limit_items"] == LIMIT
    if datasets is not None:
        config["datasets"] = {name: config["datasets"][name] for name in datasets}
    config["cache_dir"] = str(workdir / "cache")
    # A copy of the FGP template that the test may edit without touching the repository.
    template = workdir / "fgp.md"
    shutil.copy(REPO / "prompts" / "generation" / "fgp.md", template)
    config["prompts"] = {"fgp": str(template)}
    path = workdir / "tiny.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def snakemake(workdir: Path, config: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    command = [
        *SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
        "--configfile", str(config), "--cores", "2", *args,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake failed ({result.returncode}):\n{result.stderr[-6000:]}")
    return result


def planned_jobs(dry_run_output: str) -> dict[str, int]:
    """Job counts per rule from the table a dry run prints."""
    counts: dict[str, int] = {}
    in_table = False
    for line in dry_run_output.splitlines():
        parts = line.split()
        if parts[:2] == ["job", "count"]:
            in_table = True
            continue
        if in_table:
            if len(parts) == 2 and parts[1].isdigit():
                if parts[0] != "total":
                    counts[parts[0]] = int(parts[1])
            elif parts and not set(line.strip()) <= {"-", " "}:  # the rule under the header
                in_table = False
    return counts


#: The datasets of the .test study this module runs: computer science under three strategies (CoT,
#: FGP and zeroshot, which only the config and a template define: the paired comparisons against
#: the baseline and their robustness need a dataset with several) and K-12 math, FGP only (a
#: dataset with one strategy). The social-science set is a third embedded CSV through the
#: same loader and the same two cells as computer science: it would add two cells (about a third
#: of this module's time) and no rule or code path (`make study` runs it, test_datasets.py loads it).
DATASETS = ("cs", "math")


@pytest.fixture(scope="module")
def finished_study(tmp_path_factory) -> tuple[Path, Path]:
    workdir = tmp_path_factory.mktemp("study")
    config = tiny_config(workdir, DATASETS)
    snakemake(workdir, config)
    return workdir, config


def test_every_stage_writes_its_schema(finished_study):
    check_study_outputs(*finished_study)


def test_generation_ran_on_its_share_of_the_cores(finished_study):
    """torch's threads: the rule's 8, capped by ``--cores 2`` and, under the test workers, by their
    share of the cores (the ``$SNAKEMAKE_PROFILE`` tests/conftest.py writes)."""
    workdir, config = finished_study
    profile = Path(os.environ.get("SNAKEMAKE_PROFILE", "")) / "config.yaml"
    cap = (yaml.safe_load(profile.read_text()) or {}).get("max-threads", 8) if profile.is_file() else 8
    generations = sorted((workdir / "results" / "generations").glob("*/*/*.parquet"))
    cfg = yaml.safe_load(config.read_text())
    n_cells = sum(len(s["strategies"]) for s in cfg["datasets"].values()) * len(cfg["models"])
    assert len(generations) == n_cells == 4, generations  # cs under CoT, FGP and zeroshot; math under FGP
    for path in generations:
        assert read_provenance(path)["generator"]["num_threads"] == min(8, 2, cap), path


def check_study_outputs(workdir: Path, config: Path) -> None:
    """Schemas and row counts of every stage of a finished tiny study (also the SLURM test's)."""
    cfg = yaml.safe_load(config.read_text())
    results = workdir / "results"
    judges = list(cfg["judges"])
    for dataset, spec in cfg["datasets"].items():
        items = read_frame(results / "datasets" / f"{dataset}.parquet", DATASET)
        assert len(items) >= 12
        for strategy in spec["strategies"]:
            prompts = read_frame(results / "prompts" / dataset / f"{strategy}.parquet", PROMPTS)
            assert len(prompts) == LIMIT
            for model in cfg["models"]:
                stem = f"{dataset}/{strategy}/{model}"
                generations = read_frame(results / "generations" / f"{stem}.parquet", GENERATIONS)
                assert sorted(generations["prompt_id"]) == sorted(prompts["prompt_id"])
                provenance = read_provenance(results / "generations" / f"{stem}.parquet")
                assert provenance.get("package_versions", {}).get("transformers")
                for judge in judges:
                    verdicts = read_frame(results / "judgments" / stem / f"{judge}.parquet", JUDGMENTS)
                    assert len(verdicts) == 5 * LIMIT
                votes = read_frame(results / "votes" / f"{stem}.parquet", VOTES)
                assert len(votes) == LIMIT
                assert (votes["n_judges"] == len(judges)).all()
                reliability = read_frame(results / "votes" / f"{stem}.reliability.parquet", RELIABILITY)
                panel = reliability[reliability["judge"].isna()]
                assert set(panel["criterion"]) == {"unique", "readable", "answerable", "bloom_level", "knowledge_units"}
    metrics = read_frame(results / "metrics" / "all.parquet", METRICS)
    n_cells = sum(len(s["strategies"]) for s in cfg["datasets"].values()) * len(cfg["models"])
    assert metrics.groupby(["model", "dataset", "strategy"]).ngroups == n_cells
    assert {"usability", "catcons", "knowcov", "cogshift"} <= set(metrics["metric"])
    # every interval has a non-zero width (3 questions all yes: not [100, 100]), but the mean |Δ|
    # of drifts, which is 1 by definition
    with_ci = metrics[metrics["ci_method"].notna() & (metrics["metric"] != "cogdrift_mean")]
    # shares and KnowCov: Clopper-Pearson; means of levels (CogShift, the shift sizes): the betting interval
    assert (with_ci["ci_high"] - with_ci["ci_low"] > 0).all() and set(with_ci["ci_method"]) <= {
        "clopper_pearson", "clopper_pearson_bounded_mean", BETTING_MEAN}
    assert read_provenance(results / "metrics" / "all.parquet")["intervals"]["method"] == "clopper_pearson"
    plan = pd.read_parquet(results / "metrics" / "study_plan.parquet")
    if any(len(spec["strategies"]) > 1 for spec in cfg["datasets"].values()):  # a comparison is planned
        assert set(plan["metric"]) == {"usability", "catcons", "knowcov"} and (plan["n_pairs"] <= LIMIT).all()
        assert (plan["n_needed"].dropna() > LIMIT).all()  # 3 items per cell detect no 10-point difference
    else:
        assert plan.empty
    report = (results / "report.html").read_text()
    assert "<img" in report or "<svg" in report
    assert list((results / "figures").glob("*.png")) and list((results / "tables").glob("*.tex"))
    # The item explorer: one row per generated question, the judges by name, linked from the report.
    from bloomqg.reporting.explorer.encode import decode_data_script

    explorer = decode_data_script((results / "explorer" / "data.js").read_text(encoding="utf-8"))
    assert explorer["n"] == n_cells * LIMIT and explorer["judges"] == judges
    assert 'href="explorer/index.html#f.model=' in report


def test_a_strategy_only_the_config_defines_is_compared_and_shown_everywhere(finished_study):
    """zeroshot: a .test config entry and a template, no code. Its cells are scored, compared with
    the baseline (the first listed, CoT) with Holm-adjusted p, in the robustness rows, and named
    by its label in the tables, the report and the explorer."""
    from bloomqg.reporting.explorer.encode import decode_data_script

    workdir, config = finished_study
    cfg = yaml.safe_load(config.read_text())
    assert cfg["strategies"]["zeroshot"]["label"] == "Zero-shot"
    results = workdir / "results"
    metrics = read_frame(results / "metrics" / "all.parquet", METRICS)
    assert {"usability", "catcons"} <= set(metrics.loc[metrics["strategy"] == "zeroshot", "metric"])
    paired = pd.read_parquet(results / "metrics" / "paired.parquet")
    pairs = set(zip(paired["strategy_a"], paired["strategy_b"]))
    assert pairs == {("cot", "fgp"), ("cot", "zeroshot")}  # each against the baseline, no fgp-zeroshot
    tested = paired.dropna(subset=["p_value"])
    assert len(tested) and (tested["p_adjusted"] >= tested["p_value"] - 1e-12).all()
    assert (tested["family_size"] >= 1).all()
    robustness = pd.read_parquet(results / "metrics" / "robustness.parquet")
    compared = robustness[robustness["comparison"] == "strategy vs strategy"]
    assert {("cot", "fgp"), ("cot", "zeroshot")} <= set(zip(compared["strategy"], compared["strategy_b"]))
    paired_table = (results / "tables" / "table_paired.md").read_text()
    assert "Zero-shot" in paired_table and "ZEROSHOT" not in paired_table
    assert "Zero-shot" in (results / "tables" / "table5_usability.md").read_text()
    report = (results / "report.html").read_text()
    assert "Zero-shot − CoT" in report and "ZEROSHOT" not in report
    explorer = decode_data_script((results / "explorer" / "data.js").read_text(encoding="utf-8"))
    assert explorer["strategy_labels"] == {"cot": "CoT", "fgp": "FGP", "zeroshot": "Zero-shot"}


def test_the_report_answers_first_and_contradicts_itself_nowhere(finished_study):
    """The .test study's report (issue 41): the Answer first, and the same quantity the same
    wherever it appears (tests/support/report_consistency.py)."""
    from tests.support.report_consistency import report_inconsistencies

    workdir, _ = finished_study
    report = (workdir / "results" / "report.html").read_text()
    assert report.index('<section id="answer">') < report.index('<section id="overview">')
    text = re.sub(r"<[^>]+>", "", report)  # the names sit in no-break spans
    assert "Zero-shot against CoT (Chain-of-Thought), " in text
    assert "FGP (Fine-Grained Prompting) against CoT (Chain-of-Thought), " in text
    assert report_inconsistencies(report) == []
    # one fact per number: each number of the quantity sections is a row of the facts frame
    from tests.support.report_facts import unmatched_numbers

    assert unmatched_numbers(report, pd.read_parquet(workdir / "results" / "report_facts.parquet")) == []
    robustness = pd.read_parquet(workdir / "results" / "metrics" / "robustness.parquet")
    assert not ((robustness["n_pairs"] == 0) & (robustness["verdict"] != "not compared")).any()


def test_the_report_says_how_many_labels_would_bound_catcons(finished_study):
    """No annotation is imported in this study: annotation_plan runs on its votes, and the report
    says how many labels per cell would bound the share of questions at the original's level
    (the plan's CatCons-like share, over all judged questions) to the target half-width (issue 30)."""
    workdir, _ = finished_study
    plan = pd.read_parquet(workdir / "results" / "calibration" / "plan.parquet")
    catcons = plan[plan["metric"] == "catcons_level"]
    assert len(catcons) == 4 and (catcons["n_needed"] >= 1).all()
    assert (catcons["n_needed"] <= catcons["big_n"]).all()
    # the paper's panel's agreement stands in only where this panel's Bloom levels pass the gate;
    # elsewhere the plan is for the labels alone (no disagreement assumed)
    alone = catcons["agreement_source"].str.startswith("labels alone (bloom level ")
    assert (alone | (catcons["agreement_source"] == "assumed")).all()
    assert catcons.loc[alone, "disagreement"].isna().all() and catcons.loc[~alone, "disagreement"].notna().all()
    report = html.unescape((workdir / "results" / "report.html").read_text())
    share = "the share at the original's level (all judged questions)"
    if catcons["reachable"].all():
        n = int(catcons["n_needed"].max())
        assert f"No annotation was imported: {n} labels per cell would bound {share} to ± 5 points" in report
    else:  # 3 items per cell cannot bound it to ± 5: the report must not say they would
        assert f"would bound {share}" not in report and f"labelling every question would still leave {share}" in report


def test_second_run_does_nothing(finished_study):
    workdir, config = finished_study
    started = time.monotonic()
    result = snakemake(workdir, config)
    elapsed = time.monotonic() - started
    assert "Nothing to be done" in result.stdout + result.stderr
    print(f"no-op rerun took {elapsed:.1f} s")


def test_runs_from_another_directory(finished_study, tmp_path):
    workdir, config = finished_study
    # -s and --directory from an unrelated current directory: paths resolve through the workflow.
    result = subprocess.run(
        [*SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
         "--configfile", str(config), "--cores", "1", "-n"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Nothing to be done" in result.stdout + result.stderr


def test_snakemake_report_bundles_outputs(finished_study, tmp_path):
    from tests.support.report_zip import broken_links, unpack, workflow_description

    workdir, config = finished_study
    snakemake(workdir, config, "--report", str(workdir / "report.zip"))
    with zipfile.ZipFile(workdir / "report.zip") as bundle:
        names = bundle.namelist()
    assert any(name.endswith("report.html") for name in names)
    assert any(name.endswith("fig2_transitions.png") for name in names)
    # Unpacked, every link of every page resolves inside the zip: the study's report lies beside
    # its explorer (bundle_report), so its table cells and figure marks open the items.
    index = unpack(workdir / "report.zip", tmp_path)
    assert any(name.endswith("explorer/index.html") for name in names)
    assert not broken_links(index.parent), broken_links(index.parent)[:10]
    # The workflow description shows this run's config, the gate in its current keys.
    cfg = yaml.safe_load(config.read_text())
    text = workflow_description(index)
    assert "None" not in text and "{{" not in text and "{%" not in text
    assert f"models {', '.join(cfg['models'])};" in text and f"datasets {', '.join(cfg['datasets'])};" in text
    assert f"judges {', '.join(cfg['judges'])}." in text
    gate = {"coefficient": "alpha", "threshold": 0.7, "action": "flag", **cfg.get("gate", {})}
    coefficient = "Gwet's AC1" if gate["coefficient"] == "ac1" else "Krippendorff's α"
    assert f"Reliability gate: {coefficient} ≥ {gate['threshold']} (action: {gate['action']})." in text


def test_changing_decoding_or_batching_reruns_generation_not_the_conversion(finished_study, tmp_path):
    workdir, config = finished_study
    cfg = yaml.safe_load(config.read_text())
    model = cfg["models"]["smollm2-135m"]
    model["generation"]["temperature"] = 0.5
    model["batch_size"] = 4
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(cfg, sort_keys=False))
    jobs = planned_jobs(snakemake(workdir, edited, "-n").stdout)
    n_cells = sum(len(s["strategies"]) for s in cfg["datasets"].values())
    assert jobs.get("generate_questions") == n_cells
    assert "prepare_model" not in jobs and "build_prompts" not in jobs and "prepare_dataset" not in jobs


def test_calibrate_on_the_study_with_a_sheet_filled_by_a_rule_equals_ppi_python(finished_study, tmp_path):
    """Issue 30 on this .test study: export the blind sample, fill the sheet by a known rule (every
    question readable and answerable, unique only when the sheet's row number is even, Bloom level
    Apply, the original's units), import it and calibrate; each interval equals ppi-python's on
    the joined per-item data, and the joined rows are the sheet's answers."""
    ppi_reference = pytest.importorskip("tests.support.ppi_reference")
    pytest.importorskip("ppi_py")
    from bloomqg.store.frames import ANNOTATION_ITEMS, CALIBRATION_ESTIMATES, CALIBRATION_ITEMS

    workdir, config = finished_study
    cfg = yaml.safe_load(config.read_text())
    # two of each cell's three questions: one is left for the judges' values to carry
    cfg.update({"annotation": {"items_per_cell": 2}, "calibration": {}})
    edited = tmp_path / "annotated.yaml"
    edited.write_text(yaml.safe_dump(cfg, sort_keys=False))
    snakemake(workdir, edited, "export_annotation")
    folder = workdir / "results" / "annotation"
    sheet = pd.read_csv(folder / "sheet.csv", encoding="utf-8-sig", dtype=str, keep_default_na=False)
    unique = ["yes" if i % 2 == 0 else "no" for i in range(len(sheet))]
    filled = sheet.assign(annotator="a", unique=unique, readable="yes", answerable="yes", bloom_level="Apply",
                          knowledge_units=sheet["original_knowledge_units"])
    (workdir / "annotations").mkdir()
    filled.to_csv(workdir / "annotations" / "a.csv", index=False)
    snakemake(workdir, edited, "calibrate")

    items = read_frame(folder / "items.parquet", ANNOTATION_ITEMS)
    # four cells, up to two drawn in each (a cell offers only the questions it generated)
    per_cell = items.groupby(["dataset", "strategy", "model"]).size()
    assert len(per_cell) == 4 and per_cell.between(1, 2).all(), per_cell
    joined = read_frame(workdir / "results" / "calibration" / "items.parquet", CALIBRATION_ITEMS)
    said = dict(zip(filled["annotation_id"], filled["unique"]))
    uniques = joined[(joined["metric"] == "unique") & joined["annotation_id"].notna()]
    assert sorted(uniques["annotation_id"]) == sorted(items["annotation_id"])
    assert all(human == (said[a] == "yes") for a, human in zip(uniques["annotation_id"], uniques["human"]))
    readable = joined[(joined["metric"] == "readable") & joined["annotation_id"].notna()]
    assert (readable["human"] == 1.0).all()
    estimates = read_frame(workdir / "results" / "calibration" / "estimates.parquet", CALIBRATION_ESTIMATES)
    compared = ppi_reference.check_estimates_against_ppi_python(estimates, joined)
    assert compared >= 3 * (per_cell >= 2).sum()  # at least the three yes/no criteria of each cell of 2 or more
    assert ((estimates["n"] >= 2) & (estimates["n"] < estimates["big_n"])).any()  # PPI proper, not a census


def planned_wildcards(dry_run_output: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, wildcards) of every job a dry run prints."""
    jobs: list[tuple[str, dict[str, str]]] = []
    for line in dry_run_output.splitlines():
        text = line.strip()
        if header := re.match(r"^(?:local)?rule (\w+):$", text):
            jobs.append((header.group(1), {}))
        elif text.startswith("wildcards:") and jobs:
            jobs[-1][1].update(pair.split("=", 1) for pair in text.split(":", 1)[1].strip().split(", "))
    return jobs


def test_editing_the_fgp_template_reruns_only_fgp_work(finished_study):
    """Last in this module: it leaves the plan as it found it (content and timestamp). CoT's
    prompts, questions and per-cell judgments are not redone; a judge that loads a model reruns its
    one job for all cells (judge_all_cells), so CoT's votes follow it, its LLM scores from the
    call cache."""
    workdir, config = finished_study
    cfg = yaml.safe_load(config.read_text())
    fgp_datasets = [d for d, spec in cfg["datasets"].items() if "fgp" in spec["strategies"]]
    template = workdir / "fgp.md"
    original, stat = template.read_text(), template.stat()
    try:
        template.write_text(original + "\nKeep the question under 40 words.\n")
        plan = snakemake(workdir, config, "-n")
    finally:
        template.write_text(original)
        os.utime(template, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    jobs = planned_jobs(plan.stdout)
    assert jobs.get("build_prompts") == len(fgp_datasets)
    assert jobs.get("generate_questions") == len(fgp_datasets) * len(cfg["models"])
    loading = [name for name, spec in cfg["judges"].items() if spec["backend"] in ("hf", "embedding")]
    assert jobs.get("judge_questions") == len(fgp_datasets) * len(cfg["models"]) * (len(cfg["judges"]) - len(loading))
    assert jobs.get("judge_all_cells") == len(loading)
    assert "prepare_dataset" not in jobs and "prepare_model" not in jobs
    redone = [(rule, wildcards) for rule, wildcards in planned_wildcards(plan.stdout)
              if rule in ("build_prompts", "generate_questions", "merge_generations", "judge_questions")]
    assert redone and all(wildcards["strategy"] == "fgp" for _, wildcards in redone), redone
