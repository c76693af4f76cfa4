"""The config reference's table (docs/config.md), drawn from the config schema (the judge
backends' keys included).

``python -m bloomqg.tools.config_docs`` rewrites the table between the two marker comments of
docs/config.md; ``--check`` only compares, and exits 1 naming the fix when the page and the
schema differ (the test suite runs the same comparison).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from bloomqg.study.config import load_schema
from bloomqg.store.provenance import REPO_ROOT

CONFIG_PAGE = REPO_ROOT / "docs" / "config.md"
START = "<!-- config-table:start (python -m bloomqg.tools.config_docs writes this table from the schema) -->"
END = "<!-- config-table:end -->"
FIX_COMMAND = "python -m bloomqg.tools.config_docs"

Row = tuple[str, str, str, str]  # key, type, default, meaning


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip()


def _code(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f"`{text}`"


_BOUNDS = {"minimum": "≥", "exclusiveMinimum": ">", "maximum": "≤", "exclusiveMaximum": "<", "maxLength": "length ≤"}


def _bounds(prop: Mapping[str, Any]) -> str:
    """``≥ 1, ≤ 256`` for the bounds a key's value must keep."""
    return ", ".join(f"{sign} {prop[bound]}" for bound, sign in _BOUNDS.items() if bound in prop)


def _type(prop: Mapping[str, Any], defs: Mapping[str, Any]) -> str:
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        target = defs[name]
        return f"mapping (`<{name}>`)" if target.get("type") == "object" else _type(target, defs)
    if "const" in prop:
        return _code(prop["const"])
    if "enum" in prop:
        return " / ".join(_code(v) for v in prop["enum"])
    if "oneOf" in prop:
        return " or ".join(_type(p, defs) for p in prop["oneOf"])
    kind = prop.get("type")
    bounds = _bounds(prop)
    if bounds:
        return f"{_type({k: v for k, v in prop.items() if k not in _BOUNDS}, defs)} ({bounds})"
    names = {"object": "mapping", "array": "list", "number": "number", "integer": "integer",
             "string": "string", "boolean": "boolean", "null": "null"}
    if isinstance(kind, list):
        return " or ".join(names.get(k, k) for k in kind)
    if kind == "array" and isinstance(prop.get("items"), Mapping):
        return f"list of {_type(prop['items'], defs)}"
    return names.get(kind, "any") if kind else "any"


def _rows(
    prefix: str, schema: Mapping[str, Any], defs: Mapping[str, Any], *, label: str = "",
    skip: frozenset[str] = frozenset(),
) -> Iterator[Row]:
    """A row per key of ``schema``'s properties, nested mappings with properties unfolded;
    ``label`` follows each key (e.g. the judge backend the key belongs to)."""
    for key, prop in schema.get("properties", {}).items():
        if prop is True or key in skip or key == "backend" and "const" in prop:
            continue  # declared elsewhere (API settings, common keys) or the branch's own name
        path = f"{prefix}{key}"
        default = _code(prop["default"]) if "default" in prop else ""
        description = prop.get("description") or defs.get(prop.get("$ref", "").rsplit("/", 1)[-1], {}).get("description", "")
        yield f"`{path}`{label}", _type(prop, defs), default, description
        nested = prop.get("properties")
        if nested and "default" not in prop:
            yield from _rows(f"{path}.", prop, defs, label=label)


def config_rows() -> list[Row]:
    """Every config key the schema declares, in the order a reader meets them."""
    schema = load_schema()
    defs = schema["$defs"]
    rows: list[Row] = []
    entry_sections = {"datasets": "dataset", "models": "model", "judges": "judge"}
    for key, prop in schema["properties"].items():
        if key in entry_sections:
            continue
        rows.extend(_rows("", {"properties": {key: prop}}, defs))
    rows.extend(_rows("strategies.<name>.", defs["strategy_definition"], defs, label=" (mapping form)"))
    rows.extend(_rows("datasets.<name>.", defs["dataset"], defs))
    rows.extend(_rows("models.<name>.", defs["model"], defs))
    rows.extend(_rows("judges.<name>.", defs["judge"], defs))
    for name in defs["judge"]["properties"]["backend"]["enum"]:
        rows.extend(_rows("judges.<name>.", defs[f"judge_{name}"], defs, label=f" ({name})",
                          skip=frozenset(defs["judge"]["properties"])))
    rows.extend(_rows("<api_settings>.", defs["api_settings"], defs, label=" (backend openai)"))
    rows.extend(_rows("<generation>.", defs["generation"], defs))
    return rows


def config_meanings() -> dict[str, str]:
    """Each key's meaning by dotted pattern, ``*`` for an entry's name
    (``datasets.*.path``, ``judges.*.generation.max_new_tokens``): what the report's Configuration
    section writes above each key of the config it shows. A key two judge backends share takes the
    first backend's wording; the generation and API settings apply under models and judges alike."""
    meanings: dict[str, str] = {}
    for key, _, _, meaning in config_rows():
        path = key.split("`")[1].replace("<name>", "*")
        targets = ([f"{section}.*.{path.split('.', 1)[1]}" for section in ("models", "judges")]
                   if path.startswith(("<generation>.", "<api_settings>.")) else [path])
        if path.startswith("<generation>."):
            targets = [t.replace(".*.", ".*.generation.", 1) for t in targets]
        for target in targets:
            meanings.setdefault(target, meaning)
    return meanings


def config_table() -> str:
    """The Markdown table, marker comments included."""
    lines = [START, "| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    lines += [f"| {key} | {_cell(kind)} | {_cell(default)} | {_cell(meaning)} |"
              for key, kind, default, meaning in config_rows()]
    return "\n".join([*lines, END])


def page_with_table(page: str) -> str:
    """``page`` with the text between the markers replaced by :func:`config_table`."""
    start, end = page.find(START), page.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the page has no config table markers ({START!r} ... {END!r})")
    return page[:start] + config_table() + page[end + len(END):]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 when the page differs")
    parser.add_argument("--page", type=Path, default=CONFIG_PAGE)
    args = parser.parse_args(argv)
    current = args.page.read_text(encoding="utf-8")
    wanted = page_with_table(current)
    if args.check:
        if current != wanted:
            print(f"{args.page}: the config table differs from the schema; run: {FIX_COMMAND}", file=sys.stderr)
            return 1
        return 0
    if current != wanted:
        args.page.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
