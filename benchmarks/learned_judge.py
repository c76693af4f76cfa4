"""How far does the ``learned`` judge agree with the paper's panel, beside ``rules`` and ``minilm``,
on the writer it was trained on and on one it never saw?

Trained on the release's GLM-4-9B runs (CS CoT, CS FGP, K-12 math FGP), measured two ways:

- **by item, within GLM**: GroupKFold on the original item (CoT and FGP rewrite the same
  originals; no original's questions on both sides);
- **across models**: trained on every GLM question, tested on Qwen2.5-7B's three runs, the
  validation writer (its files beside GLM's in ../shared/data). Features, regularisation,
  calibration and ``min_confidence`` were chosen here; the other four models of the release are
  the held-out test and are not read.

On the same questions, the ``rules`` and ``minilm`` judges (their default settings, the question's
own original left out of their references) are scored beside it. Printed per run and pooled:
percent agreement and Cohen's κ with the panel's majority (Bloom level on CS, where the panel
judged one; knowledge unit on every run), ``n`` the questions both answered. Then, on Qwen: the
expected calibration error and the reliability diagram of each criterion (with no recalibration,
Platt, isotonic and a top-label isotonic map fitted on GLM's out-of-fold predictions; the
reliability diagram of the criterion's own, ``CALIBRATION``), the agreement at several
``min_confidence`` values, abstaining or deferring to the better base judge, and how far the
judge's own CatCons and KnowCov (share of questions it gives the original's level or unit) sit
from the panel's. Last, whether the usability criteria carry a signal to learn.

    PYTHONPATH=. python benchmarks/learned_judge.py [--release-root ../shared/data/llm-eval-release]

The last line is JSON: ``{"cross_model": {"bloom_level": {run: {judge: {"agreement", "kappa",
"n"}}}, "knowledge_units": {...}, "calibration": ..., "confidence": ..., "coverage_bias": ...},
"by_item": {...}, "usability": ...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bloomqg.inputs.bloom import BLOOM_LEVELS  # noqa: E402
from bloomqg.judges.learned import (  # noqa: E402
    CALIBRATIONS,
    FeatureSource,
    apply_top_label,
    calibration_of,
    expected_calibration_error,
    feature_frame,
    fit_calibrated,
    fit_top_label,
    load_encoder,
    most_likely,
    originals,
    out_of_fold,
    reliability,
    restrict,
    training_rows,
    unit_target,
)
from bloomqg.release.runs import ReleaseRun, import_run  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
THRESHOLDS = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
TRAIN_MODEL, VALIDATION_MODEL = "glm-4-9b", "qwen25-7b"
#: The base judge a low-confidence answer defers to, per criterion: the better one on Qwen.
DEFER_TO = {"bloom_level": "rules", "knowledge_units": "minilm"}


def default_release_root() -> Path:
    shared = Path(os.environ.get("BLOOMQG_SHARED_DATA", REPO.parent / "shared" / "data"))
    return shared / "llm-eval-release"


def release_votes(manifest: Path, release_root: Path, models: tuple[str, ...] | None = None) -> pd.DataFrame:
    """The VOTES rows of every run the manifest names (of ``models`` only, when given) whose
    files are under ``release_root``."""
    import yaml

    document = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    frames = []
    for entry in document["runs"]:
        if models is not None and entry["model"] not in models:
            continue
        run = ReleaseRun(entry["model"], entry["dataset"], entry["strategy"],
                         release_root / entry["generations"], release_root / entry["votes"])
        if run.generations.is_file() and run.votes.is_file():
            frames.append(import_run(run)[1])
    if not frames:
        sys.exit(f"no run of {models} from {manifest} under {release_root}")
    return pd.concat(frames, ignore_index=True)


def agreement(judge: pd.Series, panel: pd.Series) -> dict:
    """Percent agreement and Cohen's κ on the items both rated."""
    from sklearn.metrics import cohen_kappa_score

    both = judge.notna() & panel.notna() & (judge.astype(str) != "none")
    mine, theirs = judge[both].astype(str).to_numpy(), panel[both].astype(str).to_numpy()
    if not len(mine):
        return {"agreement": None, "kappa": None, "n": 0}
    return {"agreement": round(float(np.mean(mine == theirs)), 4),
            "kappa": round(float(cohen_kappa_score(mine, theirs)), 4), "n": int(len(mine))}


def targets_of(rows: pd.DataFrame, criterion: str) -> pd.Series:
    """The panel's class per row (None where it has none)."""
    if criterion == "bloom_level":
        return rows["bloom_level"].where(rows["bloom_level"].notna(), None)
    return rows["knowledge_units"].map(unit_target)


def base_answers(features: pd.DataFrame, criterion: str) -> dict[str, pd.Series]:
    """The rules and minilm judges' answers (None where they gave none)."""
    suffix = "level" if criterion == "bloom_level" else "unit"
    return {name: features[f"{name}_{suffix}"].where(features[f"{name}_{suffix}"] != "none", None)
            for name in ("rules", "minilm")}


def tasks(rows: pd.DataFrame) -> list[tuple[str, str, pd.Index]]:
    """(criterion, model key, rows) of every classifier: the level on every levelled row, units per dataset."""
    found = [("bloom_level", "*", rows.index[rows["bloom_level"].notna()])]
    for dataset, group in rows.groupby("dataset", sort=True):
        found.append(("knowledge_units", str(dataset), group.index[targets_of(group, "knowledge_units").notna()]))
    return found


def run_name(row) -> str:
    return f"{row.dataset}/{row.strategy}"


def cross_model(train: pd.DataFrame, test: pd.DataFrame, features: pd.DataFrame, args) -> dict:
    """Trained on ``train``'s rows, every figure on ``test``'s."""
    result: dict = {"bloom_level": {}, "knowledge_units": {}, "calibration": {}, "confidence": {}, "coverage_bias": {}}
    for criterion, key, train_index in tasks(train):
        test_index = test.index[targets_of(test, criterion).notna()
                                & ((test["dataset"] == key) if key != "*" else test["bloom_level"].notna())]
        if not len(train_index) or not len(test_index):
            continue
        truth = targets_of(test.loc[test_index], criterion).astype(str)
        bases = base_answers(features.loc[test_index], criterion)
        per_method = {}
        x, y, groups = features.loc[train_index], targets_of(train.loc[train_index], criterion), train.loc[train_index, "item_id"]
        # a unit outside the dataset's inventory is never answered
        inventory = set(train.loc[train_index, "original_knowledge_units"].explode()) if key != "*" else None
        for method in CALIBRATIONS:
            model = fit_calibrated(criterion, x, y, groups, folds=args.folds, C=args.C, method=method)
            classes, p = restrict(model.classes_, model.predict_proba(features.loc[test_index].reset_index(drop=True)),
                                  inventory)
            if method == "top_label":  # the map is fitted on GLM's out-of-fold probabilities, as train_model does
                p = apply_top_label(p, fit_top_label(out_of_fold(x, y, groups, criterion, folds=args.folds, C=args.C,
                                                                 method="none"), y, inventory))
            per_method[method] = (pd.Series(np.asarray(classes)[p.argmax(axis=1)], index=test_index), p.max(axis=1))
        guess, top = per_method[calibration_of(criterion, args.calibration)]
        runs = test.loc[test_index].apply(run_name, axis=1)
        table = result[criterion]
        for run in sorted(runs.unique()) + ["pooled"]:
            on = runs.index if run == "pooled" else runs.index[runs == run]
            name = f"{key}/pooled" if run == "pooled" and key != "*" else run
            table[name] = {"learned": agreement(guess[on], truth[on]),
                           **{base: agreement(answers[on], truth[on]) for base, answers in bases.items()}}
        correct = (guess == truth).to_numpy()
        result["calibration"][f"{criterion}/{key}"] = {
            method: {"ece": round(expected_calibration_error(t, (g == truth).to_numpy()), 4),
                     "agreement": round(float(np.mean((g == truth).to_numpy())), 4)}
            for method, (g, t) in per_method.items()}
        result["calibration"][f"{criterion}/{key}"]["reliability"] = reliability(top, correct)
        confidence = {}
        fallback = bases[DEFER_TO[criterion]]
        for threshold in THRESHOLDS:
            kept = top >= threshold
            deferred = guess.where(kept, fallback)
            confidence[str(threshold)] = {"coverage": round(float(kept.mean()), 4),
                                          "abstain": agreement(guess[kept], truth[kept]),
                                          f"defer_to_{DEFER_TO[criterion]}": agreement(deferred, truth)}
        result["confidence"][f"{criterion}/{key}"] = confidence
        original = (test.loc[test_index, "original_bloom_level"] if criterion == "bloom_level"
                    else test.loc[test_index, "original_knowledge_units"].map(unit_target)).astype(str)
        for run in sorted(runs.unique()):
            on = runs.index[runs == run]
            result["coverage_bias"][f"{criterion}/{run}"] = {
                "panel_keeps_original": round(float((truth[on] == original[on]).mean()), 4),
                "learned_keeps_original": round(float((guess[on] == original[on]).mean()), 4)}
    pooled = {}
    for judge in ("learned", "rules", "minilm"):
        figures = [result["knowledge_units"][f"{d}/pooled"][judge] for d in sorted(train["dataset"].unique())
                   if f"{d}/pooled" in result["knowledge_units"]]
        n = sum(f["n"] for f in figures)
        pooled[judge] = {"agreement": round(sum(f["agreement"] * f["n"] for f in figures) / n, 4) if n else None, "n": n}
    result["knowledge_units"]["pooled"] = pooled
    return result


def by_item(rows: pd.DataFrame, features: pd.DataFrame, args) -> tuple[dict, dict[str, pd.Series]]:
    """Cross-validated by original item within ``rows``: agreement per criterion beside the base judges."""
    result, guesses = {}, {}
    for criterion, key, index in tasks(rows):
        truth = targets_of(rows.loc[index], criterion)
        guess = most_likely(out_of_fold(features.loc[index], truth, rows.loc[index, "item_id"], criterion,
                                        folds=args.folds, C=args.C, method=args.calibration))
        guesses[f"{criterion}/{key}"] = guess
        result[f"{criterion}/{key}"] = {"learned": agreement(guess, truth),
                                        **{name: agreement(answers, truth) for name, answers in
                                           base_answers(features.loc[index], criterion).items()}}
    return result, guesses


def print_table(title: str, table: dict) -> None:
    print(f"\n{title}")
    for name, by_judge in table.items():
        cells = "  ".join(f"{judge} {f['agreement']:.3f}" + (f"/{f['kappa']:.2f}" if f.get("kappa") is not None else "")
                          + f" (n {f['n']})" for judge, f in by_judge.items() if f.get("agreement") is not None)
        print(f"  {name:22s} {cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release-root", type=Path, default=default_release_root())
    parser.add_argument("--manifest", type=Path, default=REPO / "configs" / "llm-eval-release-manifest.yaml")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--C", type=float, default=None, help="both criteria's C (default: each its own)")
    parser.add_argument("--calibration", choices=CALIBRATIONS, default=None,
                        help="both criteria's calibration (default: each its own, CALIBRATION)")
    parser.add_argument("--predictions", type=Path, default=None,
                        help="write every GLM question's out-of-fold verdicts here (Parquet; benchmarks/cascade.py reads it)")
    args = parser.parse_args()
    if not args.release_root.is_dir():
        sys.exit(f"release not found at {args.release_root} (set --release-root or BLOOMQG_SHARED_DATA)")

    started = time.perf_counter()
    votes = release_votes(args.manifest, args.release_root, (TRAIN_MODEL, VALIDATION_MODEL))
    rows = training_rows(votes)
    source = FeatureSource(load_encoder("learned"), originals(votes))
    features = feature_frame(source, rows["dataset"].tolist(), rows["new_question"].tolist(),
                             rows["original_question"].tolist(), rows["item_id"].tolist())
    features.index = rows.index
    train, test = rows[rows["model"] == TRAIN_MODEL], rows[rows["model"] == VALIDATION_MODEL]
    print(f"{len(train)} {TRAIN_MODEL} and {len(test)} {VALIDATION_MODEL} judged questions; features in "
          f"{time.perf_counter() - started:.0f} s")

    result: dict = {"train": {"model": TRAIN_MODEL, "rows": len(train)}, "folds": args.folds,
                    "calibration": {c: calibration_of(c, args.calibration) for c in ("bloom_level", "knowledge_units")}}
    if len(test):
        result["validation"] = {"model": VALIDATION_MODEL, "rows": len(test)}
        result["cross_model"] = cross = cross_model(train, test, features, args)
        print_table(f"Bloom level, trained on {TRAIN_MODEL}, on {VALIDATION_MODEL} (agreement/kappa with the panel):",
                    cross["bloom_level"])
        print_table(f"Knowledge unit, trained on {TRAIN_MODEL}, on {VALIDATION_MODEL}:", cross["knowledge_units"])
        print("\nCalibration on the validation writer (expected calibration error, agreement):")
        for name, methods in cross["calibration"].items():
            print(f"  {name}: " + "; ".join(f"{m} ECE {f['ece']:.3f} agreement {f['agreement']:.3f}"
                                            for m, f in methods.items() if m != "reliability"))
            print("    reliability (confidence -> accuracy, n): " + ", ".join(
                f"{b['confidence']:.2f}->{b['accuracy']:.2f} ({b['n']})" for b in methods["reliability"]))
        print("\nmin_confidence on the validation writer: coverage; agreement abstaining; agreement deferring:")
        for name, thresholds in cross["confidence"].items():
            for threshold, f in thresholds.items():
                defer = next(v for k, v in f.items() if k.startswith("defer_to_"))
                print(f"  {name} {threshold}: coverage {f['coverage']:.3f}  abstain {f['abstain']['agreement']:.3f}  "
                      f"defer {defer['agreement']:.3f}")
        print("\nShare of questions given the original's level/unit (CatCons / KnowCov as the judge would measure):")
        for name, f in cross["coverage_bias"].items():
            print(f"  {name}: panel {f['panel_keeps_original']:.3f}  learned {f['learned_keeps_original']:.3f}")

    result["by_item"], guesses = by_item(train, features, args)
    print_table(f"Cross-validated by original item within {TRAIN_MODEL}:", result["by_item"])

    if args.predictions is not None:
        write_predictions(args.predictions, train, votes, features, guesses, source)

    result["usability"] = usability_signal(train, votes, features, args)
    print("\nUsability criteria in the training slice (share of the minority answer; cross-validated kappa):")
    for criterion, figures in result["usability"].items():
        print(f"  {criterion}: {figures}")
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    print(json.dumps(result))


def write_predictions(path: Path, rows: pd.DataFrame, votes: pd.DataFrame, features: pd.DataFrame,
                      guesses: dict[str, pd.Series], source: FeatureSource) -> None:
    """Every training question's out-of-fold verdicts beside the panel's and the base judges'."""
    unit_guess = pd.Series(None, index=rows.index, dtype=object)
    for key, guess in guesses.items():
        if key.startswith("knowledge_units/"):
            unit_guess.update(guess)
    keyed = votes.set_index(["model", "dataset", "strategy", "item_id"])
    keys = list(zip(rows["model"], rows["dataset"], rows["strategy"], rows["item_id"]))
    levels, units = base_answers(features.loc[rows.index], "bloom_level"), base_answers(features.loc[rows.index], "knowledge_units")
    table = rows[["model", "dataset", "strategy", "item_id", "original_bloom_level"]].assign(
        original_unit=rows["original_knowledge_units"].map(unit_target),
        panel_level=rows["bloom_level"], panel_unit=rows["knowledge_units"].map(unit_target),
        panel_unique=[keyed.at[key, "unique"] for key in keys],
        learned_level=guesses["bloom_level/*"].reindex(rows.index), learned_unit=unit_guess,
        rules_level=levels["rules"], rules_unit=units["rules"],
        rules_unique=[source.base(d).rules.judge_unique(q, o).value for d, q, o in
                      zip(rows["dataset"], rows["new_question"], rows["original_question"])],
        minilm_level=levels["minilm"], minilm_unit=units["minilm"],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    table.astype({c: object for c in table.columns}).to_parquet(path)
    print(f"out-of-fold verdicts written to {path}")


def usability_signal(rows: pd.DataFrame, votes: pd.DataFrame, features: pd.DataFrame, args) -> dict:
    """Per usability criterion: the minority answer's share; for unique (the only one with a
    minority worth fitting), the same classifier's cross-validated κ beside the rules judge's."""
    keyed = votes.set_index(["model", "dataset", "strategy", "item_id"])
    found = {}
    for criterion in ("unique", "readable", "answerable"):
        values = pd.Series([keyed.at[key, criterion] for key in
                            zip(rows["model"], rows["dataset"], rows["strategy"], rows["item_id"])], index=rows.index).dropna()
        values = values.astype(bool)
        minority = float(min(values.mean(), 1 - values.mean()))
        figures = {"n": int(len(values)), "minority_share": round(minority, 4), "minority_count": int(round(minority * len(values)))}
        if figures["minority_count"] >= 50:
            target = values.map(str)
            guess = most_likely(out_of_fold(features.loc[target.index], target, rows.loc[target.index, "item_id"],
                                            "bloom_level", folds=args.folds, C=args.C, method=args.calibration))
            figures["learned"] = agreement(guess, target)
        found[criterion] = figures
    return found


if __name__ == "__main__":
    main()
