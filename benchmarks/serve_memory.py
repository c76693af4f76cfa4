"""Resident memory of a CPU transformers-serve server, as the workflow starts it and without its cache cap.

transformers serve's continuous batching sizes its KV cache at 60% of the machine's RAM on a CPU;
bloomqg passes ``--cb-max-memory-percent`` for ``engine_kv_cache_gib`` (docs/gpus.md). This starts
the server twice for SmolLM2-135M (float32, one thread): once with the command line
:func:`bloomqg.runtime.serving.engines.server_argv` builds, once with that cap removed; each answers one
greedy 32-token request. Prints one JSON document: resident memory after the request (GB), the
request's seconds, and whether both answers are the same.

Run: ``python benchmarks/serve_memory.py [--model-dir DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from generation_cpu import ensure_model_dir  # noqa: E402

from bloomqg.runtime.serving.engines import EngineSettings, server_argv, server_env  # noqa: E402
from bloomqg.runtime.serving.server import free_port  # noqa: E402

CAP = "--cb-max-memory-percent"


def resident_gb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1e6


def serve_once(model_dir: Path, *, capped: bool) -> dict:
    settings = EngineSettings(engine="transformers-serve")
    port = free_port()
    argv = server_argv(settings, python=sys.executable, model_path=str(model_dir), served_name="smollm2",
                       port=port, dtype="float32", gpus=0)
    if not capped:
        at = argv.index(CAP)
        del argv[at:at + 2]
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=server_env(settings, os.environ, threads=1))
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError(f"transformers serve did not come up: {' '.join(argv)}") from None
                time.sleep(1)
        body = json.dumps({"model": str(model_dir), "max_tokens": 32, "temperature": 0,
                           "messages": [{"role": "user", "content": "Write a question about stacks."}]}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        start = time.monotonic()
        with urllib.request.urlopen(request, timeout=600) as response:
            answer = json.load(response)["choices"][0]["message"]["content"]
        seconds = time.monotonic() - start
        return {"capped": capped, "cap": argv[argv.index(CAP) + 1] if capped else None,
                "resident_gb": round(resident_gb(server.pid), 2), "request_s": round(seconds, 1), "answer": answer}
    finally:
        server.terminate()
        server.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=None, help="converted SmolLM2 (default: converted here)")
    args = parser.parse_args()
    model_dir = ensure_model_dir(args.model_dir)
    runs = [serve_once(model_dir, capped=True), serve_once(model_dir, capped=False)]
    print(json.dumps({"runs": runs, "same_answer": runs[0]["answer"] == runs[1]["answer"]}, indent=2))


if __name__ == "__main__":
    main()
