"""How fast, and in how much memory, the hostile inputs of issues 42 and 52 are refused or read.

1. xlsx bombs (tests/support/xlsx_bombs.py): one cell at XFD20000 (declared, undeclared, written
   XFD00020000, the sheet at ``xl/sheets/a.xml`` or ``sheet1.XML``), one at row 1,048,576 or at
   XFD1048576, 60 MB of empty cells, one 60 MB shared string used in 200 cells, a cell of
   ``[img]`` × 40,000. Each is loaded as a dataset in a fresh Python process
   (:func:`bloomqg.inputs.datasets.load_dataset`, what plan time runs): wall time to the refusal and the
   process's peak resident memory. Goal: each refused in <= 5 s with <= 300 MB.
2. Config files Snakemake's own loader would expand without end or run (a mapping alias bomb,
   a merge-key bomb, ``__use_yte__``, a 50 MB value, deep nesting): ``python -m bloomqg.study.config``,
   what ``make study CONFIG=…`` runs first, in a fresh process. Goal: each refused in <= 10 s.
3. Inspect logs a models entry imports (``backend: inspect``): a 400 KB ``.eval`` whose
   ``header.json`` inflates to 400 MB, and one whose only sample does, each imported in a fresh
   process (:func:`bloomqg.generation.inspect_source.import_generations`, what the
   import_inspect_generations rule runs). Goal: refused in <= 5 s with <= 300 MB (inspect_ai
   itself took 20 s and 1.3 GB on the header).
4. Text functions on long inputs, at two sizes (the ratio of times says whether the cost is
   linear: about 4 for 4 times the input): ``clean_markup`` on unclosed tags, ``parse_generation``
   and ``parse_verdict`` on hostile replies (a 5,000-digit number, 100,000-deep nesting, many
   objects, many ``Question:`` lines), ``redact`` on long texts with and without the key.

The last line is JSON.

    python benchmarks/hostile_inputs.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support import xlsx_bombs  # noqa: E402

_CHILD = """
import json, resource, sys, time
started = time.perf_counter()
from bloomqg.inputs.datasets import DatasetError, load_dataset
try:
    load_dataset("bomb", {"loader": "release_math", "path": sys.argv[1]}, base_dir=".")
    outcome = "accepted"
except DatasetError as error:
    outcome = str(error)
print(json.dumps({"seconds": time.perf_counter() - started, "outcome": outcome,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _bombs(folder: Path) -> dict[str, Path]:
    bombs = xlsx_bombs
    return {
        "cell_at_XFD20000": bombs.one_far_cell(folder / "xfd.xlsx"),
        "cell_at_XFD20000_undeclared": bombs.one_far_cell(folder / "xfd-bare.xlsx", declare=False),
        "cell_at_XFD00020000": bombs.one_far_cell(folder / "zeros.xlsx", "XFD00020000", declare=False),
        "sheet_at_xl/sheets/a.xml": bombs.one_far_cell(folder / "a.xlsx", declare=False, sheet_path="sheets/a.xml"),
        "sheet_at_sheet1.XML": bombs.one_far_cell(folder / "upper.xlsx", declare=False,
                                                  sheet_path="worksheets/sheet1.XML"),
        "cell_at_row_1048576": bombs.one_far_cell(folder / "last-row.xlsx", "A1048576", declare=False),
        "cell_at_XFD1048576": bombs.one_far_cell(folder / "corner.xlsx", "XFD1048576", declare=False),
        "60MB_empty_cells": bombs.empty_cells(folder / "empty.xlsx"),
        "60MB_shared_string_in_200_cells": bombs.one_huge_shared_string(folder / "shared.xlsx"),
        "img_x40000_cell": bombs.markup_cell(folder / "img.xlsx", "[img]" * 40_000),
    }


def spreadsheets() -> dict[str, dict[str, Any]]:
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, path in _bombs(Path(folder)).items():
            child = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True,
                                   cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=600)
            if child.returncode != 0:
                raise SystemExit(child.stderr[-3000:])
            figures = json.loads(child.stdout.strip().splitlines()[-1])
            figures["file_bytes"] = path.stat().st_size
            figures["seconds"] = round(figures["seconds"], 3)
            figures["peak_rss_mb"] = round(figures["peak_rss_mb"], 1)
            figures["refused"] = figures["outcome"] != "accepted"
            figures["within_goal"] = figures["refused"] and figures["seconds"] <= 5 and figures["peak_rss_mb"] <= 300
            results[name] = figures
            print(f"{name}: {figures['file_bytes']:,} bytes, refused={figures['refused']} in "
                  f"{figures['seconds']} s, peak {figures['peak_rss_mb']} MB: {figures['outcome'][:160]}")
    return results


def configs() -> dict[str, dict[str, Any]]:
    from tests.support.config_bombs import write_all

    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, path in write_all(Path(folder)).items():
            started = time.perf_counter()
            child = subprocess.run([sys.executable, "-m", "bloomqg.study.config", str(path)], capture_output=True,
                                   text=True, cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
                                   timeout=600)
            seconds = round(time.perf_counter() - started, 3)
            results[name] = {"seconds": seconds, "refused": child.returncode == 2,
                             "within_goal": child.returncode == 2 and seconds <= 10,
                             "file_bytes": path.stat().st_size, "outcome": child.stderr.strip()[:300]}
            print(f"config {name}: {path.stat().st_size:,} bytes, refused={child.returncode == 2} in {seconds} s: "
                  f"{child.stderr.strip()[:160]}")
    return results


_INSPECT_CHILD = """
import json, resource, sys, time
started = time.perf_counter()
import pandas as pd
from bloomqg.generation.inspect_source import InspectImportError, import_generations
prompts = pd.DataFrame([{"prompt_id": "cs-0001:fgp", "dataset": "cs", "strategy": "fgp", 
                         "messages_json": json.dumps([{"role": "user", "content": "Write a question."}])}])
try:
    import_generations(sys.argv[1], prompts, "m", knowledge_units=["u"], seed=0)
    outcome = "accepted"
except InspectImportError as error:
    outcome = str(error)
print(json.dumps({"seconds": time.perf_counter() - started, "outcome": outcome,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _inflating_log(path: Path, member: str, megabytes: int) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        if member != "header.json":
            archive.writestr("header.json", json.dumps({"version": 2, "status": "success"}))
        with archive.open(member, "w", force_zip64=True) as stream:
            stream.write(b'{"id": "')
            for _ in range(megabytes):
                stream.write(b"a" * 1_000_000)
            stream.write(b'"}')
    return path


def inspect_logs() -> dict[str, dict[str, Any]]:
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, member in (("eval_header_400MB", "header.json"), ("eval_sample_400MB", "samples/1_epoch_1.json")):
            path = _inflating_log(Path(folder) / f"{name}.eval", member, 400)
            child = subprocess.run([sys.executable, "-c", _INSPECT_CHILD, str(path)], capture_output=True, text=True,
                                   cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=600)
            if child.returncode != 0:
                raise SystemExit(child.stderr[-3000:])
            figures = json.loads(child.stdout.strip().splitlines()[-1])
            figures.update(file_bytes=path.stat().st_size, seconds=round(figures["seconds"], 3),
                           peak_rss_mb=round(figures["peak_rss_mb"], 1), refused=figures["outcome"] != "accepted")
            figures["within_goal"] = figures["refused"] and figures["seconds"] <= 5 and figures["peak_rss_mb"] <= 300
            results[name] = figures
            print(f"inspect {name}: {figures['file_bytes']:,} bytes, refused={figures['refused']} in "
                  f"{figures['seconds']} s, peak {figures['peak_rss_mb']} MB: {figures['outcome'][:160]}")
    return results


def _seconds(function: Callable[[str], Any], text: str) -> float:
    started = time.perf_counter()
    function(text)
    return time.perf_counter() - started


def text_functions() -> dict[str, dict[str, Any]]:
    from bloomqg.inputs.datasets import clean_markup
    from bloomqg.judges.verdict import parse_verdict
    from bloomqg.inputs.parsing import parse_generation
    from bloomqg.store.stored_text import redact

    key = "gsk_Wd3Rt7Yu9pQ2mX4pL7nK3wT9yB6cF1hx8Cv"
    functions: dict[str, Callable[[str], Any]] = {
        "clean_markup": clean_markup,
        "parse_generation": lambda text: parse_generation(text, ["bloom_level", "knowledge_unit"],
                                                          knowledge_units=["sets"]),
        "parse_verdict": lambda text: parse_verdict(text, ["sets"]),
        "redact": lambda text: redact(text, [key]),
    }
    # input of n characters per case
    cases: dict[str, tuple[str, Callable[[int], str]]] = {
        "unclosed [img]": ("clean_markup", lambda n: "[img]" * (n // 5)),
        "unclosed <p": ("clean_markup", lambda n: "<p" * (n // 2)),
        "5,000-digit number": ("parse_generation", lambda n: '{"question": "Q?", "n": ' + "9" * 5000 + "}" + " " * n),
        "deep nesting": ("parse_generation", lambda n: "[" * (n // 2) + "]" * (n // 2)),
        "many objects": ("parse_generation", lambda n: '{"a": 1} ' * (n // 9)),
        "Question: lines": ("parse_generation", lambda n: "Question:\n" * (n // 10)),
        "spaces then label": ("parse_generation", lambda n: " " * n + "x"),
        "verdict, many objects": ("parse_verdict", lambda n: '{"unique": 1} ' * (n // 14)),
        "verdict, deep nesting": ("parse_verdict", lambda n: '{"a":' * (n // 5)),
        "redact, prose": ("redact", lambda n: "What is a balanced tree? " * (n // 25)),
        "redact, the key repeated": ("redact", lambda n: key.upper() * (n // len(key))),
        "redact, escapes": ("redact", lambda n: "&#103" * (n // 5)),
    }
    results = {}
    small, large = 250_000, 1_000_000
    for name, (function, build) in cases.items():
        first, second = (_seconds(functions[function], build(size)) for size in (small, large))
        results[name] = {"function": function, "chars": [small, large], "seconds": [round(first, 4), round(second, 4)],
                         "ratio": round(second / first, 1) if first > 0 else None}
        print(f"{name} ({function}): {small:,} chars {first:.3f} s, {large:,} chars {second:.3f} s")
    return results


def main() -> None:
    sheets = spreadsheets()
    config_files = configs()
    logs = inspect_logs()
    texts = text_functions()
    print(json.dumps({"goal": {"seconds": 5, "peak_rss_mb": 300, "config_seconds": 10}, "bombs": sheets,
                      "configs": config_files, "inspect_logs": logs, "text": texts,
                      "all_within_goal": all(r["within_goal"] for r in
                                             [*sheets.values(), *config_files.values(), *logs.values()])}))


if __name__ == "__main__":
    main()
