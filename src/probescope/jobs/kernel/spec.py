"""Where the window's compute Jobs run, as `probescope gui --kernel` names it: `thread` (the window's own compute
thread), `local` (a kernel process on this machine) or a Ray Client address `ray://HOST:PORT` (the kernel as an actor
on that Ray cluster: `jobs.kernel.ray_actor`).

Ray runs any code a client sends it (its documented threat model), so before the window (`refusal`) or `probescope
batch --ray` (`ray_address_from_args`) connects to a cluster that is not on this machine, the one check both call,
`cluster_refusal`, asks for Ray's token authentication (ray >= 2.52: `RAY_AUTH_MODE=token` and a token from
`RAY_AUTH_TOKEN`, the file `RAY_AUTH_TOKEN_PATH` names, or ~/.ray/auth_token, in that order) or for the user's
explicit `--kernel-insecure` / `--ray-insecure`. Ray itself sends the token when that mode is set; `use_token` sets
it when a token is found and the mode is unset (Ray 2.60's `ray start` turns token authentication on by itself when
it finds a token, but a client given an address does not), and `token_problem` asks a Ray Client server with one
ping whether it turns this machine's token (or its lack of one) away, so that is said at once.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
from collections.abc import Mapping, MutableMapping
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


def find_token(environ: Mapping[str, str] = os.environ, home: Path | None = None) -> tuple[str, str] | None:
    """(token, where it came from) in Ray's own order of token sources (RAY_AUTH_TOKEN, the file RAY_AUTH_TOKEN_PATH
    names, ~/.ray/auth_token; surrounding whitespace stripped, as Ray's token loader does), or None."""
    if token := environ.get("RAY_AUTH_TOKEN", "").strip():
        return token, "RAY_AUTH_TOKEN"
    named = environ.get("RAY_AUTH_TOKEN_PATH")
    path = Path(named) if named else (home or Path.home()) / ".ray" / "auth_token"
    try:
        token = path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return (token, str(path)) if token else None


def missing_token(environ: Mapping[str, str] = os.environ, home: Path | None = None) -> str | None:
    """In token mode, why Ray would find no token here (None: it would), in Ray's own order of token sources."""
    if find_token(environ, home) is not None:
        return None
    named = environ.get("RAY_AUTH_TOKEN_PATH")
    if named:  # Ray aborts the process on a token file it cannot read: said here instead
        return f"RAY_AUTH_TOKEN_PATH names {named}, which cannot be read or is empty"
    return ("RAY_AUTH_MODE=token but there is no token (set RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH, or write "
            "~/.ray/auth_token: `ray get-auth-token` on the cluster prints it)")


def sends_token(environ: Mapping[str, str] = os.environ, home: Path | None = None) -> bool:
    """This machine's Ray client sends a token: RAY_AUTH_MODE=token, or RAY_AUTH_MODE unset and a token found (the
    rule Ray 2.60's `ray start` follows for its own cluster; `use_token` makes a client follow it too)."""
    mode = environ.get("RAY_AUTH_MODE")
    if mode is not None and mode.lower() != "token":
        return False
    return find_token(environ, home) is not None


def cluster_refusal(option: str, address: str, host: str, insecure_flag: str, insecure: bool,
                    environ: Mapping[str, str] = os.environ, home: Path | None = None) -> str | None:
    """THE check before any connection to a Ray cluster (`gui --kernel`, `batch --ray`): why not to connect to
    `address` (whose host is `host`), in one line naming `option`, or None. Loopback (this machine, or an SSH
    tunnel's end) is fine; a cluster elsewhere needs Ray's token authentication (RAY_AUTH_MODE=token with a token)
    or the user's explicit `insecure` (`insecure_flag`). In token mode a missing token is said here (Ray would abort
    or time out)."""
    if token_mode(environ):
        problem = missing_token(environ, home)
        return None if problem is None else f"{option} {address}: {problem}"
    if is_loopback(host) or insecure:
        return None  # this machine, or a tunnel to it; or the user said so
    return (f"{option} {address}: the cluster is not on this machine and Ray token authentication is not set up "
            "(RAY_AUTH_MODE=token with a token), so anyone who can reach it can run code there; tunnel it to "
            f"127.0.0.1 over SSH (docs/cluster.md), set up the token, or pass {insecure_flag}")


def refusal(spec: KernelSpec, environ: Mapping[str, str] = os.environ, home: Path | None = None) -> str | None:
    """Why the window must not connect to `spec`'s cluster (one line), or None."""
    if not spec.is_remote:
        return None
    return cluster_refusal("--kernel", spec.address, spec.host, "--kernel-insecure", spec.insecure, environ, home)


def ray_address_from_args(text: str, insecure: bool, environ: Mapping[str, str] = os.environ,
                          home: Path | None = None) -> str:
    """The cluster `batch --ray` names ('auto', 'local', ray://HOST:PORT or a head's HOST:PORT), once
    `cluster_refusal` lets it be reached (with 'auto', the address RAY_ADDRESS names, if any); InputError (one
    line) for a malformed address or a cluster not to connect to."""
    if text == "local" or (text == "auto" and not environ.get("RAY_ADDRESS")):
        return text  # a Ray instance on this machine (one found, or one started for the run)
    checked = environ["RAY_ADDRESS"] if text == "auto" else text
    option = "--ray auto (RAY_ADDRESS)" if text == "auto" else "--ray"
    host = ray_host(checked)
    if host is None:
        raise InputError(f"{option} {checked!r}: expected auto, local, a Ray Client address ray://HOST:PORT or a "
                         "head node's HOST:PORT (e.g. ray://127.0.0.1:10001, 127.0.0.1:6379)")
    problem = cluster_refusal(option, checked, host, "--ray-insecure", insecure, environ, home)
    if problem is not None:
        raise InputError(problem)
    return text


def ray_host(address: str) -> str | None:
    """The host of ray://HOST:PORT or HOST:PORT (None: not such an address)."""
    if address.startswith(RAY_SCHEME):
        try:
            return parse_kernel(address).host
        except ValueError:
            return None
    try:
        parts = urlsplit("//" + address)
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or port is None or parts.path or parts.query or parts.fragment or parts.username \
            or "://" in address:
        return None
    return parts.hostname


def use_token(environ: MutableMapping[str, str] = os.environ) -> None:
    """Before connecting with Ray: when this machine has a token and RAY_AUTH_MODE is unset, set RAY_AUTH_MODE=token
    (for this process and its children) and make Ray read its settings again, so that its client sends the token on
    every call (an explicit address never turns it on by itself in Ray 2.60: `ray._private.worker.init`)."""
    if "RAY_AUTH_MODE" in environ or find_token(environ) is None:
        return  # a mode said (in token mode Ray sends the token itself), or no token to send
    environ["RAY_AUTH_MODE"] = "token"
    # (ray: the cluster extra, optional; the window and --help import this module)
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")  # as ray._private.authentication.authentication_token_setup._enable_token_auth
    AuthenticationTokenLoader.instance().reset_cache()


PROBE_S = 10.0  # for the Ray Client server to answer one ping


def token_problem(address: str, environ: Mapping[str, str] = os.environ, home: Path | None = None,
                  timeout: float = PROBE_S) -> str | None:
    """Whether the Ray Client server at `address` (ray://HOST:PORT, already let through by `cluster_refusal`) turns
    this machine away for its token, asked with one ping carrying the token Ray's client would send (Ray Client
    itself retries such a refusal for a minute, then says "ray client connection timeout"): one line, or None
    (let in, or some other answer, left to Ray's own connection)."""
    import grpc  # (grpc, ray: the cluster extra, optional; the window and --help import this module)
    from ray.core.generated import ray_client_pb2, ray_client_pb2_grpc

    found = find_token(environ, home) if sends_token(environ, home) else None
    metadata = [("authorization", f"Bearer {found[0]}")] if found else []
    parts = urlsplit(address)
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    with grpc.insecure_channel(f"{host}:{parts.port}") as channel:
        stub = ray_client_pb2_grpc.RayletDriverStub(channel)
        request = ray_client_pb2.ClusterInfoRequest(type=ray_client_pb2.ClusterInfoType.PING)
        try:
            stub.ClusterInfo(request, timeout=timeout, metadata=metadata)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNAUTHENTICATED:
                return None
        else:
            return None
    if found:
        return (f"the Ray cluster at {address} refused this machine's token (from {found[1]}): give the cluster's own "
                "token (`ray get-auth-token` on its head prints it) in RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or "
                "~/.ray/auth_token")
    disabled = " and unset RAY_AUTH_MODE" if environ.get("RAY_AUTH_MODE") else ""
    return (f"the Ray cluster at {address} wants a token (Ray token authentication) and none is set up here: "
            "give it in RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH (a file) or ~/.ray/auth_token (`ray get-auth-token` on "
            f"the cluster's head prints it){disabled}")


def before_connecting(address: str) -> str | None:
    """Right before `ray.init(address)` (once `cluster_refusal` let it through): send this machine's token if it has
    one (`use_token`), and for a Ray Client address say at once, in one line, that the cluster turns it away for its
    token (`token_problem`); None: go on."""
    use_token()
    return token_problem(address) if address.startswith(RAY_SCHEME) else None
