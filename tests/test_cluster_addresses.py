"""Which Ray clusters `gui --kernel` and `batch --ray` may connect to: one check (`spec.cluster_refusal`) for both,
made before anything connects (these tests never send traffic to an address that is not loopback: ray.init and the
token probe fail the test if they are called), and Ray 2.60's token authentication: a head started with Ray's
defaults on 127.0.0.1 turns it on when it finds ~/.ray/auth_token; a client without the token is told so in one line
at once, and one with it (RAY_AUTH_MODE unset) sends it."""

from __future__ import annotations

import importlib.util
import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oracles.processes import start_ray_head, stop_ray_head
from probescope.core.errors import InputError
from probescope.jobs.kernel import spec
from probescope.jobs.kernel.spec import cluster_refusal, kernel_from_args, parse_kernel, ray_address_from_args
from probescope.main import main

HAS_RAY = importlib.util.find_spec("ray") is not None
LOOPBACK = ("127.0.0.1", "127.8.0.1", "localhost", "LocalHost", "::1")
ELSEWHERE = ("10.1.2.3", "172.16.0.9", "192.168.1.5", "100.64.0.1", "8.8.8.8", "0.0.0.0", "2001:db8::1", "fd00::1",
             "gpu1", "gpu1.example.org", "127.0.0.1.nip.io")
MALFORMED = ("ray://", "ray://gpu1", "ray://gpu1:", "ray://gpu1:99999", "ray://gpu1:10001/x", "ray://u@gpu1:10001",
             "ray://gpu1:port", "gpu1", "gpu1:", ":6379", "http://gpu1:10001", "ray:/gpu1:10001", "gpu1:6379/x",
             "[::1:6379", "ray://[::1]", "")


def in_url(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@pytest.fixture
def no_ray_token(monkeypatch, tmp_path):
    """No token authentication set up, no RAY_ADDRESS, and a home without ~/.ray/auth_token."""
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return monkeypatch


@pytest.fixture
def no_connection(monkeypatch):
    """Any attempt to connect fails the test (ray.init, the token probe, Ray Client's channel)."""

    def connects(*args, **kwargs):
        pytest.fail(f"tried to connect: {args} {kwargs}")

    monkeypatch.setattr(spec, "token_problem", connects)
    if HAS_RAY:
        import ray

        monkeypatch.setattr(ray, "init", connects)
        import grpc

        monkeypatch.setattr(grpc, "insecure_channel", connects)


def refusal_of(host: str, insecure: bool = False, **environ: str) -> str | None:
    """The one check, as `batch --ray` asks it for a Ray Client address."""
    return cluster_refusal("--ray", f"ray://{in_url(host)}:10001", host, "--ray-insecure", insecure, environ,
                           Path("/nonexistent"))


@pytest.mark.parametrize("host", LOOPBACK)
def test_loopback_is_accepted_without_token_or_insecure(host):
    assert refusal_of(host) is None


@pytest.mark.parametrize("host", ELSEWHERE)
def test_a_cluster_elsewhere_needs_the_token_or_insecure(host):
    problem = refusal_of(host)
    assert problem.startswith(f"--ray ray://{in_url(host)}:10001: the cluster is not on this machine and Ray token "
                              "authentication is not set up") and "\n" not in problem
    assert problem.endswith("or pass --ray-insecure")
    assert refusal_of(host, insecure=True) is None  # the user said so
    assert refusal_of(host, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="ab" * 32) is None
    # a token found without RAY_AUTH_MODE=token is sent, but does not by itself let a cluster elsewhere through
    assert refusal_of(host, RAY_AUTH_TOKEN="ab" * 32) == problem
    assert refusal_of(host, insecure=True, RAY_AUTH_MODE="token").startswith(
        f"--ray ray://{in_url(host)}:10001: RAY_AUTH_MODE=token but there is no token")


@pytest.mark.parametrize("host", ELSEWHERE[:3] + LOOPBACK[:1])
def test_gui_and_batch_ask_the_same_check_before_connecting(host, no_ray_token, no_connection, capsys):
    address = f"ray://{in_url(host)}:10001"
    asked = []
    check = spec.cluster_refusal

    def recorded(option, *args, **kwargs):
        asked.append((option, *args[:2]))
        return check(option, *args, **kwargs)

    no_ray_token.setattr(spec, "cluster_refusal", recorded)
    expected = refusal_of(host)
    if expected is None:
        assert kernel_from_args(address, insecure=False).host == host
        assert ray_address_from_args(address, insecure=False) == address
    else:
        assert main(["gui", "--kernel", address]) == 2
        assert capsys.readouterr().err == f"probescope gui: error: {expected}\n".replace(
            "--ray ", "--kernel ").replace("--ray-insecure", "--kernel-insecure")
        assert main(["batch", "missing.toml", "--out", "out", "--ray", address]) == 2
        assert capsys.readouterr().err == f"probescope batch: error: {expected}\n"
        if HAS_RAY:
            from probescope.jobs.batch.ray_executor import RayExecutor

            with pytest.raises(InputError) as caught:
                RayExecutor(address)
            assert str(caught.value) == expected
        assert kernel_from_args(address, insecure=True).insecure
        assert ray_address_from_args(address, insecure=True) == address
    assert {option for option, *_ in asked} == {"--kernel", "--ray"} and all(
        entry[1:] == (address, host) for entry in asked)


def test_a_head_address_and_ray_address_are_checked_too(no_ray_token, no_connection):
    """`--ray HOST:PORT` (a head's GCS) and `--ray auto` with RAY_ADDRESS set go through the same check."""
    assert ray_address_from_args("127.0.0.1:6379", insecure=False) == "127.0.0.1:6379"
    assert ray_address_from_args("[::1]:6379", insecure=False) == "[::1]:6379"
    with pytest.raises(InputError, match=r"^--ray 10\.1\.2\.3:6379: the cluster is not on this machine .* "
                                         r"--ray-insecure$"):
        ray_address_from_args("10.1.2.3:6379", insecure=False)
    assert ray_address_from_args("10.1.2.3:6379", insecure=True) == "10.1.2.3:6379"
    for name in ("auto", "local"):
        assert ray_address_from_args(name, insecure=False) == name
    no_ray_token.setenv("RAY_ADDRESS", "ray://192.168.1.5:10001")
    with pytest.raises(InputError, match=r"^--ray auto \(RAY_ADDRESS\) ray://192\.168\.1\.5:10001: the cluster "):
        ray_address_from_args("auto", insecure=False)


@pytest.mark.parametrize("text", MALFORMED)
def test_a_malformed_address_is_refused_in_one_line(text, no_ray_token, no_connection):
    with pytest.raises(InputError) as caught:
        ray_address_from_args(text, insecure=True)
    message = str(caught.value)
    assert message.startswith(f"--ray {text!r}: expected auto, local, a Ray Client address") and "\n" not in message
    if text.startswith("ray:"):
        with pytest.raises(ValueError, match="expected thread, local or a Ray Client address"):
            parse_kernel(text)


def test_where_the_token_comes_from(tmp_path):
    """Ray's order: RAY_AUTH_TOKEN, the file RAY_AUTH_TOKEN_PATH names, ~/.ray/auth_token (whitespace stripped)."""
    home = tmp_path / "home"
    assert spec.find_token({}, home) is None and not spec.sends_token({}, home)
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("cd" * 32 + "\n")
    assert spec.find_token({}, home) == ("cd" * 32, str(home / ".ray" / "auth_token"))
    assert spec.sends_token({}, home) and spec.sends_token({"RAY_AUTH_MODE": "TOKEN"}, home)
    assert not spec.sends_token({"RAY_AUTH_MODE": "disabled"}, home)
    (tmp_path / "token").write_text("ef" * 32)
    named = {"RAY_AUTH_TOKEN_PATH": str(tmp_path / "token")}
    assert spec.find_token(named, home) == ("ef" * 32, str(tmp_path / "token"))
    assert spec.find_token({**named, "RAY_AUTH_TOKEN": " ab "}, home) == ("ab", "RAY_AUTH_TOKEN")
    assert spec.find_token({"RAY_AUTH_TOKEN_PATH": str(tmp_path / "missing")}, home) is None


# --- a real head with Ray's default settings on 127.0.0.1 ---------------------------------------------------------

HEAD_START_S = 90


@pytest.fixture(scope="module")
def default_head(tmp_path_factory):
    """(ray://127.0.0.1:PORT, its home) of a Ray head started as docs/cluster.md says, with Ray's defaults: no
    RAY_AUTH_MODE, a token in ~/.ray/auth_token (as `ray get-auth-token --generate` writes it), so Ray 2.60's
    `ray start` turns token authentication on by itself."""
    pytest.importorskip("ray", reason="needs ray (the cluster extra)")
    pytest.importorskip("grpc", reason="Ray Client needs ray[client] (grpcio)")
    home = tmp_path_factory.mktemp("head-home")
    (home / ".ray").mkdir()
    (home / ".ray" / "auth_token").write_text(secrets.token_hex(32))
    env = {name: value for name, value in os.environ.items() if not name.startswith(("RAY_AUTH_", "RAY_ADDRESS"))}
    env.update(HOME=str(home), RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    head, log, temp, client_port = start_ray_head(env, cpus=1)
    try:
        deadline = time.monotonic() + HEAD_START_S
        while "Ray runtime started" not in (temp / "head.log").read_text():
            if time.monotonic() > deadline or head.poll() is not None:
                raise RuntimeError(f"the Ray head did not start (exit status {head.poll()}): "
                                   f"{(temp / 'head.log').read_text()[-2000:]}")
            time.sleep(0.2)
        while True:  # its Ray Client server listens a moment after that
            try:
                socket.create_connection(("127.0.0.1", client_port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield f"ray://127.0.0.1:{client_port}", home
    finally:
        stop_ray_head(head, log, temp)


def test_a_default_head_that_wants_a_token_is_said_at_once(default_head, no_ray_token, monkeypatch):
    address, home = default_head

    def connects(*args, **kwargs):
        pytest.fail("ray.init was called")

    import ray

    monkeypatch.setattr(ray, "init", connects)
    from probescope.jobs.batch.ray_executor import RayExecutor

    start = time.monotonic()
    with pytest.raises(InputError) as caught:
        RayExecutor(address)  # no token on this side (a home without one)
    assert time.monotonic() - start < 30  # at once: not Ray's minute of retries (the probe waits PROBE_S at most)
    assert str(caught.value).startswith(f"the Ray cluster at {address} wants a token (Ray token authentication) and "
                                        "none is set up here: give it in RAY_AUTH_TOKEN")
    assert spec.token_problem(address, {}, home) is None  # the token is let in
    wrong = spec.token_problem(address, {"RAY_AUTH_TOKEN": "00" * 32}, home)
    assert wrong.startswith(f"the Ray cluster at {address} refused this machine's token (from RAY_AUTH_TOKEN)")
    disabled = spec.token_problem(address, {"RAY_AUTH_MODE": "disabled"}, home)
    assert disabled.endswith("and unset RAY_AUTH_MODE")


def test_a_client_with_the_token_sends_it_without_ray_auth_mode(default_head):
    """A fresh interpreter whose home has the token, RAY_AUTH_MODE unset (the docs' one-machine setup): connects."""
    address, home = default_head
    # (a Ray Client server that starts the driver's own server slowly on a loaded machine fails its init: tried
    # again, as the kernel's own head fixture does; a missing token fails every try)
    code = f"""
import os, time, ray
from probescope.jobs.kernel.spec import before_connecting
assert before_connecting({address!r}) is None
for attempt in range(3):
    try:
        ray.init({address!r}, logging_level="warning", log_to_driver=False)
        break
    except Exception:  # ConnectionAbortedError, or the server's error decoded
        ray.shutdown()
        if attempt == 2:
            raise
        time.sleep(2)
print(os.environ["RAY_AUTH_MODE"], ray.cluster_resources()["CPU"])
ray.shutdown()
"""
    env = {name: value for name, value in os.environ.items() if not name.startswith(("RAY_AUTH_", "RAY_ADDRESS"))}
    env["HOME"] = str(home)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.split() == ["token", "1.0"], done.stderr[-3000:]
