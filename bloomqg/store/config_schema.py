"""The config's JSON schema (``schemas/config.schema.yaml``) loaded and checked, on the ground floor.

Every layer checks its part of a config against the one schema: the API client its settings
(``#/$defs/api_settings``), the generators their ``generation`` block and model entry, the judge
stage an entry of the panel, :mod:`bloomqg.study.config` the whole study. They all import this module,
which imports nothing of the package above :mod:`bloomqg.store.provenance`, so no layer needs
:mod:`bloomqg.study.config` (which sits on top, seeing everything it validates).

:func:`file_schema` is the file as written. The judges section has one branch per judge backend,
declared by the backend's own module: :func:`bloomqg.judges.registry.config_schema` adds them,
and the checks of a whole config or a judges entry use that one.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from bloomqg.store.provenance import REPO_ROOT

SCHEMA_PATH = REPO_ROOT / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """The configuration is invalid; the message names the file and key."""


@dataclass(frozen=True)
class Cell:
    """One generation run: a model on a dataset under a strategy."""

    dataset: str
    strategy: str
    model: str


def key_path(parts: Iterable[Any]) -> str:
    """``models.smollm2.dtype`` / ``strategies[1]`` from a JSON path; ``(top level)`` when empty."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def non_finite_numbers(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[list[Any], str]]:
    """(key path, message) of every NaN or ±inf float anywhere in ``value``.

    JSON Schema's bounds compare false with NaN (so ``minimum: 0`` lets it through) and its
    ``number`` type admits ±inf, while YAML's ``.nan``/``.inf`` and ``--config key=nan`` give
    exactly such floats: they would crash inside a job or be recorded as a NaN setting.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return [(list(path), f"{value!r} is not a finite number")]
    if isinstance(value, Mapping):
        return [found for key, item in value.items() for found in non_finite_numbers(item, (*path, key))]
    if isinstance(value, (list, tuple)):
        return [found for index, item in enumerate(value) for found in non_finite_numbers(item, (*path, index))]
    return []


#: Longest message about one value an error shows: a 50 MB string is not echoed into the log.
MAX_SHOWN_CHARS = 1000


def cut(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """``text``, or its first two thirds of ``limit`` characters and its last third with how many
    were cut between (a message's reason is at its end: "... is too long")."""
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 3
    return f"{text[:head]}… ({len(text) - head - tail:,} characters cut) …{text[-tail:]}"


class ConfigSchema:
    """A config JSON schema and its checks, one Draft 2020-12 validator per ``$defs`` node, built once."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        #: the schema itself; read it, never change it (its validators are cached)
        self.schema: dict[str, Any] = dict(schema)
        self._validators: dict[str | None, Any] = {}

    def _validator(self, ref: str | None) -> Any:
        if ref not in self._validators:
            import jsonschema

            schema = self.schema
            self._validators[ref] = jsonschema.Draft202012Validator(
                schema if ref is None else {"$defs": schema["$defs"], "$ref": ref}
            )
        return self._validators[ref]

    def default_of(self, *keys: str) -> Any:
        """The schema's default of the top-level key path ``keys`` (``"input_limits",
        "max_log_member_mb"``); a KeyError naming the path where it declares none."""
        node: Mapping[str, Any] = self.schema
        for key in keys:
            node = node.get("properties", {}).get(key, {})
        if "default" not in node:
            raise KeyError(f"the config schema declares no default for {key_path(keys)}")
        return node["default"]

    def _declared_keys(self, node: Mapping[str, Any]) -> set[str]:
        """Keys a schema node declares, those of the ``$defs`` it includes with allOf/$ref too."""
        keys = set(node.get("properties", {}))
        for part in node.get("allOf", []):
            if "$ref" in part:
                keys |= self._declared_keys(self.schema["$defs"][part["$ref"].rsplit("/", 1)[-1]])
        return keys

    def errors(self, instance: Any, ref: str | None = None) -> list[tuple[list[Any], str]]:
        """Every way ``instance`` breaks the schema (or its ``$defs`` node ``ref``, e.g.
        ``#/$defs/generation``): (key path, message) per error, in key-path order; a NaN or
        ±inf anywhere is one (:func:`non_finite_numbers`), which no schema keyword refuses."""
        errors = non_finite_numbers(instance)
        non_finite = {tuple(path) for path, _ in errors}
        for error in sorted(self._validator(ref).iter_errors(instance), key=lambda e: list(map(str, e.path))):
            if error.validator in ("additionalProperties", "unevaluatedProperties") and isinstance(
                error.instance, Mapping
            ):
                extra = sorted(set(error.instance) - self._declared_keys(error.schema))
                message = f"unknown key(s) {', '.join(map(repr, extra))}"
            elif error.validator == "not" and "description" in error.schema:
                message = error.schema["description"]
            elif error.validator == "pattern" and "description" in error.schema:
                message = f"{error.instance!r} is not valid here: {error.schema['description']}"
            elif error.validator in ("oneOf", "anyOf") and error.context:
                # jsonschema's own "not valid under any of the given schemas" hides the bound missed
                message = f"{error.instance!r} is none of: " + "; ".join(
                    dict.fromkeys(branch.message for branch in error.context if not branch.relative_path)
                )
            elif error.validator == "if" or tuple(error.absolute_path) in non_finite:
                continue  # the failing "then" branch, or the non-finite check, reports it
            else:
                message = error.message
            errors.append((list(error.absolute_path), cut(message)))
        return sorted(errors, key=lambda error: list(map(str, error[0])))

    def problems(self, instance: Any, ref: str | None = None, *, prefix: Iterable[Any] = ()) -> list[str]:
        """:meth:`errors` as ``key.path: message`` lines (``prefix`` leads every path)."""
        return [f"{key_path([*prefix, *path])}: {message}" for path, message in self.errors(instance, ref)]


@functools.cache
def file_schema() -> ConfigSchema:
    """``schemas/config.schema.yaml`` as written: every ``$defs`` node but the judge backends'
    branches (:func:`bloomqg.judges.registry.config_schema` has those too)."""
    # libyaml's safe loader where PyYAML has it: the same document in a twentieth of the pure-Python
    # loader's tenth of a second, which every Snakemake start and every job reading a default paid
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return ConfigSchema(yaml.load(SCHEMA_PATH.read_text(), Loader=loader))
