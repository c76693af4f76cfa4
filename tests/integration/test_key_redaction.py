"""No file a study writes holds its API key, not even in part, when endpoints echo it.

One endpoint answers every generation with a question that quotes the key twice (a 200 answer),
once as it is and once in JSON escapes that only the parser's decoding turns into the key; the
judge's endpoint answers every call with a 500 that first echoes the key partly, as providers do
(prefix, stars, suffix), then puts it whole where the error text is cut for the log (around
character 500); two more judges answer a verdict, so the questions are voted on and reach the
item explorer and the annotation form. The key, and every 8-character piece of it, must be in no
log, no Parquet file (read back and decoded), no call-cache entry, not in the explorer's data.js
(decompressed), the annotation sheet or form: nowhere in the working directory.
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bloomqg.store.parquet_io import read_frame
from bloomqg.store.frames import GENERATIONS, JUDGMENTS
from tests.integration.test_api_workflow import one_cell_study, snakemake, start_server

pytestmark = pytest.mark.integration

#: 31 characters, as the key of the review that found the leak.
KEY = "sk-Zq8vR2mX4pL7nK3wT9yB6cF1hJ5d"
#: The SDK's error text is "Error code: 500 - <message>" and the client's "HTTP 500: <that>":
#: this prefix puts the key across character 500, where the error text is cut.
ERROR_PREFIX = "HTTP 500: Error code: 500 - "
CUT = 500
JUDGMENTS_TARGET = "results/judgments/cs/fgp/api-gen/echo-judge.parquet"
#: Where the generated text is written again for people: the explorer and the annotation export.
READER_TARGETS = ("results/explorer/data.js", "results/annotation/form.html", "results/annotation/sheet.csv")


#: The client settings of every loopback entry here: few, quick retries.
API = {"api_key_env": "BLOOMQG_TEST_KEY", "max_retries": 1, "backoff_base_s": 0.01, "backoff_max_s": 0.05,
       "timeout_s": 5, "concurrency": 2}


def entry(model: str, port: int) -> dict:
    """An openai-backend config entry for ``model`` served on loopback ``port``."""
    return {"backend": "openai", "model": model, "base_url": f"http://127.0.0.1:{port}/v1", **API}


def fragments(secret: str, length: int = 8) -> list[str]:
    return [secret[i:i + length] for i in range(len(secret) - length + 1)]


def test_a_key_echoed_by_endpoints_is_written_nowhere(tmp_path: Path) -> None:
    echo = f"Incorrect API key provided: {KEY[:12]}****{KEY[-4:]}. "
    padding = echo + "the upstream model failed; request context follows. " * 20
    message = padding[: CUT - 15 - len(ERROR_PREFIX)] + KEY + " (end of context)"
    assert len(ERROR_PREFIX) + message.index(KEY) < CUT < len(ERROR_PREFIX) + message.index(KEY) + len(KEY)
    spelled = "".join(f"\\u{ord(char):04x}" if index % 3 == 0 else char for index, char in enumerate(KEY))
    question = ('{"question": "Why must the key ' + KEY + ' stay secret when a stack is shared, and '
                + spelled + ' too?"}')
    assert KEY in json.loads(question)["question"].split("shared, and ")[1]  # the decoded attack
    generator, generator_port = start_server(question)
    judge, judge_port = start_server(None, "--status", "500", "--error-message", message)
    verdicts, verdict_port = start_server(None)
    try:
        config = one_cell_study(
            tmp_path, n_items=3,
            generator=entry("echo-generator", generator_port),
            judges={"echo-judge": entry("echo-judge", judge_port),
                    **{name: entry(name, verdict_port) for name in ("verdict-a", "verdict-b")}},
            annotation={"items_per_cell": 2},
            min_answer_rate=0.0,  # every judge call fails by design: keep its recorded errors
        )
        config_path = tmp_path / "echo.yaml"
        config_path.write_text(yaml.safe_dump(config))
        result = snakemake(tmp_path, config_path, KEY, JUDGMENTS_TARGET, *READER_TARGETS)
    finally:
        for process in (generator, judge, verdicts):
            process.terminate()
            process.wait(timeout=10)
    assert result.returncode == 0, result.stderr[-5000:]

    # The attack reached the files: the question was generated (masked), the judge's error recorded.
    generations = read_frame(tmp_path / "results" / "generations" / "cs" / "fgp" / "api-gen.parquet", GENERATIONS)
    assert generations["raw_text"].str.contains("Why must the key *** stay secret", regex=False).all()
    judgments = read_frame(tmp_path / JUDGMENTS_TARGET, JUDGMENTS)
    assert judgments["reason"].str.contains("request context follows", regex=False).all()
    logs = list((tmp_path / "logs").rglob("*.log"))
    assert any("HTTP 500" in log.read_text() for log in logs), "the judge's log records the 500s"
    assert list((tmp_path / "cache").rglob("*.json")), "the generator's answers are cached"

    for path in tmp_path.rglob("*.parquet"):  # the stored values, decoded
        frame = pd.read_parquet(path)
        for column in frame.columns:
            text = "\n".join(map(str, frame[column].tolist()))
            assert not [piece for piece in fragments(KEY) if piece in text], f"the key in {path}:{column}"
    assert generations["new_question"].str.contains("stack is shared, and *** too?", regex=False).all()

    # data.js is gzip in base64: the explorer's text is only readable decompressed
    script = (tmp_path / "results" / "explorer" / "data.js").read_text(encoding="ascii")
    explorer_text = gzip.decompress(base64.b64decode(script.split('"')[1]))
    assert b"stack is shared, and *** too?" in explorer_text, "the question reached the explorer"
    assert "stack is shared" in (tmp_path / "results" / "annotation" / "sheet.csv").read_text(encoding="utf-8")
    for piece in [KEY, *fragments(KEY)]:
        assert piece.encode() not in explorer_text, f"{piece!r} of the key in the explorer's data"

    output = result.stdout + result.stderr
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    for piece in [KEY, *fragments(KEY)]:
        assert piece not in output, f"{piece!r} of the key in Snakemake's output"
        for path in written:
            assert piece.encode() not in path.read_bytes(), f"{piece!r} of the key in {path}"


def _file_texts(root: Path) -> list[tuple[Path, str]]:
    """Every file under ``root`` as the text a reader would get from it: Parquet decoded value by
    value, the explorer's data.js decompressed, any other file as UTF-8 (errors replaced)."""
    out = []
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        if path.suffix == ".parquet":
            frame = pd.read_parquet(path)
            text = "\n".join("\n".join(map(str, frame[c].tolist())) for c in frame.columns)
        elif path.name == "data.js":
            script = path.read_text(encoding="ascii")
            text = gzip.decompress(base64.b64decode(script.split('"')[1])).decode("utf-8", "replace")
        else:
            text = path.read_bytes().decode("utf-8", "replace")
        out.append((path, text))
    return out


def test_every_spelling_of_the_key_a_model_echoes_is_written_nowhere(tmp_path: Path) -> None:
    """The issue's spellings, each of the whole key, in one generated question (JSON-escaped as a
    model's JSON answer carries them): after canonicalisation no file of the study, its call cache
    or its logs holds an 8-character run of the key (or of its reversal, its base64 or hex)."""
    from tests.unit.test_key_masking import _HOWS, _JOINERS, _spell, canonical_leaks

    spellings = [joiner.join(KEY) for joiner in _JOINERS]
    spellings += [_spell(KEY, how, lambda options: options[-1]) for how in _HOWS if how != "joined"]
    spellings += [base64.b64encode(KEY.encode()).decode(), KEY.encode().hex()]
    question = json.dumps({"question": "Which of these is a stack's key? " + " | ".join(spellings)})
    assert canonical_leaks(json.loads(question)["question"], KEY), "the attack is real"
    generator, generator_port = start_server(question)
    verdicts, verdict_port = start_server(None)
    try:
        config = one_cell_study(
            tmp_path, n_items=2,
            generator=entry("echo-generator", generator_port),
            judges={name: entry(name, verdict_port) for name in ("verdict-a", "verdict-b")},
        )
        config_path = tmp_path / "spellings.yaml"
        config_path.write_text(yaml.safe_dump(config))
        result = snakemake(tmp_path, config_path, KEY, "results/report.html")
    finally:
        for process in (generator, verdicts):
            process.terminate()
            process.wait(timeout=10)
    assert result.returncode == 0, result.stderr[-5000:]
    generations = read_frame(tmp_path / "results" / "generations" / "cs" / "fgp" / "api-gen.parquet", GENERATIONS)
    assert generations["new_question"].str.startswith("Which of these is a stack's key?").all()
    assert list((tmp_path / "cache").rglob("*.json")), "the replies are cached"
    leaks = {str(path.relative_to(tmp_path)): found for path, text in _file_texts(tmp_path)
             if (found := canonical_leaks(text, KEY))}
    assert not leaks, leaks
    assert not canonical_leaks(result.stdout + result.stderr, KEY)


@pytest.mark.parametrize("reply", [
    '{"question": ' + "9" * 5000 + "}",
    "[" * 100_000 + "]" * 100_000,
], ids=["5000-digit-number", "100000-deep"])
def test_a_hostile_reply_fails_its_row_and_the_cell_and_its_rerun_complete(tmp_path: Path, reply: str) -> None:
    reply_file = tmp_path / "reply.txt"  # 200 kB: longer than one command-line argument may be
    reply_file.write_text(reply, encoding="utf-8")
    generator, generator_port = start_server(None, "--content-file", str(reply_file))
    verdicts, verdict_port = start_server(None)
    try:
        config = one_cell_study(
            tmp_path, n_items=2,
            generator=entry("hostile", generator_port),
            judges={"verdict-a": entry("verdict-a", verdict_port)},
        )
        config_path = tmp_path / "hostile.yaml"
        config_path.write_text(yaml.safe_dump(config))
        target = "results/votes/cs/fgp/api-gen.parquet"
        first = snakemake(tmp_path, config_path, "sk-unused-key-0123456789", target)
        assert first.returncode == 0, first.stderr[-5000:]
        generations = read_frame(tmp_path / "results" / "generations" / "cs" / "fgp" / "api-gen.parquet", GENERATIONS)
        assert (generations["parse_status"] == "failed").all() and generations["parse_error"].notna().all()
        assert generations["raw_text"].notna().all(), "the cache and the row keep the reply"
        # the rerun replays the cached reply through the same guarded parser: no crash replayed
        rerun = snakemake(tmp_path, config_path, "sk-unused-key-0123456789", target,
                          "--forcerun", "generate_questions")
        assert rerun.returncode == 0, rerun.stderr[-5000:]
    finally:
        for process in (generator, verdicts):
            process.terminate()
            process.wait(timeout=10)
