"""Two `.test` studies at once on this machine: each job on its rule's threads, then on one.

What the test suite does on 2 cores (two workers, each running a study's torch jobs), and what a
user sharing a workstation does. Prints one JSON document: per setting, the wall time of the pair
and each study's user and system CPU seconds (its Snakemake process and the jobs it waited for).
Each study runs the computer-science and math cells of `.test/config/config.yaml` from scratch
(the GGUF conversion included) in its own folder under a temporary directory.

    python benchmarks/concurrent_studies.py [--cores 2] [--studies 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# The study test_workflow.py runs, built the way it builds it.
from tests.integration.test_workflow import DATASETS, tiny_config  # noqa: E402


def run_pair(root: Path, cores: int, studies: int, extra: list[str]) -> dict:
    """Start ``studies`` studies at once; wall time of all, CPU of each (os.wait4 per child)."""
    # Neither the test suite's thread cap nor a user's default profile: the settings are the flags.
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "SNAKEMAKE_PROFILE")}
    children = {}
    started = time.monotonic()
    for index in range(studies):
        folder = root / f"study-{index}"
        folder.mkdir(parents=True)
        command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(folder),
                   "--configfile", str(tiny_config(folder, DATASETS)), "--cores", str(cores), *extra]
        log = open(folder / "snakemake.log", "w")
        children[subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env).pid] = (index, log)
    runs = []
    while children:
        pid, status, usage = os.wait4(-1, 0)
        index, log = children.pop(pid)
        log.close()
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise SystemExit(f"study {index} failed ({code}): {root / f'study-{index}' / 'snakemake.log'}")
        runs.append({"study": index, "user_s": round(usage.ru_utime, 1), "system_s": round(usage.ru_stime, 1)})
    return {"wall_s": round(time.monotonic() - started, 1), "studies": sorted(runs, key=lambda r: r["study"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2, help="--cores of each study")
    parser.add_argument("--studies", type=int, default=2, help="how many run at once")
    args = parser.parse_args()
    settings = {"rule threads": [], "one thread per job (--max-threads 1)": ["--max-threads", "1"]}
    with tempfile.TemporaryDirectory() as scratch:
        results = {name: run_pair(Path(scratch) / f"setting-{i}", args.cores, args.studies, extra)
                   for i, (name, extra) in enumerate(settings.items())}
    print(json.dumps({"cores": args.cores, "cpu_count": os.cpu_count(), "studies_at_once": args.studies,
                      "load_average_after": os.getloadavg(), "settings": results}, indent=2))


if __name__ == "__main__":
    main()
