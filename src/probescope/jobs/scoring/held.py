"""The opened samples as a process holds them: in its `Session`, under the spec they were opened as, so a job names
them and finds them where it runs (`samples_of`). A generator (code, run by torch) is held in the compute kernel's
session and known to the window only by its name and length (`HeldGenerator`).

It imports the request type for annotations only: `jobs.inputs` opens generators through `hold_generator`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from probescope.core.errors import InputError
from probescope.core.scoring.sources import SampleSource, TorchScriptGeneratorSource, open_source
from probescope.core.trust import Trust
from probescope.jobs.protocol import TaskContext
from probescope.jobs.session import Session

if TYPE_CHECKING:
    from probescope.jobs.inputs import OpenRequest


def hold_samples(session: Session, spec: str, source: SampleSource) -> str:
    """`source` (the samples opened as `spec`) held in `session` for the jobs that name it; returns the name."""
    session.hold("samples", spec, source)
    return spec


@dataclass
class HeldGenerator(SampleSource):
    """A generator as the window knows it: its name and length. The generator (code, run by torch) is held in the
    session of the process that opened it (the compute kernel's), under its request's spec, and is opened again
    from the request, with the running task's trust, where it is not held (a restarted kernel)."""

    request: OpenRequest
    device: str
    name: str = ""
    length: int | None = None


def _open_generator(request: OpenRequest, device: str, trust: Trust) -> SampleSource:
    z_dim, n, num_classes = request.generator
    return TorchScriptGeneratorSource(request.spec, z_dim, n, num_classes=num_classes, device=device, trust=trust)


def hold_generator(ctx: TaskContext, request: OpenRequest, device: str) -> HeldGenerator:
    """Open the generator of `request` in this process's session (the one a newer open of the same file
    replaces) and describe it for the window."""
    source = _open_generator(request, device, ctx.trust)
    hold_samples(ctx.session, request.spec, source)
    return HeldGenerator(request, device, source.name, source.length)


def samples_of(ctx: TaskContext, samples: str | HeldGenerator) -> SampleSource:
    """The opened samples (`samples`: their spec, or a generator's description), from the session of the process
    running the job; a folder, an array file or a generator not held there (the compute kernel's, or one
    restarted) is opened again from its path (a generator from its request, with the task's trust)."""
    if isinstance(samples, HeldGenerator):
        request = samples.request
        return ctx.session.get("samples", request.spec,
                               lambda: _open_generator(request, samples.device, ctx.trust))
    spec = samples

    def opened_again() -> SampleSource:
        if Path(spec).is_dir() or Path(spec).suffix in (".npy", ".npz"):
            return open_source(spec)
        raise InputError(f"the samples {spec} are no longer open here: open them again")

    return ctx.session.get("samples", spec, opened_again)
