"""Ablating every unit of a 512-unit layer one at a time: the tail-only path against full forward passes.

A torchvision ResNet-18 with random weights (365 outputs, as Places365; 14 of them named after the demo scenes so
the images have true classes) looks at `--images` demo-world images stretched to `--size` (224: layer4 is 512 units
on a 7x7 grid, as in the papers). The tail path ablates all 512 units of layer4 on the cached activations (avgpool +
fc per unit); the full-forward path (a hook zeroing the unit in complete forward passes, what a model without a
separable tail costs) ablates `--full-units` of them in the same run. Both measure the unablated model first, outside
the timing. The script checks that both paths give the same per-class numbers for the units both ran, and prints
seconds per unit and the ratio (the full path's 512-unit time is its per-unit time times 512 unless
`--full-units 512`).

    python benchmarks/ablation_bench.py                       # a few minutes on one core
    python benchmarks/ablation_bench.py --images 200 --full-units 2 --size 128

Both sides run single-threaded (torch threads = 1), so the ratio compares the work done, not cores. Times are CPU
seconds of this process (time.process_time), so other jobs on a shared machine do not distort them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402

from probescope.core.ablation.ablate import LayerAblation  # noqa: E402
from probescope.core.ablation.groups import each_unit  # noqa: E402
from probescope.core.data.activations import extract_activations  # noqa: E402
from probescope.core.data.broden import BrodenDataset  # noqa: E402
from probescope.core.data.preprocess import IMAGENET  # noqa: E402
from probescope.core.demo.dataset import write_demo_dataset  # noqa: E402
from probescope.core.demo.world import SCENES  # noqa: E402
from probescope.core.dissection.correlation import scene_truth  # noqa: E402
from probescope.core.models.loading import load_model  # noqa: E402


def timed(fn):
    start = time.process_time()
    out = fn()
    return out, time.process_time() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, default=300)
    p.add_argument("--size", type=int, default=224, help="images are stretched to size x size (224: layer4 7x7)")
    p.add_argument("--full-units", type=int, default=4, help="units the full-forward path also ablates (slow)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--classes", type=int, default=365)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_demo_dataset(root / "data", n_images=args.images)
        torch.save(torchvision.models.resnet18(num_classes=args.classes).state_dict(), root / "r18.pth")
        names = list(SCENES) + [f"class_{k}" for k in range(len(SCENES), args.classes)]
        model = load_model(f"resnet18:{root / 'r18.pth'}", class_names=names,
                           preprocess=IMAGENET.with_resize("stretch", args.size))
        dataset = BrodenDataset.open(root / "data")
        truth = scene_truth(dataset, names)
        act, t_extract = timed(lambda: extract_activations(model, "layer4", dataset, None,
                                                           batch_size=args.batch_size, workers=1))
        n_units = act.shape[1]
        print(f"ResNet-18 (random weights, {args.classes} classes) layer4: {n_units} units on "
              f"{act.shape[2]}x{act.shape[3]}, {args.images} images at {args.size}x{args.size}; extracting the "
              f"activations once: {t_extract:.1f} s")

        def prepared(path: str) -> LayerAblation:
            ablation = LayerAblation(model, "layer4", act, dataset, truth, names, path=path,
                                     batch_size=args.batch_size)
            ablation.run([])  # the unablated model, measured once per LayerAblation: outside the timing
            return ablation

        tail = prepared("tail")
        fast, t_tail = timed(lambda: tail.run(each_unit(range(n_units))))
        full_units = list(np.linspace(0, n_units - 1, min(args.full_units, n_units)).round().astype(int))
        slow, t_full = timed(lambda: prepared("hook").run(each_unit(full_units)))

    rows = [fast.group_of_unit(u) for u in full_units]
    assert np.array_equal(fast.correct_after[rows], slow.correct_after), "the paths disagree on accuracies"
    worst = float(np.abs(fast.p_true_after[rows] - slow.p_true_after).max())
    assert worst < 1e-4, f"the paths disagree on p(true class) by {worst}"
    per_tail, per_full = t_tail / n_units, t_full / len(full_units)
    print(f"tail only ({fast.path_note}): {n_units} units in {t_tail:.2f} s, {1e3 * per_tail:.2f} ms per unit")
    print(f"full forward: {len(full_units)} units in {t_full:.1f} s, {per_full:.2f} s per unit"
          + ("" if len(full_units) == n_units else f" (all {n_units}: {per_full * n_units / 60:.1f} min, estimated)"))
    print(f"same per-class numbers on the {len(full_units)} units both ran (largest p(true) difference "
          f"{worst:.1e})")
    print(f"ratio: the tail-only path is {per_full / per_tail:.0f}x faster per unit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
