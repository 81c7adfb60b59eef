"""Starting the compute kernel as a process of this machine, and starting it early: `probescope gui` calls
`start_early` before it imports Qt, so the kernel's own start (importing torch: seconds on a busy machine) runs while
the window imports Qt and builds itself, and the window's first Job finds a kernel ready (issue 45: the first units
came 2 s sooner under load). The window's kernel client takes that process (`take_early`) instead of spawning one
when its first Job comes; an early kernel never taken is stopped at exit.

Qt-free: the launcher calls it before Qt is imported.
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.util  # its exit handler (which joins child processes) registered before this module's
from typing import Any

from probescope.jobs.kernel.process import KernelConfig, main

_early: tuple[KernelConfig, Any, Any] | None = None  # (its config, the process, the window's end of the pipe)


def spawn(config: KernelConfig) -> tuple[Any, Any]:
    """Start a kernel process: (the process, the window's end of its pipe)."""
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    # not a daemon: its jobs may start processes of their own (a dissection's workers); stopped at exit instead
    process = context.Process(target=main, args=(theirs, config), name="probescope-kernel")
    process.start()
    theirs.close()  # the kernel's end: held only by the kernel, so its death ends the connection
    return process, ours


def start_early(config: KernelConfig | None = None) -> None:
    """Start the kernel now, for the window's client to take when its first Job comes."""
    global _early
    config = config or KernelConfig()
    _early = (config, *spawn(config))


def take_early(config: KernelConfig) -> tuple[Any, Any] | None:
    """The kernel started early with `config`, if there is one still running: (process, connection); None
    otherwise (an early kernel of another config is stopped)."""
    global _early
    early, _early = _early, None
    if early is None:
        return None
    wanted, process, conn = early
    if wanted == config and process.is_alive():
        return process, conn
    _stop(process, conn)
    return None


def _stop(process: Any, conn: Any) -> None:
    conn.close()  # the kernel reads the end of its connection and exits
    process.join(2)
    if process.is_alive():
        process.kill()
        process.join()


@atexit.register  # after multiprocessing's exit handler, so it runs before it (which would wait for the kernel)
def _stop_untaken() -> None:
    if _early is not None:
        _stop(*_early[1:])
