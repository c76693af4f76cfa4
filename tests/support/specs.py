"""Typed entries for tests that judge or generate outside a study: a judges or models entry read
as a study reads it (:meth:`bloomqg.inputs.specs.EntrySpec.read`), its decoding and client
settings resolved."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bloomqg.inputs.specs import JudgeSpec, ModelSpec


def judge_spec(name: str, entry: Mapping[str, Any], *, seed: int = 0, budget_usd: float | None = None) -> JudgeSpec:
    """``judges.<name>`` as the study would read it."""
    return JudgeSpec.read(name, entry, seed=seed, budget_usd=budget_usd)


def model_spec(name: str, entry: Mapping[str, Any], *, seed: int = 0, budget_usd: float | None = None) -> ModelSpec:
    """``models.<name>`` as the study would read it."""
    return ModelSpec.read(name, entry, seed=seed, budget_usd=budget_usd)
