"""The judge_bias target against fake judges with planted biases on a loopback server.

Two API generators of different families write the questions; five API judges answer from
:mod:`tests.support.planted_judge_server`: a fair one, one that picks the first-listed Bloom
level on a third of the questions, one that prefers its own family's questions, one whose
verdicts track length, and one that answers differently under another seed; the offline
``rules`` judge runs through the probes too. Each probe must find its planted bias (CI
excluding zero) and nothing for the fair judge; a forced rerun of the API judges' probes must
send zero requests, and estimate_cost must count the probes' calls (none left to make after
the run).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bloomqg.api.budget import SpendLedger
from bloomqg.api.ledger import study_ledger
from bloomqg.store.parquet_io import read_frame, read_frames
from bloomqg.store.frames import BIAS_ESTIMATES, GENERATIONS, JUDGE_PROBES, JUDGMENTS
from tests.conftest import REPO
from tests.integration.test_workflow import planned_jobs
from tests.support.planted_judge_server import PlantedJudgeServer

pytestmark = pytest.mark.integration

ITEMS_PER_CELL = 36  # every item of the embedded cs sample
API_JUDGES = {"fair": "beta", "position": "gamma", "selfpref-alpha": "alpha", "length": "delta", "noisy": "epsilon"}


@pytest.fixture(scope="module")
def server():
    with PlantedJudgeServer() as planted:
        yield planted


def write_config(workdir: Path, server: PlantedJudgeServer) -> Path:
    api = {"backend": "openai", "base_url": server.base_url, "api_key_env": "BLOOMQG_PLANTED_KEY",
           "max_retries": 2, "timeout_s": 10, "concurrency": 8,
           "price_per_million_input": 1.0, "price_per_million_output": 4.0}  # priced: the ledger counts money
    judges = {name: {**api, "model": name, "family": family, "generation": {"temperature": 0.0, "max_new_tokens": 128}}
              for name, family in API_JUDGES.items()}
    judges["rules"] = {"backend": "rules"}
    config = {
        "seed": 11, "exemplars": 1, "strategies": ["fgp"], "cache_dir": str(workdir / "cache"),
        "datasets": {"cs": {"loader": "embedded", "path": str(REPO / "data" / "cs" / "questions.csv"),
                            "domain": "computer science"}},
        "models": {f"gen-{family}": {**api, "model": f"gen-{family}", "family": family} for family in ("alpha", "beta")},
        "judges": judges,
        "judge_bias": {"judges": list(judges), "items_per_cell": ITEMS_PER_CELL},
        "bootstrap": {"n_resamples": 400, "confidence": 0.95},
    }
    path = workdir / "bias.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def snakemake(workdir: Path, config: Path, *args: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
         "--configfile", str(config), "--cores", "2", *args],
        capture_output=True, text=True, timeout=900, env={**os.environ, "BLOOMQG_PLANTED_KEY": "sk-planted"},
    )


@pytest.fixture(scope="module")
def bias_study(server, tmp_path_factory) -> tuple[Path, Path, subprocess.CompletedProcess, dict[str, int]]:
    """The judge_bias target run once in a study folder: (folder, config, the run, the
    completions each API judge was asked for). The bias test reads and reruns it; the
    annotation test copies its generators' questions."""
    workdir = tmp_path_factory.mktemp("bias")
    config = write_config(workdir, server)
    asked_before = dict(server.by_model)  # the server may have answered another test of this module
    first = snakemake(workdir, config, "judge_bias")
    asked = {judge: server.by_model[judge] - asked_before.get(judge, 0) for judge in API_JUDGES}
    return workdir, config, first, asked


def detected(estimates: pd.DataFrame, judge: str, probe: str, statistic: str, criterion: str) -> pd.Series:
    row = estimates[(estimates["judge"] == judge) & (estimates["probe"] == probe)
                    & (estimates["statistic"] == statistic) & (estimates["criterion"] == criterion)]
    assert len(row) == 1, (judge, probe, statistic, criterion)
    return row.iloc[0]


def test_planted_biases_are_found_and_a_rerun_sends_nothing(bias_study, server):
    tmp_path, config, first, asked = bias_study
    assert first.returncode == 0, first.stderr[-5000:]
    n_questions = 2 * ITEMS_PER_CELL  # two generators, one strategy
    for judge in API_JUDGES:  # base, repeat and order probe: one call each per question
        assert asked[judge] == 3 * n_questions, judge

    estimates = read_frame(tmp_path / "results" / "judge_bias" / "estimates.parquet", BIAS_ESTIMATES)
    probes = read_frame(tmp_path / "results" / "judge_bias" / "probes" / "cs" / "fgp" / "gen-alpha" / "position.parquet",
                        JUDGE_PROBES)
    assert set(probes["probe"]) == {"base", "repeat", "order"} and (probes["status"] == "ok").all()

    # position: the first-listed level on a third of the questions
    for statistic, probe in (("excess_over_repeat", "order"), ("first_position_excess", "position")):
        row = detected(estimates, "position", probe, statistic, "bloom_level")
        assert row["detected"] and row["ci_low"] > 0, row.to_dict()
    # self-preference: yes and Create on its own family's questions
    for criterion in ("readable", "answerable", "bloom_level"):
        row = detected(estimates, "selfpref-alpha", "self_preference", "self_preference", criterion)
        assert row["detected"] and row["ci_low"] > 0, row.to_dict()
    # length: readable only when short, the level rising with length
    assert detected(estimates, "length", "length", "point_biserial", "readable")["ci_high"] < 0
    assert detected(estimates, "length", "length", "spearman", "bloom_level")["ci_low"] > 0
    # consistency: another seed, another answer on about a quarter of the questions
    row = detected(estimates, "noisy", "consistency", "self_agreement", "readable")
    assert row["detected"] and row["ci_high"] < 1
    # its order probe shares the base probe's seed: fewer changes than a repeat, no order bias
    assert not detected(estimates, "noisy", "order", "excess_over_repeat", "readable")["detected"]
    # the fair judge: nothing, on any probe or criterion
    fair = estimates[estimates["judge"] == "fair"]
    assert set(fair["probe"]) == {"order", "position", "consistency", "self_preference", "length"}
    assert not fair["detected"].any(), fair[fair["detected"]].to_dict("records")
    # the offline rules judge runs through the probes; it is deterministic and reads no list order
    rules = estimates[(estimates["judge"] == "rules") & estimates["probe"].isin(["order", "position", "consistency"])]
    assert len(rules) and not rules["detected"].any()
    assert (tmp_path / "results" / "judge_bias" / "judge_bias_positions.png").stat().st_size > 0
    table = (tmp_path / "results" / "judge_bias" / "judge_bias.md").read_text()
    assert "position: first-listed excess" in table and "*" in table

    # The judges' own jobs now: their calls are the base probes' (answered from the cache, no
    # second payment), and the report's ledger over generation, judging and the probes counts
    # each call once, per stage as the estimate does, to the cent of the spend ledger.
    probe_files = [f"results/judge_bias/probes/cs/fgp/gen-{family}/{judge}.parquet"
                   for family in ("alpha", "beta") for judge in API_JUDGES]
    judgment_files = [f"results/judgments/cs/fgp/gen-{family}/{judge}.parquet"
                      for family in ("alpha", "beta") for judge in [*API_JUDGES, "rules"]]
    asked_total = server.requests
    judged = snakemake(tmp_path, config, *judgment_files)
    assert judged.returncode == 0, judged.stderr[-5000:]
    assert server.requests == asked_total, "a judge's call its base probe paid for must not be paid again"
    ledger = study_ledger(
        generations=read_frames([tmp_path / f"results/generations/cs/fgp/gen-{f}.parquet" for f in ("alpha", "beta")],
                                GENERATIONS),
        judgments=read_frames([tmp_path / path for path in judgment_files], JUDGMENTS),
        probes=read_frames([tmp_path / path for path in probe_files], JUDGE_PROBES),
    )
    paid = sum(entry["cost_usd"] for entry in SpendLedger(tmp_path / "cache" / "spend.jsonl").entries())
    assert paid > 0 and ledger["cost_usd"].sum() == pytest.approx(paid, rel=1e-9)
    assert ledger["paid_earlier"].sum() == 0, "a call this run paid is not 'paid earlier'"

    # Each API judge's probes again, forced: the rules judge and the summary send no request.
    before = server.requests
    rerun = snakemake(tmp_path, config, *probe_files, "--forcerun", "probe_judge")
    assert rerun.returncode == 0, rerun.stderr[-5000:]
    assert planned_jobs(rerun.stderr) == {"probe_judge": len(probe_files)}
    assert server.requests == before, "a rerun of the probes must be answered from the call cache"

    # With nothing cached, the estimate counts each call once: the base probe's calls are the
    # judges' own (every item is probed), so judging plus probes is what the run asked for.
    (tmp_path / "cache").rename(tmp_path / "cache-aside")
    try:
        fresh = snakemake(tmp_path, config, "estimate_cost")
    finally:
        (tmp_path / "cache-aside").rename(tmp_path / "cache")
    assert fresh.returncode == 0, fresh.stderr[-5000:]
    uncached = pd.read_csv(tmp_path / "logs" / "estimate_cost.tsv", sep="\t")
    to_call = uncached[uncached["role"].isin(["judge", "judge_bias"])].groupby("name")["to_call"].sum()
    assert {judge: to_call[judge] for judge in API_JUDGES} == asked

    stage_of_role = {"generator": "generation", "judge": "judging", "judge_bias": "judge_bias"}
    estimated = (uncached.assign(stage=uncached["role"].map(stage_of_role))
                 .groupby(["stage", "name"])["to_call"].sum())
    counted = ledger.assign(name=ledger["judge"].fillna(ledger["model"])).groupby(["stage", "name"])["requests"].sum()
    assert counted[counted > 0].to_dict() == estimated[estimated > 0].to_dict()

    estimate = snakemake(tmp_path, config, "estimate_cost")
    assert estimate.returncode == 0, estimate.stderr[-5000:]
    table = pd.read_csv(tmp_path / "logs" / "estimate_cost.tsv", sep="\t")
    probed = table[table["role"] == "judge_bias"]
    assert set(probed["name"]) == set(API_JUDGES)
    assert (probed.groupby("name")["requests"].sum() == 3 * n_questions).all()
    assert probed["to_call"].sum() == 0 and server.requests == before


def test_alt_test_of_three_exported_sheets_matches_a_direct_computation(tmp_path, server, bias_study):
    """Three annotators fill the exported sheet with the fair judge's verdicts; the import's
    alt-test must pass that judge everywhere and decide the length judge's readable as a direct
    t-test and Benjamini-Yekutieli computation here says."""
    import shutil

    from scipy import stats

    from bloomqg.store.frames import ALT_TEST, ALT_TEST_COMPARISONS, ANNOTATION_ITEMS, JUDGMENTS

    config = yaml.safe_load(write_config(tmp_path, server).read_text())
    config["models"] = {"gen-alpha": config["models"]["gen-alpha"]}
    config["judges"] = {name: config["judges"][name] for name in ("fair", "position", "length")}
    del config["judge_bias"]
    config["annotation"] = {"items_per_cell": ITEMS_PER_CELL, "alt_test": {"epsilon": 0.2}}
    path = tmp_path / "annotate.yaml"
    path.write_text(yaml.safe_dump(config))
    # gen-alpha's questions as this config would write them (same generator, seed and prompts):
    # copied with their times and without Snakemake's records, they are taken as made here.
    assert bias_study[2].returncode == 0, bias_study[2].stderr[-5000:]
    for stage in ("datasets", "prompts", "generations"):
        shutil.copytree(bias_study[0] / "results" / stage, tmp_path / "results" / stage)
    exported = snakemake(tmp_path, path, "export_annotation")
    assert exported.returncode == 0, exported.stderr[-5000:]

    folder = tmp_path / "results" / "annotation"
    items = read_frame(folder / "items.parquet", ANNOTATION_ITEMS)
    judged = {name: read_frame(tmp_path / "results" / "judgments" / "cs" / "fgp" / "gen-alpha" / f"{name}.parquet",
                               JUDGMENTS).set_index(["prompt_id", "criterion"]) for name in ("fair", "length")}
    fair = judged["fair"]
    yes_no = {True: "yes", False: "no"}
    sheet = pd.read_csv(folder / "sheet.csv", encoding="utf-8-sig", dtype=str, keep_default_na=False)
    prompt_of = dict(zip(items["annotation_id"], items["prompt_id"]))
    answers = {
        "unique": lambda p: yes_no[bool(fair.loc[(p, "unique"), "value_bool"])],
        "readable": lambda p: yes_no[bool(fair.loc[(p, "readable"), "value_bool"])],
        "answerable": lambda p: yes_no[bool(fair.loc[(p, "answerable"), "value_bool"])],
        "bloom_level": lambda p: fair.loc[(p, "bloom_level"), "value_level"],
        "knowledge_units": lambda p: "; ".join(fair.loc[(p, "knowledge_units"), "value_units"]),
    }
    (tmp_path / "annotations").mkdir()
    for who in ("ann1", "ann2", "ann3"):
        filled = sheet.assign(annotator=who, **{column: [answer(prompt_of[a]) for a in sheet["annotation_id"]]
                                                for column, answer in answers.items()})
        filled.to_csv(tmp_path / "annotations" / f"{who}.csv", index=False)
    imported = snakemake(tmp_path, path, "import_annotations")
    assert imported.returncode == 0, imported.stderr[-5000:]

    summary = read_frame(folder / "alt_test.parquet", ALT_TEST).set_index(["rater", "criterion"])
    comparisons = read_frame(folder / "alt_test_annotators.parquet", ALT_TEST_COMPARISONS)
    assert (summary.loc["fair", "winning_rate"] == 1.0).all()  # it says what every annotator says
    # length vs three identical annotators on readable: each left-out annotator aligns fully with the
    # others, the judge only where it agrees, so d_i = 1 where it disagrees and 0 elsewhere
    disagree = [float(bool(judged["length"].loc[(p, "readable"), "value_bool"])
                      != bool(fair.loc[(p, "readable"), "value_bool"])) for p in items["prompt_id"]]
    p_value = float(stats.ttest_1samp(disagree, 0.2, alternative="less").pvalue)
    threshold = 0.05 / (1 + 1 / 2 + 1 / 3)  # BY, m = 3 equal p-values: all rejected iff p <= q / H_3
    expected_omega = 1.0 if p_value <= threshold else 0.0
    mine = comparisons[(comparisons["rater"] == "length") & (comparisons["criterion"] == "readable")]
    assert len(mine) == 3 and mine["p_value"].tolist() == pytest.approx([p_value] * 3)
    assert mine["rater_advantage"].tolist() == pytest.approx([1 - sum(disagree) / len(disagree)] * 3)
    row = summary.loc[("length", "readable")]
    assert row["winning_rate"] == expected_omega
    verb = "can" if expected_omega >= 0.5 else "cannot"
    assert row["verdict"].startswith(f"judge length {verb} replace an annotator on readable at ε = 0.2")
    assert "panel majority" in summary.index.get_level_values("rater")
    table = (folder / "alt_test.md").read_text(encoding="utf-8")
    assert f"| length | Readable | {expected_omega:.2f} | {int(3 * expected_omega)}/3 |" in table
    from bloomqg.reporting.report import _table_entries

    assert _table_entries([folder / "alt_test.json"], {})[0]["stem"] == "alt_test"  # the report reads it
