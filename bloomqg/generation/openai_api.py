"""A :class:`~bloomqg.inputs.chat.TextGenerator` for models behind an OpenAI-compatible API.

Used for API-only question generators (the paper's Spark3.5-Max) and for LLM judges
(gpt-4o-mini, gpt-4.1-mini). All transport — caching, concurrency, rate limits, retries,
structured outputs, the cost ledger — lives in :mod:`bloomqg.api.client`; this class maps a
config entry onto it and records provenance without secrets.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit

from bloomqg.api.client import OpenAICompatibleClient
from bloomqg.api.settings import ClientSettings
from bloomqg.inputs.chat import BatchCallback, ChatRequest, Completion, DecodingParams
from bloomqg.store.config_schema import file_schema

log = logging.getLogger(__name__)

def client_settings_from_entry(spec: Mapping[str, Any]) -> ClientSettings:
    """The client settings of a config entry (a ``models.<name>`` or an openai ``judges.<name>``).

    The entry is checked against the config schema's ``$defs/model`` (a key of in-process models
    or an unknown key is a ValueError naming it); the client takes its ``model`` and the keys of
    ``$defs/api_settings``, the rest (``generation``, ``gpus``, ...) is the workflow's.
    """
    schema = file_schema()
    backend = spec.get("backend", "openai")
    if backend != "openai":
        raise ValueError(f"OpenAITextGenerator needs backend 'openai', got {backend!r}")
    errors = schema.errors({**spec, "backend": backend}, "#/$defs/model")
    if errors:
        raise ValueError(f"API model entry {spec.get('model')!r}: " + "; ".join(
            f"key {'.'.join(map(str, path))!r}: {message}" if path else message for path, message in errors))
    client_keys = {"model", *schema.schema["$defs"]["api_settings"]["properties"]}
    return ClientSettings.from_spec({k: v for k, v in spec.items() if k in client_keys})


class OpenAITextGenerator:
    """Chat completions from an OpenAI-compatible endpoint, cached under ``<cache_dir>``.

    ``spec`` is the config entry (``model``, ``base_url``, ``api_key_env``, ``concurrency``,
    ``rpm``, ``tpm``, prices, ``structured_outputs``, ...); ``cache_dir`` is the call cache's
    directory (the workflow passes ``<cache_dir>/calls``, outside ``results/``).
    """

    def __init__(self, spec: Mapping[str, Any], *, cache_dir: str | Path) -> None:
        self.settings = client_settings_from_entry(spec)
        self.cache_dir = Path(cache_dir)
        self.client = OpenAICompatibleClient(self.settings, cache=self.cache_dir)
        base_url = self.settings.base_url or "https://api.openai.com/v1"
        #: recorded with every output; the key's variable NAME only, never its value
        self.provenance: dict[str, Any] = {
            "backend": "openai",
            "model": self.settings.model,
            "base_url_host": urlsplit(base_url).hostname,
            "settings": self.settings.public_dict(),
        }

    def rebase(self, base_url: str) -> None:
        """Send later calls to ``base_url``: a served engine's port is known once it starts.
        What the cache keys calls by does not change."""
        self.settings = dataclasses.replace(self.settings, base_url=base_url)
        self.client.settings = self.settings
        self.provenance["base_url_host"] = urlsplit(base_url).hostname
        self.provenance["settings"] = self.settings.public_dict()

    def complete(
        self,
        requests: Sequence[ChatRequest],
        params: DecodingParams,
        on_batch: BatchCallback | None = None,
    ) -> list[Completion]:
        """One Completion per request, in order; failures are Completions with an error."""
        completions = self.client.complete(requests, params, on_batch)
        log.info("%s ledger: %s", self.settings.model, self.client.ledger())
        return completions

    def ledger(self) -> dict[str, Any]:
        """Calls, cache hits, retries, tokens and cost so far (see OpenAICompatibleClient.ledger)."""
        return self.client.ledger()

    def close(self) -> None:
        self.client.close()
