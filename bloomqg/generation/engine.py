"""A :class:`~bloomqg.inputs.chat.TextGenerator` for a model served by an engine this job starts.

``engine: vllm`` or ``engine: transformers-serve`` on an ``hf`` model entry: the job starts the
engine's server on 127.0.0.1 and a free port (:mod:`bloomqg.runtime.serving`), waits until it answers,
and sends its requests through the same OpenAI-compatible client as API models
(:class:`~bloomqg.generation.openai_api.OpenAITextGenerator`: call cache, concurrency, retries,
ledger), at price 0. The call cache keys calls by the model's name *and* its engine (name,
versions, arguments, weights), so switching engines reruns generation and nothing is mixed;
each output's provenance records the same. The server starts at the first request the cache
cannot answer: a rerun whose answers are all cached loads no model (minutes for a 7B model on a
GPU). :meth:`EngineTextGenerator.close` stops the server.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bloomqg.inputs.api_settings import ClientSettings
from bloomqg.inputs.chat import BatchCallback, ChatRequest, Completion, DecodingParams
from bloomqg.generation.openai_api import OpenAITextGenerator
from bloomqg.inputs.models import read_model_provenance
from bloomqg.runtime.serving.engines import (
    READY_PATHS,
    EngineSettings,
    engine_python,
    engine_settings,
    engine_versions,
    server_argv,
    server_env,
    wire_model_name,
)
from bloomqg.runtime.serving.server import HOST, ModelServer

logger = logging.getLogger(__name__)

#: Client settings a model entry may set for its engine's requests, and the engines' defaults
#: where they differ from an API's: more in flight (the engine batches them), a longer timeout
#: (on a CPU, a 500-token answer among 16 takes minutes).
CLIENT_KEYS = ("concurrency", "timeout_s", "max_retries", "backoff_base_s", "backoff_max_s")
ENGINE_CLIENT_DEFAULTS = {"concurrency": 16, "timeout_s": 900, "max_retries": 3}
#: The client's port until the server starts: nothing listens there, and nothing is sent before.
UNSTARTED_PORT = 9
#: The server's address as provenance records it (the port varies from run to run).
ELIDED_BASE_URL = f"http://{HOST}:{{port}}/v1"


def model_source(spec: Mapping[str, Any], model_dir: str | Path | None) -> str:
    """What the engine loads: the converted folder of a GGUF entry, a local folder, or the hub id
    (which, offline, must already be in the hub cache)."""
    if model_dir and (Path(model_dir) / "config.json").is_file():  # weights in the folder itself
        return str(model_dir)
    if spec.get("gguf"):
        raise FileNotFoundError(f"model {spec.get('model')!r}: converted GGUF folder {model_dir} is missing "
                                "(the prepare_model step writes it)")
    pointer = read_model_provenance(model_dir) if model_dir else {}
    return str(pointer.get("model") or spec["model"])


class EngineTextGenerator:
    """Chat completions from a server of ``engine`` that this object starts and stops.

    ``spec``: the model entry; ``model_dir``: its materialised folder; ``threads``: the job's
    granted threads (the server's torch threads); ``gpus``: the GPUs the job claimed
    (``tensor_parallel_size``); ``log_path``: the server's log (``logs/serve/<model>.log``).
    """


    def __init__(
        self,
        spec: Mapping[str, Any],
        *,
        name: str,
        model_dir: str | Path | None,
        cache_dir: str | Path,
        threads: int,
        gpus: int,
        log_path: str | Path,
        workflow_dir: str | Path,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.settings: EngineSettings = engine_settings(spec, name)
        #: vLLM continues a trailing assistant message (continue_final_message); the stage reads these
        self.supports_response_prefill = self.settings.engine == "vllm"
        self.response_prefill = bool(spec.get("response_prefill", False))
        python = engine_python(self.settings, workflow_dir)
        versions = engine_versions(self.settings, python)
        source = model_source(spec, model_dir)
        served = str(spec["model"])
        #: the server's command line for a port (chosen when it starts, so that no other socket
        #: takes it meanwhile)
        self._argv = functools.partial(
            server_argv, self.settings, python=python, model_path=source, served_name=served,
            dtype=str(spec.get("dtype") or "auto"), gpus=gpus, trust_remote_code=bool(spec.get("trust_remote_code", False)))
        weights = read_model_provenance(model_dir) if model_dir else {}
        #: what decides the answers besides the request: the cache key's model part
        self.identity = {
            "model": served, "engine": self.settings.engine, "engine_versions": versions,
            "engine_args": list(self.settings.args), "dtype": spec.get("dtype", "auto"),
            "weights_sha256": weights.get("source_gguf_sha256"), "revision": spec.get("revision"),
        }
        self._env = server_env(self.settings, os.environ if environ is None else environ, threads=threads)
        self._log_path, self._name, self._threads = log_path, name, threads
        #: started at the first request the cache cannot answer (:meth:`complete`)
        self.server: ModelServer | None = None
        # the entry's client keys were checked when the study was read; the rest is the server's
        client = ClientSettings.from_spec({
            **ENGINE_CLIENT_DEFAULTS, **{key: spec[key] for key in CLIENT_KEYS if key in spec},
            "model": wire_model_name(self.settings, model_path=source, served_name=served),
            "base_url": f"http://{HOST}:{UNSTARTED_PORT}/v1", "api_key_env": None,
            "price_per_million_input": 0, "price_per_million_output": 0, "structured_outputs": "none",
        })
        self.inner = OpenAITextGenerator(client, cache_dir=cache_dir)
        self.inner.client.cache_model = json.dumps(self.identity, sort_keys=True)
        self.inner.client.continue_final_message = self.supports_response_prefill
        self.inner.client.before_sending = self.start  # only when the cache cannot answer all
        argv = self._argv(port=UNSTARTED_PORT)
        #: recorded with every output: the engine, its versions and its command line (port
        #: elided); ``engine_ready_after_s`` stays None while every answer came from the cache
        self.provenance: dict[str, Any] = {
            "backend": "engine",
            **self.identity,
            "engine_command": ["{port}" if before == "--port" else part for before, part in zip(["", *argv], argv)],
            "engine_threads": threads,
            "engine_gpus": gpus,
            "engine_ready_after_s": None,
            "client": {**self.inner.provenance["settings"], "base_url": ELIDED_BASE_URL},
        }

    @property
    def started(self) -> bool:
        """Whether this object started its server."""
        return self.server is not None

    def start(self) -> None:
        """Start the server now (the client does, before the first request the call cache
        cannot answer); once only.
        The benchmarks call it to time the start-up apart from the requests."""
        if self.server is not None:
            return
        self.server = ModelServer(
            lambda port: self._argv(port=port), port=None, env=self._env, log_path=self._log_path,
            ready_timeout_s=self.settings.ready_timeout_s, ready_paths=READY_PATHS[self.settings.engine],
            name=f"{self.settings.engine} server for {self._name}",
        )
        logger.info("starting %s (threads %d, gpus %d): %s", self.server.name, self._threads,
                    self.provenance["engine_gpus"], self.server.command_line)
        self.server.__enter__()
        logger.info("%s ready after %.1f s at %s", self.server.name, self.server.ready_after_s or 0.0,
                    self.server.base_url)
        self.inner.rebase(self.server.base_url)
        # the port is this run's accident, as in engine_command: not provenance
        self.provenance["client"] = {**self.inner.provenance["settings"], "base_url": ELIDED_BASE_URL}
        self.provenance["engine_ready_after_s"] = round(self.server.ready_after_s or 0.0, 1)

    def complete(
        self,
        requests: Sequence[ChatRequest],
        params: DecodingParams,
        on_batch: BatchCallback | None = None,
    ) -> list[Completion]:
        """One Completion per request, in order; the server starts first when the call cache
        cannot answer them all. A server that died mid-run fails the job
        before the batch it spoiled is handed on (and checkpointed as failures). A request that
        ends with an assistant message (a response prefill) gets that prefix before its text, as
        the in-process loop records it."""
        self._check_alive()
        prefixes = {r.request_id: r.messages[-1]["content"] for r in requests
                    if self.supports_response_prefill and r.messages and r.messages[-1].get("role") == "assistant"}

        def with_prefix(completion: Completion) -> Completion:
            prefix = prefixes.get(completion.request_id)
            if prefix is not None and completion.text is not None and not completion.extra.get("prefixed"):
                completion.text = prefix + completion.text
                completion.extra["prefixed"] = True
            return completion

        def checked(completions: list[Completion]) -> None:
            if any(c.finish_reason == "error" and not c.cached for c in completions):
                self._check_alive()
            for completion in completions:
                with_prefix(completion)
            if on_batch is not None:
                on_batch(completions)

        completions = [with_prefix(c) for c in self.inner.complete(requests, params, checked)]
        self._check_alive()
        return completions

    def _check_alive(self) -> None:
        if self.server is not None:
            self.server.check_alive()

    def ledger(self) -> dict[str, Any]:
        return self.inner.ledger()

    def close(self) -> None:
        """Close the client, then stop the server's whole process group."""
        try:
            self.inner.close()
        finally:
            if self.server is not None:
                self.server.stop()
            else:  # the job's server log says why it is empty
                Path(self._log_path).parent.mkdir(parents=True, exist_ok=True)
                with open(self._log_path, "a", encoding="utf-8") as log:
                    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
                    log.write(f"\n--- {stamp} {self.settings.engine} server for {self._name} not started: "
                              "the call cache answered every request\n")
