"""Run the window and kernel tests many times, two xdist workers each, with CPU-bound processes beside them, and count
the failures: a test that waits on wall-clock time instead of an event fails here first (issue 43 asks for 0 in 20).

    .venv/bin/python scripts/flake_loop.py                 # 20 runs, 2 CPU-bound processes meanwhile
    .venv/bin/python scripts/flake_loop.py --runs 5 --load 0 tests/test_kernel.py

Prints one line per run (passed, failed, seconds, load average, the tests that failed) and, at the end, each failing
test with how often it failed; exit status 1 when any run failed. A run with failures leaves its whole output in
--logs (what failed and why: a flake seen once must be readable afterwards).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TESTS = ("test_window_*.py", "test_ws_*.py", "test_app_*.py", "test_kernel.py")
FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)
COUNTS = re.compile(r"(\d+) (passed|failed|error)")


def test_files(patterns: list[str]) -> list[str]:
    """The test files the patterns name (globs under tests/, or paths)."""
    found: list[str] = []
    for pattern in patterns:
        path = Path(pattern)
        globbed = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob(pattern))
        found += [str(path)] if path.exists() else globbed
    return found


def one_run(files: list[str]) -> tuple[dict[str, int], list[str], float, str]:
    """({'passed': n, 'failed': n, 'error': n}, the failing tests, seconds, pytest's output) of one pytest run."""
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "xdist", "-n", "2", "-p", "no:logging",
                           "-p", "no:cacheprovider", "-rfE", *files], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    counts = collections.Counter({kind: 0 for kind in ("passed", "failed", "error")})
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    for n, kind in COUNTS.findall(tail):
        counts[kind] += int(n)
    failing = FAILED.findall(done.stdout)
    if done.returncode not in (0, 1) and not failing:  # pytest itself failed (collection, a crash)
        failing = [f"pytest exited {done.returncode}: {tail or done.stderr.strip()[-200:]}"]
    return dict(counts), failing, time.monotonic() - start, done.stdout + done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tests", nargs="*", default=list(DEFAULT_TESTS), help="test files or globs under tests/")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--load", type=int, default=2, help="CPU-bound processes running meanwhile")
    parser.add_argument("--logs", type=Path, default=ROOT / "flake-logs", help="folder for the output of failed runs")
    args = parser.parse_args()
    files = test_files(args.tests)
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(args.load)]
    failures: collections.Counter[str] = collections.Counter()
    bad_runs = 0
    try:
        print(f"{len(files)} test files, {args.runs} runs, 2 workers, {args.load} CPU-bound processes meanwhile; "
              f"{os.cpu_count()} cores", flush=True)
        for k in range(1, args.runs + 1):
            counts, failing, seconds, output = one_run(files)
            failures.update(failing)
            bad_runs += bool(failing)
            print(f"run {k:2d}: {counts['passed']} passed, {counts['failed']} failed, {counts['error']} errors in "
                  f"{seconds:.0f} s (load average {os.getloadavg()[0]:.1f})", flush=True)
            if failing:
                args.logs.mkdir(parents=True, exist_ok=True)
                log = args.logs / f"run-{k:02d}.txt"
                log.write_text(output, encoding="utf-8")
                print(f"        failed: {', '.join(failing)} (output in {log})", flush=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    print(f"{bad_runs} of {args.runs} runs had failures")
    for test, n in failures.most_common():
        print(f"  {n:2d}x {test}")
    return 1 if bad_runs else 0


if __name__ == "__main__":
    raise SystemExit(main())
