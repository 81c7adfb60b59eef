"""The processes a process started, from /proc (Linux): how tests and benchmarks find a run's worker processes."""

from __future__ import annotations

from pathlib import Path


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
