"""Every in-process generator of ``configs/paper.yaml`` loads and generates, on local stand-ins.

Each stand-in is a tiny random-weight model of the entry's architecture saved to disk (the
Baichuan2 one as remote code written like Baichuan2-7B-Chat's: rotary tables built in ``__init__``,
no ``position_ids``, tuple caches, no chat template), loaded through
``python -m bloomqg.generation.check_models`` with every other setting of the preset entry, so a
missing dependency, attribute or template shows up here rather than after a 16 GB download.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.tiny_models import available_architectures, save_baichuan2_remote_model, save_standin

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PAPER = REPO / "configs" / "paper.yaml"
#: preset entry -> stand-in architecture ("baichuan2": the remote-code model of tests/support)
STANDINS = {"glm-4-9b": "glm", "qwen25-7b": "qwen2", "baichuan2-7b": "baichuan2",
            "internlm3-8b": "internlm3", "llama3-8b-chinese": "llama"}


def test_every_hf_entry_of_the_paper_preset_has_a_standin():
    models = yaml.safe_load(PAPER.read_text())["models"]
    assert {name for name, spec in models.items() if spec["backend"] == "hf"} == set(STANDINS)


def test_paper_generators_load_and_generate_on_standins(tmp_path):
    args = []
    native = set(available_architectures())
    for name, architecture in STANDINS.items():
        folder = tmp_path / name
        if architecture == "baichuan2":
            save_baichuan2_remote_model(folder)
        elif architecture in native:
            save_standin(architecture, folder)
        else:  # InternLM3 before transformers 5.23: a folder of its type, which must fail clearly
            save_standin("llama", folder)
            config = folder / "config.json"
            config.write_text(config.read_text().replace('"model_type": "llama"', f'"model_type": "{architecture}"'))
        args += ["--standin", f"{name}={folder}"]
    run = subprocess.run([sys.executable, "-m", "bloomqg.generation.check_models", str(PAPER), *args],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    records = {r["model"]: r for r in map(json.loads, run.stdout.splitlines())}
    assert set(records) == set(STANDINS), f"{run.stdout}\n{run.stderr[-3000:]}"
    if "internlm3" not in native:
        failed = records.pop("internlm3-8b")
        assert not failed["ok"] and "does not know model type 'internlm3' (native from transformers 5.23)" in failed["error"]
    assert run.returncode == (0 if "internlm3" in native else 1), f"{run.stdout}\n{run.stderr[-3000:]}"
    assert all(record["ok"] and record["completion_tokens"] for record in records.values()), records
    assert records["baichuan2-7b"]["decode_loop"] == "legacy"
    assert records["baichuan2-7b"]["attn_implementation"] == "eager"
    assert records["baichuan2-7b"]["chat_template"] == "prompts/chat_templates/baichuan2.jinja"
    # its rotary tables, left on the meta device by loading, are rebuilt; its left padding is exact
    assert records["baichuan2-7b"]["rebuilt_init_tensors"]["left_on_meta"] > 0
    assert records["baichuan2-7b"]["left_padding"]["batching"] == "exact: batched"
    for name in ("glm-4-9b", "qwen25-7b", "llama3-8b-chinese"):
        assert (records[name]["code"], records[name]["decode_loop"]) == ("native", "cached"), records[name]
    if "internlm3" in native:
        assert (records["internlm3-8b"]["code"], records["internlm3-8b"]["decode_loop"]) == ("native", "cached")
