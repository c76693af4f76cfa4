"""Who owns a server, read from ``/proc`` (Linux): the workflow above the job, and the port's holder.

- :func:`owner_chain`: the job's ancestors up to the Snakemake process that runs it (or its
  parent alone, for a job run by hand), each with its start time, so a recycled pid is not
  taken for the same process; :func:`chain_broken` names the first one that is gone (the walk
  and "is Snakemake" are :mod:`bloomqg.runtime.processes`'s).
- :func:`snakemake_log` / :func:`stopping_gracefully`: Snakemake answers a SIGTERM by finishing
  its running jobs (hours for an engine job) and tells nothing to them; the only trace is the
  line it writes to its log, which a job watching its server reads.
- :func:`port_holders`: the processes that listen on a TCP port, found by the socket inodes of
  ``/proc/net/tcp`` in each process's descriptors, so readiness can tell its own server from
  another one on the same port.
"""

from __future__ import annotations

import os
from pathlib import Path

from bloomqg.runtime.processes import Process, is_snakemake, parent_pid, read_process

#: What Snakemake (9.x) writes to its log once a SIGTERM asked it to stop after the running jobs.
SNAKEMAKE_GRACEFUL_LINE = "Will exit after finishing currently running jobs"
_LISTEN = "0A"


def owner_chain(pid: int | None = None) -> list[Process]:
    """The ancestors of ``pid`` (this process) from its parent up to the nearest Snakemake process,
    inclusive; only the parent when no ancestor is Snakemake."""
    pid = os.getpid() if pid is None else pid
    chain: list[Process] = []
    current = parent_pid(pid)
    while current > 1:
        process = read_process(current)
        if process is None:
            break
        chain.append(process)
        if is_snakemake(process.argv):
            return chain
        current = parent_pid(current)
    return chain[:1]


def chain_broken(chain: list[Process]) -> Process | None:
    """The first process of ``chain`` that is gone (or whose pid now names another process)."""
    for process in chain:
        now = read_process(process.pid)
        if now is None or now.start != process.start:
            return process
    return None


def snakemake_log(chain: list[Process]) -> Path | None:
    """The log file the chain's Snakemake process writes (found among its open files)."""
    if not chain or not is_snakemake(chain[-1].argv):
        return None
    fd_dir = Path(f"/proc/{chain[-1].pid}/fd")
    try:
        for entry in fd_dir.iterdir():
            target = os.readlink(entry)
            if target.endswith(".snakemake.log"):
                return Path(target)
    except OSError:
        return None
    return None


def stopping_gracefully(log: Path | None, offset: int) -> tuple[bool, int]:
    """Whether Snakemake's log, read from ``offset`` on, says it stops after its running jobs;
    and the offset to read from next time."""
    if log is None:
        return False, offset
    try:
        with open(log, "rb") as handle:
            handle.seek(offset)
            text = handle.read()
    except OSError:
        return False, offset
    # keep a line's worth, so a line written in two pieces is still seen whole next time
    seen = SNAKEMAKE_GRACEFUL_LINE.encode() in text
    return seen, offset + max(0, len(text) - len(SNAKEMAKE_GRACEFUL_LINE))


def listening_inodes(port: int) -> set[int]:
    """Socket inodes listening on TCP ``port`` (IPv4 and IPv6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as handle:
                rows = handle.readlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == _LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(int(fields[9]))
    return inodes


def port_holders(port: int) -> dict[int, int]:
    """``{pid: process group}`` of the processes (readable to this user) that hold a socket
    listening on ``port``; empty when nothing listens."""
    inodes = listening_inodes(port)
    if not inodes:
        return {}
    wanted = {f"socket:[{inode}]" for inode in inodes}
    holders = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            descriptors = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in descriptors:
            try:
                if os.readlink(f"/proc/{entry}/fd/{fd}") in wanted:
                    holders[int(entry)] = os.getpgid(int(entry))
                    break
            except OSError:  # closed meanwhile (the listing's own descriptor, for one)
                continue
    return holders


def group_members(pgid: int, spare: int | None = None) -> list[int]:
    """Live (not zombie) processes of group ``pgid`` other than ``spare``."""
    members = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        if int(entry) == spare:
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry))
    return members
