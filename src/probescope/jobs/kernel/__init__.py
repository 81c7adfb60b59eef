"""The compute kernel: the process that runs the window's Jobs (process.py), the messages it exchanges with the
window (transport.py), the same kernel as a Ray actor on a cluster (ray_actor.py) and how `--kernel` names where it
runs (spec.py). Qt-free; the window's side is `probescope.app.compute.kernel_client` (and `app.ray_kernel_client`)."""
