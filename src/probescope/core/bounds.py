"""What a number the user gives can mean, declared once per option or setting, checked before anything is allocated.

Every numeric option of every command, every numeric dissection setting (command line, batch manifest, GUI) and
every number a saved setting holds is a `Bound`: a kind (whole or real) and the range of values that mean
something. A value outside is refused in one line naming the option, before any work: `embed --dims 2-2000000000`
never builds two billion integers, `score --inf-points 2000000000` never asks np.linspace for 16 GB.

Static bounds say what an option can mean anywhere (a seed is 0..2^32-1, NumPy's RandomState range; a batch is at
most 4096 images). Bounds that depend on the data (dimensions at most the number of stimuli, units below the
layer's width) are checked with `Bound.check(value, name, high=..., because=...)` as soon as the data is known, and
still before allocating; `IntRanges` keeps '0-9,17' as ranges until then. What a size must fit in (memory) is
`check_fits`.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

from probescope.core.errors import InputError

_INT = re.compile(r"[+-]?\d+")


@dataclass(frozen=True)
class Bound:
    """A whole (`kind` int) or real (`kind` float, always finite) number from `low` to `high`, both included."""

    low: float
    high: float
    kind: type = int

    def describe(self, high: float | None = None) -> str:
        top = self.high if high is None else high
        what = "a whole number" if self.kind is int else "a number"
        return f"{what} from {_show(self.low)} to {_show(top)}"

    def parse(self, text: str, name: str = "") -> int | float:
        """The value `text` writes, when it is of this kind and in range; InputError naming `name` otherwise. Whole
        numbers are parsed without building a float (1e400) or an int from more than 40 digits."""
        text = text.strip().replace("_", "")
        if self.kind is int:
            if not _INT.fullmatch(text) or len(text.lstrip("+-")) > 40:
                raise InputError(_refusal(name, self.describe(), repr(text)))
            return self.check(int(text), name)
        try:
            value = float(text)
        except ValueError:
            raise InputError(_refusal(name, self.describe(), repr(text))) from None
        return self.check(value, name)

    def check(self, value: float, name: str = "", *, high: float | None = None, because: str = "",
              path: object = None) -> int | float:
        """`value` when it is in range (with `high` lowered to what the data allows, `because` saying why);
        InputError naming `name` (and `path`) otherwise."""
        top = self.high if high is None else min(self.high, high)
        wrong_kind = isinstance(value, bool) or not isinstance(value, int | float) or (
            self.kind is int and not isinstance(value, int))
        if wrong_kind or not math.isfinite(value) or not self.low <= value <= top:
            over = not wrong_kind and math.isfinite(value) and value > top
            why = f" ({because})" if because and over else ""
            raise InputError(_refusal(name, self.describe(top), _show(value)) + why, path)
        return value


def _refusal(name: str, expected: str, got: str) -> str:
    return f"{name}: expected {expected}, got {got}" if name else f"expected {expected}, got {got}"


def _show(value: object) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return str(value)


@dataclass(frozen=True)
class IntRanges:
    """Whole numbers written as ranges, '0-9,17': kept as (first, last) pairs until the data says how many there
    can be, so an absurd range costs nothing until it is refused."""

    ranges: tuple[tuple[int, int], ...]
    text: str

    @classmethod
    def parse(cls, text: str, name: str, bound: Bound) -> IntRanges:
        """Ranges within `bound`; InputError naming `name` for text that is not like '2-10', '4' or '0-9,17'."""
        pairs = []
        for part in text.split(","):
            match = re.fullmatch(r"\s*(\d{1,40})\s*(?:-\s*(\d{1,40})\s*)?", part)
            if match is None or (match.group(2) is not None and int(match.group(2)) < int(match.group(1))):
                lead = f"{name}: " if name else ""
                raise InputError(f"{lead}cannot read {part.strip()!r} in {text!r} (expected e.g. 2-10, 4 or 0-9,17)")
            first = int(match.group(1))
            last = int(match.group(2)) if match.group(2) is not None else first
            bound.check(first, name)
            bound.check(last, name)
            pairs.append((first, last))
        return cls(tuple(pairs), text)

    @property
    def highest(self) -> int:
        return max(last for _first, last in self.ranges)

    def values(self, name: str, what: str, *, high: int, because: str) -> list[int]:
        """The sorted distinct numbers, once the data allows them all (each at most `high`; `what` one of them is)."""
        if self.highest > high:
            raise InputError(f"{name}: {what} {self.highest} out of range ({because})")
        return sorted({v for first, last in self.ranges for v in range(first, last + 1)})


def available_memory() -> int | None:
    """Bytes this process can still allocate: the smaller of the memory the system has available and what its
    address-space limit (RLIMIT_AS) leaves; None when neither is known."""
    limits = []
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    limits.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError):
        try:
            limits.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            pass
    try:
        import resource  # (POSIX only: Windows has none)

        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            with open("/proc/self/statm", encoding="ascii") as fh:
                used = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            limits.append(max(0, soft - used))
    except (ImportError, OSError, ValueError):
        pass
    return min(limits) if limits else None


def check_fits(n_bytes: float, what: str, path: object = None) -> None:
    """InputError when `what` would need more memory than is available (`n_bytes`, an estimate)."""
    free = available_memory()
    if free is not None and n_bytes > free:
        raise InputError(f"{what} would need {_gib(n_bytes)} of memory; {_gib(free)} is available", path)


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:,.1f} GiB"


# ---- the bounds, by what they count (the commands, the settings and the GUI share them) ---------------------------
SEED = Bound(0, 2**32 - 1)  # NumPy's RandomState (torch-fidelity's protocol) takes exactly this range
BATCH = Bound(1, 4096)  # images per forward pass: 4096 at 299x299 are 4.4 GB of float input already
WORKERS = Bound(1, 64)  # decode threads
PROCESSES = Bound(0, 1024)  # worker processes (0: one per core)
IMAGE_SIDE = Bound(1, 8192)  # a resize or probing input side: 8192^2 RGB floats are 805 MB per image
PIXELS = Bound(1, 2**30)  # the largest image decoded: a gigapixel RGB image is 3 GB before any conversion
SAMPLES = Bound(1, 10_000_000)  # images drawn or scored (FID's usual N is 50,000)
SPLITS = Bound(1, SAMPLES.high)  # at most N, checked once N is known
KID_SUBSETS = Bound(1, 10_000)
KID_SUBSET_SIZE = Bound(2, SAMPLES.high)
NEIGHBOURS = Bound(1, 10_000)  # precision/recall's k-th nearest neighbour; a proposal's nearest neighbours
FIT_POINTS = Bound(2, 1_000)  # subset sizes of an infinite-N fit: np.linspace allocates one per point
NOISE = Bound(1, 1 << 20)  # a generator's noise dimension
CLASSES = Bound(0, 1 << 20)  # a conditional generator's classes (0: unconditional)
FRACTION = Bound(0.0, 1.0, float)
SIGNIFICANCE = Bound(1e-6, 0.5, float)  # a test's level alpha
HELD_OUT_SHARE = Bound(0.01, 0.9, float)  # the part of a reference set aside as held-out images
REAL = Bound(-1e30, 1e30, float)  # any finite value (an output range)
UNIT = Bound(0, 2**31 - 1)  # a unit (channel) number, below the layer's width once it is known
UNITS = Bound(0, 2**31 - 1)  # a count of units, at most the layer's width
DIMENSIONS = Bound(1, 2**31 - 1)  # embedding dimensions, at most the number of stimuli
MEMBERS = Bound(1, 100)  # ensemble members
EPOCHS = Bound(1, 1_000_000)
PAIRS = Bound(1, 100_000_000)  # pairs sampled for a correlation: two int64 arrays of this length, and features
QUERIES = Bound(1, 1_000_000)
CANDIDATES = Bound(1, 1_000_000)
POSTERIOR_SAMPLES = Bound(1, 10_000)
DEMO_IMAGES = Bound(1, 1_000_000)  # images the demo dataset writes (about 10 kB each, with labels)
WINDOW_WIDTH = Bound(200, 16384)  # pixels (a window any smaller cannot lay out a workspace; 16384^2 RGBA is 1 GiB)
WINDOW_HEIGHT = Bound(150, 16384)
SECONDS = Bound(0.001, 7 * 24 * 3600.0, float)  # a wait (Qt timers count milliseconds in 31 bits: 24.8 days)
MEBIBYTES = Bound(1, 1 << 30)  # a memory budget in MiB, at most what is available once checked
