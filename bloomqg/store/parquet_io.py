"""Reading and writing the workflow's Parquet files: schema-checked, atomic, with provenance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bloomqg.store.atomic import atomic_target
from bloomqg.store.provenance import base_provenance
from bloomqg.store.stored_text import redact, registered_secrets

PROVENANCE_KEY = b"bloomqg.store.provenance"


class SchemaMismatch(ValueError):
    """A frame does not fit the schema of the file it is written to."""


def _redacted(value: Any) -> Any:
    """A cell with every registered secret masked in its text (:func:`bloomqg.store.stored_text.redact`)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_redacted(item) for item in value]
    return value


def to_table(frame: pd.DataFrame, schema: pa.Schema, *, where: str = "frame") -> pa.Table:
    """Cast ``frame`` to ``schema``: same columns (order aside), declared non-nulls present."""
    missing = [name for name in schema.names if name not in frame.columns]
    extra = [name for name in frame.columns if name not in schema.names]
    if missing or extra:
        raise SchemaMismatch(f"{where}: missing columns {missing}, unexpected columns {extra}")
    for field in schema:
        if not field.nullable and frame[field.name].isna().any():
            rows = frame.index[frame[field.name].isna()].tolist()[:5]
            raise SchemaMismatch(f"{where}: column {field.name!r} has nulls at rows {rows}")
    columns = {}
    for field in schema:
        values = frame[field.name]
        # pandas NaN in object columns must reach arrow as null, not as a float.
        values = values.astype(object).where(values.notna(), None).tolist()
        if registered_secrets():  # the writers' share of redaction: no key reaches a file
            values = [_redacted(value) for value in values]
        columns[field.name] = pa.array(values, type=field.type, from_pandas=True)
    return pa.Table.from_pydict(columns, schema=schema)


def write_frame(
    frame: pd.DataFrame,
    path: str | Path,
    schema: pa.Schema,
    provenance: Mapping[str, Any] | None = None,
) -> None:
    """Write ``frame`` to ``path`` atomically (temp file + rename) with provenance metadata."""
    path = Path(path)
    table = to_table(frame, schema, where=str(path))
    meta = dict(base_provenance())
    meta.update(provenance or {})
    table = table.replace_schema_metadata(
        {PROVENANCE_KEY: json.dumps(meta, sort_keys=True, default=str).encode()}
    )
    with atomic_target(path) as tmp:
        pq.write_table(table, tmp)


def read_frame(path: str | Path, schema: pa.Schema | None = None) -> pd.DataFrame:
    """Read a Parquet file into pandas; list columns become Python lists, nulls become None."""
    table = pq.read_table(path)
    if schema is not None:
        missing = [name for name in schema.names if name not in table.column_names]
        if missing:
            raise SchemaMismatch(f"{path}: missing columns {missing}")
    frame = table.to_pandas()
    for field in table.schema:
        if pa.types.is_list(field.type):
            frame[field.name] = [
                None if value is None else list(value) for value in frame[field.name]
            ]
    return frame


def read_frames(paths: Iterable[str | Path], schema: pa.Schema | None = None) -> pd.DataFrame:
    """Several files of one schema (e.g. every cell's votes) as one frame, in the given order."""
    return pd.concat([read_frame(path, schema) for path in paths], ignore_index=True)


def read_provenance(path: str | Path) -> dict[str, Any]:
    """The provenance dictionary stored in a file written by :func:`write_frame`."""
    metadata = pq.read_schema(path).metadata or {}
    raw = metadata.get(PROVENANCE_KEY)
    return json.loads(raw) if raw else {}
