"""A stand-in for a serving engine's command, to test the lifecycle without vLLM.

Takes an engine's flags and uses ``--port`` (the rest ignored). Before it listens it starts a
worker child in its own process group, as vLLM's engine core is (the teardown must reach it),
and writes both pids to ``--pid-file``; ``--startup-delay`` waits before listening,
``--exit-code`` exits at once instead. It then answers as
:mod:`tests.support.fixed_latency_server` (``/v1/models``, chat completions with ``--content``).

A shim named as the engine's interpreter (tests write it) runs this file for ``-m ...`` and
answers the version query (``-c``) with a fake version.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fixed_latency_server import serve  # noqa: E402


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid-file", default=os.environ.get("FAKE_ENGINE_PID_FILE"))
    parser.add_argument("--startup-delay", type=float, default=float(os.environ.get("FAKE_ENGINE_DELAY", "0")))
    parser.add_argument("--exit-code", type=int, default=None)
    parser.add_argument("--content", default=os.environ.get("FAKE_ENGINE_CONTENT"))
    args, _ = parser.parse_known_args(argv)
    print(f"fake engine: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')} "
          f"HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE')}", flush=True)
    if args.exit_code is not None:
        print("fake engine: failing on purpose", flush=True)
        sys.exit(args.exit_code)
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    if args.pid_file:
        Path(args.pid_file).write_text(f"{os.getpid()} {worker.pid}\n")
    time.sleep(args.startup_delay)
    asyncio.run(serve(args.port, 0.01, args.content))


if __name__ == "__main__":
    main(sys.argv[1:])
