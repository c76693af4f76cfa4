"""The GLM-4-9B slice of the paper's release, imported and scored the way reproduce_release does
(votes, α and gate, metrics with Table 4 over the published lines), without Snakemake."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from bloomqg.metrics.cell import score_cell
from bloomqg.release.reliability import gate_published_lines, release_reliability
from bloomqg.release.runs import import_run, load_manifest, published_vote_lines

MANIFEST = Path(__file__).resolve().parents[1] / "release_glm.yaml"


def glm_slice(release_dir: Path, workdir: Path, *, n_resamples: int = 20) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(votes, reliability, metrics) of the slice's three runs; ``workdir`` holds the manifest copy."""
    document = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    document["release_root"] = str(release_dir)
    manifest = Path(workdir) / "release_glm.yaml"
    manifest.write_text(yaml.safe_dump(document), encoding="utf-8")
    votes, reliability, metrics = [], [], []
    for run in load_manifest(manifest):
        _, cell_votes = import_run(run)
        cell_votes, cell_reliability = release_reliability(
            cell_votes, gate_alpha=0.7, gate_action="flag", n_resamples=n_resamples, confidence=0.95, seed=0
        )
        lines = gate_published_lines(published_vote_lines(run), cell_reliability)
        metrics.append(score_cell(cell_votes, cell_reliability, n_resamples=n_resamples, seed=0, published_lines=lines))
        votes.append(cell_votes)
        reliability.append(cell_reliability)
    return (pd.concat(votes, ignore_index=True), pd.concat(reliability, ignore_index=True),
            pd.concat(metrics, ignore_index=True))
