"""How fast, and in how much memory, planning refuses the xlsx bombs of issue 42 (point 4).

Builds the bombs (tests/support/xlsx_bombs.py): one cell at XFD20000 (declared, and undeclared),
one at row 1,048,576, and 60 MB of empty cells in a file of under 200 KB; then, each in a fresh
Python process, loads it as a dataset (:func:`bloomqg.datasets.load_dataset`, what plan time
runs) and records the wall time to the refusal and the process's peak resident memory. Goal:
each refused in <= 5 s with <= 300 MB. The last line is JSON.

    python benchmarks/hostile_inputs.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.xlsx_bombs import empty_cells, one_far_cell  # noqa: E402

_CHILD = """
import json, resource, sys, time
started = time.perf_counter()
from bloomqg.datasets import DatasetError, load_dataset
try:
    load_dataset("bomb", {"loader": "release_math", "path": sys.argv[1]}, base_dir=".")
    outcome = "accepted"
except DatasetError as error:
    outcome = str(error)
print(json.dumps({"seconds": time.perf_counter() - started, "outcome": outcome,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        bombs = {
            "cell_at_XFD20000": one_far_cell(Path(folder) / "xfd.xlsx"),
            "cell_at_XFD20000_undeclared": one_far_cell(Path(folder) / "xfd-bare.xlsx", declare=False),
            "cell_at_row_1048576": one_far_cell(Path(folder) / "last-row.xlsx", "A1048576", declare=False),
            "60MB_empty_cells": empty_cells(Path(folder) / "empty.xlsx"),
        }
        for name, path in bombs.items():
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
    print(json.dumps({"goal": {"seconds": 5, "peak_rss_mb": 300}, "bombs": results,
                      "all_within_goal": all(r["within_goal"] for r in results.values())}))


if __name__ == "__main__":
    main()
