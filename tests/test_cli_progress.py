"""Command progress: a live line on a terminal, whole lines in a log (a pipe, a file, a cluster job's output)."""

from __future__ import annotations

import io
import os
import subprocess
import sys

from probescope.cli import progress as p


def _run_units(report, n: int = 500) -> None:
    report(0.0, "reading label maps")
    report(1.0, "reading label maps")
    for u in range(n):
        report(u / n, f"unit {u} ({u + 1}/{n})")
    report(1.0, f"dissected {n} units")


def test_a_log_gets_one_line_per_stage_and_no_carriage_returns():
    log = io.StringIO()
    _run_units(p.stderr_progress(stream=log))
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert lines == ["  0.0% reading label maps", "100.0% reading label maps", "  0.0% unit 0 (1/500)",
                     "100.0% dissected 500 units"]


def test_a_long_stage_in_a_log_is_reported_every_interval(monkeypatch):
    clock = iter(float(t) for t in range(10_000))
    monkeypatch.setattr(p.time, "monotonic", lambda: next(clock) * p.LOG_INTERVAL_S / 4)
    log = io.StringIO()
    _run_units(p.stderr_progress("layer4", stream=log), n=40)
    units = [line for line in log.getvalue().splitlines() if " unit " in line]
    assert len(units) == 10 and all(line.startswith("layer4 ") for line in units)  # one in every 4 updates


def test_a_terminal_gets_one_line_rewritten_in_place():
    main, side = os.openpty()
    with os.fdopen(side, "w") as terminal:
        report = p.stderr_progress(stream=terminal)
        _run_units(report, n=3)
        p.end_progress_line()
    shown = b""
    while True:  # a pty hands what was written over in pieces: read to its end (EIO once the other side is closed)
        try:
            piece = os.read(main, 65536)
        except OSError:
            break
        if not piece:
            break
        shown += piece
    shown = shown.decode()
    os.close(main)
    assert shown.count("\n") == 1 and shown.endswith("\n")  # one line, ended once
    assert shown.replace("\r\n", "").count("\r") == 6  # each of the 6 updates rewrote it


def test_a_command_piped_to_a_file_logs_whole_lines(tmp_path):
    """The real command with its stderr in a file: lines, not a carriage-return stream."""
    out = tmp_path / "demo"
    run = subprocess.run([sys.executable, "-m", "probescope", "demo-data", str(out), "--images", "40"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "\r" not in run.stderr
