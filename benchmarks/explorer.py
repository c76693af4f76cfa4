"""The item explorer at the paper's release scale: how long Chromium takes to open it from a file
and to filter it, and how large its data file is. Prints one JSON object.

The table is the GLM-4-9B slice of the release (real questions, votes, published vote lines and
metrics) copied to six models (each copy's questions made distinct so that nothing compresses
better than six real models would; texts the slice repeats stay repeated) and topped up to
``--rows`` questions (default 20,700, the release's size), each extra question judged on a line
of its own; the explorer then holds a row per question and one per published vote line, as the
release's does. Without the slice, the synthetic study of :mod:`tests.support.synthetic` of the
same size (questions only).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/explorer.py [--rows 20700] [--runs 3] [--release-dir DIR]

Figures: ``open_ms`` (navigation start to the first full render, as the page measures it, per
run), ``decode_ms`` (base64 + gunzip + header), ``filter_ms`` per action (the page's own
recompute and render, then ``paint_ms`` until the next frame is painted), ``data_mb``; and, since
wall time on a shared machine measures the other jobs too, ``*_cpu_ms``: the CPU time of the
page's main thread (DevTools ``ThreadTime``) for the opening and for each action with its paint.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bloomqg.metrics.cell import score_cell  # noqa: E402
from bloomqg.reporting.explorer.items import build_items  # noqa: E402
from bloomqg.reporting.explorer.write import write_explorer  # noqa: E402
from tests.support.devtools import DevToolsPipe, find_chromium  # noqa: E402

SIX_MODELS = ("glm-4-9b", "qwen2.5-7b", "baichuan2-7b", "llama-3-8b", "internlm3-8b", "spark-3.5-max")
#: Where the tests look for the release (tests/conftest.py): $BLOOMQG_SHARED_DATA or ../shared/data.
DEFAULT_RELEASE = Path(os.environ.get("BLOOMQG_SHARED_DATA", ROOT.parent / "shared" / "data")) / "llm-eval-release"


def release_votes(release_dir: Path, workdir: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None, str]:
    """(votes, reliability, published lines, source) of one model: the GLM slice, or a synthetic
    study (no lines)."""
    if (release_dir / "generated" / "glm").is_dir():
        from tests.support.release_slice import glm_slice

        votes, reliability, _, lines = glm_slice(release_dir, workdir, n_resamples=5)
        return votes, reliability, lines, f"GLM-4-9B slice of {release_dir}"
    from tests.support.synthetic import synthetic_dataset, synthetic_generations_and_votes, synthetic_reliability

    cells = {"cs": ("cot", "fgp"), "math": ("fgp",)}
    datasets = {name: synthetic_dataset(name, 1150, 0) for name in cells}
    _, votes = synthetic_generations_and_votes(datasets, ["glm-4-9b"], cells, 0)
    _, votes = synthetic_generations_and_votes(datasets, ["glm-4-9b"], cells, 0)
    return votes, synthetic_reliability(["glm-4-9b"], cells, 0), None, "synthetic study (the release's GLM slice is absent)"


CELL = ["dataset", "strategy", "model"]


def _joined(frame: pd.DataFrame, lines: pd.DataFrame) -> list[list[str]]:
    """Each line's ``joined``: the judged questions of its text when it is the text's first line."""
    takers = frame[frame["n_judges"] > 0].groupby([*CELL, "new_question"])["prompt_id"].agg(list).to_dict()
    first = ~lines.duplicated([*CELL, "question"])
    return [takers.get((d, s, m, q), []) if is_first else [] for d, s, m, q, is_first in
            zip(lines["dataset"], lines["strategy"], lines["model"], lines["question"], first)]


def six_models(
    votes: pd.DataFrame, reliability: pd.DataFrame, rows: int, lines: pd.DataFrame | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None]:
    """The one model's votes (and published lines) as six models, ``rows`` questions in all
    (extra questions: copies with new ids and texts, each judged on a line of its own)."""
    per_model = -(-rows // len(SIX_MODELS))
    copies, reliabilities, line_copies = [], [], []
    for model in SIX_MODELS:
        frame = votes.copy()
        frame["new_question"] = [None if q is None else f"{q} [{model}]" for q in frame["new_question"]]
        sources = [frame]
        while sum(len(part) for part in sources) < per_model:
            size = sum(len(part) for part in sources)
            extra = votes.iloc[: per_model - size].copy()
            extra["prompt_id"] = extra["prompt_id"] + f":copy{size}"
            extra["source"] = [None if q is None else f"{q} [{model}]" for q in extra["new_question"]]
            extra["new_question"] = [None if q is None else f"{q} [{model} copy {size + i}]"
                                     for i, q in enumerate(extra["new_question"])]
            sources.append(extra)
        frame = pd.concat(sources, ignore_index=True).iloc[:per_model].assign(model=model)
        copies.append(frame[votes.columns])
        reliabilities.append(reliability.assign(model=model))
        if lines is not None:
            own = lines.assign(model=model, question=[f"{q} [{model}]" for q in lines["question"]])
            # An extra question's line: the first line of its source's text, under its own text.
            first = own.drop_duplicates([*CELL, "question"]).set_index(["dataset", "strategy", "question"])
            extra = frame[frame["source"].notna() & (frame["n_judges"] > 0)] if "source" in frame else frame.iloc[:0]
            added = first.loc[list(zip(extra["dataset"], extra["strategy"], extra["source"]))].reset_index()
            added["question"] = extra["new_question"].tolist()
            last = own.groupby(["dataset", "strategy"])["line"].max()
            added["line"] = added.groupby(["dataset", "strategy"]).cumcount() + 1 + [
                last[(d, s)] for d, s in zip(added["dataset"], added["strategy"])]
            own = pd.concat([own, added[own.columns]], ignore_index=True)
            own["joined"] = _joined(frame, own)
            line_copies.append(own)
    out = pd.concat(copies, ignore_index=True).iloc[:rows].reset_index(drop=True)
    all_lines = None
    if lines is not None:
        all_lines = pd.concat(line_copies, ignore_index=True)
        kept = set(out["prompt_id"] + "/" + out["model"])
        all_lines["joined"] = [[p for p in joined if f"{p}/{m}" in kept] for joined, m in
                               zip(all_lines["joined"], all_lines["model"])]
    return out, pd.concat(reliabilities, ignore_index=True), all_lines


def metrics_of(votes: pd.DataFrame, reliability: pd.DataFrame, lines: pd.DataFrame | None) -> pd.DataFrame:
    def lines_of(cell: pd.DataFrame) -> pd.DataFrame | None:
        if lines is None:
            return None
        d, s, m = (cell[key].iloc[0] for key in CELL)
        return lines[(lines["dataset"] == d) & (lines["strategy"] == s) & (lines["model"] == m)]

    return pd.concat(
        [score_cell(cell, reliability, n_resamples=2, seed=0, published_lines=lines_of(cell))
         for _, cell in votes.groupby(["model", "dataset", "strategy"], sort=False)],
        ignore_index=True,
    )


#: What a researcher does after opening: (name, JavaScript performing it through the page's API).
ACTIONS: tuple[tuple[str, str], ...] = (
    ("filter_model", "explorer.setFilter('model', ['qwen2.5-7b'])"),
    ("add_judged_level", "explorer.setFilter('judged_level', ['Analyze', 'Evaluate'])"),
    ("search_text", "(() => { explorer.state.q = 'binary tree'; explorer.update(); })()"),
    ("metric_link_catcons", "explorer.openHash('f.model=llama-3-8b&f.dataset=cs&f.strategy=FGP&m=catcons')"),
    # Table 4: a release's opens on the published vote lines (the page finds the rows' kind)
    ("metric_link_unique", "explorer.openHash('f.model=internlm3-8b&f.dataset=cs&f.strategy=CoT&m=unique')"),
    ("sort_judged_level", "explorer.sortBy('judged_level', true)"),
    ("clear_all", "(() => { explorer.state.filters.clear(); explorer.state.metric = null; explorer.state.q = '';"
                  " explorer.state.sort = null; explorer.update(); })()"),
)


def measure(executable: str, index: Path, runs: int, profile: Path) -> dict:
    browser = DevToolsPipe(executable, profile, timeout=120)
    opens, decodes, open_cpu, filters = [], [], [], {name: [] for name, _ in ACTIONS}
    paints = {name: [] for name, _ in ACTIONS}
    cpu = {name: [] for name, _ in ACTIONS}
    try:
        for _ in range(runs):
            target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            browser.send("Emulation.setDeviceMetricsOverride",
                         {"width": 1600, "height": 950, "deviceScaleFactor": 1, "mobile": False}, session)

            def evaluate(expression: str):
                reply = browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                          "awaitPromise": True}, session)
                if "exceptionDetails" in reply:
                    raise RuntimeError(f"{expression[:60]}: {reply['exceptionDetails']}")
                return reply["result"].get("value")

            def thread_ms() -> float:
                # CPU time of the page's main thread: what the page costs, whatever else runs.
                metrics = browser.send("Performance.getMetrics", {}, session)["metrics"]
                return 1000 * next(m["value"] for m in metrics if m["name"] == "ThreadTime")

            browser.send("Performance.enable", {}, session)
            browser.send("Page.navigate", {"url": index.resolve().as_uri()}, session)
            deadline = time.monotonic() + 120
            while not evaluate("!!(window.__explorerTimings || document.body && document.body.dataset.error)"):
                if time.monotonic() > deadline:
                    raise TimeoutError("the explorer did not open within 120 s")
                time.sleep(0.02)
            timings = evaluate("window.__explorerTimings || {error: document.body.dataset.error}")
            if "error" in timings:
                raise RuntimeError(f"the explorer failed: {timings['error']}")
            opens.append(timings["sinceNavigationMs"])
            open_cpu.append(thread_ms())
            decodes.append(timings["decodeMs"])
            for name, action in ACTIONS:
                before = thread_ms()
                result = evaluate(f"""(async () => {{ const t0 = performance.now(); {action};
                    const ms = performance.now() - t0;
                    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
                    return {{ms, paint: performance.now() - t0, count: Number(document.getElementById('count').dataset.count)}}; }})()""")
                cpu[name].append(thread_ms() - before)
                filters[name].append(result["ms"])
                paints[name].append(result["paint"])
            browser.send("Target.closeTarget", {"targetId": target})
    finally:
        browser.close()
    return {
        "open_ms": [round(x) for x in opens], "open_ms_median": round(statistics.median(opens)),
        "decode_ms_median": round(statistics.median(decodes)),
        "filter_ms_median": {name: round(statistics.median(v), 1) for name, v in filters.items()},
        "filter_ms_max": round(max(max(v) for v in filters.values()), 1),
        "paint_ms_median": {name: round(statistics.median(v), 1) for name, v in paints.items()},
        "open_cpu_ms_median": round(statistics.median(open_cpu)),
        "filter_cpu_ms_median": {name: round(statistics.median(v), 1) for name, v in cpu.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_700)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--release-dir", type=Path, default=DEFAULT_RELEASE)
    parser.add_argument("--keep", type=Path, default=None, help="write the explorer here (default: a temp dir)")
    args = parser.parse_args()
    executable = find_chromium()
    if executable is None:
        sys.exit("benchmarks/explorer.py needs Chromium (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        votes, reliability, lines, source = release_votes(args.release_dir, work)
        votes, reliability, lines = six_models(votes, reliability, args.rows, lines)
        metrics = metrics_of(votes, reliability, lines)
        prepared = time.perf_counter()
        table = build_items(votes, reliability=reliability, metrics=metrics, lines=lines)
        out = args.keep or work / "explorer"
        write_explorer(out, table, title=f"{len(votes):,} questions, six models")
        built = time.perf_counter()
        load_before = os.getloadavg()[0]
        figures = measure(executable, out / "index.html", args.runs, work / "profile")
        report = {
            "benchmark": "explorer", "source": source, "rows": len(table), "questions": len(votes),
            "published_vote_lines": 0 if lines is None else len(lines), "judges": len(table.judges),
            "cells": int(votes.groupby(["model", "dataset", "strategy"]).ngroups),
            "data_mb": round((out / "data.js").stat().st_size / 1e6, 2),
            "build_s": round(built - prepared, 1), "prepare_s": round(prepared - started, 1),
            **figures, "cpus": os.cpu_count(), "chromium": executable,
            # Other work on the machine slows the browser down: the 1-minute load before and after.
            "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
