"""Attacks on the study's inputs (issue 42's seven): each is refused, or made harmless, here.

1. a key spelled in JSON escapes; 2. a key partly echoed; 3. a reply that cannot be stored;
4. spreadsheet bombs; 5. YAML alias bombs; 6. numbers that hang or overflow a job; 7. the rest
(duplicate keys, strategy names, Markdown labels, secrets in base_url, a leading apostrophe,
paths outside the working directory). The fuzz tests run the reply parser and the redaction
over 2,000 generated replies each.
"""

from __future__ import annotations

import html
import json
import re
import urllib.parse

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bloomqg.inputs.parsing import parse_generation
from bloomqg.store.stored_text import redact, storable_text
from tests.support import xlsx_bombs

KEY = "gsk_Wd3Rt7Yu9pQ2mX4pL7nK3wT9yB6cF1hx8Cv"


def pieces(secret: str, size: int = 8) -> list[str]:
    return [secret[i:i + size] for i in range(len(secret) - size + 1)]


def leaks(text: str, secret: str = KEY) -> list[str]:
    return [piece for piece in pieces(secret) if piece in text]


def escaped(text: str, which: list[int], style: str) -> str:
    """``text`` with the characters at ``which`` written as ``style`` escapes."""
    spell = {
        "json": lambda c: f"\\u{ord(c):04x}",
        "JSON": lambda c: f"\\u{ord(c):04X}",
        "url": lambda c: f"%{ord(c):02X}",
        "html": lambda c: f"&#{ord(c)};",
        "hex": lambda c: f"&#x{ord(c):x};",
    }[style]
    return "".join(spell(c) if i in which else c for i, c in enumerate(text))


# -- 1. the key, decoded ------------------------------------------------------------------------

def test_a_key_in_json_escapes_is_masked_in_the_raw_reply_and_in_the_parsed_question() -> None:
    reply = '{"question": "What does \\u0067' + KEY[1:] + ' unlock?"}'
    assert leaks(json.loads(reply)["question"]), "the attack: decoding reveals the key"
    assert not leaks(redact(reply, [KEY]))
    parsed = parse_generation(reply, [], knowledge_units=[], secrets=[KEY])
    assert parsed.parse_status == "ok" and not leaks(parsed.new_question)


# -- 2. the key, partly echoed --------------------------------------------------------------------

@pytest.mark.parametrize("echo", [
    f"Incorrect API key provided: {KEY[:12]}****************{KEY[-4:]}",
    f"invalid key {KEY[:12]}...{KEY[-12:]}",
    f"key {KEY[:6]}…{KEY[-4:]} was revoked",
    f"forbidden for {KEY[3:15]} / {KEY[20:32]}",
])
def test_a_partly_echoed_key_leaves_no_piece_and_no_prefix(echo: str) -> None:
    masked = redact(echo, [KEY])
    assert not leaks(masked) and KEY[:6] not in masked, masked


def test_an_error_masks_any_provider_key_shape_even_unregistered() -> None:
    from bloomqg.api.retry import redact_error

    assert "Wd3Rt7Yu" not in redact_error("HTTP 401: bad key gsk_Wd3Rt7Yu9pQ2", None)


# -- 3. a reply that cannot be stored -------------------------------------------------------------

def test_a_lone_surrogate_nul_and_controls_are_made_storable_and_counted() -> None:
    parsed = parse_generation('{"question": "x \\ud800 y\\u0000 z\\u0007?"}', [], knowledge_units=[])
    assert parsed.parse_status == "ok"
    assert parsed.new_question == "x \ufffd y z?"
    parsed.new_question.encode("utf-8")  # what the checkpoint and Parquet writers need
    assert "1 invalid surrogate(s)" in parsed.parse_error and "2 NUL/control" in parsed.parse_error


def test_an_overlong_question_fails_its_row_saying_why() -> None:
    parsed = parse_generation(json.dumps({"question": "Why " + "very " * 20_000 + "?"}), [],
                              knowledge_units=[], max_question_chars=4000)
    assert parsed.parse_status == "failed" and parsed.new_question is None
    assert "max_question_chars = 4,000" in parsed.parse_error


def test_a_reply_of_controls_only_fails_its_row() -> None:
    parsed = parse_generation('{"question": "\\u0000\\u0001\\u0002"}', [], knowledge_units=[])
    assert parsed.parse_status == "failed"


def test_the_stored_record_of_a_hostile_reply_encodes(tmp_path) -> None:
    """The checkpoint writer's and the Parquet writer's encodings: the crash of the issue."""
    from bloomqg.inputs.chat import Completion
    from bloomqg.generation.stage import pass_record

    completion = Completion(request_id="p1", text='{"question": "x \ud800 \\ud800 y\x00?"}', finish_reason="stop")
    record = pass_record("generate", [], [], completion, [])
    json.dumps(record, ensure_ascii=False).encode("utf-8")
    assert record["parse_status"] == "ok" and "\x00" not in record["raw_text"]


# -- 7. the rest: the leading apostrophe ----------------------------------------------------------

@pytest.mark.parametrize("reply, question", [
    ('{"question": "\'Twas brillig: who wrote the line?"}', "'Twas brillig: who wrote the line?"),
    ("Question: 'Hamlet' is a play by whom?", "'Hamlet' is a play by whom?"),
    ("Question: 'Who wrote Hamlet?'", "Who wrote Hamlet?"),
])
def test_the_parser_keeps_a_leading_apostrophe(reply: str, question: str) -> None:
    assert parse_generation(reply, [], knowledge_units=[]).new_question == question


# -- fuzz: the reply parser and the redaction -----------------------------------------------------

_ESCAPES = st.sampled_from(["json", "JSON", "url", "html", "hex"])
#: Text around the key: anything but the escape characters, whose meaning next to an escape is
#: ambiguous outside JSON (a backslash before \u0067 makes it the text "\u0067").
_NOISE = st.text(alphabet=st.characters(exclude_characters="\\%&"), max_size=40)


def decoded(text: str) -> str:
    """Every escape style of :func:`escaped` decoded (what a reader of the stored text sees)."""
    text = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
    return html.unescape(urllib.parse.unquote(text))


@st.composite
def spelled_key_replies(draw: st.DrawFn) -> tuple[str, str]:
    """A reply carrying the whole key or a run of 8+ of its characters, some escaped, in JSON or prose."""
    start = draw(st.integers(0, len(KEY) - 8))
    end = draw(st.integers(start + 8, len(KEY)))
    fragment = KEY[start:end]
    which = draw(st.lists(st.integers(0, len(fragment) - 1), max_size=len(fragment)))
    spelled = escaped(fragment, which, draw(_ESCAPES))
    before, after = draw(_NOISE), draw(_NOISE)
    shape = draw(st.sampled_from(["json", "prose", "label"]))
    if shape == "json":
        reply = json.dumps({"question": before + "X" + after})[:-1].replace("X", spelled) + "}"
    elif shape == "prose":
        reply = before + spelled + after
    else:
        reply = f"Question: {before}{spelled}{after}"
    return reply, fragment


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spelled_key_replies())
def test_fuzz_no_spelling_of_the_key_survives_redaction_or_parsing(case: tuple[str, str]) -> None:
    reply, _fragment = case
    masked = redact(reply, [KEY])
    assert not leaks(masked), masked
    assert not leaks(decoded(masked)), masked
    parsed = parse_generation(reply, ["bloom_level", "knowledge_unit"], knowledge_units=["sets"], secrets=[KEY])
    for text in (parsed.new_question, parsed.parse_error, *(parsed.identified_knowledge_units or [])):
        if text is not None:
            assert not leaks(text), text


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30)
    | st.sampled_from(["\\ud800", "\\u0000", "\ud800", "\x00", "\\", '"', "'", "<x>", KEY[5:20]]),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(["question", "Question", "bloom_level", "knowledge_unit", "x"]),
                      children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_JSONISH, st.booleans(), st.integers(1, 200))
@example({"bloom_level": "²", "question": False}, True, 1)  # "²".isdigit(), but int("²") raised (found by this test)
def test_fuzz_the_parser_never_raises_and_stores_only_storable_text(value, dumped: bool, cap: int) -> None:
    reply = json.dumps(value) if dumped else str(value)
    parsed = parse_generation(reply, ["bloom_level", "knowledge_unit"], knowledge_units=["sets"],
                              max_question_chars=cap, secrets=[KEY])
    assert parsed.parse_status in ("ok", "failed")
    for text in (parsed.new_question, parsed.parse_error, *(parsed.identified_knowledge_units or [])):
        if text is not None:
            text.encode("utf-8")
            assert "\x00" not in text and not leaks(text)
    if parsed.new_question is not None:
        assert 0 < len(parsed.new_question) <= cap


def test_storable_text_keeps_ordinary_text() -> None:
    text = "Wie berechnet man 3² − 1? 数学\nZeile\tzwei"
    assert storable_text(text).text == text and storable_text(text).note() is None


# -- 4. spreadsheets, bounded by the parser that reads them (issues 42 and 52) ---------------------

@pytest.mark.parametrize("build, extent", [
    (lambda folder: xlsx_bombs.one_far_cell(folder / "xfd.xlsx"), "reaches row 20,000, column XFD"),
    (lambda folder: xlsx_bombs.one_far_cell(folder / "bare.xlsx", declare=False), "reaches row 20,000, column XFD"),
    (lambda folder: xlsx_bombs.one_far_cell(folder / "zeros.xlsx", "XFD00020000", declare=False),
     "reaches row 20,000, column XFD"),
    (lambda folder: xlsx_bombs.one_far_cell(folder / "a.xlsx", declare=False, sheet_path="sheets/a.xml"),
     "reaches row 20,000, column XFD"),
    (lambda folder: xlsx_bombs.one_far_cell(folder / "upper.xlsx", declare=False, sheet_path="worksheets/sheet1.XML"),
     "reaches row 20,000, column XFD"),
    (lambda folder: xlsx_bombs.one_far_cell(folder / "last.xlsx", "A1048576", declare=False), "reaches row 500,001"),
    (lambda folder: xlsx_bombs.one_far_cell(folder / "corner.xlsx", "XFD1048576", declare=False), "reaches row 500,001"),
    (lambda folder: xlsx_bombs.empty_cells(folder / "empty.xlsx", megabytes=8), "reaches row 5,001, column CV"),
])
def test_an_xlsx_bomb_is_refused_naming_file_and_extent(tmp_path, build, extent: str) -> None:
    """Wherever the workbook's relationships put the sheet, however its references are written:
    the reader that would build the table is the one that counts and refuses."""
    from bloomqg.inputs.datasets import DatasetError, load_dataset

    path = build(tmp_path)
    with pytest.raises(DatasetError) as error:
        load_dataset("bomb", {"loader": "release_math", "path": str(path)}, base_dir=tmp_path)
    assert str(path) in str(error.value) and extent in str(error.value), str(error.value)
    assert "input_limits.max_sheet_cells = 500,000" in str(error.value)


@pytest.mark.parametrize("build, where", [
    (lambda folder: xlsx_bombs.one_huge_shared_string(folder / "shared.xlsx", megabytes=2, uses=200),
     "cell B2: 2,000,000 characters"),
    (lambda folder: xlsx_bombs.markup_cell(folder / "img.xlsx", "[img]" * 40_000), "cell B2: 200,000 characters"),
])
def test_an_oversized_cell_is_refused_as_it_is_read(tmp_path, build, where: str) -> None:
    """Before any markup is cleaned: a shared string is counted at each use."""
    from bloomqg.inputs.datasets import DatasetError, load_dataset

    path = build(tmp_path)
    with pytest.raises(DatasetError) as error:
        load_dataset("bomb", {"loader": "release_math", "path": str(path)}, base_dir=tmp_path)
    assert str(path) in str(error.value) and where in str(error.value)
    assert "input_limits.max_field_chars = 20,000" in str(error.value)


def test_a_shared_string_is_counted_at_each_use(tmp_path) -> None:
    from bloomqg.store.sheet_extent import SheetTooLarge, read_first_sheet

    path = xlsx_bombs.one_huge_shared_string(tmp_path / "shared.xlsx", megabytes=1, uses=50)
    header, rows = read_first_sheet(path, max_cells=1000, max_cell_chars=2_000_000, max_text_chars=50_000_100)
    assert header == ["知识点名称", "题目内容"] and len(rows) == 50
    with pytest.raises(SheetTooLarge, match=r"more than 10,000,000 characters of text by cell B11"):
        read_first_sheet(path, max_cells=1000, max_cell_chars=2_000_000, max_text_chars=10_000_000)


def test_a_workbook_within_the_bound_is_read(tmp_path) -> None:
    from bloomqg.store.sheet_extent import read_first_sheet

    path = xlsx_bombs.one_far_cell(tmp_path / "small.xlsx", "C40")
    header, rows = read_first_sheet(path, max_cells=120, max_cell_chars=10, max_text_chars=100)  # 40 rows × 3 columns
    assert header == ["question", "Unnamed: 1", "Unnamed: 2"] and len(rows) == 39 and rows[-1] == [None, None, "x"]
    with pytest.raises(ValueError, match="reaches row 40, column C: more than 119 cells"):
        read_first_sheet(path, max_cells=119, max_cell_chars=10, max_text_chars=100)


def test_markup_of_unclosed_tags_is_cleaned_as_text() -> None:
    """The patterns no longer search past the next bracket: what an unclosed tag leaves is kept."""
    from bloomqg.inputs.datasets import clean_markup

    assert clean_markup("[img]" * 40_000 + "[img]http://x/a.png[/img] Why?") == ("[img]" * 40_000 + " Why?", 1)
    assert clean_markup("a [img=1]u[/img] b <p class='x'>c</p> [color=red]d[/color]") == ("a b\nc\nd", 1)
    assert clean_markup("<p" * 1000 + "x") == ("<p" * 1000 + "x", 0)


def test_an_annotation_sheet_beyond_its_sample_is_refused_while_streaming(tmp_path) -> None:
    from bloomqg.annotation.sheets import AnnotationError, SHEET_COLUMNS, _read_rows

    path = tmp_path / "sheet.csv"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(",".join(SHEET_COLUMNS) + "\n")
        handle.write(("," * (len(SHEET_COLUMNS) - 1) + "\n") * 5000)
    with pytest.raises(AnnotationError, match=r"sheet.csv: more than 1,030 rows, for a sample of 30 items"):
        _read_rows(path, 1030)
    assert len(_read_rows(path, 5000)) == 5000


# -- 5. config that cannot expand ------------------------------------------------------------------

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))


def test_an_alias_bomb_is_refused_before_any_walk(tmp_path) -> None:
    import yaml

    from bloomqg.study.config import ConfigError, parse_config_text, prepare_study

    with pytest.raises(ConfigError, match=r"bomb.yaml: 490,329,064 YAML nodes once its aliases"):
        parse_config_text(ALIAS_BOMB, "bomb.yaml")
    source = tmp_path / "study.yaml"
    source.write_text("judges:\n  rules:\n    backend: rules\n    extra:\n"
                      + "".join("      " + line + "\n" for line in ALIAS_BOMB.splitlines()))
    loaded = yaml.safe_load(source.read_text())  # what Snakemake hands over: shared lists
    with pytest.raises(ConfigError, match="YAML nodes once its aliases"):
        prepare_study(loaded, workdir=tmp_path, sources=[source])
    with pytest.raises(ConfigError, match="values once its YAML aliases are expanded"):
        prepare_study(loaded, workdir=tmp_path)  # no file to read: the loaded mapping is counted


# -- 6. numbers that pass the bounds and break the job --------------------------------------------

@pytest.mark.parametrize("path, value", [
    (("seed",), 2**70),
    (("seed",), -1),
    (("models", "api", "backoff_base_s"), 1e308),
    (("models", "api", "backoff_max_s"), 1e308),
    (("models", "api", "timeout_s"), 1e308),
    (("models", "api", "rpm"), 10**300),
    (("models", "api", "budget_usd"), 1e308),
    (("budget_usd",), 1e308),
])
def test_a_number_past_its_meaningful_bound_is_refused_at_plan_time_naming_the_key(path, value) -> None:
    from bloomqg.study.config import ConfigError, validate_schema

    config = {"datasets": {"cs": {"loader": "embedded", "path": "data/cs/questions.csv"}},
              "models": {"api": {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}},
              "judges": {"rules": {"backend": "rules"}}}
    validate_schema(config)
    node = config
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ConfigError, match=re.escape(".".join(path)) + ": "):
        validate_schema(config)


# -- 7. the rest: duplicate keys ---------------------------------------------------------------------

def test_a_key_written_twice_is_refused_naming_it_and_both_lines(tmp_path) -> None:
    from bloomqg.study.config import ConfigError, load_config_file

    source = tmp_path / "study.yaml"
    source.write_text("seed: 1\nlimit_items: 8\nexemplars: 1\nlimit_items: 2\n")
    with pytest.raises(ConfigError, match=r"study.yaml: key 'limit_items' is written twice in one mapping, at lines 2 and 4"):
        load_config_file(source)
    source.write_text("base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\n")
    assert load_config_file(source)["other"] == {"x": 1, "y": 3}  # a merge key's keys may be overridden


# -- 7. the rest: strategy names, Markdown labels, base_url secrets, paths outside -----------------

@pytest.mark.parametrize("name", ["my socratic", "../x"])
def test_a_bad_strategy_name_is_told_which_characters_are_allowed(name: str) -> None:
    from bloomqg.study.config import ConfigError, validate_schema

    config = {"datasets": {"cs": {"loader": "embedded", "path": "data/cs/questions.csv"}},
              "models": {"m": {"backend": "openai", "model": "m"}}, "judges": {"rules": {"backend": "rules"}},
              "strategies": {name: {"template": "prompts/fgp.txt"}}}
    with pytest.raises(ConfigError) as error:
        validate_schema(config)
    assert f"{name!r} is not valid here: A strategy's name: 1 to 64 characters, only letters" in str(error.value)
    assert "'_' and '-'" in str(error.value)


def test_docs_config_says_which_characters_a_strategy_name_may_hold() -> None:
    from tests.conftest import REPO

    assert "only letters A-Z and a-z, digits 0-9, '_' and '-'" in (REPO / "docs" / "config.md").read_text()


def test_markdown_tables_escape_html_in_labels() -> None:
    from bloomqg.reporting.tables.markdown import render_markdown
    from bloomqg.reporting.tables.model import Cell as TableCell, Table

    label = "<img src=x onerror=alert(1)>"
    table = Table(name="t", caption=f"Strategies {label}", stub_columns=["strategy"], columns=["n"],
                  rows=[[TableCell(label), TableCell("1")]], data=pd.DataFrame())
    markdown = render_markdown(table)
    assert "<img" not in markdown and "&lt;img src=x onerror=alert(1)&gt;" in markdown


@pytest.mark.parametrize("url, what", [
    ("http://127.0.0.1:8000/v1;token=abc123", "path parameters"),
    ("http://127.0.0.1:8000/sk-Zq8vR2mX4pL7nK3wT9/v1", "a path segment that looks like a key"),
    ("http://127.0.0.1:8000/v1/Zq8vR2mX4pL7nK3wT9yB6cF1", "a path segment that looks like a key"),
])
def test_a_secret_in_base_urls_path_is_refused_without_echoing_it(url: str, what: str) -> None:
    from bloomqg.study.config import ConfigError, check_base_urls

    with pytest.raises(ConfigError) as error:
        check_base_urls({"models": {"api": {"base_url": url}}})
    assert what in str(error.value) and "models.api.base_url" in str(error.value)
    assert "Zq8vR2mX" not in str(error.value) and "abc123" not in str(error.value)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "https://x.openai.azure.com/openai/deployments/gpt-4o-2024-08-06",
                                 "https://gateway.ai.cloudflare.com/v1/0123456789abcdef0123456789abcdef/gw/openai"])
def test_ordinary_base_urls_pass(url: str) -> None:
    from bloomqg.inputs.api_settings import base_url_problem

    assert base_url_problem(url) is None


def test_a_written_path_outside_the_working_directory_must_be_absolute(tmp_path, caplog) -> None:
    from bloomqg.study.config import ConfigError, check_written_paths

    workdir = tmp_path / "project"
    workdir.mkdir()
    with pytest.raises(ConfigError, match=r"cache_dir: '\.\./\.\.' leads outside the working directory"):
        check_written_paths({"cache_dir": "../.."}, workdir)
    check_written_paths({"cache_dir": ".cache/bloomqg"}, workdir)
    assert not caplog.records
    with caplog.at_level("WARNING"):
        check_written_paths({"cache_dir": str(tmp_path / "shared-cache")}, workdir)
    assert [record.getMessage() for record in caplog.records] == [
        f"cache_dir is outside the working directory {workdir}: the workflow writes to {tmp_path / 'shared-cache'}"]


# -- 1 and 2 through the writers: every file the path of a reply writes, read back decoded -------

@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(spelled_key_replies())
def test_a_spelled_key_reaches_no_file_a_reply_is_written_to(tmp_path_factory, case: tuple[str, str]) -> None:
    """The reply as an endpoint sends it (in the response's JSON, its escapes intact) → the call
    cache entry, the checkpoint line and the GENERATIONS Parquet (read back), and a log line that
    quotes the reply: no 8-character piece of the key in any of them, decoded."""
    import logging

    from bloomqg.api.cache import CallCache
    from bloomqg.inputs.api_settings import ClientSettings
    from bloomqg.api.wire import Call, parse_completion
    from bloomqg.inputs.chat import ChatRequest
    from bloomqg.store.frames import GENERATIONS
    from bloomqg.generation.stage import final_row, pass_record
    from bloomqg.store.logs import _MaskingFormatter, hide_in_logs
    from bloomqg.store.parquet_io import read_frame, write_frame

    reply, _fragment = case
    folder = tmp_path_factory.mktemp("run")
    settings_ = ClientSettings(model="m", base_url="http://127.0.0.1:9/v1", api_key_env="BLOOMQG_FUZZ_KEY")
    call = Call("k1", ChatRequest("p1", ({"role": "user", "content": "Write."},)), [0], 10, 10)
    response = json.loads(json.dumps({"choices": [{"message": {"content": reply}, "finish_reason": "stop"}]}))
    cached, completion = parse_completion(settings_, call, response, None, batch=False, api_key=KEY)
    entry = CallCache(folder / "cache").put("0" * 64, cached)
    record = pass_record("generate", [], [], completion, [])
    checkpoint = json.dumps(record, ensure_ascii=False)
    prompt = {"prompt_id": "p1", "item_id": "cs-0001", "dataset": "cs", "strategy": "fgp",
              "original_question": "What is a set?", "original_bloom_level": "Remember",
              "original_knowledge_units": ["sets"],
              "prompt_hash": "0" * 64, "passes_json": json.dumps([{"name": "generate", "answer_fields": []}])}
    row = final_row(prompt, [record], "api", 7)
    write_frame(pd.DataFrame([row])[GENERATIONS.names], folder / "g.parquet", GENERATIONS)
    stored = read_frame(folder / "g.parquet", GENERATIONS).to_json()
    hide_in_logs(KEY)
    line = _MaskingFormatter("%(message)s").format(
        logging.LogRecord("x", logging.WARNING, __file__, 1, "the endpoint said %s", (reply,), None))
    for where, text in {"cache": entry.read_text(encoding="utf-8"), "checkpoint": checkpoint,
                        "parquet": stored, "log": line}.items():
        assert not leaks(decoded(text)) and not leaks(decoded(json.loads(json.dumps(text)))), (where, text)


def test_every_job_masks_the_keys_its_config_names(monkeypatch) -> None:
    """A job that calls no endpoint (a report, the explorer) still masks every configured key."""
    from bloomqg.store import stored_text
    from bloomqg.runtime.job import hide_configured_secrets

    monkeypatch.setattr(stored_text, "_registered", set())
    monkeypatch.setenv("BLOOMQG_JUDGE_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-default-0123456789")
    hide_configured_secrets({"models": {"api": {"backend": "openai", "model": "m"}},
                             "judges": {"j": {"backend": "openai", "api_key_env": "BLOOMQG_JUDGE_KEY"}}})
    assert stored_text.registered_secrets() == {KEY, "sk-openai-default-0123456789"}
    assert redact(f"saw {KEY[2:14]} and sk-openai-default-0123456789") == "saw *** and ***"


def test_a_judges_reason_is_stored_text_too(monkeypatch) -> None:
    from bloomqg.store import stored_text
    from bloomqg.store.stored_text import stored_or_none

    monkeypatch.setattr(stored_text, "_registered", {KEY})
    reason = stored_or_none(f"fine \ud800 question\x00 ({KEY[:10]}…{KEY[-5:]})")
    reason.encode("utf-8")
    assert reason == "fine \ufffd question (***)" and stored_or_none(None) is None


# -- issue 52, 2: every reply is untrusted, every time it is read ----------------------------------

_HUGE = "9" * 5000  # past Python's int-string limit (4,300 digits): int() raises ValueError
_HOSTILE_REPLIES = {
    "5,000-digit number": '{"question": "What is a set?", "n": ' + _HUGE + "}",
    "5,000-digit number, fenced": '```json\n{"unique": ' + _HUGE + "}\n```",
    "100,000-deep list": '{"question": "Q?", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "100,000-deep object": '{"a":' * 100_000 + "1" + "}" * 100_000,
    "100,000 open braces in prose": "Here: " + "{" * 100_000,
}


@pytest.mark.parametrize("name", list(_HOSTILE_REPLIES))
def test_a_hostile_reply_fails_its_row_with_a_reason(name: str) -> None:
    from bloomqg.judges.verdict import parse_verdict

    reply = _HOSTILE_REPLIES[name]
    parsed = parse_generation(reply, ["bloom_level", "knowledge_unit"], knowledge_units=["sets"])
    assert parsed.parse_status == "failed" and parsed.new_question is None
    assert "digits" in parsed.parse_error or "deep" in parsed.parse_error, parsed.parse_error
    verdict = parse_verdict(reply, ["sets"])
    assert {cv.status for cv in verdict.criteria.values()} == {"parse_failed"}
    assert "digits" in verdict["unique"].reason or "deep" in verdict["unique"].reason


def test_a_cached_hostile_reply_fails_its_row_not_the_job(tmp_path) -> None:
    """The replay of the issue: the cached reply is read through the same guarded parsers, by the
    generation stage and by the LLM judge, and a cache file nested deeply is a miss."""
    from bloomqg.api.cache import CallCache
    from bloomqg.inputs.chat import Completion
    from bloomqg.generation.stage import pass_record
    from bloomqg.judges.llm import verdict_from_completion

    for reply in _HOSTILE_REPLIES.values():
        completion = Completion(request_id="p1", text=reply, finish_reason="stop", cached=True)
        record = pass_record("generate", [], [], completion, ["sets"])
        assert record["parse_status"] == "failed" and record["raw_text"] == reply
        verdict = verdict_from_completion(completion, ["sets"])
        assert verdict["readable"].status == "parse_failed"
    entry = CallCache(tmp_path).path_for("0" * 64)
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.write_text("[" * 100_000 + "]" * 100_000)
    assert CallCache(tmp_path).get("0" * 64) is None


def test_a_reason_quoting_a_reply_value_is_cut() -> None:
    from bloomqg.judges.verdict import parse_verdict

    verdict = parse_verdict(json.dumps({"unique": "maybe " * 100_000, "bloom_level": ["x" * 10_000] * 50}), ["sets"])
    assert verdict["unique"].status == "parse_failed" and len(verdict["unique"].reason) < 500
    assert len(verdict["bloom_level"].reason) < 1000


_PIECES = st.sampled_from([
    '{"question": "What is a set?"}', '{"unique": true, "readable": "yes"}', "{", "}", "[", "]", '"', ":",
    ",", "```json\n", "```", "Question: ", "\n", "\\u0000", "1e999999", "-0", "NaN", "\ud800", "{}"])


@st.composite
def hostile_replies(draw: st.DrawFn) -> str:
    """Pieces of answers, huge numbers, deep or unbalanced nesting and long runs, concatenated."""
    parts = []
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["piece", "number", "nest", "run"]))
        if kind == "piece":
            parts.append(draw(_PIECES))
        elif kind == "number":
            parts.append(draw(st.sampled_from(["", "-"])) + "7" * draw(st.integers(1, 6000)))
        elif kind == "nest":
            depth = draw(st.integers(1, 5000))
            opener = draw(st.sampled_from(["[", '{"a":', '{"question":']))
            parts.append(opener * depth + draw(st.sampled_from(["1", '"x"', _HUGE[:4400]]))
                         + ("]" if opener == "[" else "}") * draw(st.integers(0, depth)))
        else:
            parts.append(draw(st.sampled_from([" ", "{}", "Question:\n", "a", '"question": "'])) * draw(st.integers(1, 20_000)))
    return "".join(parts)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
@given(hostile_replies())
def test_fuzz_no_exception_escapes_the_reply_parsers(reply: str) -> None:
    from bloomqg.judges.verdict import parse_verdict

    parsed = parse_generation(reply, ["bloom_level", "knowledge_unit"], knowledge_units=["sets"])
    assert parsed.parse_status in ("ok", "failed")
    assert parsed.parse_error is None or len(parsed.parse_error) < 2000
    verdict = parse_verdict(reply, ["sets"])
    for criterion in verdict.criteria.values():
        assert criterion.status in ("ok", "parse_failed")
        assert criterion.reason is None or len(criterion.reason) < 2000


# -- issue 52, 4: configs checked before Snakemake parses them -----------------------------------------

@pytest.mark.parametrize("name, reason", [
    ("mapping_alias_bomb", "YAML nodes once its aliases (*name) are expanded"),
    ("merge_key_bomb", "YAML nodes once its aliases (*name) are expanded"),
    ("use_yte", "key '__use_yte__' asks Snakemake to run the config as a YTE template"),
    ("50MB_string", "50,000,015 bytes, above the 1,000,000 a config file may hold"),
    ("long_value", "label: a value of 20,000 characters (yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy… (19,940 characters cut)"),
    ("deep_nesting", "nested more than 32 deep"),
])
def test_a_config_snakemake_would_choke_on_is_refused_first(tmp_path, name: str, reason: str) -> None:
    """What `make study CONFIG=…` runs before Snakemake: the file named, the reason, no value whole."""
    import subprocess
    import sys
    from pathlib import Path

    from tests.support.config_bombs import write_all

    path = write_all(tmp_path)[name]
    repo = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-m", "bloomqg.study.config", str(path)], capture_output=True, text=True,
                            cwd=repo, env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert result.returncode == 2 and str(path) in result.stderr and reason in result.stderr, result.stderr
    assert len(result.stderr) < 1000


def test_every_shipped_config_passes_the_check_before_snakemake() -> None:
    from pathlib import Path

    from bloomqg.study.config import check_config_file, main

    repo = Path(__file__).resolve().parents[2]
    files = [repo / "config.yaml", *sorted((repo / "configs").glob("*.yaml"))]
    for path in files:
        check_config_file(path)
    assert main([str(path) for path in files]) == 0


def test_a_schema_error_echoes_a_long_value_cut() -> None:
    from bloomqg.study.config import ConfigError, validate_schema

    config = {"datasets": {"cs": {"loader": "embedded", "path": "data/cs/questions.csv"}},
              "models": {"api": {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}},
              "judges": {"rules": {"backend": "rules"}}, "seed": "z" * 1_000_000}
    with pytest.raises(ConfigError) as error:
        validate_schema(config)
    assert "seed: " in str(error.value) and "characters cut)" in str(error.value)
    assert len(str(error.value)) < 2000


# -- issue 52, 5 (in part): no model file from a path a config points elsewhere ----------------------

@pytest.mark.parametrize("path", ["../../../elsewhere/evil.skops", "/tmp/evil.skops", "results/../../evil.skops"])
def test_a_learned_judges_model_file_outside_the_study_is_refused(path: str) -> None:
    from bloomqg.study.config import ConfigError
    from bloomqg.judges.backends.learned import DEFAULT_MODEL_FILE, model_file

    with pytest.raises(ConfigError, match=r"judges\.mine\.model_file: .* must be a relative path inside the study"):
        model_file("mine", {"backend": "learned", "model_file": path})
    assert model_file("mine", {"backend": "learned"}) == DEFAULT_MODEL_FILE.format(judge="mine")


def test_a_learned_models_cache_key_holds_the_code_that_trains_it(monkeypatch) -> None:
    from bloomqg.judges import learned

    before = learned.training_digest("0" * 64, {"C": 1.0})
    monkeypatch.setattr(learned, "code_version", lambda: "changed")
    assert learned.training_digest("0" * 64, {"C": 1.0}) != before
