"""What generation and judging jobs ask the scheduler for, from the config (bloomqg.inputs.resources)."""

from __future__ import annotations

import pytest
import yaml

from bloomqg.judges.registry import judge_resources
from bloomqg.inputs.resources import JobResources, ResourceError, model_resources, parameters_from_name
from tests.conftest import REPO


@pytest.mark.parametrize("model, billions", [
    ("THUDM/glm-4-9b-chat", 9.0),
    ("Qwen/Qwen2.5-7B-Instruct", 7.0),
    ("baichuan-inc/Baichuan2-7B-Chat", 7.0),
    ("internlm/internlm3-8b-instruct", 8.0),
    ("shenzhi-wang/Llama3-8B-Chinese-Chat", 8.0),
    ("HuggingFaceTB/SmolLM2-135M-Instruct", 0.135),
    ("mistralai/Mixtral-8x7B-Instruct", 56.0),
    ("org/model_1.5B", 1.5),
    ("/local/checkpoints/my-model", None),
    ("gpt-4o-mini", None),
])
def test_parameter_count_is_read_off_the_name(model, billions):
    assert parameters_from_name(model) == billions


def test_entry_values_win():
    spec = {"backend": "hf", "model": "x/any", "gpus": 2, "mem_mb": 1234, "runtime_min": 56}
    assert model_resources("m", spec) == JobResources(gpu=2, mem_mb=1234, runtime=56, api=0)


def test_defaults_scale_with_parameters_and_dtype():
    small = model_resources("s", {"backend": "hf", "model": "a/Tiny-135M", "dtype": "float32"})
    seven = model_resources("q", {"backend": "hf", "model": "Qwen/Qwen2.5-7B-Instruct", "dtype": "bfloat16", "gpus": 1})
    nine = model_resources("g", {"backend": "hf", "model": "THUDM/glm-4-9b-chat", "dtype": "bfloat16", "gpus": 1})
    assert small.gpu == 0 and seven.gpu == nine.gpu == 1
    assert small.mem_mb < seven.mem_mb < nine.mem_mb
    assert small.runtime < seven.runtime < nine.runtime
    # 7B in bf16 is ~13.0 GiB of weights: the job holds them once more while loading.
    assert 13_350 * 1.5 < seven.mem_mb - 3000 < 13_360 * 1.5 + 1
    # auto is bf16 on a GPU and fp32 on a CPU: twice the bytes without one.
    on_cpu = model_resources("c", {"backend": "hf", "model": "Qwen/Qwen2.5-7B-Instruct", "dtype": "auto"})
    on_gpu = model_resources("c", {"backend": "hf", "model": "Qwen/Qwen2.5-7B-Instruct", "dtype": "auto", "gpus": 1})
    assert on_cpu.mem_mb - 3000 == pytest.approx(2 * (on_gpu.mem_mb - 3000), abs=2)


def test_params_b_overrides_the_name():
    named = model_resources("m", {"backend": "hf", "model": "/weights/ours", "params_b": 7, "dtype": "bfloat16"})
    assert named == model_resources("m", {"backend": "hf", "model": "Qwen/Qwen2.5-7B", "dtype": "bfloat16"})


def test_unknown_size_is_an_error_naming_the_entry():
    with pytest.raises(ResourceError, match=r"models\.mine.*params_b.*mem_mb and runtime_min"):
        model_resources("mine", {"backend": "hf", "model": "/weights/ours"})


def test_api_jobs_take_an_api_slot_and_no_gpu():
    api = model_resources("spark", {"backend": "openai", "model": "generalv3.5", "gpus": 3})
    assert api.api == 1 and api.gpu == 0
    judge = judge_resources("gpt", {"backend": "openai", "model": "gpt-4o-mini"}, {})
    assert judge.api == 1 and judge.gpu == 0


def test_judges():
    models = {"big": {"backend": "hf", "model": "Qwen/Qwen2.5-7B-Instruct", "gpus": 1}}
    hf = judge_resources("llm", {"backend": "hf", "model_ref": "big"}, models)
    assert hf == model_resources("big", models["big"])
    for backend in ("rules", "embedding"):
        local = judge_resources(backend, {"backend": backend}, models)
        assert local.gpu == 0 and local.api == 0


def test_every_preset_works_out():
    """The shipped configs plan: every model and judge entry has resources."""
    for path in (REPO / "config.yaml", REPO / "configs" / "paper.yaml"):
        config = yaml.safe_load(path.read_text())
        for name, spec in config["models"].items():
            model_resources(name, spec)
        for name, spec in config["judges"].items():
            judge_resources(name, spec, config["models"])
    paper = yaml.safe_load((REPO / "configs" / "paper.yaml").read_text())
    gpu_models = [name for name, spec in paper["models"].items() if spec["backend"] == "hf"]
    assert all(model_resources(n, paper["models"][n]).gpu == 1 for n in gpu_models)
