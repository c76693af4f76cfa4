"""A study config, read as the workflow reads it, for the scorer and the task run under Inspect.

The panel scorer and the questions task take a bloomqg config (``-S config=…`` / ``-T
config=…``, ``config.yaml`` by default): its datasets, strategies, prompts and judges, validated
and resolved by :func:`bloomqg.study.config.prepare_study` against the config's own folder, so
the prompts the task renders and the judges the scorer builds are the ones a study run from that
folder would use (the task's log then imports back into that study unchanged).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    import pandas as pd

    from bloomqg.study.config import Study


class StudyInputError(ValueError):
    """A config or dataset the scorer or the task cannot use; the message names the file and key."""


@functools.cache
def load_study(config: str) -> "Study":
    """The study of the config file ``config`` (resolved against its own folder), read once per
    process."""
    from bloomqg.study.config import prepare_study

    path = Path(config).resolve()
    if not path.is_file():
        raise StudyInputError(f"bloomqg config {config}: no such file (pass config=PATH to a bloomqg config)")
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise StudyInputError(f"bloomqg config {path}: not a YAML mapping")
    return prepare_study(raw, workdir=path.parent, sources=[path], load_datasets=False)


def require_dataset(study: "Study", dataset: str, config: str) -> None:
    """Refuse a dataset name the config does not define, naming the ones it does."""
    if dataset not in study.datasets:
        raise StudyInputError(f"bloomqg config {config}: no dataset {dataset!r} under datasets: "
                              f"(defined: {', '.join(study.datasets)})")


@functools.cache
def _dataset_frame(config: str, dataset: str) -> "pd.DataFrame":
    from bloomqg.inputs.datasets import load_dataset

    study = load_study(config)
    require_dataset(study, dataset, config)
    return load_dataset(dataset, study.dataset_params(dataset), base_dir=study.workdir,
                        limits=study.config.get("input_limits"))


def dataset_frame(config: str, dataset: str) -> "pd.DataFrame":
    """The dataset ``dataset`` of the config, loaded as rule prepare_dataset loads it (a copy:
    the cached frame is shared)."""
    return _dataset_frame(config, dataset).copy()
