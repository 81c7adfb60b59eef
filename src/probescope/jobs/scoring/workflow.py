"""Score a sample set: the one workflow behind `probescope score` and the gallery.

Images go through the classifier batch by batch (`score_batches`); each batch is a `Partial(ScoredBatch)`, so the
gallery shows the live Inception Score while the stream runs and the command line gathers them into one array
(`classify`). `score_images` is the whole command-line run: the reference and held-out sets, the images, the split
protocol's report, the distances to real images and the per-sample table; `score_rows` the same for probabilities
or logits given. Every setting comes from `ScoreSettings`. Each function is a task (probescope.jobs.protocol): it
yields `Progress` (a stage with `fraction` None) and `Partial`, returns its result, and stops when cancelled.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from probescope.core.errors import InputError
from probescope.core.scoring.settings import ScoreSettings
from probescope.core.scoring.sources import DEFAULT_EXTENSIONS, SampleSource
from probescope.jobs.protocol import Partial, Progress, TaskContext

INCEPTION_OUTPUTS = 1008  # the widest logits (the TF Inception's), for the memory check of a classifier without names
INCEPTION_FEATURES = 2048  # the widest features (its pool)


@dataclass(frozen=True)
class ScoredBatch:
    """Images start.. start+len(logits) of a stream: their logits, their features from the same forward pass (None
    when not asked for or the classifier gives none), the demo sampler that drew them (demo streams) and their
    thumbnails (uint8 arrays, made where the images were read)."""

    start: int
    logits: np.ndarray
    features: np.ndarray | None = None
    sampler: Any = None
    thumbnails: tuple[np.ndarray, ...] = ()


def score_batches(ctx: TaskContext, source: SampleSource, classifier, settings: ScoreSettings, *,
                  features: bool = True, start: int = 0, prefetch: bool = True) -> Iterator[Partial | Progress]:
    """Classify `source` (image `start` on) in `settings.batch_size` batches, each a `Partial(ScoredBatch)` with
    the features beside the logits when asked and given (one forward pass). Returns the images scored in all.

    With `prefetch`, `settings.workers` threads read and prepare the next batches while the network runs (the
    engine's pipeline); without, each batch is read inline, which on the CPU beats prefetching: a prefetch thread
    that renders or decodes in Python competes with the compute and GUI threads for the GIL (measured on 2 busy
    cores: 95 ms GUI stalls with a prefetch thread, 3 ms without, and higher throughput as well).
    """
    from probescope.core.scoring.pipeline import classify_batches, embed_batches

    embed = features and classifier.gives_features
    if not prefetch:
        batches = _inline(ctx, source, classifier, settings.batch_size, embed, start)
    elif embed:
        batches = embed_batches(source, classifier, settings.batch_size, workers=settings.workers,
                                progress=ctx.progress, cancel=ctx.cancelled)
    else:
        batches = ((None, logits) for logits in classify_batches(
            source, classifier, settings.batch_size, workers=settings.workers, progress=ctx.progress,
            cancel=ctx.cancelled))
    with contextlib.closing(batches):  # a cancelled stream shuts a prefetch thread down at once
        for batch_features, logits in batches:
            sampler = source.sampler_of(start) if hasattr(source, "sampler_of") else None
            thumbs = source.thumbnails_of(start) if hasattr(source, "thumbnails_of") else ()
            yield Partial(ScoredBatch(start, logits, batch_features, sampler, thumbs))
            start += len(logits)
    return start


def _inline(ctx: TaskContext, source: SampleSource, classifier, batch_size: int, embed: bool,
            start: int) -> Iterator[tuple[np.ndarray | None, np.ndarray]]:
    """(features or None, logits) of one batch after the other, read and classified in the calling thread."""
    total, done = source.length, start
    for task in source.batch_tasks(batch_size):
        ctx.check()
        prepared = classifier.prepare(task())
        yield classifier.embed(prepared) if embed else (None, classifier.logits(prepared))
        done += len(prepared)
        ctx.progress(done / total if total else 0.0, f"{done}{f'/{total}' if total else ''} images")


def classify(ctx: TaskContext, source: SampleSource, classifier, settings: ScoreSettings,
             features: bool) -> Iterator[Progress]:
    """Every image's (features or None, logits), float32, from one pass of `score_batches` over `source`: each
    batch copied into arrays of the source's length (when known), so the rows are held once, not as batches and
    a concatenated copy."""
    from probescope.core.scoring.growing import GrowingRows

    rows = {"features": GrowingRows(source.length), "logits": GrowingRows(source.length)}
    for item in score_batches(ctx, source, classifier, settings, features=features):
        if isinstance(item, Partial):
            rows["logits"].append(item.value.logits)
            if features:
                rows["features"].append(item.value.features)
        else:
            yield item
    if not len(rows["logits"]):
        raise InputError(f"{source.name}: no images to score")
    return (rows["features"].values if features else None), rows["logits"].values


@dataclass(frozen=True)
class ScoreAsk:
    """What a run computes and writes beside the Inception Score (the command line's options): `fid` and
    `held_out` are reference specs (see core.scoring.reference), the others paths or switches."""

    fid: str | None = None
    held_out: str | None = None
    kid: bool = False
    prc: bool = False
    fid_inf: bool = False
    density_coverage: bool = False
    vendi: bool = False
    cmmd: bool = False
    bits: bool = False
    extensions: tuple[str, ...] = DEFAULT_EXTENSIONS
    save_logits: str | None = None
    save_stats: str | None = None
    per_image: str | None = None


@dataclass
class ScoreResult:
    """A run's report: `header` (where the scores come from), the split protocol's report, the distances to real
    images, density/coverage and the Vendi score (`extras`: each with to_dict and summary), and what the per-sample
    table and the data-copying test add (`per_sample` for JSON, `lines` for text)."""

    header: dict[str, object]
    report: Any
    distances: Any = None
    extras: list[Any] = field(default_factory=list)
    per_sample: dict[str, object] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        distances = self.distances.to_dict() if self.distances is not None else {}
        extras = {key: value for extra in self.extras for key, value in extra.to_dict().items()}
        return {**self.header, **self.report.to_dict(), **distances, **extras, **self.per_sample}

    def text(self) -> list[str]:
        out = [f"{key.replace('_', ' ')}: {value}" for key, value in self.header.items()]
        out.append(self.report.summary())
        if self.distances is not None:
            out.append(self.distances.summary())
        return out + [extra.summary() for extra in self.extras] + self.lines


def score_images(ctx: TaskContext, source: SampleSource, classifier, settings: ScoreSettings,
                 ask: ScoreAsk) -> Iterator[Progress]:
    """The whole run over images: reference sets, the images through `classifier`, then `score_rows`'s report."""
    from probescope.core import bounds
    from probescope.core.atomic import save_npy
    from probescope.core.scoring.distributions import ClassScores

    if source.length is not None:  # the logits (and features) of every image are kept: they must fit
        outputs = len(classifier.class_names or ()) or INCEPTION_OUTPUTS
        width = INCEPTION_FEATURES if ask.fid or ask.save_stats or ask.fid_inf or ask.vendi or ask.cmmd else 0
        bounds.check_fits(4.0 * source.length * (outputs + width), f"{source.length} images' outputs")
    if ask.prc and source.length is not None:  # before any image goes through the classifier
        _check_neighbourhood(source.length, f"the samples {source.name}", settings.prc_k)
    reference = held_out = None
    if ask.fid:
        reference = yield from _reference(ctx, ask.fid, classifier, settings, ask, "reference")
        if (ask.prc or ask.per_image) and reference.features is not None:
            _check_neighbourhood(len(reference.features), f"the --fid reference {ask.fid}", settings.prc_k)
        if ask.density_coverage and reference.features is not None:
            _check_neighbourhood(len(reference.features), f"the --fid reference {ask.fid}", settings.dc_k, "--dc-k")
        if ask.held_out:
            held_out = yield from _reference(ctx, ask.held_out, classifier, settings, ask, "held-out images")
    yield Progress(None, f"scoring {source.describe()} with {classifier.name}")
    features, logits = yield from classify(ctx, source, classifier, settings,
                                           bool(ask.fid or ask.save_stats or ask.vendi or ask.cmmd))
    if ask.save_logits:
        save_npy(ask.save_logits, logits)
    if ask.save_stats:
        from probescope.core.scoring.frechet import gaussian_stats

        gaussian_stats(features).save(ask.save_stats)
    header = dict(source=source.describe(), lossy_inputs=source.lossy, classifier=classifier.name,
                  classifier_note=classifier.note, comparable_with_published=classifier.comparable)
    label = "FID"
    if classifier.network is not None:
        header.update(feature_network=classifier.network.name, feature_network_note=classifier.network.note,
                      feature_precision=classifier.network.precision)
        label = classifier.network.label
    return (yield from score_rows(ctx, ClassScores(logits, "logits", source.name), settings, ask,
                                  classifier.class_names, header, features, reference, held_out,
                                  feature_note=classifier.feature_note, label=label))


def _check_neighbourhood(n: int, what: str, k: int, option: str = "--prc-k") -> None:
    """Refuse a set too small for each of its members' k nearest other members (precision/recall's radii, and
    density/coverage's with option --dc-k)."""
    if n <= k:
        raise InputError(f"{option} {k}: {what} has {n} image{'s' if n != 1 else ''}, and k = {k} nearest neighbours "
                         f"need at least {k + 1} per set (use a larger set or a smaller {option})")


def _reference(ctx: TaskContext, spec: str, classifier, settings: ScoreSettings, ask: ScoreAsk,
               what: str) -> Iterator[Progress]:
    from probescope.core.scoring.reference import load_reference

    yield Progress(None, f"{what} {spec} through {classifier.name}")
    return load_reference(spec, classifier, extensions=ask.extensions, batch_size=settings.batch_size,
                          workers=settings.workers, progress=ctx.progress, cancel=ctx.cancelled)


def score_rows(ctx: TaskContext, scores, settings: ScoreSettings, ask: ScoreAsk, class_names=None,
               header: dict[str, object] | None = None, features: np.ndarray | None = None, reference=None,
               held_out=None, feature_note: str = "", label: str = "FID") -> Iterator[Progress]:
    """The report of `scores` (a ClassScores): the split protocol, the distances to `reference` (and IS_inf with
    `ask.fid_inf`; `label` names the Fréchet distance on these features), density/coverage, CMMD and the Vendi
    score on the same features as precision/recall (`feature_note` names them where there is no reference), the
    per-sample table with the copy test, and the data-copying test against `held_out`."""
    from probescope.core.scoring.distances import distance_report
    from probescope.core.scoring.report import score_report

    unit = "bits" if ask.bits else "nats"
    report = score_report(scores, settings.splits, settings.shuffle, settings.seed, unit=unit,
                          class_names=class_names)
    if ask.prc and reference is not None and features is not None:  # a stream whose length was not known ahead
        _check_neighbourhood(len(features), f"the samples {scores.source}", settings.prc_k)
    ks = ((settings.prc_k,) if ask.prc or ask.per_image else ()) + ((settings.dc_k,) if ask.density_coverage else ())
    if len(ks) > 1 and reference is not None and reference.features is not None:
        yield Progress(None, "reference radii")
        # precision/recall's radii (the realism's) and density/coverage's, from one pass over the reference (then
        # cached)
        reference.radii_of(ks, progress=ctx.progress, cancel=ctx.cancelled)
    distances = None
    if reference is not None or ask.fid_inf:
        distances = distance_report(features, scores, reference,
                                    settings.distances(kid=ask.kid, prc=ask.prc, infinite=ask.fid_inf), class_names,
                                    label)
    result = ScoreResult(dict(header or {}), report, distances)
    yield from _density_vendi(ctx, result, settings, ask, features, reference, feature_note)
    if ask.per_image:
        _per_image(ctx, result, settings, ask, features, reference, held_out)
    if held_out is not None:
        from probescope.core.scoring.copy_test import in_reference_caveat
        from probescope.core.scoring.copying import data_copying
        from probescope.core.scoring.report import shown

        held = held_out.require_features("the data-copying test")
        copying = data_copying(reference.require_features("the data-copying test"), held, features,
                               settings.copy_cells, seed=settings.seed, progress=ctx.progress, cancel=ctx.cancelled)
        _refuse_held_out_in_reference(copying.in_training, len(held), held_out.name)
        result.per_sample.update(copying.to_dict())
        result.lines.append(f"data-copying C_T: {shown(copying.statistic, 2)}   ({copying.cells_used} of "
                            f"{copying.cells} cells; << 0: samples closer to the training set than held-out images, "
                            "copying; >> 0: farther, underfitting)"
                            + in_reference_caveat(copying.in_training, len(held), "training set (--fid)"))
    return result


def _density_vendi(ctx: TaskContext, result: ScoreResult, settings: ScoreSettings, ask: ScoreAsk, features,
                   reference, feature_note: str) -> Iterator[Progress]:
    """Density/coverage against the reference's features (its k-NN radii from the reference's cache, one pass for
    precision/recall's k and this k) and the Vendi score of the samples' (and the reference's) features."""
    note = reference.feature_note if reference is not None and reference.feature_note else feature_note
    if ask.density_coverage and reference is not None:
        from probescope.core.scoring.density_coverage import density_coverage

        real = reference.require_features("density and coverage")
        _check_neighbourhood(len(real), f"the reference {reference.name}", settings.dc_k, "--dc-k")
        yield Progress(None, "density and coverage")
        radii = reference.radii_of((settings.dc_k,), progress=ctx.progress, cancel=ctx.cancelled)[settings.dc_k]
        result.extras.append(density_coverage(features, real, settings.dc_k, real_radii=radii, features=note,
                                              cancel=ctx.cancelled))
    if ask.vendi and features is not None:
        from probescope.core.scoring.vendi import vendi_scores

        yield Progress(None, "Vendi score")
        ref = reference.features if reference is not None else None
        result.extras.append(vendi_scores(features, ref, features=note, cancel=ctx.cancelled))
    if ask.cmmd and reference is not None:
        from probescope.core.scoring.cmmd import cmmd

        yield Progress(None, "CMMD")
        result.extras.append(cmmd(features, reference.require_features("CMMD"), features=note, cancel=ctx.cancelled))


def _per_image(ctx: TaskContext, result: ScoreResult, settings: ScoreSettings, ask: ScoreAsk, features,
               reference, held_out) -> None:
    """Write the per-sample table: each sample's KL and, where the reference has features, its realism, nearest
    reference images and the copy test (calibrated on `held_out`, or on a part of the reference set aside)."""
    from probescope.core.scoring.per_image import write_per_image
    from probescope.core.scoring.realism import sample_neighbours

    kl = result.report.contributions
    neighbours = None
    if reference is not None and reference.features is not None:
        calibration, why = copy_calibration(ctx, reference, held_out, settings)
        radii = reference.radii_of((settings.prc_k,))
        neighbours = sample_neighbours(features, reference.features, settings.prc_k, real_radii=radii[settings.prc_k],
                                       calibration=calibration, features=reference.feature_note,
                                       progress=ctx.progress, cancel=ctx.cancelled)
        if neighbours.copy is not None:
            result.per_sample.update(neighbours.copy.to_dict())
            result.lines.append(neighbours.copy.summary())
        else:
            result.per_sample["copy_test_not_run"] = why
            result.lines.append(f"copy test not run: {why}")
    write_per_image(ask.per_image, kl, neighbours, settings.prc_k)
    result.per_sample["per_image"] = str(ask.per_image)
    result.lines.append(f"per-image table: {ask.per_image}" + (
        " (kl only: realism and the nearest images need a reference's features, --fid REF)" if neighbours is None
        else ""))


def copy_calibration(ctx: TaskContext, reference, held_out, settings: ScoreSettings):
    """The copy test's calibration and '' (the held-out images' nearest-reference distances: `held_out`, a
    ReferenceSet with features, or a part of the reference set aside, `settings.held_out_share` from
    `settings.seed`), or None and why the reference is too small to set enough images aside. Computed once per
    reference and held-out set: the window asks again at every block of samples it streams."""
    from probescope.core.scoring.copy_test import calibrate, min_held_out, set_aside_calibration

    real = reference.require_features("the copy test")
    if held_out is not None:
        held = held_out.require_features("the copy test")
        _held, calibration = reference.derived(  # (the held-out features kept with it: their id stays theirs)
            ("calibration", settings.copy_alpha, id(held)),
            lambda: (held, calibrate(real, held, alpha=settings.copy_alpha, held_out_note=f"held-out images "
                                     f"{held_out.name}", cancel=ctx.cancelled)))
        _refuse_held_out_in_reference(calibration.in_reference, len(held), held_out.name)
        return calibration, ""
    needed = min_held_out(settings.copy_alpha)
    if round(settings.held_out_share * len(real)) < needed:
        return None, (f"at alpha {settings.copy_alpha:g} it needs {needed} held-out real images; "
                      f"{settings.held_out_share:g} of the {len(real)} reference images are fewer (give --held-out "
                      "REF, a larger reference or a larger --held-out-share)")
    return reference.derived(
        ("calibration", settings.copy_alpha, settings.held_out_share, settings.seed),
        lambda: set_aside_calibration(real, alpha=settings.copy_alpha, share=settings.held_out_share,
                                      seed=settings.seed, cancel=ctx.cancelled)), ""


def _refuse_held_out_in_reference(same: int, n: int, name: str) -> None:
    """Held-out images that are all reference images hold nothing out: neither copy test means anything."""
    if same == n:
        raise InputError(f"all {n} held-out images are also in the --fid reference (distance 0): held-out images "
                         "must be real images not in the reference (never trained on)", name)
