"""The processes a process started, from /proc (Linux): how tests and benchmarks find a run's worker processes; and
how tests stop a Ray head they started."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO


def children_of(pid: int) -> list[int]:
    """Processes whose parent is `pid`."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_ray_head(env: dict[str, str], cpus: int) -> tuple[subprocess.Popen, IO, Path, int]:
    """`ray start --head --block` on 127.0.0.1 with `env`, logging to a fresh temporary folder (Ray's socket paths
    must stay short: under /tmp): (the head, its log, the folder, its Ray Client port). Stop it with stop_ray_head."""
    temp = Path(tempfile.mkdtemp(prefix="psray-", dir="/tmp"))
    client_port = free_port()
    log = (temp / "head.log").open("w")
    head = subprocess.Popen(
        [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block", "--node-ip-address=127.0.0.1",
         f"--port={free_port()}", f"--ray-client-server-port={client_port}", f"--num-cpus={cpus}",
         "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"],
        env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return head, log, temp, client_port


def stop_ray_head(head: subprocess.Popen, log: IO, temp: str | Path) -> None:
    """Stop a `ray start --head --block` process (SIGTERM stops what it started; its process group is killed after
    30 s), close its log and remove its temporary folder."""
    head.send_signal(signal.SIGTERM)
    try:
        head.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(head.pid, signal.SIGKILL)
        head.wait()
    log.close()
    shutil.rmtree(temp, ignore_errors=True)
