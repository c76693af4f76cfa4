"""Backend ``learned``: a classifier distilled from a panel's votes (:mod:`bloomqg.judges.learned`).

The model is made by rule ``train_learned_judge`` from the entry's ``train`` source and read
from ``model_file``; the judge answers Bloom level and knowledge unit only.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bloomqg.store.config_schema import ConfigError
from bloomqg.judges.embedding import SENTENCE_MODEL_SCHEMA
from bloomqg.judges.registry import JudgeBackend, JudgeContext
from bloomqg.inputs.resources import JobResources

if TYPE_CHECKING:
    from bloomqg.judges.learned import LearnedJudge

#: Where the workflow writes a learned judge's model; ``{judge}`` is the judges entry's name.
DEFAULT_MODEL_FILE = "results/learned/{judge}/model.skops"


def model_file(judge_name: str, spec: Mapping[str, Any]) -> str:
    """The model file of a learned judges entry: a relative path inside the study's directory,
    without ``..`` (a :class:`ConfigError` naming the key otherwise): the judge reads only a file
    this study's rule ``train_learned_judge`` wrote, never one a config points at elsewhere (the
    file is skops, which loads only scikit-learn, numpy and scipy types: defence in depth)."""
    value = str(BACKEND.with_defaults(spec)["model_file"]).format(judge=judge_name)
    path = Path(value)
    if path.is_absolute() or ".." in path.parts:
        raise ConfigError(
            f"judges.{judge_name}.model_file: {value!r} must be a relative path inside the study's directory, "
            "without '..': only a model this study's rule train_learned_judge wrote is read")
    return value


def _outside_results(entry: str, where: str) -> Path:
    """``entry`` as a path, refused when it lies in this study's own ``results/``: those votes
    are what the judge being trained helps make."""
    path = Path(entry)
    if not path.is_absolute() and path.parts[:1] == ("results",):
        raise ConfigError(f"{where}: {entry!r} is in this study's results/, whose votes this judge helps make; "
                          "copy the earlier study's files elsewhere, or give their absolute path")
    return path


def training_vote_files(judge_name: str, spec: Mapping[str, Any]) -> list[str]:
    """The votes files a ``train: {source: votes}`` entry names, folders expanded (reliability
    files left out), sorted. Errors name the key: no ``votes``, a missing path, a folder without
    votes, or a path in this study's own ``results/``."""
    key = f"judges.{judge_name}.train.votes"
    paths = BACKEND.with_defaults(spec)["train"].get("votes")
    if not paths:
        raise ConfigError(f"{key}: train.source votes needs the votes files (or folders) to learn from")
    files: list[str] = []
    for position, entry in enumerate(paths):
        path = _outside_results(str(entry), f"{key}[{position}]")
        if path.is_file():
            found = [path]
        elif path.is_dir():
            found = sorted(p for p in path.rglob("*.parquet") if not p.name.endswith(".reliability.parquet"))
            if not found:
                raise ConfigError(f"{key}[{position}]: folder {entry!r} holds no votes file (*.parquet)")
        else:
            raise ConfigError(f"{key}[{position}]: {entry!r} does not exist")
        files += [str(p) for p in found]
    return sorted(dict.fromkeys(files))


def training_annotation_files(judge_name: str, spec: Mapping[str, Any]) -> dict[str, list[str]]:
    """The key (``annotation_items``) and filled sheets (``sheets``) a ``train: {source: annotations}``
    entry names. Errors name the key: a missing key file or round folder, a round with no sheet,
    or a path in this study's own ``results/``."""
    train = BACKEND.with_defaults(spec)["train"]
    key = f"judges.{judge_name}.train"

    if not train.get("items") or not train.get("rounds"):
        raise ConfigError(f"{key}: train.source annotations needs items (the export's items.parquet) and rounds "
                          "(folders of filled sheets)")
    items = _outside_results(str(train["items"]), f"{key}.items")
    if not items.is_file():
        raise ConfigError(f"{key}.items: {str(items)!r} does not exist")
    sheets: list[str] = []
    for position, entry in enumerate(train["rounds"]):
        folder = _outside_results(str(entry), f"{key}.rounds[{position}]")
        if not folder.is_dir():
            raise ConfigError(f"{key}.rounds[{position}]: folder {entry!r} does not exist")
        found = sorted(str(p) for p in folder.glob("*.csv"))
        if not found:
            raise ConfigError(f"{key}.rounds[{position}]: folder {entry!r} holds no filled sheet (*.csv)")
        sheets += found
    return {"annotation_items": [str(items)], "sheets": sheets}


def _build(context: JudgeContext) -> "LearnedJudge":
    from bloomqg.judges.learned import FeatureSource, LearnedJudge, load_encoder, load_model

    dataset, spec = context.dataset, context.spec
    name = str(dataset["dataset"].iloc[0]) if len(dataset) else ""
    items = [(item, question, level if isinstance(level, str) and level else None, list(units))
             for item, question, level, units in zip(dataset["item_id"], dataset["question"], dataset["bloom_level"],
                                                     dataset["knowledge_units"])]
    source = FeatureSource(load_encoder(context.judge_name, spec["encoder"]), {name: items})
    return LearnedJudge(load_model(model_file(context.judge_name, spec)), source, name, context.knowledge_units,
                        min_confidence=spec["min_confidence"])


def _provenance(judge_name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    import json

    from bloomqg.judges.learned import provenance_path

    path = provenance_path(model_file(judge_name, spec))
    trained = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    return {"learned_model_file": model_file(judge_name, spec), "learned_model": trained}


BACKEND = JudgeBackend(
    name="learned",
    description="a classifier trained on a panel's votes (Bloom level and knowledge unit)",
    build=_build,
    resources=lambda name, spec, models: JobResources(gpu=0, mem_mb=4000, runtime=60, api=0),
    threads=2,
    loads_model=True,
    provenance=_provenance,
    properties={
        "train": {
            "type": "object",
            "additionalProperties": False,
            "default": {"source": "release"},
            "description": "What the model learns from. source: release (the release runs of release_manifest, "
                           "imported by import_release_run; the panel is the paper's), votes (the votes files of an "
                           "earlier study, its own API panel's say: 'distil your panel') or annotations (filled "
                           "annotation sheets: people as the teacher).",
            "properties": {
                "source": {"enum": ["release", "votes", "annotations"],
                           "description": "The votes the model is trained on: the release's panel, an earlier "
                                          "study's votes, or the annotators' majorities of annotation rounds."},
                "models": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                           "description": "Only these models' runs (default: every run of the manifest, every row "
                                          "of the votes files)."},
                "votes": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                          "description": "source votes: votes files (VOTES Parquet, results/votes/... of an earlier "
                                         "study) or folders of them, searched recursively; never this study's own "
                                         "results/, whose votes the judge itself makes."},
                "items": {"type": "string",
                          "description": "source annotations: the export's key (items.parquet of export_annotation) "
                                         "the rounds were filled against, not in this study's results/."},
                "rounds": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                           "description": "source annotations: folders of filled sheets (*.csv); the annotators' "
                                          "strict majority on each item's Bloom level and units is the teacher."},
                "C": {"type": "number", "exclusiveMinimum": 0,
                      "description": "Inverse regularisation strength of both criteria's logistic regressions "
                                     "(default: each criterion's own, chosen on a model the classifier never saw: "
                                     "30 for the Bloom level, 0.5 for the knowledge unit)."},
                "calibration": {"enum": ["none", "sigmoid", "isotonic", "top_label"],
                                "description": "How both criteria's probabilities are calibrated (default: each "
                                               "criterion's own, chosen on a model they never saw: none for the "
                                               "Bloom level, top_label for the knowledge unit): none (the logistic "
                                               "regressions' own), Platt (sigmoid) / isotonic fitted on the training "
                                               "votes' out-of-fold predictions, or top_label (an isotonic map of "
                                               "the top class's out-of-fold probability; the answer is unchanged)."},
                "folds": {"type": "integer", "minimum": 2, "default": 5,
                          "description": "Cross-validation folds (GroupKFold by original item) of the recorded agreement."},
            },
        },
        "model_file": {"type": "string", "default": DEFAULT_MODEL_FILE,
                       "description": "The trained model (made by rule train_learned_judge); {judge} is this entry's name."},
        "min_confidence": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.0,
                           "description": "Probability of the top class below which the judge abstains (a missing vote)."},
        "encoder": {**SENTENCE_MODEL_SCHEMA,
                    "description": "The sentence-transformers model of the features: {path} or {package, subdir}."},
    },
)
