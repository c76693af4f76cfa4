"""A Snakemake job script that owns an engine server as generate_on_engine does, and keeps it.

Starts the server of ``params.spec`` through :class:`bloomqg.generation.engine.EngineTextGenerator`
(the rule's own path: watchdog, owner watch, readiness), writes ``params.ready`` (JSON: the job's
pid, the server's process group and port), then checks the server every half second, as a job
with requests in flight does between batches, until it is killed or the server is ended.
"""
import json
import os
import time
from pathlib import Path

from bloomqg.generation.engine import EngineTextGenerator
from bloomqg.runtime.serving.server import server_log_path

snakemake = globals()["snakemake"]
params = snakemake.params
generator = EngineTextGenerator(dict(params.spec), name="m", model_dir=params.model_dir, cache_dir=params.cache_dir,
                                threads=snakemake.threads, gpus=0, log_path=server_log_path(snakemake.log[0]),
                                workflow_dir=params.workflow_dir)
try:
    generator.start()
    server = generator.server
    Path(params.ready).write_text(json.dumps({"job": os.getpid(), "pgid": server.process.pid, "port": server.port}))
    while True:
        server.check_alive()
        time.sleep(0.5)
finally:
    generator.close()
