"""The calibrated copy test (core/scoring/copy_test.py) on the demo world: how often it flags honest samples, copies
and near-copies, beside the rule it replaced ("closer to a reference image than that image's nearest other
reference image") on the same features.

Reference: the demo world's 1,500 images (the demo dataset). Held-out: --held-out fresh demo-world renders (seed
101), or a part of the reference set aside (--set-aside). Features: the demo classifier's 128-d pool (trained on the
demo world: trained-like features). Sample sets, --n each:
  fresh renders (seed 202: real images not in the reference), the demo sampler at diversity 14, 7 and 1 (fidelity 1)
  and at fidelity 0.7, exact copies of reference images, and near-copies of them: flipped left-right, cropped by 10%
  (centre crop of 90%, resized back), JPEG at quality 75, colour-jittered (brightness, contrast and saturation each
  by a random factor in [0.8, 1.2]), pixel noise of +-6.

For each: the flagged share at alpha with its Clopper-Pearson 95% interval, the share of flagged copies whose
nearest reference image is their own original, and the old rule's share.

    python benchmarks/copy_test_bench.py                 # about a minute on 2 cores
    python benchmarks/copy_test_bench.py --set-aside --alpha 0.05
"""

from __future__ import annotations

import argparse
import io
import time

import numpy as np
from PIL import Image, ImageEnhance


def flipped(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.ascontiguousarray(image[:, ::-1])


def cropped(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    h, w = image.shape[:2]
    dh, dw = round(0.05 * h), round(0.05 * w)
    part = Image.fromarray(image[dh : h - dh, dw : w - dw])
    return np.asarray(part.resize((w, h), Image.Resampling.BILINEAR))


def jpeg(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "JPEG", quality=75)
    return np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))


def jittered(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    out = Image.fromarray(image)
    for enhance in (ImageEnhance.Brightness, ImageEnhance.Contrast, ImageEnhance.Color):
        out = enhance(out).enhance(float(rng.uniform(0.8, 1.2)))
    return np.asarray(out)


def noisy(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.clip(image.astype(int) + rng.integers(-6, 7, image.shape), 0, 255).astype(np.uint8)


def old_rule(generated: np.ndarray, real: np.ndarray) -> float:
    """The share flagged by the replaced rule: |g - r_j| < NN_1(r_j) for some j."""
    from probescope.core.scoring.precision_recall import distance_blocks, knn_radii

    nn1 = knn_radii(real, 1)
    flagged = [((dist < nn1[None, :]) & (nn1[None, :] > 0)).any(axis=1) for _, dist in distance_blocks(generated, real)]
    return float(np.concatenate(flagged).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="samples per set (default 1,000)")
    parser.add_argument("--held-out", type=int, default=1000, help="fresh renders held out (default 1,000)")
    parser.add_argument("--set-aside", action="store_true", help="calibrate on 20%% of the reference set aside")
    parser.add_argument("--alpha", type=float, default=0.01)
    args = parser.parse_args()

    from probescope.core.demo import world
    from probescope.core.demo.dataset import ensure_demo_dataset
    from probescope.core.demo.sampler import DemoSampler
    from probescope.core.scoring.classifiers import load_classifier
    from probescope.core.scoring.copy_test import calibrate, clopper_pearson, set_aside_calibration
    from probescope.core.scoring.pipeline import embed_source
    from probescope.core.scoring.realism import sample_neighbours
    from probescope.core.scoring.reference import BrodenImageSource
    from probescope.core.scoring.sources import ArraySource

    start = time.perf_counter()
    classifier = load_classifier("demo")
    source = BrodenImageSource(ensure_demo_dataset())
    real_images = np.stack([source.dataset.load_image(i) for i in range(source.length)])
    real = embed_source(source, classifier)[0]

    def features(images: np.ndarray) -> np.ndarray:
        return embed_source(ArraySource(images), classifier)[0]

    if args.set_aside:
        calibration = set_aside_calibration(real, alpha=args.alpha)
    else:
        held = features(np.stack([s.image for s in world.render_batch(101, args.held_out)]))
        calibration = calibrate(real, held, alpha=args.alpha, held_out_note=f"{args.held_out} fresh renders")
    print(f"reference: the demo world's {len(real)} images; demo classifier features ({real.shape[1]}-d); "
          f"alpha {args.alpha}; held out: {calibration.held_out or 'given'} ({len(calibration.held_out_distances)})")
    rng = np.random.default_rng(0)
    searched = calibration.searched if calibration.searched is not None else np.arange(len(real))
    originals = rng.choice(searched, args.n, replace=len(searched) < args.n)  # copies of images the test searches
    sets: dict[str, tuple[np.ndarray, np.ndarray | None]] = {
        "fresh renders": (features(np.stack([s.image for s in world.render_batch(202, args.n)])), None)}
    for diversity, fidelity in ((14, 1.0), (7, 1.0), (1, 1.0), (14, 0.7)):
        sampler = DemoSampler(args.n, diversity=diversity, fidelity=fidelity, seed=7)
        sets[f"sampler d{diversity} f{fidelity}"] = (embed_source(sampler, classifier)[0], None)
    for name, transform in (("exact copies", None), ("flipped", flipped), ("cropped 10%", cropped),
                            ("JPEG q75", jpeg), ("colour-jittered", jittered), ("noise +-6", noisy)):
        images = real_images[originals]
        if transform is not None:
            images = np.stack([transform(im, rng) for im in images])
        sets[name] = (features(images), originals)
    print(f"{'samples':22s} {'flagged':>8s} {'95% CI':>16s} {'own original':>13s} {'old rule':>9s}")
    for name, (generated, own) in sets.items():
        result = sample_neighbours(generated, real, 3, calibration=calibration).copy
        lo, hi = clopper_pearson(result.flagged_count, result.samples)
        found = "" if own is None or not result.flagged_count else \
            f"{(result.nearest[result.flagged] == own[result.flagged]).mean():.1%}"
        print(f"{name:22s} {result.flagged_share:8.1%} {f'{lo:.1%}-{hi:.1%}':>16s} {found:>13s} "
              f"{old_rule(generated, real):9.1%}")
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
