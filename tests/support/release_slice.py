"""The GLM-4-9B slice of the paper's release, imported and scored the way reproduce_release does
(votes, α and gate, metrics with Table 4 over the published lines), without Snakemake; and a
small hand-made run in the release's format with what makes Table 4's lines differ from the
join: texts judged on several lines, two originals with one text, a line no original wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import yaml

from bloomqg.metrics.cell import score_cell
from bloomqg.release.reliability import gate_published_lines, release_reliability
from bloomqg.release.runs import ReleaseRun, import_run, load_manifest, published_vote_lines

MANIFEST = Path(__file__).resolve().parents[1] / "release_glm.yaml"
REPO = MANIFEST.parents[1]


def rater_validation_study(workdir: Path, release_dir: Path, *, keep_run=lambda run: True, **changes) -> dict:
    """Write into ``workdir`` the GLM manifest (its runs for which ``keep_run(run entry)``) read
    from ``release_dir``, and configs/rater-validation.yaml pointed at it, 100 bootstrap
    resamples, then ``changes`` applied (top-level keys replaced); return the config."""
    manifest = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    manifest["release_root"] = str(release_dir)
    manifest["runs"] = [run for run in manifest["runs"] if keep_run(run)]
    (workdir / "release_glm.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    config = yaml.safe_load((REPO / "configs" / "rater-validation.yaml").read_text(encoding="utf-8"))
    config.update({"release_dir": str(release_dir), "release_manifest": str(workdir / "release_glm.yaml"),
                   "bootstrap": {"n_resamples": 100, "confidence": 0.95}, **changes})
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    return config


def trimmed_release(release_dir: Path, folder: Path, first_rows: Mapping[str, int]) -> Path:
    """A copy of the release in ``folder`` (links to its files) in which each file named in
    ``first_rows`` (its path in the release) keeps only its first rows: a votes file (``.jsonl``)
    its first lines, a generations workbook (``.xlsx``) its header and first data rows. For a test
    whose claim does not need a run's every question."""
    def cut(source: Path, target: Path, rows: int) -> None:
        if source.suffix == ".xlsx":
            import openpyxl

            workbook = openpyxl.load_workbook(source)
            for sheet in workbook.worksheets:
                if sheet.max_row > rows + 1:
                    sheet.delete_rows(rows + 2, sheet.max_row - rows - 1)
            workbook.save(target)
        else:
            with source.open(encoding="utf-8") as lines:
                target.write_text("".join(line for _, line in zip(range(rows), lines)), encoding="utf-8")

    def mirror(source: Path, target: Path) -> None:
        target.mkdir(parents=True, exist_ok=True)
        for entry in source.iterdir():
            relative = entry.relative_to(release_dir).as_posix()
            if relative in first_rows:
                cut(entry, target / entry.name, first_rows[relative])
            elif entry.is_dir() and any(path.startswith(f"{relative}/") for path in first_rows):
                mirror(entry, target / entry.name)
            else:
                (target / entry.name).symlink_to(entry)

    missing = [path for path in first_rows if not (release_dir / path).is_file()]
    if missing:
        raise FileNotFoundError(f"not in the release at {release_dir}: {missing}")
    mirror(release_dir, folder)
    return folder


def run_study(workdir: Path, *targets: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """Snakemake on ``workdir``'s config.yaml (this checkout's Snakefile, 2 cores); asserts success."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
         "--configfile", str(workdir / "config.yaml"), "--cores", "2", "--", *targets],
        capture_output=True, text=True, env=env, timeout=timeout,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def judged(question: str, unique=(1, 1, 1), readable=(1, 1, 1), answerable=(1, 1, 1), topics=("Stacks",) * 3, topic=None) -> dict:
    """One line of a release votes file (``*_voted.jsonl``): the judges' votes and the majority."""

    def majority(votes):
        return int(sum(votes) * 2 > len(votes))

    return {
        "question": question,
        "non_repeatable_votes": list(unique), "non_repeatable": majority(unique),
        "readable_votes": list(readable), "readable": majority(readable),
        "answerable_votes": list(answerable), "answerable": majority(answerable),
        "topic_votes": list(topics), "topic": topic or topics[0],
    }


def score_run(run, *, gate_action: str = "flag", n_resamples: int = 20) -> tuple[pd.DataFrame, ...]:
    """(votes, reliability, metrics, published lines) of one run, as rule import_release_run
    and score_metrics make them."""
    _, votes = import_run(run)
    votes, reliability = release_reliability(
        votes, gate_alpha=0.7, gate_action=gate_action, n_resamples=n_resamples, confidence=0.95, seed=0
    )
    lines = gate_published_lines(published_vote_lines(run, votes), reliability)
    metrics = score_cell(votes, reliability, n_resamples=n_resamples, seed=0, published_lines=lines)
    return votes, reliability, metrics, lines


#: The planted run's texts that are judged on several lines, and the line no original wrote.
SHARED, THRICE, ORPHAN = "Two originals wrote this.", "Judged three times.", "No original wrote this."
LEVELS = ("Remember", "Understand", "Apply", "Analyze", "Evaluate", "Create")


def planted_run(folder: Path, model: str = "m", n: int = 24) -> ReleaseRun:
    """A CS CoT run of ``n`` originals in the release's format, in ``folder``. Originals 3 and 4
    wrote :data:`SHARED` (judged on two lines with other votes), 5 wrote :data:`THRICE` (three
    lines), 6 wrote nothing, 7 a text never judged; a last line judges :data:`ORPHAN`. Unique
    votes disagree (its α fails a 0.7 gate), readable and answerable agree."""
    texts: list[str | None] = [f"New question {i}." for i in range(n)]
    texts[3] = texts[4] = SHARED
    texts[5], texts[6], texts[7] = THRICE, None, "Never judged."
    rows = [("Stacks", LEVELS[i % 6], f"Original {i}?", "Stacks", LEVELS[(i + 1) % 6], text,
             None if text is None else LEVELS[(i + 2) % 6]) for i, text in enumerate(texts)]
    sheet = pd.DataFrame(rows, columns=["Topic", "Category", "Questions", "COT_Topic", "COT_Bloom", "New Question",
                                        "New Category"]).assign(Score=10)
    sheet.to_excel(folder / f"{model}.xlsx", index=False)

    def line(text: str, i: int, unique: Sequence[int] | None = None) -> dict:
        agreed = (int(i % 5 != 0),) * 3
        return judged(text, unique=unique or (i % 2, (i // 2) % 2, (i // 3) % 2), readable=agreed,
                      answerable=(int(i % 7 != 0),) * 3, topics=("Stacks", "Stacks", "Queues"))

    judged_texts = [text for text in dict.fromkeys(texts) if text not in (None, "Never judged.")]
    lines = [line(text, i) for i, text in enumerate(judged_texts)]
    lines.insert(4, line(SHARED, 40, unique=(0, 0, 1)))  # once per original, other votes
    lines += [line(THRICE, 41, unique=(0, 0, 0)), line(THRICE, 42, unique=(1, 0, 0)),
              line(ORPHAN, 43, unique=(0, 0, 0))]
    votes = folder / f"{model}.jsonl"
    votes.write_text("".join(json.dumps(record) + "\n" for record in lines), encoding="utf-8")
    return ReleaseRun(model, "cs", "cot", folder / f"{model}.xlsx", votes)


def glm_slice(
    release_dir: Path, workdir: Path, *, n_resamples: int = 20
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(votes, reliability, metrics, published lines) of the slice's three runs; ``workdir``
    holds the manifest copy."""
    document = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    document["release_root"] = str(release_dir)
    manifest = Path(workdir) / "release_glm.yaml"
    manifest.write_text(yaml.safe_dump(document), encoding="utf-8")
    votes, reliability, metrics, published = [], [], [], []
    for run in load_manifest(manifest):
        cell_votes, cell_reliability, cell_metrics, lines = score_run(run, n_resamples=n_resamples)
        metrics.append(cell_metrics)
        votes.append(cell_votes)
        reliability.append(cell_reliability)
        published.append(lines)
    return (pd.concat(votes, ignore_index=True), pd.concat(reliability, ignore_index=True),
            pd.concat(metrics, ignore_index=True), pd.concat(published, ignore_index=True))
