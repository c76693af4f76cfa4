"""A :class:`~bloomqg.inputs.chat.TextGenerator` for models behind an OpenAI-compatible API.

Used for API-only question generators (the paper's Spark3.5-Max) and for LLM judges
(gpt-4o-mini, gpt-4.1-mini). All transport — caching, concurrency, rate limits, retries,
structured outputs, the cost ledger — lives in :mod:`bloomqg.api.client`; this class hands it
the entry's :class:`~bloomqg.inputs.api_settings.ClientSettings` (resolved once, where the config
is read: :func:`~bloomqg.inputs.api_settings.client_settings_from_entry`) and records provenance
without secrets.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlsplit

from bloomqg.api.client import OpenAICompatibleClient
from bloomqg.inputs.api_settings import ClientSettings
from bloomqg.inputs.chat import BatchCallback, ChatRequest, Completion, DecodingParams

log = logging.getLogger(__name__)


class OpenAITextGenerator:
    """Chat completions from an OpenAI-compatible endpoint, cached under ``<cache_dir>``.

    ``settings`` are the entry's client settings (``model``, ``base_url``, ``api_key_env``,
    ``concurrency``, ``rpm``, ``tpm``, prices, ``structured_outputs``, ...: a config entry's come
    from :func:`~bloomqg.inputs.api_settings.client_settings_from_entry`); ``cache_dir`` is the
    call cache's directory (the workflow passes ``<cache_dir>/calls``, outside ``results/``).
    """

    def __init__(self, settings: ClientSettings, *, cache_dir: str | Path) -> None:
        self.settings = settings
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
