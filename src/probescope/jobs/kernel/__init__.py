"""The compute kernel: the process that runs the window's Jobs (process.py) and the messages it exchanges with the
window (transport.py). Qt-free; the window's side is `probescope.app.kernel_client`."""

KERNELS = ("thread", "local")  # where the window's compute Jobs run: its own compute thread, or a kernel process
