"""The processes a process started, from /proc (Linux): how tests and benchmarks find a run's worker processes; and
how tests stop a Ray head they started."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
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
