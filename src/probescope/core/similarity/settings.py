"""The settings of the similarity workflows, in one place: each dataclass field carries its default, the help its
command-line option shows and, for numbers, the `Bound` of what it can mean. `probescope similarity`, `embed` and
`propose` generate their options from these fields (the flag is the field name with dashes) and the Similarity
workspace's controls take their starting values from them, so no default is typed twice.

The window's own starting values, where they differ (a smaller proposal, so that it is interactive), are named
presets beside the dataclass, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from probescope.core.bounds import (
    CANDIDATES,
    DIMENSIONS,
    EPOCHS,
    MEMBERS,
    NEIGHBOURS,
    PAIRS,
    POSTERIOR_SAMPLES,
    QUERIES,
    SEED,
    Bound,
    IntRanges,
)

BETA = 10.0  # the similarity kernel's exp(-beta * distance), as in ImageNet-HSJ
DEFAULT_SEED = 0  # every similarity workflow's seed (sampled pairs, posterior samples, fits, proposals)
DEFAULT_MAX_PAIRS = 1_000_000  # pairs an embedding correlation samples at most (the engine's default too)
MAX_EPOCHS = 300  # epochs per member (FitOptions' default)
POOLS = ("avg", "cls", "flatten")  # a map's (or a ViT's patch tokens') mean, a ViT's class token, everything


def _meta(text: str, bound: Bound | None = None, **more: object) -> dict[str, object]:
    """A field's metadata: the help text of its option and, for numbers, the Bound of what it can mean."""
    return {"help": text, **({} if bound is None else {"bound": bound}), **more}


@dataclass(frozen=True)
class Filters:
    """The quality-control switches (ImageNet-HSJ's: drop catch trials, unsatisfactory sessions, trials under 1 s);
    on the command line each is a `filter_flag` switch with the help below."""

    catch: bool = field(default=True, metadata=_meta("keep catch trials"))
    grade: bool = field(default=True, metadata=_meta("keep unsatisfactory sessions and the file's trial weights"))
    rt: bool = field(default=True, metadata=_meta("keep trials answered in under 1 s"))


def filter_flag(name: str) -> str:
    """The command-line switch that turns filter `name` off ('catch' -> --no-catch-filter)."""
    return f"--no-{name}-filter"


@dataclass(frozen=True)
class AgreementSettings:
    """`probescope similarity`: how model features are compared with the judgments."""

    pool: str = field(default="avg", metadata=_meta(
        "the layer's feature: the mean over its positions (default; a ViT's patch tokens), a ViT's class token "
        "('cls') or everything flattened", choices=POOLS))
    distance: str = field(default="cosine,l1,l2", metadata=_meta("comma-separated: cosine, l1, l2"))
    max_pairs: int = field(default=DEFAULT_MAX_PAIRS, metadata=_meta(
        "pairs for the embedding correlation (sampled, seeded, when there are more)", PAIRS))
    seed: int = field(default=DEFAULT_SEED, metadata=_meta("seed of the sampled pairs and posterior samples", SEED))


@dataclass(frozen=True)
class EmbeddingSettings:
    """`probescope embed` and the workspace's refit: which dimensionalities, how many members, how long."""

    dims: str = field(default="2-10", metadata=_meta(
        "dimensionalities to try, e.g. 2-10, 4 or 2,4,8, at most the number of stimuli", DIMENSIONS, ranges=True))
    ensemble: int = field(default=3, metadata=_meta("members, each with its own 5%% held out", MEMBERS))
    max_epochs: int = field(default=MAX_EPOCHS, metadata=_meta("epochs per member at most", EPOCHS))
    seed: int = field(default=DEFAULT_SEED, metadata=_meta("seed of the held-out splits and initialisations", SEED))


@dataclass(frozen=True)
class ProposeSettings:
    """`probescope propose` and the workspace's Active learning panel: the next trials by information gain."""

    queries: int = field(default=100, metadata=_meta("queries to sample", QUERIES))
    candidates: int = field(default=1000, metadata=_meta("candidate trials per query", CANDIDATES))
    keep: int = field(default=3, metadata=_meta("best trials kept per query, at most the candidates", CANDIDATES))
    confirmation: int | None = field(default=None, metadata=_meta(
        "confirmation trials (default: as many as queries)", Bound(0, QUERIES.high)))
    neighbors: int | None = field(default=None, metadata=_meta(
        "nearest neighbours references come from, fewer than the stimuli (default: 1%% of the stimuli, at least 24)",
        NEIGHBOURS))
    samples: int = field(default=32, metadata=_meta("posterior samples per member", POSTERIOR_SAMPLES))
    seed: int = field(default=DEFAULT_SEED, metadata=_meta("seed of the candidates and posterior samples", SEED))

    def __post_init__(self) -> None:
        CANDIDATES.check(self.keep, "--keep", high=self.candidates, because=f"--candidates {self.candidates}")


def dims_span(dims: str) -> tuple[int, int]:
    """(lowest, highest) dimensionality a ranges text names ('2-10' -> (2, 10)), for the window's two boxes."""
    ranges = IntRanges.parse(dims, "dims", DIMENSIONS)
    return min(first for first, _ in ranges.ranges), ranges.highest


# The window's boxes hold smaller ranges than the command line accepts: a refit or a proposal there is interactive
# (64 dimensions and 9 members fit in seconds to minutes on a CPU), and each box is sized for its largest value.
WINDOW_DIMS = Bound(1, 64)
WINDOW_MEMBERS = Bound(1, 9)
WINDOW_COUNTS = Bound(1, 100_000)  # queries, and candidates per query

# The window proposes a fifth of the command line's queries, each from a fifth of its candidates: a proposal there
# is looked at, not run in a batch, and takes seconds instead of a minute on the demo embedding.
WINDOW_PROPOSAL = replace(ProposeSettings(), queries=20, candidates=200)
