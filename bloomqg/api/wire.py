"""What goes over the wire for one chat call: its request body and the reading of its answer.

Shared by sync calls and Batch API lines (a batch line's ``body`` is the same request body, its
output line's ``body`` the same answer), so both modes cache and report the same thing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from bloomqg.api.cache import CachedResponse
from bloomqg.api.retry import ItemError, RetryableError
from bloomqg.store.stored_text import redact, storable_text
from bloomqg.inputs.chat import ChatRequest, Completion

if TYPE_CHECKING:
    from bloomqg.inputs.api_settings import ClientSettings


@dataclass
class Call:
    """One unique call (requests with the same cache key share it)."""

    key: str
    request: ChatRequest
    request_indices: list[int]
    prompt_estimate: int
    max_tokens: int

    @property
    def estimated_tokens(self) -> int:
        """Tokens the call may use: the prompt estimate plus the whole completion budget."""
        return self.prompt_estimate + self.max_tokens


def request_body(
    settings: ClientSettings, call: Call, decoding: Mapping[str, Any], *, text_mode: bool,
    continue_final_message: bool = False,
) -> tuple[dict[str, Any], str | None]:
    """Keyword arguments for ``chat.completions.create`` (also a batch line's ``body``) and
    how JSON was asked for. ``continue_final_message`` (a vLLM server: its chat API's extension)
    asks the server to continue a trailing assistant message, a response prefill, rather than
    open a new turn after it."""
    schema = call.request.response_schema
    messages = [dict(m) for m in call.request.messages]
    body: dict[str, Any] = {"model": settings.model, **decoding}
    if body["seed"] is None:
        del body["seed"]
    structured: str | None = None
    if schema is not None:
        if text_mode:
            messages = with_schema_instruction(messages, schema)
            structured = "text"
            if settings.structured_outputs == "json_object":
                body["response_format"] = {"type": "json_object"}
                structured = "json_object"
        else:
            body["response_format"] = json_schema_response_format(schema)
            structured = "json_schema"
    body["messages"] = messages
    if continue_final_message and messages and messages[-1].get("role") == "assistant":
        body.update(continue_final_message=True, add_generation_prompt=False)
    return body, structured


def parse_completion(
    settings: ClientSettings, call: Call, response: Mapping[str, Any], structured: str | None, *, batch: bool,
    api_key: str | None,
) -> tuple[CachedResponse, Completion]:
    """A successful chat completion (decoded JSON, from a sync answer or a batch output line)
    → (what to cache, Completion), the ``api_key`` in use masked in its text (the cache, the
    Parquet files and the logs all take the text from here). A response without text is retried."""
    try:
        choice = response["choices"][0]
        message = choice["message"]
        text = message.get("content")
        api_finish = choice.get("finish_reason")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise RetryableError("invalid_response", "response has no choices[0].message") from None
    if not isinstance(text, str):
        if api_finish == "content_filter":
            raise ItemError("the endpoint's content filter withheld the answer")
        raise RetryableError(
            "invalid_response", f"no text in the message (finish_reason={api_finish!r})"
        )
    # storable first (a lone surrogate the endpoint's JSON escaped cannot break the cache entry,
    # and a NUL between a key's letters is gone before the key is searched), then masked, before
    # anything stores it (the parser counts what decoding the text itself reveals)
    text = redact(storable_text(text).text, [api_key])
    finish_reason = "length" if api_finish == "length" else "stop"
    usage = response.get("usage") if isinstance(response.get("usage"), Mapping) else {}
    prompt_tokens = _int_or_none(usage.get("prompt_tokens"))
    completion_tokens = _int_or_none(usage.get("completion_tokens"))
    cost = settings.cost(prompt_tokens, completion_tokens, batch=batch)
    response_model = redact(response["model"], [api_key]) if isinstance(response.get("model"), str) else None
    cached = CachedResponse(text, finish_reason, prompt_tokens, completion_tokens, response_model)
    return cached, Completion(
        request_id=call.request.request_id,
        text=text,
        finish_reason=finish_reason,
        n_prompt_tokens=prompt_tokens,
        n_completion_tokens=completion_tokens,
        cached=False,
        cost_usd=cost,
        extra={
            "cache_key": call.key,
            "response_model": response_model,
            "api_finish_reason": api_finish,
            "structured_output": structured,
            "mode": "batch" if batch else "sync",
        },
    )


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def json_schema_response_format(schema: Mapping[str, Any]) -> dict[str, Any]:
    """OpenAI's ``response_format`` for a JSON schema; strict only when the schema forbids extras
    (strict mode rejects schemas that allow additional properties)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or "response"))[:64] or "response"
    return {
        "type": "json_schema",
        "json_schema": {
            "name": name,
            "schema": dict(schema),
            "strict": schema.get("additionalProperties") is False,
        },
    }


def with_schema_instruction(
    messages: list[dict[str, str]], schema: Mapping[str, Any]
) -> list[dict[str, str]]:
    """Messages asking for JSON in the text itself, for endpoints without structured outputs."""
    instruction = (
        "Respond with only a JSON object (no prose, no code fence) that follows this JSON schema:\n"
        + json.dumps(schema, ensure_ascii=False)
    )
    out = [dict(m) for m in messages]
    for message in reversed(out):
        if message.get("role") == "user":
            message["content"] = f"{message.get('content', '')}\n\n{instruction}"
            return out
    out.append({"role": "user", "content": instruction})
    return out
