"""The GUI process's threads and their share of the machine: interpreter settings that keep the GUI thread
responsive, Qt threads that run Python under a name, and the decode pool's lower priority (the task pool,
probescope.app.compute.workers, runs the tasks on them).
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
from collections.abc import Callable

GUI_SWITCH_INTERVAL_S = 0.001  # the GIL switch interval in the GUI process (Python's default: 5 ms)
# the decode pool's threads run this much below the GUI thread and above the compute kernel (nice 2): they read the
# live scores (FID's eigenproblem, its 1/N fits, distances) beside a busy kernel, and a pool thread holding the
# interpreter lock while the kernel's threads keep it from a core would stall the GUI thread behind it
IO_NICENESS = 1


def keep_gui_responsive() -> None:
    """Interpreter settings for the GUI process; call once, after startup.

    - Every object alive now (torch, Qt, the window: about 250,000) leaves the garbage collector's reach. Otherwise a
      worker allocating many objects (a dissection.json read into results) sets off full collections that walk them
      all holding the GIL: measured 139 ms of frozen GUI per collection.
    - The GIL switch interval drops from 5 ms to 1 ms. The GUI thread gives the GIL up on each Qt call and waits for
      it again while a worker runs Python: measured longest GUI stall during a Python-bound worker task 31-53 ms at
      5 ms, 4-8 ms at 1 ms.
    """
    gc.freeze()  # no collect first: it found nothing to free at this point (0 objects) and took 114 ms
    sys.setswitchinterval(GUI_SWITCH_INTERVAL_S)


def run_named(name: str, work: Callable[[], None]) -> None:
    """Run `work` in a Qt thread as Python thread `name`. Python keeps a stand-in Thread for each foreign thread
    that ran Python code until the interpreter exits; it is forgotten here when the work is done, so a thread
    that has ended is not listed as alive (`threading.enumerate`)."""
    threading.current_thread().name = name
    try:
        work()
    finally:
        with threading._active_limbo_lock:  # noqa: SLF001  (the one way to forget a foreign thread's stand-in)
            threading._active.pop(threading.get_ident(), None)  # noqa: SLF001


def lower_thread_priority(by: int = IO_NICENESS) -> None:
    """This thread's scheduling priority `by` below the process's main (GUI) thread's (Linux keeps a nice value
    per thread; elsewhere nothing changes). Idempotent: a pool thread, reused, stays where it was put."""
    if not sys.platform.startswith("linux"):
        return
    tid = threading.get_native_id()
    with contextlib.suppress(OSError):  # (lowering is always allowed; a sandbox may still refuse it)
        target = min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + by)  # (the pid is the main thread's id)
        if os.getpriority(os.PRIO_PROCESS, tid) < target:
            os.setpriority(os.PRIO_PROCESS, tid, target)
