"""How to reach one model behind an OpenAI-compatible endpoint: :class:`ClientSettings`.

The settings are checked against the config schema's ``$defs/api_settings`` (the one definition of
valid settings) through :mod:`bloomqg.store.config_schema`. They are part of the study's inputs:
:mod:`bloomqg.inputs.specs` resolves an API entry's settings once, when the config is read
(:func:`client_settings_from_entry`), and every part of :mod:`bloomqg.api` takes them from here
(this module imports none of them).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import unquote, urlsplit, urlunsplit

from bloomqg.store.config_schema import file_schema
from bloomqg.store.stored_text import PROVIDER_KEY

#: The endpoint used when ``base_url`` is None (explicit, so OPENAI_BASE_URL never redirects calls).
OPENAI_BASE_URL = "https://api.openai.com/v1"


@dataclass(frozen=True)
class ClientSettings:
    """How to reach one model behind an OpenAI-compatible endpoint and how hard to push it.

    ``api_key_env`` names the environment variable holding the key (None: the endpoint needs no
    key, e.g. a local server). ``rpm``/``tpm`` are the account's limits; ``None`` means unpaced.
    ``backoff_max_s`` caps every wait between tries, a server's ``Retry-After`` included.
    """

    model: str
    base_url: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    concurrency: int = 8
    rpm: float | None = None
    tpm: float | None = None
    timeout_s: float = 60.0
    max_retries: int = 8
    backoff_base_s: float = 0.5
    backoff_max_s: float = 60.0
    price_per_million_input: float | None = None
    price_per_million_output: float | None = None
    structured_outputs: str = "auto"
    mode: str = "sync"
    #: Batch API prices; None: the sync prices (an upper bound: OpenAI charges half)
    batch_price_per_million_input: float | None = None
    batch_price_per_million_output: float | None = None
    batch_completion_window: str = "24h"
    batch_poll_s: float = 30.0
    batch_poll_max_s: float = 600.0
    #: the Batch API's limits per batch: requests and input file bytes (split above them)
    batch_max_requests: int = 50_000
    batch_max_bytes: int = 200_000_000
    #: new batches for failed or expired items, after the first
    batch_max_rounds: int = 2
    #: this many failed items or fewer are retried as sync calls instead of a new batch
    batch_sync_below: int = 20
    #: stop calls once the spend recorded under the cache directory would pass this (USD)
    budget_usd: float | None = None

    def __post_init__(self) -> None:
        # The config schema's $defs/api_settings is the one definition of valid settings; code
        # that builds settings itself (tests, benchmarks) is held to the same rules as a config.
        problems = [] if isinstance(self.model, str) and self.model.strip() else [
            f"model: {self.model!r} is not a non-empty string"]
        settings = {key: value for key, value in dataclasses.asdict(self).items() if key != "model"}
        problems += file_schema().problems(settings, "#/$defs/api_settings")
        if isinstance(self.base_url, str) and (problem := base_url_problem(self.base_url)):
            problems.append(f"base_url: {problem}")
        if self.budget_usd is not None and not self.prices_known:
            problems.append("budget_usd needs price_per_million_input and price_per_million_output: "
                            "without prices the spend cannot be counted")
        if problems:
            raise ValueError("client settings: " + "; ".join(problems))

    @property
    def prices_known(self) -> bool:
        return self.price_per_million_input is not None and self.price_per_million_output is not None

    def prices(self, *, batch: bool) -> tuple[float, float] | None:
        """USD per million (input, output) tokens for sync or batch calls; None when unknown."""
        if not self.prices_known:
            return None
        if batch:
            return (
                self.price_per_million_input if self.batch_price_per_million_input is None
                else self.batch_price_per_million_input,
                self.price_per_million_output if self.batch_price_per_million_output is None
                else self.batch_price_per_million_output,
            )  # type: ignore[return-value]
        return self.price_per_million_input, self.price_per_million_output  # type: ignore[return-value]

    def cost(self, prompt_tokens: int | None, completion_tokens: int | None, *, batch: bool) -> float | None:
        """USD of one call at the configured prices; None when prices or usage are unknown."""
        prices = self.prices(batch=batch)
        if prices is None or prompt_tokens is None or completion_tokens is None:
            return None
        return (prompt_tokens * prices[0] + completion_tokens * prices[1]) / 1e6

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> "ClientSettings":
        """Build settings from a config mapping; an unknown or missing key is a clear error."""
        if not isinstance(spec, Mapping):
            raise TypeError(f"client settings must be a mapping, got {type(spec).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(spec) - known)
        if unknown:
            raise ValueError(
                f"client settings: unknown key(s) {', '.join(map(repr, unknown))}; "
                f"known keys: {', '.join(sorted(known))}"
            )
        if "model" not in spec:
            raise ValueError("client settings: key 'model' is required")
        return cls(**dict(spec))

    @property
    def endpoint(self) -> str:
        """The base URL calls go to, with any user:password or query removed (safe to print)."""
        return redact_url(self.base_url or OPENAI_BASE_URL)

    def public_dict(self) -> dict[str, Any]:
        """The settings for provenance: the endpoint without credentials, the key's variable NAME."""
        values = dataclasses.asdict(self)
        values["base_url"] = self.endpoint
        return values


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


def base_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a ``base_url``, or None. User info (``user:password@``), a query
    string (``?token=…``) and a fragment are refused: whatever a base_url holds is written where
    the config is (``.snakemake/`` metadata, Snakemake's report, the HTML report, Parquet
    provenance). The message shows the URL without them, so it is safe to print."""
    try:
        parts = urlsplit(url)
        shown = redact_url(url)
    except ValueError:  # e.g. a port that is not a number
        return "is not a valid URL (check its host and port)"
    found = []
    if "@" in parts.netloc:
        found.append("user info (user:password@)")
    if "?" in url:
        found.append("a query string (?...)")
    if "#" in url:
        found.append("a fragment (#...)")
    if ";" in parts.path:
        found.append("path parameters (;...)")
    if any(_secret_looking(segment) for segment in parts.path.split(";")[0].split("/")):
        found.append("a path segment that looks like a key or token")
    if not found:
        return None
    return (
        f"{shown} carries {' and '.join(found)}: credentials do not belong in a base_url, which is "
        "written into .snakemake/ metadata, the report and the Parquet provenance. Put the key in an "
        "environment variable and name that variable in api_key_env (the key is sent as "
        "'Authorization: Bearer <key>'), and give base_url as scheme://host[:port]/path only"
    )


_TOKEN_SEGMENT = re.compile(r"[A-Za-z0-9_.~-]{20,}")


def _secret_looking(segment: str) -> bool:
    """Whether a URL path segment looks like a credential: a provider key's shape, ``name=value``,
    or a random token (20+ characters mixing upper and lower case letters and digits; an Azure
    deployment or a Cloudflare account id, lower case, is none)."""
    segment = unquote(segment)
    if PROVIDER_KEY.match(segment) or "=" in segment:
        return True
    return bool(_TOKEN_SEGMENT.fullmatch(segment)) and all(
        any(test(char) for char in segment) for test in (str.isupper, str.islower, str.isdigit))


def redact_url(url: str) -> str:
    """``url`` without user info, query string, fragment, path parameters or a path segment that
    looks like a key (where credentials sometimes hide)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    path = "/".join("***" if _secret_looking(segment) else segment
                    for segment in parts.path.split(";")[0].split("/"))
    return urlunsplit((parts.scheme, host, path, "", ""))
