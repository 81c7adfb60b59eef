"""The window's compute device, in one place: AppState.device, which the views and the tasks read. The user's choice
is saved in the settings; the compute kernel's machine decides whether it is there (a device it lacks gives way to
cpu, once, saying so, while the settings keep the choice)."""

from __future__ import annotations

from collections.abc import Callable

from probescope.app.window.saved_settings import DEVICE, Settings
from probescope.app.window.state import AppState
from probescope.core.devices import device_problem


class ComputeDevice:
    """`choose` (the Compute Device menu) and `check` (the kernel's devices, once it has started); `reopen` opens
    again the inputs loaded on the device (a model, a generator), on the one set now."""

    def __init__(self, state: AppState, settings: Settings, notify: Callable[[str], None],
                 reopen: Callable[[], None]) -> None:
        self._state, self._settings, self._notify, self._reopen = state, settings, notify, reopen

    def choose(self, device: str) -> None:
        self._state.device = device
        self._settings.set(DEVICE, device)
        self._reopen()

    def check(self, devices: list[str]) -> None:
        problem = device_problem(self._state.device, devices=devices)
        if problem is None:
            return
        self._notify(f"{problem}; computing on cpu")
        self._state.device = "cpu"
        self._reopen()
