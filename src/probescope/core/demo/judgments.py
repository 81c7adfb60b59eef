"""SIMULATED similarity judgments for the demo world, so the similarity workspace runs without a download.

Nothing here comes from people. A ground-truth psychological space is derived from the demo images' attributes
(scene, object areas, colour areas: weighted, reduced to 6 dimensions by PCA, plus per-image noise); simulated
participants answer 8-rank-2 trials through the same Luce model the embedding assumes. Sessions of 50 trials hold 4
catch trials (the query's mirror image among the references: 2 in the first 20 trials, 2 in the last 20), a share of
participants is careless (random picks, hurried response times), and response times are log-normal. The files use
the psiz HDF5 layout (observations + catalog.hdf5 with `mirror_of`), carry `simulated = True` in their attributes,
and are read back through the real reader. Stimulus images (and the mirrored ones) are PNGs under `images/`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from probescope.core.atomic import save_npy, write_json, write_text
from probescope.core.cache import cache_dir as default_cache
from probescope.core.demo.world import OBJECTS, SCENES, render_batch
from probescope.core.similarity.catalog import Catalog, write_catalog_hdf5
from probescope.core.similarity.trials import Trials
from probescope.core.similarity.writers import write_psiz_hdf5

VERSION = 1
N_STIMULI = 240
N_MIRRORED = 40  # stimuli with a mirror image, the queries of catch trials
N_SESSIONS = 80
SESSION_TRIALS = 50
CATCH_SLOTS = (4, 13, 33, 44)  # two in the first 20 trials, two in the last 20
CARELESS_SHARE = 0.15
N_COARSE = 500  # randomly assembled trials for the coarse-grained loss
TRUE_DIMS = 6
SEED = 2020
SIMULATED_NOTE = "SIMULATED judgments of the probescope demo world: not human data"


@dataclass(frozen=True)
class DemoJudgments:
    """Paths of the simulated judgments: observations, catalog, coarse-grained trial set, ground truth, images."""

    folder: Path
    observations: Path
    catalog: Path
    coarse: Path
    truth: Path  # truth.npy: (n, 6) true positions (mirrors coincide with their originals)
    images: Path


def _paths(folder: Path) -> DemoJudgments:
    return DemoJudgments(folder, folder / "obs-demo.hdf5", folder / "catalog.hdf5", folder / "obs-demo-coarse.hdf5",
                         folder / "truth.npy", folder / "images")


def true_space(attributes: np.ndarray, rng: np.random.Generator, n_scenes: int, n_objects: int) -> np.ndarray:
    """Ground-truth positions from attribute vectors: weighted blocks -> PCA -> scale to beta = 10 -> noise."""
    weights = np.ones(attributes.shape[1])
    weights[:n_scenes] = 0.8  # scene identity
    weights[n_scenes : n_scenes + n_objects] = 1.6  # what is in the picture
    weights[n_scenes + n_objects :] = 1.2  # its colours
    x = attributes * weights
    x = x - x.mean(0)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    z = x @ vt[:TRUE_DIMS].T
    d = np.sqrt(((z[:, None] - z[None]) ** 2).sum(-1))
    z *= 0.45 / np.median(d[np.triu_indices(len(z), 1)])  # median distance 0.45: clear but noisy choices
    return z + rng.normal(0, 0.04, z.shape)


def simulate(seed: int = SEED) -> tuple[list, np.ndarray, dict[str, np.ndarray]]:
    """Demo samples, true positions (originals then mirrors) and the trial columns of all sessions + coarse set."""
    # (torch: the window's process imports this module to find the demo judgments; simulating them runs elsewhere)
    from probescope.core.similarity.simulate import random_references, sample_outcomes

    rng = np.random.default_rng(seed)
    samples = render_batch(seed, N_STIMULI)
    attributes = np.stack([s.attributes for s in samples]).astype(np.float64)
    z0 = true_space(attributes, rng, len(SCENES), len(OBJECTS))
    mirrored = np.sort(rng.choice(N_STIMULI, N_MIRRORED, replace=False))
    z = np.concatenate([z0, z0[mirrored]])  # a mirror image sits where its original does
    originals = np.arange(N_STIMULI)

    n_participants = N_SESSIONS * 3 // 4
    careless = rng.random(n_participants) < CARELESS_SHARE
    session_participant = np.concatenate([np.arange(n_participants),
                                          rng.integers(0, n_participants, N_SESSIONS - n_participants)])
    m = N_SESSIONS * SESSION_TRIALS
    session = np.repeat(np.arange(N_SESSIONS), SESSION_TRIALS)
    participant = session_participant[session]
    is_catch = np.zeros(m, dtype=bool)
    is_catch[(np.arange(N_SESSIONS)[:, None] * SESSION_TRIALS + np.array(CATCH_SLOTS)).ravel()] = True

    query = rng.integers(0, N_STIMULI, m)
    catch_k = rng.integers(0, N_MIRRORED, is_catch.sum())
    query[is_catch] = mirrored[catch_k]
    refs = random_references(rng, query, originals, 8)
    slot = rng.integers(0, 8, is_catch.sum())
    catch_refs = refs[is_catch]
    catch_refs[np.arange(len(slot)), slot] = N_STIMULI + catch_k  # the mirrored query
    refs[is_catch] = catch_refs

    choices = sample_outcomes(z, query, refs, 2, rng)
    rt = answer_as_people(rng, choices, is_catch, slot, careless[participant])

    coarse_q = rng.integers(0, N_STIMULI, N_COARSE)
    coarse_refs = random_references(rng, coarse_q, originals, 8)
    coarse_choices = sample_outcomes(z, coarse_q, coarse_refs, 2, rng)
    columns = {
        "query": query, "references": refs, "choices": choices, "session": session, "participant": participant,
        "rt_ms": np.round(rt), "coarse_query": coarse_q, "coarse_references": coarse_refs,
        "coarse_choices": coarse_choices, "mirrored": mirrored,
    }
    return samples, z, columns


def answer_as_people(rng: np.random.Generator, choices: np.ndarray, is_catch: np.ndarray, slot: np.ndarray,
                     sloppy: np.ndarray) -> np.ndarray:
    """Turn the model's (m, 2) choices among 8 references into what people answer, in place, and return each
    trial's response time (ms). People recognise their query's mirror image in a catch trial (in reference `slot`):
    careful participants pick it first 95% of the time, second 4%; careless ones (`sloppy` per trial) pick two
    references at random, and fast."""
    m = len(choices)
    u = rng.random(m)
    catch_slot = np.full(m, -1)
    catch_slot[is_catch] = slot
    other = np.where(choices[:, 0] == catch_slot, choices[:, 1], choices[:, 0])
    first, second = is_catch & (u < 0.95), is_catch & (u >= 0.95) & (u < 0.99)
    choices[first] = np.stack([catch_slot, other], 1)[first]
    choices[second] = np.stack([other, catch_slot], 1)[second]
    random_picks = np.argsort(rng.random((m, 8)), axis=1)[:, :2]
    choices[sloppy] = random_picks[sloppy]
    return np.where(sloppy, rng.lognormal(np.log(1400), 0.5, m), rng.lognormal(np.log(5200), 0.45, m))


def write_demo_judgments(folder: str | Path, seed: int = SEED) -> DemoJudgments:
    """Generate and write the simulated judgments (a few seconds); returns their paths."""
    paths = _paths(Path(folder))
    paths.images.mkdir(parents=True, exist_ok=True)
    samples, z, cols = simulate(seed)
    names = [f"images/{i:04d}.png" for i in range(N_STIMULI)]
    names += [f"images/{i:04d}_mirror.png" for i in cols["mirrored"]]
    for i, s in enumerate(samples):
        Image.fromarray(s.image).save(paths.folder / names[i])
    for k, i in enumerate(cols["mirrored"]):
        Image.fromarray(np.ascontiguousarray(samples[i].image[:, ::-1])).save(paths.folder / names[N_STIMULI + k])
    mirror_of = np.concatenate([np.full(N_STIMULI, -1), cols["mirrored"]]).astype(np.int64)
    scenes = [s.scene for s in samples] + [samples[i].scene for i in cols["mirrored"]]
    catalog = Catalog(tuple(names), mirror_of, paths.folder, tuple(scenes), simulated=True)
    write_catalog_hdf5(paths.catalog, catalog, notes=SIMULATED_NOTE)
    attrs = {"simulated": True, "notes": SIMULATED_NOTE}
    trials = Trials.make(cols["query"], cols["references"], cols["choices"], cols["session"], cols["participant"],
                         cols["rt_ms"])
    write_psiz_hdf5(paths.observations, trials, attrs)
    coarse = Trials.make(cols["coarse_query"], cols["coarse_references"], cols["coarse_choices"],
                         rt_ms=np.full(N_COARSE, 5000.0))
    write_psiz_hdf5(paths.coarse, coarse, attrs)
    save_npy(paths.truth, z.astype(np.float32))
    write_text(paths.folder / "README.txt", SIMULATED_NOTE + ".\n" + (__doc__ or ""))
    write_json(paths.folder / "done.json", {"version": VERSION, "seed": seed, "simulated": True})
    return paths


def _demo_folder(cache_dir: str | Path | None) -> Path:
    if cache_dir is None:
        cache_dir = default_cache()
    return Path(cache_dir) / "demo_judgments"


def demo_judgments_written(cache_dir: str | Path | None = None) -> bool:
    """Whether the simulated judgments are on disk, complete (reading them needs no torch; simulating them does)."""
    folder = _demo_folder(cache_dir)
    paths = _paths(folder)
    try:
        done = json.loads((folder / "done.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return done.get("version") == VERSION and done.get("seed") == SEED and all(
        p.exists() for p in (paths.observations, paths.catalog, paths.coarse, paths.truth))


def ensure_demo_judgments(cache_dir: str | Path | None = None) -> DemoJudgments:
    """The simulated judgments under `<cache>/demo_judgments`, generated on first use (deterministic)."""
    folder = _demo_folder(cache_dir)
    return _paths(folder) if demo_judgments_written(cache_dir) else write_demo_judgments(folder)
