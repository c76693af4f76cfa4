"""The item table as compressed columnar data the page decodes.

Layout (JSON, gzip-compressed, base64 in a ``<script src>`` file so that a page opened from
``file://`` can load it: Chromium refuses ``fetch`` there):

- ``cat`` and ``text`` columns: a dictionary of distinct strings and one integer code per row
  (-1: null). An original question shared by every model and strategy is stored once.
- ``multi`` columns: the dictionary and one list of codes per row.
- ``num`` columns: a number or null per row.

The JSON text keeps per-row arrays of small integers, which gzip shrinks well; the browser
decodes about 20,000 rows in a few tens of milliseconds.
"""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

from bloomqg.reporting.explorer.items import ItemTable

FORMAT_VERSION = 1
#: The global the data file assigns; the page's script reads it.
DATA_GLOBAL = "BLOOMQG_EXPLORER_DATA"


def _dictionary(values: list[Any]) -> tuple[list[str], list[int]]:
    codes: dict[str, int] = {}
    out = []
    for value in values:
        if value is None:
            out.append(-1)
            continue
        out.append(codes.setdefault(value, len(codes)))
    return list(codes), out


def _multi(values: list[list[str]]) -> tuple[list[str], list[list[int]]]:
    codes: dict[str, int] = {}
    out = [[codes.setdefault(value, len(codes)) for value in row] for row in values]
    return list(codes), out


def encode_table(table: ItemTable, *, title: str) -> dict[str, Any]:
    """The JSON-ready document of ``table``."""
    columns = []
    for column in table.columns:
        entry: dict[str, Any] = {"key": column.key, "label": column.label, "kind": column.kind,
                                 "group": column.group, "shown": column.shown}
        raw = table.values[column.key]
        if column.kind in ("cat", "text"):
            entry["dict"], entry["codes"] = _dictionary(raw)
        elif column.kind == "multi":
            entry["dict"], entry["codes"] = _multi(raw)
        else:
            entry["data"] = [None if v is None else round(float(v), 6) for v in raw]
        columns.append(entry)
    return {
        "version": FORMAT_VERSION, "title": title, "n": len(table), "columns": columns,
        "judges": table.judges, "cells": table.cells, "metrics": table.metrics,
        "metric_specs": table.metric_specs,
    }


def compress_document(document: dict[str, Any]) -> str:
    """gzip + base64 of the document's compact JSON (mtime 0: the same table, the same bytes)."""
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")


def data_script(document: dict[str, Any]) -> str:
    """The ``data.js`` file: one assignment of the compressed document to a global."""
    return f'window.{DATA_GLOBAL} = "{compress_document(document)}";\n'


def decode_data_script(text: str) -> dict[str, Any]:
    """The document back from a ``data.js`` text (for tests and checks)."""
    prefix = f'window.{DATA_GLOBAL} = "'
    if not text.startswith(prefix):
        raise ValueError(f"not an explorer data file: it does not start with {prefix!r}")
    payload = text[len(prefix):].rstrip().removesuffix('";')
    return json.loads(gzip.decompress(base64.b64decode(payload)))
