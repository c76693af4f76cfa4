"""The API key is masked before any text is cut, stored or logged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bloomqg.api.cache import CachedResponse, CallCache
from bloomqg.api.client import OpenAICompatibleClient
from bloomqg.api.retry import RetryableError, status_error
from bloomqg.stored_text import redact
from bloomqg.api.settings import ClientSettings
from bloomqg.chat import ChatRequest, DecodingParams

KEY = "sk-Zq8vR2mX4pL7nK3wT9yB6cF1hJ5d"
SETTINGS = ClientSettings(model="m", base_url="http://127.0.0.1:9/v1", api_key_env="BLOOMQG_MASK_KEY")


def pieces(secret: str) -> list[str]:
    return [secret[i:i + 8] for i in range(len(secret) - 7)]


def test_an_error_is_masked_before_it_is_cut() -> None:
    for start in range(470, 500):  # the key across the 500-character cut, glued to the text
        message = "x" * (start - len("HTTP 500: ")) + KEY + " tail"
        error = status_error(SETTINGS, 500, message, None, None, KEY)
        assert isinstance(error, RetryableError) and len(str(error)) <= 500
        assert not any(piece in str(error) for piece in pieces(KEY)), start


def test_answers_lose_the_exact_key_only() -> None:
    assert redact(f'{{"question": "Is {KEY} a key?"}}', [KEY]) == '{"question": "Is *** a key?"}'
    # A key of under 8 characters ("EMPTY" for a local server) would mangle words: left alone.
    assert redact("The stack is EMPTY.", ["EMPTY"]) == "The stack is EMPTY."
    # sk-… words in an answer may be content; only errors mask every sk- token.
    assert redact("Use sk-learn-contrib here.", [KEY]) == "Use sk-learn-contrib here."


def test_a_cached_answer_holding_the_key_is_masked_on_replay_and_on_disk(tmp_path: Path, monkeypatch) -> None:
    """An entry written before answers were masked: replayed without the key, no call made, and
    the file rewritten masked, so no piece of the key stays in the cache."""
    monkeypatch.setenv("BLOOMQG_MASK_KEY", KEY)
    client = OpenAICompatibleClient(SETTINGS, cache=tmp_path)
    request = ChatRequest("r1", ({"role": "user", "content": "Write a question."},))
    params = DecodingParams(temperature=0.0, top_p=1.0, max_new_tokens=16, do_sample=False, seed=1)
    entry = CallCache(tmp_path).put(client.cache_key(request, params), CachedResponse(f"echo {KEY}", "stop"))
    [completion] = client.complete([request], params)
    assert completion.cached and completion.text == "echo ***"
    assert not any(piece in entry.read_text() for piece in pieces(KEY))
    assert CallCache(tmp_path).get(client.cache_key(request, params)).text == "echo ***"


def test_the_job_log_masks_a_key_on_every_path(tmp_path: Path) -> None:
    log_path = tmp_path / "job.log"
    script = f"""
import logging
from bloomqg.logs import configure_job_logging, hide_in_logs
configure_job_logging({str(log_path)!r})
hide_in_logs({KEY!r})
logging.getLogger("bloomqg.x").warning("the server said %s", {KEY!r})
raise RuntimeError("uncaught, carrying " + {KEY!r})
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode != 0
    text = log_path.read_text()
    assert "the server said ***" in text and "uncaught, carrying ***" in text
    assert KEY not in text and KEY not in result.stderr
