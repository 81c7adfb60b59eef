"""The scale drill's inputs, written once at the users' scale from seeded generators (no downloads), through the
package's own writers, resumably (each part records what it finished; a killed run continues where it stopped).

- broden/: a Broden-format probing dataset shaped like Broden's ADE20K rows: 22,210 JPEG images at 224x224
  (20,210 'train' + 2,000 'val', paths ade20k/ADE_*.jpg), label PNGs at 112x112, 1,105 concepts (11 colours,
  640 objects, 200 parts on three part layers, 254 scenes) with Zipf frequencies like ADE20K's (a few objects in
  most images, a long tail in a handful), part layers in about half the images, a scene on 96% of them; index.csv
  and index_ade20k.csv (the same rows: every row is an ADE20K row). The pictures are random polygons in each
  object's colour with noise: they look like nothing, they only have ADE20K's sizes, counts and file volumes.
- models/: resnet18_places365.pth.tar and densenet161_places365.pth.tar in the Places365 release's layout
  ({epoch, arch, state_dict, best_prec1}, `module.` keys, DenseNet's old `norm.1` names, 365 classes) holding
  RANDOM weights (seeded): the point is the shapes and volumes (512 units at 7x7 in layer4, 2,208 in DenseNet's
  features), not what the units detect. categories_places365.txt names the 365 classes; 254 of them are the
  dataset's scene names, so predictions meet true labels as they do on the real data.
- judgments/: 50,000 stimuli (47,500 demo-world renders at 128x128 as ImageNet-style JPEG paths, and 2,500 mirrored
  copies for catch trials), 312,500 SIMULATED 8-rank-2 trials in 6,250 sessions of 50 (4 catch trials each, 15%
  careless participants, log-normal response times) answered by the Luce model over a 6-D space derived from the
  renders' attributes; psiz 0.4 HDF5 (obs-drill.hdf5) and catalog.hdf5 through the package's writers.
- samples.npz: 50,000 demo-sampler images at 128x128 (uint8, uncompressed .npz as np.savez writes it).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from probescope.core.atomic import write_json, write_text
from probescope.core.data.broden import Label
from probescope.core.data.broden_write import BrodenImage, WrittenImage, write_image, write_tables

SEED = 2024
N_TRAIN, N_VAL = 20_210, 2_000
IMAGE, SEG = 224, 112
COLOR_RGB = {
    "black-c": (22, 22, 26), "blue-c": (45, 85, 205), "brown-c": (122, 74, 34), "green-c": (46, 150, 58),
    "grey-c": (128, 128, 132), "orange-c": (238, 134, 24), "pink-c": (240, 150, 192), "purple-c": (128, 52, 160),
    "red-c": (206, 32, 30), "white-c": (238, 238, 236), "yellow-c": (238, 214, 44),
}
N_OBJECTS, N_SCENES = 640, 254
PART_LEVELS = (150, 40, 10)  # parts of objects, parts of those parts, parts of those
PARENT_OBJECTS = 60  # the most frequent objects carry the level-1 parts
OBJECT_ZIPF = (3.5, 1.3)  # presence probability of the k-th object: min(0.85, a * k^-b)
PART_IMAGES = 0.5  # share of images annotated with parts
NO_SCENE = 0.04
CHUNK = 1000  # images per resumable chunk

N_STIMULI, N_MIRRORED = 50_000, 2_500
N_SESSIONS, SESSION_TRIALS = 6_250, 50
CATCH_SLOTS = (4, 13, 33, 44)
N_COARSE = 2_000
N_SAMPLES = 50_000
SIMULATED_NOTE = "SIMULATED judgments of the probescope scale drill: not human data"

Progress = Callable[[str], None]


# ------------------------------------------------------------------------------------------------- Broden / ADE20K
def broden_labels() -> list[Label]:
    """1..11 colours, then objects, parts (by level) and scenes: 1,105 concepts."""
    rows = [(name, "color") for name in COLOR_RGB]
    rows += [(f"object{k:03d}", "object") for k in range(N_OBJECTS)]
    rows += [(f"part{k:03d}", "part") for k in range(sum(PART_LEVELS))]
    rows += [(f"{place}-s", "scene") for place in place_names()[:N_SCENES]]
    return [Label(i + 1, name, category) for i, (name, category) in enumerate(rows)]


def place_names() -> list[str]:
    return [f"place{k:03d}" for k in range(365)]


class _World:
    """Fixed per-concept properties (seeded): object colours, part parents, frequencies."""

    def __init__(self) -> None:
        rng = np.random.default_rng([SEED, 0])
        labels = broden_labels()
        self.color_numbers = np.array([lb.number for lb in labels if lb.category == "color"])
        self.object_numbers = np.array([lb.number for lb in labels if lb.category == "object"])
        self.part_numbers = np.array([lb.number for lb in labels if lb.category == "part"])
        self.scene_numbers = np.array([lb.number for lb in labels if lb.category == "scene"])
        self.palette = np.array(list(COLOR_RGB.values()), np.float32)
        self.object_rgb = rng.integers(20, 236, (N_OBJECTS, 3))
        rank = np.arange(1, N_OBJECTS + 1)
        self.object_p = np.minimum(0.85, OBJECT_ZIPF[0] * rank ** -OBJECT_ZIPF[1])
        self.object_area = 0.5 * rank ** -0.35  # frequent objects are big (walls, floors, sky)
        scene_w = 1.0 / np.arange(1, N_SCENES + 1)
        self.scene_p = scene_w / scene_w.sum()
        # part k's parent: level 1 -> an object among the first PARENT_OBJECTS, deeper levels -> a part one level up
        self.children: dict[tuple[str, int], list[int]] = {}
        start = 0
        for level, count in enumerate(PART_LEVELS):
            for j in range(count):
                parent = ("object", j % PARENT_OBJECTS) if level == 0 else (
                    "part", start - PART_LEVELS[level - 1] + j % PART_LEVELS[level - 1])
                self.children.setdefault(parent, []).append(start + j)
            start += count
        self.part_level = np.repeat(np.arange(len(PART_LEVELS)), PART_LEVELS)


def _shape(rng: np.random.Generator, area: float, box: tuple[float, float, float, float] | None = None) -> list:
    """A random polygon of about `area` (share of the image), inside `box` (x0, y0, x1, y1 in [0, 1]) if given."""
    x0, y0, x1, y1 = box or (0.0, 0.0, 1.0, 1.0)
    cx, cy = rng.uniform(x0, x1), rng.uniform(y0, y1)
    radius = math.sqrt(area / math.pi) * min(1.0, 2 * max(x1 - x0, y1 - y0))
    n = int(rng.integers(5, 10))
    angles = np.sort(rng.uniform(0, 2 * math.pi, n))
    radii = radius * rng.uniform(0.6, 1.4, n)
    return [(float(cx + r * math.cos(a)), float(cy + r * math.sin(a))) for a, r in zip(angles, radii)]


def _scaled(points: list, size: int) -> list:
    return [(x * size, y * size) for x, y in points]


def broden_image(world: _World, i: int) -> BrodenImage:
    """Image i, from its own seed: objects as polygons (big frequent ones first), parts inside them, a scene."""
    rng = np.random.default_rng([SEED, 1, i])
    present = np.flatnonzero(rng.random(N_OBJECTS) < world.object_p)
    if not len(present):
        present = np.array([0])
    present = present[np.argsort(-world.object_area[present] * rng.uniform(0.7, 1.3, len(present)))]
    image = Image.new("RGB", (IMAGE, IMAGE), tuple(int(v) for v in world.object_rgb[present[0]]))
    objects = Image.new("I", (SEG, SEG), int(world.object_numbers[present[0]]))
    draw_image, draw_objects = ImageDraw.Draw(image), ImageDraw.Draw(objects)
    shapes = {}
    for k in present[1:]:
        poly = _shape(rng, float(world.object_area[k]) * rng.uniform(0.3, 1.5))
        rgb = tuple(int(v) for v in np.clip(world.object_rgb[k] + rng.normal(0, 12, 3), 0, 255))
        draw_image.polygon(_scaled(poly, IMAGE), fill=rgb)
        draw_objects.polygon(_scaled(poly, SEG), fill=int(world.object_numbers[k]))
        shapes[int(k)] = poly
    object_map = np.asarray(objects, np.int32).copy()
    part_maps = [np.zeros((SEG, SEG), np.int32) for _ in PART_LEVELS]
    pixels = np.asarray(image, np.float32).copy()
    if rng.random() < PART_IMAGES:
        _draw_parts(world, rng, object_map, shapes, part_maps, pixels)
    yy = np.linspace(-1, 1, IMAGE, dtype=np.float32)[:, None, None]
    pixels = pixels * (1 + 0.15 * yy * rng.uniform(-1, 1)) + rng.normal(0, 7, pixels.shape).astype(np.float32)
    pixels = np.clip(pixels, 0, 255).astype(np.uint8)
    small = pixels.reshape(SEG, 2, SEG, 2, 3).mean(axis=(1, 3))
    nearest = ((small[:, :, None, :] - world.palette[None, None]) ** 2).sum(-1).argmin(-1)
    color_map = world.color_numbers[nearest].astype(np.int32)
    scene = [] if rng.random() < NO_SCENE else [int(world.scene_numbers[rng.choice(N_SCENES, p=world.scene_p)])]
    val = i >= N_TRAIN
    name = f"ade20k/ADE_val_{i - N_TRAIN + 1:08d}" if val else f"ade20k/ADE_train_{i + 1:08d}"
    return BrodenImage(name=name, image=pixels,
                       layers={"color": [color_map], "object": [object_map], "part": [m for m in part_maps if m.any()]},
                       image_labels={"scene": scene}, split="val" if val else "train")


def _draw_parts(world: _World, rng: np.random.Generator, object_map: np.ndarray, shapes: dict, part_maps: list,
                pixels: np.ndarray) -> None:
    """Parts of the visible objects (and parts of parts), each clipped to its parent's visible pixels and tinted
    in the image."""
    queue = [(("object", k), object_map == world.object_numbers[k], poly) for k, poly in shapes.items()
             if k < PARENT_OBJECTS]
    while queue:
        parent, visible, poly = queue.pop()
        if not visible.any():
            continue
        xs, ys = [p[0] for p in poly], [p[1] for p in poly]
        box = (max(0.0, min(xs)), max(0.0, min(ys)), min(1.0, max(xs)), min(1.0, max(ys)))
        if box[0] >= box[2] or box[1] >= box[3]:  # the polygon's box lies outside the image: the visible pixels'
            rows, cols = np.nonzero(visible)
            box = (cols.min() / SEG, rows.min() / SEG, (cols.max() + 1) / SEG, (rows.max() + 1) / SEG)
        area = max(1e-4, visible.mean() * 0.3)
        for j in world.children.get(parent, []):
            if rng.random() >= 0.5:
                continue
            part_poly = _shape(rng, area * rng.uniform(0.5, 1.5), box)
            canvas = Image.new("L", (SEG, SEG), 0)
            ImageDraw.Draw(canvas).polygon(_scaled(part_poly, SEG), fill=1)
            mask = (np.asarray(canvas) > 0) & visible
            if not mask.any():
                continue
            level = int(world.part_level[j])
            part_maps[level][mask] = world.part_numbers[j]
            full = np.repeat(np.repeat(mask, 2, axis=0), 2, axis=1)
            pixels[full] = 0.5 * pixels[full] + 0.5 * rng.integers(0, 256, 3)
            queue.append((("part", j), mask, part_poly))


def make_broden(root: Path, progress: Progress, limit: int | None = None) -> Path:
    """Write the dataset chunk by chunk; each finished chunk's table rows are kept in root/.drill/ (resume)."""
    n = N_TRAIN + N_VAL if limit is None else limit
    done_file = root / ".drill" / "done.json"
    if done_file.exists():
        return root
    world = _World()
    labels = broden_labels()
    written: list[WrittenImage] = []
    for start in range(0, n, CHUNK):
        record = root / ".drill" / f"chunk_{start // CHUNK:04d}.json"
        if record.exists():
            written += [WrittenImage.from_json(v) for v in json.loads(record.read_text())]
            continue
        t0 = time.perf_counter()
        chunk = [write_image(root, broden_image(world, i)) for i in range(start, min(n, start + CHUNK))]
        write_json(record, [w.to_json() for w in chunk], indent=None)
        written += chunk
        progress(f"broden: images {start + len(chunk)}/{n} ({time.perf_counter() - t0:.1f} s for this chunk)")
    write_tables(root, written, labels)
    write_text(root / "index_ade20k.csv", (root / "index.csv").read_text(encoding="utf-8"))
    write_json(done_file, {"images": n, "seed": SEED})
    return root


# ------------------------------------------------------------------------------------------------------ checkpoints
def make_checkpoints(folder: Path, progress: Progress) -> dict[str, Path]:
    """Places365-layout checkpoints with random (seeded) weights, and the 365 class names."""
    import torch
    import torchvision

    out = {}
    names = folder / "categories_places365.txt"
    if not names.exists():
        write_text(names, "".join(f"/{p[0]}/{p} {k}\n" for k, p in enumerate(place_names())))
    for arch in ("resnet18", "densenet161"):
        path = folder / f"{arch}_places365.pth.tar"
        out[arch] = path
        if path.exists():
            continue
        torch.manual_seed(SEED)
        model = torchvision.models.get_model(arch, weights=None, num_classes=365)
        state = {}
        for key, value in model.state_dict().items():
            if key.endswith("num_batches_tracked"):
                continue  # the 2017 release predates it
            if arch.startswith("densenet"):  # the release's old DenseNet names: norm.1, relu.1, conv.1
                for old in ("norm", "relu", "conv"):
                    key = key.replace(f".{old}1.", f".{old}.1.").replace(f".{old}2.", f".{old}.2.")
            state[f"module.{key}"] = value
        from probescope.core.atomic import atomic_open

        with atomic_open(path, "wb") as fh:
            torch.save({"epoch": 90, "arch": arch, "state_dict": state, "best_prec1": 0.0}, fh)
        progress(f"checkpoint {path.name}: {path.stat().st_size / 2**20:.0f} MiB (random weights)")
    return out


# ------------------------------------------------------------------------------------------------------- judgments
def make_judgments(folder: Path, progress: Progress) -> dict[str, Path]:
    """Stimulus images (resumable by chunk), catalog.hdf5, obs-drill.hdf5 and obs-drill-coarse.hdf5."""
    from probescope.core.demo import world
    from probescope.core.demo.judgments import answer_as_people
    from probescope.core.similarity.catalog import Catalog, write_catalog_hdf5
    from probescope.core.similarity.simulate import sample_outcomes
    from probescope.core.similarity.trials import Trials
    from probescope.core.similarity.writers import write_psiz_hdf5

    paths = {"observations": folder / "obs-drill.hdf5", "catalog": folder / "catalog.hdf5",
             "coarse": folder / "obs-drill-coarse.hdf5", "images": folder / "images"}
    if (folder / "done.json").exists():
        return paths
    n_orig = N_STIMULI - N_MIRRORED
    rng = np.random.default_rng([SEED, 2])
    scenes = rng.integers(0, len(world.SCENES), n_orig)
    wnid = [f"n{9000000 + k:08d}" for k in range(len(world.SCENES))]
    names = [f"{wnid[s]}/ILSVRC2012_val_{k + 1:08d}.JPEG" for k, s in enumerate(scenes)]
    mirrored = np.sort(rng.choice(n_orig, N_MIRRORED, replace=False))
    names += [f"{wnid[scenes[k]]}/ILSVRC2012_val_{k + 1:08d}_mirror.JPEG" for k in mirrored]
    mirror_slot = {int(k): n_orig + j for j, k in enumerate(mirrored)}
    attributes = None
    for start in range(0, n_orig, 5000):
        record = folder / ".drill" / f"attributes_{start // 5000:03d}.npy"
        if not record.exists():
            t0 = time.perf_counter()
            rows = []
            for k in range(start, min(n_orig, start + 5000)):
                sample = world.render_sample(np.random.default_rng([SEED, 3, k]), world.SCENES[scenes[k]])
                rows.append(sample.attributes)
                _save_jpeg(paths["images"] / names[k], sample.image)
                if k in mirror_slot:
                    _save_jpeg(paths["images"] / names[mirror_slot[k]], sample.image[:, ::-1])
            from probescope.core.atomic import save_npy

            save_npy(record, np.stack(rows).astype(np.float32))
            progress(f"judgments: stimuli {min(n_orig, start + 5000)}/{n_orig} rendered "
                     f"({time.perf_counter() - t0:.1f} s)")
        part = np.load(record)
        attributes = part if attributes is None else np.concatenate([attributes, part])
    z0 = _true_space(attributes, rng)
    z = np.concatenate([z0, z0[mirrored]])

    m = N_SESSIONS * SESSION_TRIALS
    n_participants = N_SESSIONS * 3 // 4
    careless = rng.random(n_participants) < 0.15
    session_participant = np.concatenate([np.arange(n_participants),
                                          rng.integers(0, n_participants, N_SESSIONS - n_participants)])
    session = np.repeat(np.arange(N_SESSIONS), SESSION_TRIALS)
    participant = session_participant[session]
    is_catch = np.zeros(m, bool)
    is_catch[(np.arange(N_SESSIONS)[:, None] * SESSION_TRIALS + np.array(CATCH_SLOTS)).ravel()] = True
    query = rng.integers(0, n_orig, m)
    catch_k = rng.integers(0, N_MIRRORED, int(is_catch.sum()))
    query[is_catch] = mirrored[catch_k]
    refs = _references(rng, query, n_orig, 8)
    slot = rng.integers(0, 8, int(is_catch.sum()))
    catch_refs = refs[is_catch]
    catch_refs[np.arange(len(slot)), slot] = n_orig + catch_k
    refs[is_catch] = catch_refs
    choices = np.concatenate([sample_outcomes(z, query[s:s + 50_000], refs[s:s + 50_000], 2, rng)
                              for s in range(0, m, 50_000)])
    rt = answer_as_people(rng, choices, is_catch, slot, careless[participant])

    mirror_of = np.concatenate([np.full(n_orig, -1), mirrored]).astype(np.int64)
    classes = tuple(wnid[s] for s in scenes) + tuple(wnid[scenes[k]] for k in mirrored)
    write_catalog_hdf5(paths["catalog"], Catalog(tuple(names), mirror_of, paths["images"], classes, simulated=True),
                       notes=SIMULATED_NOTE)
    attrs = {"simulated": True, "notes": SIMULATED_NOTE}
    write_psiz_hdf5(paths["observations"], Trials.make(query, refs, choices, session, participant, np.round(rt)),
                    attrs)
    coarse_q = rng.integers(0, n_orig, N_COARSE)
    coarse_refs = _references(rng, coarse_q, n_orig, 8)
    write_psiz_hdf5(paths["coarse"], Trials.make(coarse_q, coarse_refs, sample_outcomes(z, coarse_q, coarse_refs,
                                                                                         2, rng),
                                                 rt_ms=np.full(N_COARSE, 5000.0)), attrs)
    write_json(folder / "done.json", {"stimuli": N_STIMULI, "trials": m, "seed": SEED, "simulated": True})
    progress(f"judgments: {m} trials over {N_STIMULI} stimuli written")
    return paths


def _save_jpeg(path: Path, image: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.ascontiguousarray(image)).save(path, format="JPEG", quality=90)


def _true_space(attributes: np.ndarray, rng: np.random.Generator, dims: int = 6) -> np.ndarray:
    """Weighted attributes -> PCA to `dims` -> median distance 0.45 (estimated on sampled pairs) -> noise."""
    x = attributes.astype(np.float64)
    x = x - x.mean(0)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    z = x @ vt[:dims].T
    a, b = rng.integers(0, len(z), (2, 200_000))
    z *= 0.45 / np.median(np.linalg.norm(z[a] - z[b], axis=1))
    return z + rng.normal(0, 0.04, z.shape)


def _references(rng: np.random.Generator, query: np.ndarray, n: int, r: int) -> np.ndarray:
    """(m, r) distinct references per trial among stimuli 0..n-1, never the query (rows redrawn until so)."""
    refs = rng.integers(0, n, (len(query), r))
    while True:
        s = np.sort(refs, axis=1)
        bad = (s[:, 1:] == s[:, :-1]).any(1) | (refs == query[:, None]).any(1)
        if not bad.any():
            return refs
        refs[bad] = rng.integers(0, n, (int(bad.sum()), r))


# --------------------------------------------------------------------------------------------------------- samples
def make_samples(path: Path, progress: Progress) -> Path:
    """50,000 demo-sampler images into an uncompressed .npz, through a resumable .npy memmap."""
    from probescope.core.demo.sampler import DemoSampler

    if path.exists():
        return path
    work = path.with_suffix(".partial.npy")
    marks = path.with_suffix(".partial.json")
    sampler = DemoSampler(N_SAMPLES, fidelity=0.8, seed=SEED)
    first = sampler.sample(0)[0]
    shape = (N_SAMPLES, *first.shape)
    done = json.loads(marks.read_text())["done"] if marks.exists() and work.exists() else 0
    array = np.lib.format.open_memmap(work, mode="r+" if done else "w+", dtype=np.uint8, shape=shape)
    for start in range(done, N_SAMPLES, 5000):
        t0 = time.perf_counter()
        for k in range(start, min(N_SAMPLES, start + 5000)):
            array[k] = sampler.sample(k)[0]
        array.flush()
        write_json(marks, {"done": min(N_SAMPLES, start + 5000)})
        progress(f"samples: {min(N_SAMPLES, start + 5000)}/{N_SAMPLES} ({time.perf_counter() - t0:.1f} s)")
    from probescope.core.atomic import atomic_open

    with atomic_open(path, "wb") as fh:
        np.savez(fh, images=array)
    del array
    work.unlink()
    marks.unlink()
    return path
