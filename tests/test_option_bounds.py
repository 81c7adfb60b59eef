"""Every numeric option of every command is bounded by what it can mean, and an absurd value is refused in one line
before anything is allocated: the whole table runs in a child process under an address-space limit
(RLIMIT_AS), where `embed --dims 2-2000000000` used to build two billion integers and end in MemoryError.

The table is read from the commands' parsers themselves, so an option added later without a bound fails
`test_every_numeric_option_has_a_bound`; bounds that depend on the data (dimensions at most the number of
stimuli, units below the layer's width, splits at most N) have a table of their own, run on small real data.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from probescope.jobs.arguments import BoundedArg, NumbersArg, RangesArg
from probescope.main import build_parser

ADDRESS_SPACE = 8 << 30  # torch alone reserves about 3.4 GB of address space; every absurd request is far beyond

# options that take text which is not a number (names, paths, specs, lists of words)
NOT_NUMERIC = {
    "gui": {"workspace", "model", "dataset", "batch", "samples", "judgments", "catalog", "image_root", "device",
            "theme", "screenshot", "view", "panel", "settings", "trust", "kernel"},
    "demo-data": {"dir"},
    "info": {"spec", "index", "trust", "class_names", "preprocess"},
    "dissect": {"dataset", "index", "source", "activations", "model", "layer", "trust", "out", "searches",
                "beam_dedupe", "iou_scope", "device", "predictions", "class_names", "label_map", "layout"},
    "ablate": {"model", "layer", "dataset", "index", "source", "concept", "dissection", "mode", "path",
               "class_names", "label_map", "device", "trust", "out", "layout"},
    "batch": {"manifest", "out", "ray", "trust"},
    "score": {"probs", "logits", "images", "generator", "example", "classifier", "device", "extensions",
              "save_logits", "fid", "save_stats", "trust", "per_image", "held_out", "features"},
    "similarity": {"judgments", "catalog", "images", "features", "model", "layer", "preprocess", "pool", "distance",
                   "layout",
                   "embedding", "device", "trust"},
    "embed": {"judgments", "catalog", "images", "out", "init", "coarse", "device"},
    "propose": {"judgments", "catalog", "images", "embedding", "out", "device"},
}
FLAGS = (argparse._HelpAction, argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._VersionAction)


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def _options():
    """(command, action) for every option that takes a value."""
    for command, sub in _subparsers().items():
        for action in sub._actions:
            if not isinstance(action, FLAGS):
                yield command, action


def test_every_numeric_option_has_a_bound():
    """An option is a bounded number, a choice, or text listed above as not numeric: nothing else."""
    unbounded = []
    for command, action in _options():
        bounded = isinstance(action.type, BoundedArg | NumbersArg | RangesArg) or action.choices is not None
        if not bounded and action.dest not in NOT_NUMERIC[command]:
            unbounded.append(f"{command} {action.option_strings or action.dest} ({action.type})")
    assert not unbounded
    assert set(NOT_NUMERIC) == set(_subparsers())


def _absurd(kind) -> list[str]:
    """Values of an option's type that mean nothing: just past each end, far past, not finite."""
    if isinstance(kind, RangesArg):
        return [f"0-{kind.bound.high + 1}", "7-3", "0-" + "9" * 50]
    if isinstance(kind, NumbersArg):
        base = [str(b.low) for b in kind.bounds]
        out = []
        for i, bound in enumerate(kind.bounds):
            for bad in (bound.high * 10 + 1, "nan"):
                parts = list(base)
                parts[i] = str(bad)
                out.append(kind.sep.join(parts))
        return out + [kind.sep.join(base + base)]
    bound = kind.bound
    out = [str(bound.high + 1 if bound.kind is int else bound.high * 2 + 1), str(bound.low - 1), "1" + "0" * 30]
    return out + (["nan", "inf", "1e400"] if bound.kind is float else ["2.5"])


def _static_cases() -> list[tuple[list[str], str]]:
    cases = []
    for command, action in _options():
        if isinstance(action.type, BoundedArg | NumbersArg | RangesArg):
            flag = action.option_strings[-1]
            cases += [([command, f"{flag}={value}"], flag) for value in _absurd(action.type)]
    return cases


CHILD = textwrap.dedent("""
    import contextlib, io, json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
    from probescope.main import main
    results = []
    for argv in json.load(sys.stdin):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
            except BaseException as exc:
                code = repr(exc)
        results.append((code, err.getvalue()))
    json.dump(results, sys.stdout)
""")


def _run_limited(argvs: list[list[str]], tmp_path) -> list[tuple[object, str]]:
    env = {**os.environ, "PROBESCOPE_CACHE": str(tmp_path / "cache"), "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", CHILD.format(limit=ADDRESS_SPACE)], input=json.dumps(argvs),
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _check_refusals(cases, results) -> None:
    wrong = []
    for (argv, flag), (code, err) in zip(cases, results):
        errors = [line for line in err.splitlines() if "error" in line.lower() or "Traceback" in line]
        if code != 2 or len(errors) != 1 or flag not in errors[0] or "Memory" in err:
            wrong.append(f"{' '.join(argv)} -> {code}: {err.strip()[-300:]}")
    assert not wrong, "\n".join(wrong)


def test_absurd_values_of_every_option_are_refused_in_one_line(tmp_path):
    cases = _static_cases()
    assert len(cases) > 150  # the table covers every command (about 60 options)
    _check_refusals(cases, _run_limited([argv for argv, _ in cases], tmp_path))


def test_bounds_that_depend_on_the_data_are_checked_before_allocating(small_world, tmp_path):
    """Dimensions at most the stimuli, units below the layer's width, splits at most N, neighbours fewer than the
    stimuli, kept trials at most the candidates, a resize within an image side: all on small real data."""
    from probescope.main import main

    w = small_world
    judgments = ["--judgments", str(w["judgments"]), "--catalog", str(w["catalog"])]
    embedding = tmp_path / "emb.npz"
    assert main(["embed", *judgments, "--dims", "2", "--ensemble", "1", "--max-epochs", "5", "--out",
                 str(embedding), "--json"]) == 0
    activations = tmp_path / "act.npy"
    np.save(activations, np.random.default_rng(0).random((12, 4, 3, 3), dtype=np.float32))
    dataset = ["--dataset", str(w["dataset"])]
    cases = [
        (["embed", *judgments, "--dims", "2-2000000000", "--out", str(tmp_path / "e.npz")], "--dims"),
        (["dissect", *dataset, "--activations", str(activations), "--out", str(tmp_path / "d"), "--units",
          "0-2000000000"], "--units"),
        (["ablate", "--model", w["model"], *dataset, "--out", str(tmp_path / "a"), "--each", "--top-units",
          "2000000000"], "--top-units"),
        (["score", "--images", "demo", "--n", "10", "--splits", "11"], "--splits"),
        (["propose", *judgments, "--embedding", str(embedding), "--out", str(tmp_path / "p.csv"), "--neighbors",
          "10000"], "--neighbors"),
        (["propose", *judgments, "--embedding", str(embedding), "--out", str(tmp_path / "p.csv"), "--candidates",
          "10", "--keep", "11"], "--keep"),
        (["info", "demo", "--preprocess", "imagenet:crop=2000000000"], "preprocessing"),
        (["similarity", *judgments, "--model", w["model"], "--layer", "layer4", "--preprocess",
          "classic:stretch=99999999999"], "preprocessing"),
    ]
    _check_refusals(cases, _run_limited([argv for argv, _ in cases], tmp_path))


@pytest.mark.parametrize("argv", [["embed", "--dims", "2-2000000000"], ["dissect", "--units", "0-2000000000"]])
def test_ranges_are_kept_as_ranges_until_the_data_bounds_them(argv):
    """Parsing an absurd range costs nothing: the two billion numbers are never built."""
    sub = _subparsers()[argv[0]]
    action = next(a for a in sub._actions if argv[1] in a.option_strings)
    ranges = action.type(argv[2])
    assert ranges.ranges[0][1] == 2_000_000_000 and ranges.highest == 2_000_000_000
