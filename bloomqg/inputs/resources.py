"""What a generation or judging job asks its scheduler for, read off the config.

The rules hand these figures to Snakemake as resources: ``gpu`` (the local ``--resources gpu=N``
cap and, through the SLURM executor plugin, ``sbatch --gpus=N``), ``mem_mb``, ``runtime``
(minutes) and ``api`` (one per job that talks to an API, so a profile can cap how many such jobs
run at once against one rate limit).

A model entry may state ``gpus``, ``mem_mb`` and ``runtime_min``; where it does not, memory and
runtime scale with the parameter count (``params_b``, else read off the model name: ``7B``,
``135M``). These defaults are deliberately generous first guesses, not measurements: a site with
tight limits states them per model. A judging job asks what its judge's backend declares
(:func:`bloomqg.judges.registry.judge_resources`), built from :class:`JobResources` and
:func:`model_resources` here.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

#: Bytes per weight by dtype; ``auto`` is bf16 on a GPU and fp32 on a CPU.
_BYTES_PER_PARAM = {"float32": 4, "bfloat16": 2, "float16": 2}
#: Host memory besides the weights: Python, torch, tokenizer, the prompts and outputs.
BASE_MEM_MB = 3000
#: Weights are read into host memory once more while they load (safetensors, conversion).
LOAD_FACTOR = 1.5
#: Wall time: a floor plus a share per billion parameters (bigger models decode slower).
BASE_RUNTIME_MIN = 30
RUNTIME_MIN_PER_B = 15
#: An API job holds little: the client, the cache, the rows.
API_MEM_MB = 2000
API_RUNTIME_MIN = 240

#: ``7B``, ``135M``, ``1.5B``; ``8x7B`` (mixtures of experts) counts every expert.
_SIZE = re.compile(r"(?<![A-Za-z0-9.])(?:(\d+)x)?(\d+(?:\.\d+)?)\s*([BbMm])(?![A-Za-z])")


class ResourceError(ValueError):
    """A job's resources cannot be worked out; the message names the config key."""


@dataclass(frozen=True)
class JobResources:
    gpu: int
    mem_mb: int
    runtime: int
    api: int

    def as_dict(self) -> dict[str, int]:
        return {"gpu": self.gpu, "mem_mb": self.mem_mb, "runtime": self.runtime, "api": self.api}


def parameters_from_name(model: str) -> float | None:
    """Billions of parameters written in a model id (``Qwen2.5-7B-Instruct`` → 7.0,
    ``SmolLM2-135M-Instruct`` → 0.135, ``glm-4-9b-chat`` → 9.0, ``Mixtral-8x7B`` → 56.0);
    ``None`` when absent."""
    matches = _SIZE.findall(model.rsplit("/", 1)[-1].replace("_", "-"))
    if not matches:
        return None
    experts, number, unit = matches[-1]
    return int(experts or 1) * float(number) / (1000.0 if unit in "Mm" else 1.0)


def model_resources(name: str, spec: Mapping[str, Any]) -> JobResources:
    """Resources of a job that runs models entry ``name`` (generation, or an hf judge)."""
    if spec["backend"] == "inspect":  # reads logs, runs no model
        return JobResources(gpu=0, mem_mb=int(spec.get("mem_mb", API_MEM_MB)),
                            runtime=int(spec.get("runtime_min", API_RUNTIME_MIN)), api=0)
    if spec["backend"] == "openai":
        return JobResources(
            gpu=0,
            mem_mb=int(spec.get("mem_mb", API_MEM_MB)),
            runtime=int(spec.get("runtime_min", API_RUNTIME_MIN)),
            api=1,
        )
    gpus = int(spec.get("gpus", 0))
    if "mem_mb" in spec and "runtime_min" in spec:
        return JobResources(gpus, int(spec["mem_mb"]), int(spec["runtime_min"]), 0)
    billions = spec.get("params_b") or parameters_from_name(str(spec["model"]))
    if billions is None:
        raise ResourceError(
            f"models.{name}: cannot tell the parameter count of {spec['model']!r} from its name; "
            "set params_b (billions), or mem_mb and runtime_min"
        )
    dtype = spec.get("dtype", "auto")
    bytes_per_param = _BYTES_PER_PARAM.get(dtype, 2 if gpus else 4)
    weights_mb = billions * 1e9 * bytes_per_param / 2**20
    mem_mb = int(spec.get("mem_mb", BASE_MEM_MB + math.ceil(LOAD_FACTOR * weights_mb)))
    runtime = int(spec.get("runtime_min", BASE_RUNTIME_MIN + math.ceil(RUNTIME_MIN_PER_B * billions)))
    return JobResources(gpus, mem_mb, runtime, 0)

