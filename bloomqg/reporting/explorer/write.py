"""Writing the explorer: ``index.html``, ``explorer.js``, ``explorer.css`` and ``data.js``.

The page, script and style are static files of this package (``static/``), copied as they are;
only ``data.js`` depends on the run. Everything the page needs lies in its folder.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from bloomqg.store.atomic import write_text_atomic
from bloomqg.reporting.explorer.encode import data_script, encode_table
from bloomqg.reporting.explorer.items import ItemTable, build_items
from bloomqg.store.cells import cell_of

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parent / "static"
#: The page, script and style, copied from :data:`STATIC_DIR` as they are.
STATIC_FILES: tuple[str, ...] = ("index.html", "explorer.js", "explorer.css")
#: The files of an explorer folder; ``index.html`` is the one to open.
EXPLORER_FILES: tuple[str, ...] = (*STATIC_FILES, "data.js")
#: Provenance keys left out of the detail pane (long and the same for every item).
_VERBOSE_KEYS = frozenset({"package_versions", "shards"})


def write_explorer(out_dir: Path, table: ItemTable, *, title: str) -> list[Path]:
    """Write the explorer of ``table`` into ``out_dir``; return the paths of :data:`EXPLORER_FILES`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in EXPLORER_FILES:
        path = out_dir / name
        text = data_script(encode_table(table, title=title)) if name == "data.js" else (STATIC_DIR / name).read_text(encoding="utf-8")
        write_text_atomic(path, text)
        paths.append(path)
    log.info("wrote the explorer of %d rows to %s (data %.2f MB)", len(table), out_dir,
             (out_dir / "data.js").stat().st_size / 1e6)
    return paths


def _trimmed(provenance: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in provenance.items() if key not in _VERBOSE_KEYS}


def cell_provenance(
    generation_files: Sequence[tuple[Path, pd.DataFrame, Mapping[str, Any]]],
    judgment_files: Sequence[tuple[Path, pd.DataFrame, Mapping[str, Any]]],
    vote_files: Sequence[tuple[Path, pd.DataFrame]],
    line_files: Sequence[tuple[Path, pd.DataFrame]] = (),
) -> dict[str, dict[str, Any]]:
    """cell key -> {votes, lines (a release's published vote lines), generations: {file,
    provenance}, judges: [{judge, file, provenance}]}."""
    cells: dict[str, dict[str, Any]] = {}

    def key_of(frame: pd.DataFrame, path: Path) -> str | None:
        if frame.empty:
            return None
        return cell_of(frame, f"{path} (the explorer reads one cell per file)").name()

    for name, files in (("votes", vote_files), ("lines", line_files)):
        for path, frame in files:
            if (key := key_of(frame, path)) is not None:
                cells.setdefault(key, {"judges": []})[name] = str(path)
    for path, frame, provenance in generation_files:
        if (key := key_of(frame, path)) is not None:
            cells.setdefault(key, {"judges": []})["generations"] = {"file": str(path), "provenance": _trimmed(provenance)}
    for path, frame, provenance in judgment_files:
        if (key := key_of(frame, path)) is not None:
            judge = str(frame["judge"].iloc[0])
            cells.setdefault(key, {"judges": []})["judges"].append(
                {"judge": judge, "file": str(path), "provenance": _trimmed(provenance)}
            )
    return cells


def write_explorer_from_files(
    out_dir: Path,
    *,
    votes: Sequence[Path],
    generations: Sequence[Path],
    judgments: Sequence[Path],
    reliability: Sequence[Path],
    metrics: Path,
    title: str,
    lines: Sequence[Path] = (),
    strategy_labels: Mapping[str, str] | None = None,
) -> list[Path]:
    """:func:`write_explorer` from the workflow's files (what the explorer rule hands over);
    ``lines``: an imported release's published vote lines, one file per cell; ``strategy_labels``
    ({name: label}) name the strategies, as in the report."""
    from bloomqg.store.parquet_io import read_frame, read_frames, read_provenance
    from bloomqg.store.frames import GENERATIONS, JUDGMENTS, METRICS, PUBLISHED_VOTE_LINES, RELIABILITY, VOTES

    vote_frames = [(Path(p), read_frame(p, VOTES)) for p in votes]
    generation_frames = [(Path(p), read_frame(p, GENERATIONS), read_provenance(p)) for p in generations]
    judgment_frames = [(Path(p), read_frame(p, JUDGMENTS), read_provenance(p)) for p in judgments]
    line_frames = [(Path(p), read_frame(p, PUBLISHED_VOTE_LINES)) for p in lines]
    table = build_items(
        pd.concat([frame for _, frame in vote_frames], ignore_index=True),
        generations=pd.concat([frame for _, frame, _ in generation_frames], ignore_index=True) if generation_frames else None,
        judgments=[frame for _, frame, _ in judgment_frames],
        reliability=read_frames(reliability, RELIABILITY) if reliability else None,
        metrics=read_frame(metrics, METRICS),
        cells=cell_provenance(generation_frames, judgment_frames, vote_frames, line_frames),
        lines=pd.concat([frame for _, frame in line_frames], ignore_index=True) if line_frames else None,
        strategy_labels=strategy_labels,
    )
    return write_explorer(Path(out_dir), table, title=title)
