"""The item table as compressed columnar data the page decodes without parsing per-row values.

``data.js`` assigns one base64 string to :data:`DATA_GLOBAL` (a ``<script src>`` file, because
Chromium refuses ``fetch`` from ``file://``). The string is gzip of a binary payload:

- 4 bytes: the length ``H`` of the header (uint32, little endian);
- ``H`` bytes: the header, UTF-8 JSON: title, row count, judges, per-cell provenance and
  metrics, and per column its key, label, kind, group, dictionary and where its arrays lie;
- the arrays, each starting at a multiple of 8 bytes, little endian:

  - ``cat`` and ``text`` columns: one code per row into the dictionary of distinct strings
    (int8, int16 or int32, whichever fits; -1 is null). An original question shared by every
    model and strategy is stored once.
  - ``multi`` columns: ``offsets`` (int32, rows + 1) into ``codes`` (the codes of every row's
    list, one after another).
  - ``num`` columns: float64 per row, NaN for null.

The page turns each array into a typed-array view of the decompressed buffer: decoding 20,000
rows costs the gunzip and a small JSON header, not a parse of a million numbers.
"""

from __future__ import annotations

import base64
import gzip
import json
import struct
from typing import Any

import numpy as np
import pandas as pd

from bloomqg.reporting.explorer.items import ItemTable

FORMAT_VERSION = 2
#: The global the data file assigns; the page's script reads it.
DATA_GLOBAL = "BLOOMQG_EXPLORER_DATA"
_ALIGN = 8


def _dictionary(values: list[Any]) -> tuple[list[str], np.ndarray]:
    """Distinct strings in order of first appearance, and each row's code (-1: null)."""
    codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
    return [str(value) for value in uniques], codes


def _multi(values: list[list[str]]) -> tuple[list[str], np.ndarray, np.ndarray]:
    codes: dict[str, int] = {}
    flat = [codes.setdefault(value, len(codes)) for row in values for value in row]
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    offsets[1:] = np.cumsum([len(row) for row in values])
    return list(codes), np.asarray(flat, dtype=np.int64), offsets


def _code_type(size: int) -> str:
    return "i8" if size < 2**7 else "i16" if size < 2**15 else "i32"


_NUMPY = {"i8": "<i1", "i16": "<i2", "i32": "<i4", "f64": "<f8"}


class _Buffers:
    """Arrays laid one after another, each aligned; ``add`` returns where one lies."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0

    def add(self, array: np.ndarray, dtype: str) -> dict[str, Any]:
        data = np.ascontiguousarray(array, dtype=_NUMPY[dtype]).tobytes()
        entry = {"offset": self.size, "length": int(len(array)), "dtype": dtype}
        pad = -len(data) % _ALIGN
        self.parts.append(data + b"\0" * pad)
        self.size += len(data) + pad
        return entry


def encode_table(table: ItemTable, *, title: str) -> bytes:
    """The binary payload of ``table`` (before gzip)."""
    buffers = _Buffers()
    columns = []
    for column in table.columns:
        entry: dict[str, Any] = {"key": column.key, "label": column.label, "kind": column.kind,
                                 "group": column.group, "shown": column.shown, "help": column.help}
        raw = table.values[column.key]
        if len(raw) != len(table):
            raise ValueError(f"explorer column {column.key!r}: {len(raw)} values for {len(table)} rows")
        if column.kind in ("cat", "text"):
            entry["dict"], codes = _dictionary(raw)
            entry["codes"] = buffers.add(codes, _code_type(len(entry["dict"])))
        elif column.kind == "multi":
            entry["dict"], codes, offsets = _multi(raw)
            entry["codes"] = buffers.add(codes, _code_type(len(entry["dict"])))
            entry["offsets"] = buffers.add(offsets, "i32")
        else:
            entry["values"] = buffers.add(np.array([np.nan if v is None else v for v in raw], dtype=np.float64), "f64")
        columns.append(entry)
    header = {
        "version": FORMAT_VERSION, "title": title, "n": len(table), "columns": columns,
        "judges": table.judges, "cells": table.cells, "metrics": table.metrics,
        "metric_specs": table.metric_specs, "strategy_labels": table.strategy_labels,
    }
    text = json.dumps(header, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    head = struct.pack("<I", len(text)) + text
    head += b"\0" * (-len(head) % _ALIGN)
    # Array offsets count from the end of the padded header.
    return head + b"".join(buffers.parts)


def data_script(payload: bytes) -> str:
    """The ``data.js`` file: the gzip-compressed payload, base64, assigned to a global (mtime 0:
    the same table gives the same bytes)."""
    packed = base64.b64encode(gzip.compress(payload, compresslevel=6, mtime=0)).decode("ascii")
    return f'window.{DATA_GLOBAL} = "{packed}";\n'


def decode_payload(payload: bytes) -> dict[str, Any]:
    """The header with every column's arrays read back as lists (for tests and checks)."""
    (length,) = struct.unpack_from("<I", payload, 0)
    header = json.loads(payload[4:4 + length].decode("utf-8"))
    start = 4 + length + (-(4 + length) % _ALIGN)

    def read(entry: dict[str, Any]) -> list:
        dtype = np.dtype(_NUMPY[entry["dtype"]])
        return np.frombuffer(payload, dtype=dtype, count=entry["length"], offset=start + entry["offset"]).tolist()

    for column in header["columns"]:
        if column["kind"] == "num":
            column["values"] = [None if np.isnan(v) else v for v in read(column["values"])]
        elif column["kind"] == "multi":
            codes, offsets = read(column["codes"]), read(column["offsets"])
            column["codes"] = [codes[a:b] for a, b in zip(offsets, offsets[1:])]
        else:
            column["codes"] = read(column["codes"])
    return header


def decode_data_script(text: str) -> dict[str, Any]:
    """The document back from a ``data.js`` text."""
    prefix = f'window.{DATA_GLOBAL} = "'
    if not text.startswith(prefix):
        raise ValueError(f"not an explorer data file: it does not start with {prefix!r}")
    payload = text[len(prefix):].rstrip().removesuffix('";')
    return decode_payload(gzip.decompress(base64.b64decode(payload)))
