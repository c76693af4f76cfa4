"""A single-node SLURM cluster on this machine, for tests: munged, slurmctld and slurmd started by
hand (no systemd), everything under one folder, clients pointed at it through ``SLURM_CONF``.

The node advertises one stand-in GPU (``Gres=gpu:1`` backed by ``/dev/null``), so a GPU request
is really scheduled: a job asking for ``--gpus=1`` waits for it and sees ``CUDA_VISIBLE_DEVICES=0``.
The configuration is also linked at
``/etc/slurm`` for the duration: Snakemake's job-step plugin strips ``SLURM_*`` variables (
``SLURM_CONF`` included) before its inner ``srun``, which then finds no cluster ("DNS SRV lookup
failed"); a machine that already has a ``/etc/slurm/slurm.conf`` is refused, never overwritten.
There is no accounting daemon; finished jobs stay visible to ``scontrol``/``squeue`` for
``MinJobAge`` seconds, and ``jobcomp/filetxt`` keeps one line per finished job (its history).

Facts this relies on (Debian's SLURM 22.05): ``proctrack/linuxproc`` and ``task/none`` need no
cgroups; a ``gres.conf`` line without ``File=`` leaves the node INVALID ("gres/gpu count reported
lower than configured"); a PID file left behind breaks later package operations, so teardown
stops each daemon by its PID and removes the PID files.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("slurm-wlm", "munge")
SYSTEM_CONF_DIR = Path("/etc/slurm")
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo")


class ClusterError(RuntimeError):
    """The test cluster could not be installed or started; the message says which step."""


def missing_commands() -> list[str]:
    return [name for name in DAEMONS if shutil.which(name) is None]


def install_packages(timeout_s: float = 600) -> None:
    """apt-get the Debian packages when a command is missing (root only)."""
    if not missing_commands():
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"],
                    ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES]):
        result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout_s)
        if result.returncode != 0:
            raise ClusterError(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    if missing_commands():
        raise ClusterError(f"still missing after apt-get: {', '.join(missing_commands())}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _node_hardware() -> dict[str, str]:
    """CPUs and RealMemory as slurmd itself measures them (``slurmd -C``)."""
    text = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True, timeout=60).stdout
    return dict(re.findall(r"(\w+)=(\S+)", text.splitlines()[0]))


def _is_stale_test_link(link: Path) -> bool:
    """A link into another test cluster's folder (``bloomqg-slurm-*``) whose daemons are gone."""
    target = Path(os.readlink(link))
    folder = target.parent.parent
    if not folder.name.startswith("bloomqg-slurm-"):
        return False
    for pid_file in folder.glob("*.pid"):
        try:
            os.kill(int(pid_file.read_text().strip()), 0)
            return False  # that cluster is still running
        except (ProcessLookupError, ValueError):
            continue
    return True


@dataclass
class SlurmCluster:
    """Start with :meth:`start`, stop with :meth:`stop` (always, in a ``finally``)."""

    root: Path
    min_job_age_s: int = 3600  # finished jobs stay in scontrol for the whole test
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    linked: list[Path] = field(default_factory=list)

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment in which SLURM clients (and Snakemake's executor) use this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    @property
    def jobcomp(self) -> Path:
        return self.root / "jobcomp.txt"

    def pid_files(self) -> list[Path]:
        return [self.root / f"{name}.pid" for name in ("munged", "slurmctld", "slurmd")]

    def write_config(self) -> None:
        hardware = _node_hardware()
        host = socket.gethostname().split(".")[0]
        for sub in ("etc", "state", "spool", "munge"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "munge", 0o700)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(128))
        os.chmod(key, 0o400)
        r = self.root
        self.conf.write_text(f"""\
ClusterName=bloomqg-test
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={r}/munge/munge.socket
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/slurmctld.log
SlurmdLogFile={r}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
SchedulerType=sched/backfill
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
MinJobAge={self.min_job_age_s}
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc={self.jobcomp}
NodeName={host} NodeAddr=127.0.0.1 CPUs={hardware['CPUs']} RealMemory={hardware['RealMemory']} Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes={host} Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes={host} MaxTime=INFINITE State=UP
""")
        (self.root / "etc" / "gres.conf").write_text(
            f"NodeName={host} Name=gpu File=/dev/null AutoDetect=off\n"
        )
        self.host = host
        for name in ("slurm.conf", "gres.conf"):
            system = SYSTEM_CONF_DIR / name
            if system.is_symlink() and _is_stale_test_link(system):
                system.unlink()  # left by a test run that was killed before its teardown
            elif system.exists() or system.is_symlink():
                raise ClusterError(f"{system} exists: this machine has its own SLURM; not touching it")
        SYSTEM_CONF_DIR.mkdir(parents=True, exist_ok=True)
        for name in ("slurm.conf", "gres.conf"):
            (SYSTEM_CONF_DIR / name).symlink_to(self.root / "etc" / name)
            self.linked.append(SYSTEM_CONF_DIR / name)

    def _daemon(self, name: str, command: list[str]) -> None:
        log = open(self.root / f"{name}.out", "wb")
        self.processes[name] = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True,
        )
        log.close()

    def start(self, timeout_s: float = 60) -> "SlurmCluster":
        self.write_config()
        m = self.root / "munge"
        self._daemon("munged", [
            "munged", "--foreground", "--force", f"--socket={m}/munge.socket",
            f"--key-file={m}/munge.key", f"--pid-file={self.root}/munged.pid",
            f"--log-file={m}/munged.log", f"--seed-file={m}/munged.seed",
        ])
        self._wait(lambda: (m / "munge.socket").exists(), "munged's socket", timeout_s)
        self._daemon("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        self._wait(lambda: self.run("scontrol", "ping").returncode == 0, "slurmctld to answer", timeout_s)
        self._daemon("slurmd", ["slurmd", "-D", "-f", str(self.conf)])
        self._wait(self._node_idle, "the node to be idle", timeout_s)
        return self

    def _node_idle(self) -> bool:
        result = self.run("sinfo", "-h", "-N", "-o", "%T")
        return result.returncode == 0 and result.stdout.strip().startswith("idle")

    def _wait(self, ready, what: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise ClusterError(f"{name} exited ({process.returncode}) waiting for {what}:\n{self.logs()}")
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out waiting for {what}:\n{self.logs()}")
            time.sleep(0.2)

    def run(self, *command: str, timeout_s: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(list(command), capture_output=True, text=True, env=self.env, timeout=timeout_s)

    def jobs(self) -> list[dict[str, str]]:
        """Every job slurmctld still knows (finished ones for MinJobAge), as scontrol's fields."""
        text = self.run("scontrol", "-o", "show", "jobs").stdout
        return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in text.splitlines() if line.startswith("JobId=")]

    def finished_jobs(self) -> list[dict[str, str]]:
        """jobcomp/filetxt's lines: one per finished job, kept after slurmctld forgets it."""
        if not self.jobcomp.exists():
            return []
        return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in self.jobcomp.read_text().splitlines() if line]

    def logs(self) -> str:
        parts = []
        for path in sorted(self.root.glob("*.log")) + sorted(self.root.glob("*.out")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-2000:]}")
        return "\n".join(parts)

    def stop(self, timeout_s: float = 30) -> None:
        """Cancel what still runs, stop the daemons by PID (slurmd, slurmctld, then munged) and
        remove their PID files."""
        if "slurmctld" in self.processes and self.processes["slurmctld"].poll() is None:
            self.run("scancel", "--user", str(os.getuid()), "--full")
        for name in ("slurmd", "slurmctld", "munged"):
            process = self.processes.pop(name, None)
            if process is None or process.poll() is not None:
                continue
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=timeout_s)
        for pid_file in self.pid_files():
            pid_file.unlink(missing_ok=True)
        while self.linked:
            self.linked.pop().unlink(missing_ok=True)


def main() -> None:
    """``python -m tests.support.slurm_cluster [FOLDER]``: start the cluster, keep it up until
    Ctrl-C or SIGTERM, then tear it down (to run the study through profiles/slurm by hand)."""
    import sys
    import tempfile

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    install_packages()
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="bloomqg-slurm-"))
    cluster = SlurmCluster(root)
    try:
        cluster.start()
        print(f"SLURM up: partitions cpu and gpu (1 stand-in GPU); config {cluster.conf} "
              "(also linked at /etc/slurm). Ctrl-C stops it.", flush=True)
        while True:
            signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
