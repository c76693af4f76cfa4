"""What remote-code models need once their weights are loaded.

**Tensors computed in ``__init__``.**  transformers 5 builds a model on the meta device and then
loads the checkpoint into it.  Whatever a module computed in its ``__init__`` and did not store
as a persistent parameter or buffer is not in the checkpoint: a plain tensor attribute stays on
the meta device (the first forward fails with "Cannot copy out of meta tensor"), and a
non-persistent buffer comes back as an uninitialised ``empty_like`` (the forward runs on
garbage).  Baichuan2-7B's ``RotaryEmbedding`` keeps ``inv_freq``, ``cos_cached`` and
``sin_cached`` as such attributes.  :func:`rebuild_init_tensors` re-runs the model's own
construction with its parameters on the meta device (:func:`accelerate.init_empty_weights`,
buffers real) and copies every such tensor from that skeleton onto the device of the module
that holds it, in the dtype loading gave it; nothing is specific to one model.

**Left padding for models that cannot be told positions.**  A batch left-pads its prompts; a
``forward`` without ``position_ids`` numbers a padded row's tokens from its first pad.  With
relative positions (rotary, ALiBi) every real token is shifted by the same offset and attends as
it would alone, so batching is exact up to rounding; with absolute positions it is not.
:func:`probe_left_padding` decides it per model, by measurement: the last-position logits of a
short prompt alone and behind ``k`` masked pad tokens, for the prefill and a few decode steps.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bloomqg.generation.hf.model_support import ModelSupportError

#: Pad counts the probe puts before its prompt (a small and an odd, larger shift).
PADDING_PROBE_PADS = (1, 7)
#: Decode steps the probe runs after the prefill (the mask of a one-token step is built
#: differently from the prefill's in most remote code).
PADDING_PROBE_STEPS = 2
#: Largest relative difference (:func:`relative_logit_difference`) still called equal, per
#: dtype.  fp32 rounding differences of shifted rotary angles are ~1e-6; bf16/fp16 round each
#: rotated query and key to 8/11 mantissa bits, which moves logits by up to a few per cent
#: (the same order as batching any model in half precision).  Absolute positions or a mask
#: that lets pads through move them by tens of per cent.
PADDING_TOLERANCE = {"float32": 1e-3, "float64": 1e-6, "bfloat16": 0.1, "float16": 0.05}


@dataclass(frozen=True)
class RebuiltTensors:
    """What :func:`rebuild_init_tensors` rebuilt."""

    #: qualified names with layer indices folded to ``*`` (one entry per kind of tensor)
    names: tuple[str, ...]
    count: int
    #: of them, how many loading had left on the meta device
    left_on_meta: int
    #: of the others (non-persistent buffers), how many held other values than construction gives
    differed: int

    def as_provenance(self) -> dict[str, Any]:
        return {"count": self.count, "tensors": list(self.names), "left_on_meta": self.left_on_meta,
                "differed_from_construction": self.differed}


def _init_tensors(model: Any) -> list[tuple[str, Any, str, Any]]:
    """(module name, module, attribute, tensor) of every plain tensor attribute and
    non-persistent buffer: what a checkpoint does not hold."""
    import torch

    found = []
    for name, module in model.named_modules():
        for attribute, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                found.append((name, module, attribute, value))
        for attribute in sorted(getattr(module, "_non_persistent_buffers_set", ())):
            value = module._buffers.get(attribute)
            if value is not None:
                found.append((name, module, attribute, value))
    return found


def _construction_skeleton(model: Any) -> Any:
    """The model's class built again from its config: parameters on the meta device (no memory,
    no init), buffers and plain tensors computed for real on the CPU, in the default dtype the
    loading used (transformers sets it to the model's dtype while constructing)."""
    import torch
    from accelerate import init_empty_weights

    previous = torch.get_default_dtype()
    dtype = next(model.parameters()).dtype
    if dtype.is_floating_point:
        torch.set_default_dtype(dtype)
    try:
        with init_empty_weights(include_buffers=False), torch.device("cpu"):
            return type(model)(copy.deepcopy(model.config))
    finally:
        torch.set_default_dtype(previous)


def _holder_device(model: Any, module_name: str, modules: dict[str, Any]) -> Any:
    """The device of the nearest module (itself or an ancestor) holding a real parameter or buffer."""
    name = module_name
    while True:
        module = modules[name]
        for tensor in (*module.parameters(), *module.buffers()):
            if not tensor.is_meta:
                return tensor.device
        if not name:
            break
        name = name.rsplit(".", 1)[0] if "." in name else ""
    import torch

    return torch.device("cpu")


def rebuild_init_tensors(model: Any, model_id: str) -> RebuiltTensors:
    """Rebuild what ``model``'s modules computed in ``__init__`` on the devices they run on.

    Raises :class:`ModelSupportError` naming the tensor when one cannot be rebuilt (its
    construction did not produce a real tensor of the same shape).
    """
    import torch

    targets = _init_tensors(model)
    if not targets:
        return RebuiltTensors((), 0, 0, 0)
    skeleton = dict(_construction_skeleton(model).named_modules())
    modules = dict(model.named_modules())
    names: list[str] = []
    on_meta = differed = 0
    for module_name, module, attribute, old in targets:
        qualified = f"{module_name}.{attribute}" if module_name else attribute
        fresh = getattr(skeleton.get(module_name), attribute, None)
        if not isinstance(fresh, torch.Tensor) or fresh.is_meta or fresh.shape != old.shape:
            raise ModelSupportError(
                f"model {model_id!r}: {qualified} ({'on the meta device' if old.is_meta else 'not in the checkpoint'})"
                " cannot be rebuilt: constructing the model again does not compute it "
                f"(got {type(fresh).__name__} {getattr(fresh, 'shape', '')}); its remote code does not "
                "load on this transformers version")
        value = fresh.to(device=_holder_device(model, module_name, modules), dtype=old.dtype)
        if old.is_meta:
            on_meta += 1
        elif not torch.equal(old.to(value.device), value):
            differed += 1
        if attribute in module._buffers:
            module._buffers[attribute] = value
        else:
            setattr(module, attribute, value)
        names.append(re.sub(r"\.\d+\.", ".*.", qualified))
    left = [name for name, tensor in _all_tensors(model) if tensor.is_meta]
    if left:
        raise ModelSupportError(f"model {model_id!r}: {len(left)} tensors are still on the meta device after "
                                f"loading (first: {left[0]}); its weights did not load")
    return RebuiltTensors(tuple(dict.fromkeys(names)), len(targets), on_meta, differed)


def _all_tensors(model: Any) -> list[tuple[str, Any]]:
    tensors = list(model.named_parameters()) + list(model.named_buffers())
    tensors += [(f"{name}.{attribute}", tensor) for name, _module, attribute, tensor in _init_tensors(model)]
    return tensors


def meta_tensors(model: Any) -> list[str]:
    """Names of the model's parameters, buffers and tensor attributes on the meta device."""
    return [name for name, tensor in _all_tensors(model) if tensor.is_meta]


@dataclass(frozen=True)
class PaddingProbe:
    """Whether left padding leaves a model's outputs alone, as measured by :func:`probe_left_padding`."""

    exact: bool
    max_relative_difference: float
    tolerance: float
    pads: tuple[int, ...]
    prompt_tokens: int
    decode_steps: int
    #: whether the probe passed position_ids (the model's forward takes them)
    position_ids: bool

    @property
    def reason(self) -> str:
        """Why the model batches or not, in words (logged and recorded)."""
        verdict = "within" if self.exact else "above"
        told = "position_ids passed" if self.position_ids else "forward takes no position_ids"
        return (f"left padding by {'/'.join(map(str, self.pads))} tokens moves its last-position logits by "
                f"{self.max_relative_difference:.2e} (relative), {verdict} the tolerance {self.tolerance:g} "
                f"({told}; prefill and {self.decode_steps} decode steps)")

    def as_provenance(self) -> dict[str, Any]:
        return {"batching": "exact: batched" if self.exact else "inexact: one request at a time",
                "max_relative_difference": self.max_relative_difference, "tolerance": self.tolerance,
                "pads": list(self.pads), "prompt_tokens": self.prompt_tokens,
                "decode_steps": self.decode_steps, "position_ids_passed": self.position_ids}


def relative_logit_difference(a: Any, b: Any) -> float:
    """max |a - b| over the vocabulary, each centred on its mean (a softmax ignores a common
    shift), divided by the spread (max - min) of ``a``."""
    centred = (a - a.mean()) - (b - b.mean())
    spread = float((a.max() - a.min()).clamp(min=1e-12))
    return float(centred.abs().max()) / spread


def probe_left_padding(model: Any, prompt: Sequence[int], *, pad_id: int, takes_position_ids: bool,
                       input_device: Any, tolerance: float | None = None,
                       pads: Sequence[int] = PADDING_PROBE_PADS,
                       steps: int = PADDING_PROBE_STEPS) -> PaddingProbe:
    """Compare ``prompt`` alone with ``prompt`` behind each count of masked pads in ``pads``.

    Both run as the legacy loop runs them (:func:`bloomqg.generation.hf.decode.legacy_forward`):
    prefill, then ``steps`` one-token steps fed the same tokens (the alone run's greedy choices).
    """
    import torch

    from bloomqg.generation.hf.decode import legacy_forward

    if len(prompt) < 1:
        raise ValueError("the padding probe needs a prompt of at least one token")
    dtype_name = str(next(model.parameters()).dtype).removeprefix("torch.")
    if tolerance is None:
        tolerance = PADDING_TOLERANCE.get(dtype_name, 0.1)

    def run(pad_count: int, feed: list[int] | None) -> tuple[list[Any], list[int]]:
        ids = torch.tensor([[pad_id] * pad_count + list(prompt)], dtype=torch.long, device=input_device)
        mask = torch.ones_like(ids)
        mask[:, :pad_count] = 0
        positions = (mask.cumsum(dim=-1) - 1).clamp(min=0) if takes_position_ids else None
        logits, state = legacy_forward(model, ids, mask, None, positions)
        collected, chosen = [logits[0]], []
        for step in range(steps):
            token = feed[step] if feed is not None else int(logits[0].argmax())
            chosen.append(token)
            mask = torch.cat([mask, mask.new_ones((1, 1))], dim=-1)
            position = positions[:, -1:] + 1 + step if positions is not None else None
            logits, state = legacy_forward(model, torch.tensor([[token]], device=input_device), mask, state,
                                           position)
            collected.append(logits[0])
        return collected, chosen

    with torch.inference_mode():
        alone, tokens = run(0, None)
        worst = 0.0
        for pad_count in pads:
            padded, _ = run(pad_count, tokens)
            for a, b in zip(alone, padded):
                worst = max(worst, relative_logit_difference(a, b.to(a.device)))
    if worst != worst:  # NaN: the logits themselves are not finite
        worst = float("inf")
    return PaddingProbe(exact=worst <= tolerance, max_relative_difference=worst, tolerance=tolerance,
                        pads=tuple(pads), prompt_tokens=len(prompt), decode_steps=steps,
                        position_ids=takes_position_ids)
