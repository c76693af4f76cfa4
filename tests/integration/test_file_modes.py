"""Outputs get the modes the user's umask asks for: group-readable (and -writable) under 002.

The real writers run in a child process started under each umask: Parquet (``write_frame``),
the annotation form (HTML) and its blank sheet (CSV), a figure (PNG and SVG), a report-style
HTML page, the API call cache and spend ledger, and a prepared model folder.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.integration

_WRITERS = r"""
import sys
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from bloomqg.annotation.form import write_blank_sheet, write_form
from bloomqg.api.budget import SpendLedger
from bloomqg.api.cache import CachedResponse, CallCache
from bloomqg.store.atomic import write_text_atomic
from bloomqg.inputs.models import _atomic_directory
from bloomqg.store.parquet_io import write_frame
from bloomqg.reporting.figures.write import save_figure
from bloomqg.store.frames import ANNOTATION_ITEMS

out = Path(sys.argv[1])
items = pd.DataFrame([{
    "annotation_id": "A0001", "prompt_id": "cs-0000:fgp", "item_id": "cs-0000", "dataset": "cs",
    "strategy": "fgp", "model": "m", "original_question": "q", "original_bloom_level": "Apply",
    "original_knowledge_units": ["Stacks"], "new_question": "nq", "unit_choices": ["Stacks", "Queues"],
    "panel_unique": True, "panel_readable": True, "panel_answerable": True,
    "panel_bloom_level": "Apply", "panel_knowledge_units": ["Stacks"],
}], columns=ANNOTATION_ITEMS.names)
written = {"files": [], "dirs": []}
write_frame(items, out / "results" / "annotation" / "key.parquet", ANNOTATION_ITEMS)
write_form(items, out / "results" / "annotation" / "form.html", title="t")
write_blank_sheet(items, out / "results" / "annotation" / "sheet.csv")
write_text_atomic(out / "results" / "report.html", "<html></html>")
fig, ax = plt.subplots()
ax.plot([0, 1])
save_figure(fig, out / "results" / "figures", "fig")
cache = CallCache(out / "cache" / "calls")
cache.put("a" * 64, CachedResponse(text="t", finish_reason="stop", n_prompt_tokens=1,
                                   n_completion_tokens=1, response_model="m"))
SpendLedger(out / "cache" / "spend.jsonl").record(key="a" * 64, model="m", mode="sync", prompt_tokens=1,
                                                  completion_tokens=1, cost_usd=0.0)
model_dir = _atomic_directory(out / "models" / "m")
(model_dir / "config.json").write_text("{}")
written["dirs"].append(str(model_dir))
print(__import__("json").dumps(written))
"""


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077], ids=lambda mask: f"umask-{mask:03o}")
def test_outputs_follow_the_umask(tmp_path: Path, umask: int) -> None:
    run = subprocess.run(
        [sys.executable, "-c", _WRITERS, str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(REPO), "MPLCONFIGDIR": str(tmp_path / ".mpl")},
        preexec_fn=lambda: os.umask(umask), capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    model_dir = Path(json.loads(run.stdout.splitlines()[-1])["dirs"][0])
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file() and ".mpl" not in p.parts)
    names = {p.name for p in files}
    assert {"key.parquet", "form.html", "sheet.csv", "report.html", "fig.png", "fig.svg", "spend.jsonl",
            "config.json"} <= names, names
    assert any(p.suffix == ".json" and "calls" in p.parts for p in files), "no call-cache entry written"
    assert not [p for p in files if p.name.endswith(".tmp")], "a temporary file was left behind"
    wrong = {str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.stat().st_mode))
             for p in files if stat.S_IMODE(p.stat().st_mode) != 0o666 & ~umask}
    assert not wrong, f"files not {oct(0o666 & ~umask)} under umask {oct(umask)}: {wrong}"
    assert stat.S_IMODE(model_dir.stat().st_mode) == 0o777 & ~umask
