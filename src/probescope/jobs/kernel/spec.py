"""Where the window's compute Jobs run, as `probescope gui --kernel` names it: `thread` (the window's own compute
thread), `local` (a kernel process on this machine) or a Ray Client address `ray://HOST:PORT` (the kernel as an actor
on that Ray cluster: `jobs.kernel.ray_actor`).

Ray runs any code a client sends it (its documented threat model), so before the window connects to a cluster that
is not on this machine, `refusal` asks for Ray's token authentication (ray >= 2.52: `RAY_AUTH_MODE=token` and a token
from `RAY_AUTH_TOKEN`, the file `RAY_AUTH_TOKEN_PATH` names, or ~/.ray/auth_token, in that order) or for the user's
explicit `insecure` (`--kernel-insecure`). Ray itself sends the token when that mode is set.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from probescope.core.errors import InputError

KINDS = ("thread", "local", "ray")
RAY_SCHEME = "ray://"
LOOPBACK_NAMES = ("localhost",)


@dataclass(frozen=True)
class KernelSpec:
    """`kind` (KINDS); for 'ray': `address` (ray://HOST:PORT), the `gpus` its actor asks for, and `insecure`: the
    user agreed to connect to a cluster elsewhere without token authentication."""

    kind: str
    address: str = ""
    gpus: float = 0
    insecure: bool = False

    @property
    def host(self) -> str:
        return urlsplit(self.address).hostname or ""

    @property
    def is_remote(self) -> bool:
        return self.kind == "ray"


def parse_kernel(text: str) -> KernelSpec:
    """'thread', 'local' or 'ray://HOST:PORT'; ValueError (one line) for anything else."""
    if text in ("thread", "local"):
        return KernelSpec(text)
    expected = "expected thread, local or a Ray Client address ray://HOST:PORT (e.g. ray://127.0.0.1:10001)"
    if not text.startswith(RAY_SCHEME):
        raise ValueError(f"{text!r}: {expected}")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None or parts.path or parts.query or parts.fragment or parts.username:
        raise ValueError(f"{text!r}: {expected}")
    return KernelSpec("ray", text)


def as_spec(kernel: str | KernelSpec) -> KernelSpec:
    """`kernel` as a KernelSpec (parsed when it is `--kernel` text)."""
    return kernel if isinstance(kernel, KernelSpec) else parse_kernel(kernel)


def kernel_arg(text: str) -> str:
    """argparse type of `--kernel`: the text, once it names a kernel (argparse says the ValueError in one line)."""
    try:
        parse_kernel(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def kernel_from_args(text: str, insecure: bool) -> KernelSpec:
    """The kernel `--kernel` and `--kernel-insecure` name; InputError (one line) for a cluster not to connect to."""
    spec = replace(parse_kernel(text), insecure=insecure)
    problem = refusal(spec)
    if problem is not None:
        raise InputError(problem)
    return spec


def on_device(spec: KernelSpec, device: str) -> KernelSpec:
    """The kernel for compute on `device`: a Ray kernel asks for a GPU when it is a CUDA device."""
    return replace(spec, gpus=1) if spec.is_remote and device.startswith("cuda") else spec


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost: a cluster reached through this machine (itself, or an SSH tunnel)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_mode(environ: Mapping[str, str] = os.environ) -> bool:
    """Ray's token authentication is asked for (RAY_AUTH_MODE=token): Ray sends the token on every call."""
    return environ.get("RAY_AUTH_MODE", "").lower() == "token"


def missing_token(environ: Mapping[str, str] = os.environ, home: Path | None = None) -> str | None:
    """In token mode, why Ray would find no token here (None: it would), in Ray's own order of token sources."""
    if environ.get("RAY_AUTH_TOKEN"):
        return None
    named = environ.get("RAY_AUTH_TOKEN_PATH")
    path = Path(named) if named else (home or Path.home()) / ".ray" / "auth_token"
    try:
        if path.read_text().strip():
            return None
    except OSError:
        pass
    if named:  # Ray aborts the process on a token file it cannot read: said here instead
        return f"RAY_AUTH_TOKEN_PATH names {named}, which cannot be read or is empty"
    return ("RAY_AUTH_MODE=token but there is no token (set RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH, or write "
            "~/.ray/auth_token: `ray get-auth-token` on the cluster prints it)")


def refusal(spec: KernelSpec, environ: Mapping[str, str] = os.environ, home: Path | None = None) -> str | None:
    """Why the window must not connect to `spec`'s cluster (one line), or None."""
    if not spec.is_remote:
        return None
    if token_mode(environ):
        problem = missing_token(environ, home)
        return None if problem is None else f"--kernel {spec.address}: {problem}"
    if is_loopback(spec.host) or spec.insecure:
        return None  # this machine, or a tunnel to it; or the user said so
    return (f"--kernel {spec.address}: the cluster is not on this machine and Ray token authentication is not set up "
            "(RAY_AUTH_MODE=token with a token), so anyone who can reach it can run code there; tunnel it to "
            "127.0.0.1 over SSH (docs/cluster.md), set up the token, or pass --kernel-insecure")
