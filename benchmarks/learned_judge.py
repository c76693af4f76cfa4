"""How far does the ``learned`` judge agree with the paper's panel, beside ``rules`` and ``minilm``?

On the release's GLM-4-9B slice (three runs: CS CoT, CS FGP, K-12 math FGP), the learned judge
(:mod:`bloomqg.judges.learned`) is cross-validated by source item: GroupKFold on the original
item, so no original's rewritten questions are in both the training and the test fold (CoT and
FGP rewrite the same originals). Every question of a test fold gets the learned judge's
out-of-fold prediction, and the ``rules`` and ``minilm`` judges' verdicts on the same questions.
Printed per criterion (Bloom level on CS, where the panel judged one; knowledge unit per
dataset): percent agreement and Cohen's κ with the panel's majority, ``n`` the questions where
both gave a value (a judge's abstention leaves the question out, as in judge_validation; the
learned judge never abstains here). Then the learned judge's Bloom level at several
``min_confidence`` values (coverage and agreement on what it answers), and whether the usability
criteria carry a signal to learn (prevalence of the minority answer and the cross-validated κ
of the same classifier for unique).

    python benchmarks/learned_judge.py [--release-root ../shared/data/llm-eval-release] [--manifest tests/release_glm.yaml]

The last line is JSON: ``{"bloom_level": {"learned": {"agreement", "kappa", "n"}, "rules": …,
"minilm": …}, "knowledge_units": {dataset: {...}}, "confidence": …, "usability": …}``.
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
from bloomqg.judges.base import JudgeItem  # noqa: E402
from bloomqg.judges.embedding import EmbeddingJudge  # noqa: E402
from bloomqg.judges.learned import (  # noqa: E402
    FeatureSource,
    feature_frame,
    load_encoder,
    most_likely,
    out_of_fold,
    originals,
    rules_judges,
    training_rows,
    unit_target,
)
from bloomqg.release.runs import ReleaseRun, import_run  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
THRESHOLDS = (0.0, 0.4, 0.5, 0.6, 0.7, 0.8)


def default_release_root() -> Path:
    shared = Path(os.environ.get("BLOOMQG_SHARED_DATA", REPO.parent / "shared" / "data"))
    return shared / "llm-eval-release"


def release_votes(manifest: Path, release_root: Path) -> pd.DataFrame:
    """The VOTES rows of every run the manifest names, its paths read under ``release_root``."""
    import yaml

    document = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    frames = []
    for entry in document["runs"]:
        run = ReleaseRun(entry["model"], entry["dataset"], entry["strategy"],
                         release_root / entry["generations"], release_root / entry["votes"])
        frames.append(import_run(run)[1])
    return pd.concat(frames, ignore_index=True)


def agreement(judge: pd.Series, panel: pd.Series) -> dict:
    """Percent agreement and Cohen's κ on the items both rated."""
    from sklearn.metrics import cohen_kappa_score

    both = judge.notna() & panel.notna()
    mine, theirs = judge[both].astype(str).to_numpy(), panel[both].astype(str).to_numpy()
    if not len(mine):
        return {"agreement": None, "kappa": None, "n": 0}
    return {"agreement": round(float(np.mean(mine == theirs)), 4),
            "kappa": round(float(cohen_kappa_score(mine, theirs)), 4), "n": int(len(mine))}


class MemoModel:
    """The MiniLM model as the minilm judge calls it, answered from the features' memo (the same
    unit-length vectors), so no text is encoded twice."""

    def __init__(self, source: FeatureSource) -> None:
        self.source = source

    def encode(self, texts, **_options) -> np.ndarray:
        return self.source.encode(list(texts))

    def get_sentence_embedding_dimension(self) -> int:
        return self.source.encoder.get_sentence_embedding_dimension()


def minilm_verdicts(rows: pd.DataFrame, encoder) -> pd.DataFrame:
    """The ``minilm`` judge's level and unit per row (its default settings, own item left out);
    ``encoder``: a SentenceTransformer, or a :class:`MemoModel`."""
    out = pd.DataFrame(index=rows.index, columns=["bloom_level", "knowledge_units"], dtype=object)
    for dataset, group in rows.groupby("dataset"):
        first = group.drop_duplicates("item_id")
        items = list(zip(first["item_id"], first["original_question"], first["original_bloom_level"],
                         first["original_knowledge_units"]))
        units = sorted({u for us in first["original_knowledge_units"] for u in us})
        judge = EmbeddingJudge("unused", items, units, model=encoder)
        judged = judge.judge_batch([JudgeItem(str(i), r.item_id, r.new_question, r.original_question)
                                    for i, r in zip(group.index, group.itertuples())])
        for index, verdict in zip(group.index, judged):
            level, unit = verdict.verdict["bloom_level"], verdict.verdict["knowledge_units"]
            out.at[index, "bloom_level"] = level.value
            out.at[index, "knowledge_units"] = unit.value[0] if unit.value else None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release-root", type=Path, default=default_release_root())
    parser.add_argument("--manifest", type=Path, default=REPO / "tests" / "release_glm.yaml")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--predictions", type=Path, default=None,
                        help="write every question's out-of-fold verdicts here (Parquet; benchmarks/cascade.py reads it)")
    args = parser.parse_args()
    if not args.release_root.is_dir():
        sys.exit(f"release not found at {args.release_root} (set --release-root or BLOOMQG_SHARED_DATA)")

    started = time.perf_counter()
    votes = release_votes(args.manifest, args.release_root)
    rows = training_rows(votes)
    encoder = load_encoder("learned")
    source = FeatureSource(encoder, rules_judges(originals(votes)))
    features = feature_frame(source, rows["dataset"].tolist(), rows["new_question"].tolist(),
                             rows["original_question"].tolist(), rows["original_bloom_level"].tolist(),
                             rows["item_id"].tolist())
    minilm = minilm_verdicts(rows, MemoModel(source))
    rules_level = features["rules_level"].where(features["rules_level"] != "none")
    rules_unit = features["rules_unit"].where(features["rules_unit"] != "none")
    print(f"{len(rows)} judged questions of {rows['item_id'].nunique()} originals; features in "
          f"{time.perf_counter() - started:.0f} s")

    result: dict = {"rows": len(rows), "folds": args.folds}
    # Bloom level: CS only (the panel judged no level for math)
    levelled = rows.index[rows["bloom_level"].notna()]
    panel = rows.loc[levelled, "bloom_level"]
    from sklearn.metrics import confusion_matrix

    probabilities = out_of_fold(features.loc[levelled], panel, rows.loc[levelled, "item_id"], "bloom_level",
                                folds=args.folds, C=args.C)
    predicted = most_likely(probabilities)
    result["bloom_level"] = {
        "learned": agreement(predicted, panel),
        "rules": agreement(rules_level.loc[levelled], panel),
        "minilm": agreement(minilm.loc[levelled, "bloom_level"], panel),
        "by_strategy": {
            str(strategy): {name: agreement(judge.loc[idx], panel.loc[idx]) for name, judge in
                            (("learned", predicted), ("rules", rules_level), ("minilm", minilm["bloom_level"]))}
            for strategy, idx in rows.loc[levelled].groupby("strategy").groups.items()
        },
    }
    print("\nBloom level against the panel's majority (CS), out-of-fold by original item:")
    for name in ("learned", "rules", "minilm"):
        figures = result["bloom_level"][name]
        print(f"  {name:8s} agreement {figures['agreement']:.3f}  kappa {figures['kappa']:.3f}  n {figures['n']}")
    for cell, by_judge in result["bloom_level"]["by_strategy"].items():
        print(f"  {cell}: " + "; ".join(f"{j} {f['agreement']:.3f}/{f['kappa']:.3f}" for j, f in by_judge.items()))

    # Confidence: abstain below a threshold
    top, best = probabilities.max(axis=1), probabilities.idxmax(axis=1)
    result["confidence"] = {}
    print("\nLearned Bloom level with min_confidence: coverage, agreement on what it answers")
    for threshold in THRESHOLDS:
        kept = top >= threshold
        figures = {"coverage": round(float(kept.mean()), 4), **agreement(best[kept], panel[kept])}
        result["confidence"][str(threshold)] = figures
        print(f"  {threshold:.1f}: coverage {figures['coverage']:.3f}  agreement {figures['agreement']:.3f}  "
              f"kappa {figures['kappa']:.3f}")
    levels = list(BLOOM_LEVELS)
    matrix = confusion_matrix(panel.astype(str), predicted.astype(str), labels=levels)
    result["bloom_level"]["confusion"] = {"levels": levels, "panel_by_learned": matrix.tolist()}
    print("\nConfusion (rows: panel, columns: learned):\n" + pd.DataFrame(matrix, index=levels, columns=levels).to_string())

    # Knowledge unit, per dataset
    result["knowledge_units"] = {}
    out_of_fold_units = {}
    print("\nKnowledge unit against the panel's majority, out-of-fold by original item:")
    for dataset, group in rows.groupby("dataset"):
        target = group["knowledge_units"].map(unit_target).dropna()
        guess = most_likely(out_of_fold(features.loc[target.index], target, rows.loc[target.index, "item_id"],
                                        "knowledge_units", folds=args.folds, C=args.C))
        out_of_fold_units[dataset] = guess
        result["knowledge_units"][dataset] = {
            "learned": agreement(guess, target), "rules": agreement(rules_unit.loc[target.index], target),
            "minilm": agreement(minilm.loc[target.index, "knowledge_units"], target),
        }
        for name, figures in result["knowledge_units"][dataset].items():
            print(f"  {dataset} {name:8s} agreement {figures['agreement']:.3f}  kappa {figures['kappa']:.3f}  n {figures['n']}")

    if args.predictions is not None:
        unit_guess = pd.Series(None, index=rows.index, dtype=object)
        for guess in out_of_fold_units.values():
            unit_guess.update(guess)
        keyed = votes.set_index(["model", "dataset", "strategy", "item_id"])
        keys = list(zip(rows["model"], rows["dataset"], rows["strategy"], rows["item_id"]))
        table = rows[["model", "dataset", "strategy", "item_id", "original_bloom_level"]].assign(
            original_unit=rows["original_knowledge_units"].map(unit_target),
            panel_level=rows["bloom_level"], panel_unit=rows["knowledge_units"].map(unit_target),
            panel_unique=[keyed.at[key, "unique"] for key in keys],
            learned_level=predicted.reindex(rows.index), learned_unit=unit_guess,
            rules_level=rules_level, rules_unit=rules_unit,
            rules_unique=[source.rules[d].judge_unique(q, o).value for d, q, o in
                          zip(rows["dataset"], rows["new_question"], rows["original_question"])],
            minilm_level=minilm["bloom_level"], minilm_unit=minilm["knowledge_units"],
        )
        args.predictions.parent.mkdir(parents=True, exist_ok=True)
        table.astype({c: object for c in table.columns}).to_parquet(args.predictions)
        print(f"out-of-fold verdicts written to {args.predictions}")

    # Usability: is there a signal to learn?
    result["usability"] = usability_signal(rows, votes, features, args)
    print("\nUsability criteria in the training slice (share of the minority answer; cross-validated kappa):")
    for criterion, figures in result["usability"].items():
        print(f"  {criterion}: {figures}")
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    print(json.dumps(result))


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
                                            "bloom_level", folds=args.folds, C=args.C))
            figures["learned"] = agreement(guess, target)
        found[criterion] = figures
    return found


if __name__ == "__main__":
    main()
