"""Issue 28's per-image views, what each costs: the layer's view of one image (per image), what a unit would draw
(per unit), realism, nearest reference images and copy flags (per 1,000 samples) and the data-copying test, each at
the demo's scale and at the users' scale, beside a naive implementation measured in the same run.

1. view: `segment_image` per image, against the app's per-unit mask helper (masks.image_masks, one unit at a time)
   with the drawing decided unit by unit. Demo: the demo world (1,500 images) and the demo model's layer4 (128 units,
   8x8 -> 64x64). Users': the first --drill-images images of the scale drill's ADE20K-shaped dataset
   (benchmarks/scale_data.py, 224x224 with 112x112 labels, 1,105 concepts) through the drill's ResNet-18 Places365
   checkpoint with RANDOM weights, layer4 (512 units, 7x7 -> 112x112). The cost per image does not depend on how many
   images the dataset has; the random weights change which units fire, not what firing costs.
2. vis: `visualize` per unit, 512 steps (lucid's), against the same loop with `loss.backward()` (weight gradients
   computed too, as lucent's render_vis does). Demo model layer4 at 128x128; torchvision ResNet-18 (random weights,
   no file) layer4 at 224x224 (--vis-steps of them, scaled to 512).
3. realism: `sample_neighbours` per 1,000 samples against a naive per-sample loop (np.linalg.norm to every
   reference image, a full sort). Demo: 1,000 demo-sampler images against the demo world's 1,500, the demo
   classifier's 128-d features. Users': Inception-like 2048-d features, 1,000 samples against --ref reference
   images (default 50,000: CIFAR-10's or ImageNet-val's size), and the reference's own k-NN radii (k = 3, once
   per reference and cached), timed on --radii-rows rows and scaled to the whole reference. The data-copying test
   (k-means cells, distances within cells) on --ct-samples samples.

Times are CPU seconds (time.process_time) with one torch/BLAS thread, so other jobs on a shared machine do not
distort them (the feature visualisation also gives its wall time with 2 threads). Run with `nice`.

    python benchmarks/per_image_bench.py --work /tmp/perimage-bench            # everything (about 15 CPU-minutes)
    python benchmarks/per_image_bench.py --work DIR --part realism --ref 10000
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)
HERE = Path(__file__).resolve().parent


def cpu(fn, repeat: int = 1):
    """(best CPU seconds of `repeat` runs, the last result)."""
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.process_time()
        out = fn()
        best = min(best, time.process_time() - start)
    return best, out


# ---------------------------------------------------------------------------------------------------- 1. the view
def naive_view(result, activations: np.ndarray, store, image: int, method: str, min_iou: float) -> np.ndarray:
    """One unit at a time through masks.image_masks, the winner kept pixel-array by pixel-array."""
    from probescope.core.dissection.image_view import explanation
    from probescope.core.dissection.masks import image_masks
    from probescope.core.dissection.unitmasks import upsample

    best = None
    winner = None
    for u in sorted(result.units):
        r = result.units[u]
        e = explanation(r, method)
        if e is None or e.iou < min_iou:
            continue
        mask, truth = image_masks(store, activations, u, r.threshold, image, e.formula)
        if not mask.any():
            continue
        up = upsample(np.asarray(activations[image, u])[None], mask.shape)[0].numpy()
        score = np.where(mask, up / r.threshold if r.threshold > 0 else -1e30, -np.inf)
        if best is None:
            best, winner = score, np.where(mask, u, -1)
        else:
            better = score > best
            best, winner = np.where(better, score, best), np.where(better, u, winner)
        (mask & truth).sum()  # the agreement's count, as segment_image makes it
    return winner


def view_scale(name: str, result, activations, store, images: list[int], method: str) -> None:
    from probescope.core.dissection.image_view import segment_image

    fast, views = cpu(lambda: [segment_image(result, activations[i], store=store, image=i, method=method)
                               for i in images])
    slow, _ = cpu(lambda: [naive_view(result, activations, store, i, method, 0.0) for i in images])
    fired = np.mean([len(v.units) for v in views])
    concepts = np.mean([len(v.concepts) for v in views])
    n = len(images)
    print(f"  {name}: {1000 * fast / n:.1f} ms per image ({fired:.0f} units fire, {concepts:.0f} explanations; "
          f"{n} images); naive per-unit masks {1000 * slow / n:.1f} ms: {slow / fast:.1f}x")


def bench_view(work: Path, drill_images: int) -> None:
    from probescope.core.cache import cache_dir
    from probescope.core.data.activations import extract_activations
    from probescope.core.data.broden import BrodenDataset
    from probescope.core.demo.dataset import ensure_demo_dataset
    from probescope.core.dissection.engine import dissect
    from probescope.core.dissection.labels import LabelStore
    from probescope.core.dissection.settings import DissectionSettings
    from probescope.core.models.loading import load_model

    print("1. the layer's view of one image (segment_image)")
    data = BrodenDataset.open(ensure_demo_dataset())
    activations = extract_activations(load_model("demo"), "layer4", data, cache_dir())
    store = LabelStore.build(data)
    t, result = cpu(lambda: dissect(store, activations, DissectionSettings(searches=("iou",))))
    print(f"  (demo dissection, iou search, length 3: {t:.0f} s)")
    view_scale("demo, 128 units at 8x8 -> 64x64, compositional explanations", result, activations, store,
               list(range(0, 1500, 30)), "iou")
    sys.path.insert(0, str(HERE))
    import scale_data

    root = scale_data.make_broden(work / "drill-broden", lambda m: print("   ", m), limit=drill_images)
    checkpoint = scale_data.make_checkpoints(work / "drill-models", lambda m: print("   ", m))["resnet18"]
    data = BrodenDataset.open(root, "index_ade20k.csv")
    model = load_model(f"places365:resnet18:{checkpoint}")
    t, activations = cpu(lambda: extract_activations(model, "layer4", data, work / "cache"))
    store = LabelStore.build(data)
    t2, result = cpu(lambda: dissect(store, activations, DissectionSettings(max_length=1)))
    print(f"  (drill subset: {data.n_images} images, layer4 extracted in {t:.0f} s, NetDissect labels in {t2:.0f} s)")
    view_scale("users', ResNet-18 layer4, 512 units at 7x7 -> 112x112, 1,105 concepts", result, activations, store,
               list(range(0, data.n_images, max(1, data.n_images // 40))), "netdissect")


# ------------------------------------------------------------------------------------------------ 2. visualisation
def lucent_like_steps(model, layer: str, unit: int, steps: int, size: int) -> None:
    """The same optimisation with loss.backward(): the network's weight gradients are computed and accumulated."""
    from probescope.core.featurevis import transforms
    from probescope.core.featurevis.image import FourierImage

    generator = torch.Generator().manual_seed(0)
    image = FourierImage(size, generator)
    optimizer = torch.optim.Adam([image.spectrum], lr=0.05)
    mean = torch.tensor(model.preprocess.mean).view(1, 3, 1, 1)
    std = torch.tensor(model.preprocess.std).view(1, 3, 1, 1)
    out = {}
    handle = dict(model.module.named_modules())[layer].register_forward_hook(lambda m, i, o: out.update(a=o))
    try:
        for _ in range(steps):
            optimizer.zero_grad()
            model.module((255 * transforms.standard(image(), generator) - mean) / std)
            (-out["a"][0, unit].mean()).backward()
            optimizer.step()
    finally:
        handle.remove()
        model.module.zero_grad(set_to_none=True)


def bench_vis(vis_steps: int) -> None:
    import torchvision

    from probescope.core.data.preprocess import IMAGENET
    from probescope.core.featurevis.render import visualize
    from probescope.core.featurevis.settings import Direction, VisSettings
    from probescope.core.models.loading import LoadedModel, load_model

    print("2. what a unit would draw (visualize, 512 steps = lucid's)")
    torch.manual_seed(0)
    resnet = LoadedModel(torchvision.models.resnet18(weights=None).eval(), "resnet18", "resnet18", IMAGENET, None,
                         (224, 224), None, "random weights", "layer4")
    cases = (("demo model layer4, 128x128", load_model("demo"), 128, 512),
             ("ResNet-18 (random weights) layer4, 224x224", resnet, 512, vis_steps))
    for name, model, units, steps in cases:
        direction = Direction.unit(3, units)
        t, _ = cpu(lambda m=model, d=direction, s=steps: visualize(m, "layer4", d, VisSettings(steps=s)))
        few = max(8, steps // 8)
        naive, _ = cpu(lambda m=model, f=few: lucent_like_steps(m, "layer4", 3, f, m.input_size[0]))
        naive *= steps / few
        torch.set_num_threads(2)
        start = time.perf_counter()
        visualize(model, "layer4", direction, VisSettings(steps=few))
        wall2 = (time.perf_counter() - start) * steps / few
        torch.set_num_threads(1)
        per_unit = 512 / steps
        timed = "" if steps == 512 else f", {steps} steps timed"
        print(f"  {name}: {t * per_unit:.1f} CPU s per unit (1 thread; {1000 * t / steps:.0f} ms a step{timed}), "
              f"2 threads {wall2 * per_unit:.1f} s wall; with weight gradients (lucent's backward) "
              f"{naive * per_unit:.1f} s: {naive / t:.2f}x")


# ------------------------------------------------------------------------------------------------ 3. realism etc.
def naive_neighbours(generated: np.ndarray, real: np.ndarray, radii: np.ndarray, calibration, k: int) -> None:
    kept = radii <= np.percentile(radii, 50)
    searched = calibration.searched
    held = calibration.held_out_distances
    for g in generated:
        d = np.linalg.norm(real.astype(np.float64) - g, axis=1)
        np.argsort(d, kind="stable")[:k]
        (radii[kept] / (d[kept] + 1e-5)).max()
        (1 + (held <= d[searched].min()).sum()) / (len(held) + 1)


def inception_like(rng: np.random.Generator, n: int, centres: np.ndarray, mixing: np.ndarray) -> np.ndarray:
    """Non-negative, correlated features around a few clusters, as Inception pool features are (every set drawn
    with the same centres and mixing comes from one distribution)."""
    z = centres[rng.integers(0, len(centres), n)] + 0.7 * rng.normal(size=(n, centres.shape[1]))
    return np.maximum(z @ mixing + 0.3 * rng.normal(size=(n, mixing.shape[1])), 0).astype(np.float32)


def realism_scale(name: str, generated: np.ndarray, real: np.ndarray, radii_rows: int, ct_samples: int,
                  held: np.ndarray) -> None:
    """Per 1,000 of the first 1,000 `generated`, and C_T of the first `ct_samples`."""
    from probescope.core.scoring.copy_test import set_aside_calibration
    from probescope.core.scoring.copying import data_copying
    from probescope.core.scoring.precision_recall import distance_blocks
    from probescope.core.scoring.realism import sample_neighbours

    rows = min(radii_rows, len(real))  # the reference's radii, k = 3 (ReferenceSet.radii_of),
    t_radii, parts = cpu(lambda: [np.partition(dist, (1, 3), axis=1)[:, [1, 3]]  # for `rows` images, scaled
                                  for _, dist in distance_blocks(real[:rows], real)])
    t_radii *= len(real) / rows
    timed = np.concatenate(parts)
    if rows < len(real):  # every image's radii drawn from the timed ones'
        timed = timed[np.random.default_rng(1).integers(0, rows, len(real))]
    radii = timed[:, 1]
    q = generated[:ct_samples]
    generated = generated[:1000]
    n = len(generated)
    t_cal, calibration = cpu(lambda: set_aside_calibration(real))  # once per reference, like its radii
    t, nb = cpu(lambda: sample_neighbours(generated, real, 3, real_radii=radii, calibration=calibration))
    few = generated[:100]
    slow, _ = cpu(lambda: naive_neighbours(few, real, radii, calibration, 3))
    slow *= n / len(few)
    scaled = "" if rows == len(real) else f" ({rows:,} rows timed)"
    print(f"  {name}: {t * 1000 / n:.2f} CPU s per 1,000 samples against {len(real):,} reference images "
          f"({real.shape[1]}-d), {nb.copies} of {n} flagged; naive per-sample loop {slow * 1000 / n:.2f} s: "
          f"{slow / t:.1f}x; the reference's own radii (k = 3, once, cached) {t_radii:.1f} s{scaled}; the copy test's "
          f"calibration (20% set aside, once) {t_cal:.1f} s")
    t_ct, ct = cpu(lambda: data_copying(real, held, q, cells=10))
    print(f"  {name}: data-copying C_T over 10 cells {t_ct:.1f} CPU s for {len(q):,} samples "
          f"({t_ct * 1000 / len(q):.2f} s per 1,000; {len(held):,} held-out), C_T = {ct.statistic:.2f}")


def bench_realism(n_ref: int, radii_rows: int, ct_samples: int) -> None:
    from probescope.core.demo import world
    from probescope.core.demo.sampler import DemoSampler
    from probescope.core.scoring.classifiers import load_classifier
    from probescope.core.scoring.pipeline import embed_source
    from probescope.core.scoring.reference import load_reference
    from probescope.core.scoring.sources import ArraySource

    print("3. realism, nearest reference images, copy flags (sample_neighbours) and C_T")
    classifier = load_classifier("demo")
    reference = load_reference("demo", classifier)
    generated, _ = embed_source(DemoSampler(1000, seed=1), classifier)
    held, _ = embed_source(ArraySource(np.stack([s.image for s in world.render_batch(77, 500)])), classifier)
    realism_scale("demo, 1,000 samples", generated, reference.features, len(reference.features), 1000, held)
    rng = np.random.default_rng(0)
    centres, mixing = rng.normal(size=(20, 64)), rng.normal(size=(64, 2048)) / 8
    real = inception_like(rng, n_ref, centres, mixing)
    generated = inception_like(rng, max(1000, ct_samples), centres, mixing)
    held = inception_like(rng, min(10_000, n_ref // 5), centres, mixing)
    realism_scale("users', Inception-like", generated, real, radii_rows, ct_samples, held)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="folder for the drill subset and its caches")
    parser.add_argument("--part", choices=["view", "vis", "realism", "all"], default="all")
    parser.add_argument("--drill-images", type=int, default=300, help="images of the drill's dataset for part 1")
    parser.add_argument("--vis-steps", type=int, default=64, help="ResNet-18 steps timed (scaled to 512)")
    parser.add_argument("--ref", type=int, default=50_000, help="reference images at the users' scale")
    parser.add_argument("--radii-rows", type=int, default=2_000, help="reference rows whose radii are timed")
    parser.add_argument("--ct-samples", type=int, default=5_000, help="samples of the users'-scale C_T")
    args = parser.parse_args()
    os.environ.setdefault("PROBESCOPE_CACHE", str(args.work / "cache"))
    args.work.mkdir(parents=True, exist_ok=True)
    if args.part in ("view", "all"):
        bench_view(args.work, args.drill_images)
    if args.part in ("vis", "all"):
        bench_vis(args.vis_steps)
    if args.part in ("realism", "all"):
        bench_realism(args.ref, args.radii_rows, args.ct_samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
