"""Batch tasks on a Ray cluster (the optional `probescope[cluster]` extra; ray is imported here only).

Extraction runs as one task per model (asking for the model's GPUs); its activations go into the object store from
the worker, so they never pass through the driver. The label store is put into the object store once. Chunk tasks
are retried when their worker is lost (`max_retries`); a task that raises InputError raises it again here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from probescope.core.dissection.inputs import LayerInput, extract_model_layers
from probescope.core.errors import InputError
from probescope.core.trust import Trust
from probescope.jobs.batch.chunks import dissect_chunk
from probescope.jobs.kernel.spec import before_connecting, ray_address_from_args

MAX_RETRIES = 4  # per task, on a lost worker or node


def _ray():
    try:
        import ray  # (ray: the cluster extra, optional; refused in one line without it)
    except ImportError:
        raise InputError("--ray needs the cluster extra: pip install 'probescope[cluster]'") from None
    return ray


def _extract_to_store(spec: str, layers: list[str], root: Path, index: str, source: str, device: str,
                      trust: Trust) -> list[LayerInput]:
    """The extraction task body: activations are put into the object store by the worker (refs come back)."""
    ray = _ray()
    out = extract_model_layers(spec, layers, root, index, source, device, trust)
    for item in out:
        item.activations = ray.put(np.ascontiguousarray(item.activations))
    return out


class RayExecutor:
    """Connects to Ray on creation: `address` 'auto' joins the cluster this machine belongs to (or starts a local
    one); any other value is a cluster address, refused in one line before anything connects when it is not on this
    machine and neither Ray's token authentication nor `insecure` (`--ray-insecure`) says to go on
    (`jobs.kernel.spec.ray_address_from_args`, the check `gui --kernel` makes too). This machine's token is sent
    when it has one, and a Ray Client server that turns it away (or wants one) is said at once
    (`jobs.kernel.spec.before_connecting`). Without an address, an already initialised Ray is used as it is (and
    left running by close())."""

    def __init__(self, address: str | None = "auto", insecure: bool = False):
        if address is not None:
            ray_address_from_args(address, insecure)
        ray = self._ray = _ray()
        self._owns = not ray.is_initialized()
        if self._owns:
            problem = before_connecting(os.environ.get("RAY_ADDRESS", "") if address in (None, "auto") else address)
            if problem is not None:
                raise InputError(problem)
            try:
                ray.init(address=None if address in (None, "auto") else address, log_to_driver=False,
                         logging_level="warning")
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise InputError(f"cannot connect to the Ray cluster at {address!r}: {exc}") from None
        self._extract = ray.remote(max_retries=MAX_RETRIES)(_extract_to_store)
        self._chunk = ray.remote(max_retries=MAX_RETRIES)(dissect_chunk)

    def put(self, value: Any) -> Any:
        if isinstance(value, self._ray.ObjectRef):
            return value
        if isinstance(value, np.memmap):
            value = np.ascontiguousarray(value)
        return self._ray.put(value)

    def extract(self, spec: str, layers: list[str], root: Path, index: str, source: str, device: str,
                trust: Trust, gpus: float) -> Any:
        task = self._extract.options(num_gpus=gpus, name="extract_model")
        return task.remote(spec, layers, root, index, source, device, trust)

    def chunk(self, *args: Any) -> Any:
        return self._chunk.remote(*args)

    def wait(self, handles: list[Any]) -> tuple[Any, Any]:
        ray = self._ray
        (done,), _ = ray.wait(handles, num_returns=1)
        try:
            return done, ray.get(done)
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, InputError):
                raise InputError(str(exc.cause)) from None
            raise

    def close(self) -> None:
        if self._owns:
            self._ray.shutdown()
