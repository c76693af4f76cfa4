"""The report and its item explorer as one folder, for ``snakemake --report report.zip``.

Snakemake's zip stores every file marked for the report in a folder of its own
(``data/raw/<id>/<name>``), so ``report.html``'s relative links to ``explorer/index.html`` led
nowhere there. A folder marked with ``htmlindex`` keeps its layout: this one holds
``report.html`` and ``explorer/…`` as they lie beside each other in ``{root}/``, so every link of
the report resolves inside the zip as it does on disk.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from bloomqg.reporting.explorer.links import EXPLORER_HREF

#: The folder's index page (the rule's ``htmlindex``).
BUNDLE_INDEX = "report.html"


def bundle_report(report: str | Path, explorer_files: Sequence[str | Path], out_dir: str | Path) -> list[Path]:
    """Copy ``report`` to ``out_dir/report.html`` and each explorer file to
    ``out_dir/explorer/<name>`` (where the report's links point); a half-written folder from an
    interrupted run is replaced whole. Returns the copied paths."""
    out_dir = Path(out_dir)
    explorer_dir = Path(EXPLORER_HREF).parent
    partial = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / explorer_dir).mkdir(parents=True)
    copied = [Path(shutil.copy2(report, partial / BUNDLE_INDEX))]
    for path in explorer_files:
        copied.append(Path(shutil.copy2(path, partial / explorer_dir / Path(path).name)))
    shutil.rmtree(out_dir, ignore_errors=True)
    partial.rename(out_dir)
    return [out_dir / path.relative_to(partial) for path in copied]
