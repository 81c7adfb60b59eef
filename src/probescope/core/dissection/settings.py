"""The settings of a dissection, in one place: the dataclass is the single source of every default, and the command
line, the batch manifest, saved results and the GUI all read and write settings through it.

    settings = DissectionSettings.from_mapping({"quantile": 0.01, "searches": "iou,da-stop"})
    settings.to_mapping()   # every field, JSON- and TOML-ready
    settings.protocol()     # the fields that decide results (what a saved result records and a resume must match)

Each field's `help` is the text `probescope dissect --help` shows; its command-line flag is the field name with
dashes (`--beam-limit`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from probescope.core.bounds import FRACTION, MEBIBYTES, PROCESSES, UNITS, Bound
from probescope.core.devices import check_device
from probescope.core.errors import InputError

SEARCH_MODES = ("iou", "da-select", "da-stop", "optimal")
CHOICES = {  # the settings that name one of a few ways, each with the few words a menu shows for it
    "beam_dedupe": {"mask": "one slot per mask", "none": "duplicates kept (the original code)"},
    "iou_scope": {"dataset": "whole dataset", "category": "per category (NetDissect-Lite)"},
}
DEDUPE_MODES = tuple(CHOICES["beam_dedupe"])
IOU_SCOPES = tuple(CHOICES["iou_scope"])
SPEED_ONLY = ("device", "cache_mb", "jobs")  # change how fast, never what is found


def _help(text: str, bound: Bound | None = None) -> dict[str, object]:
    """A field's metadata: the help text of its option and, for numbers, the Bound of what it can mean."""
    return {"help": text} if bound is None else {"help": text, "bound": bound}


LENGTH = Bound(1, 32)  # atoms in a formula: the papers go to 10, and every atom multiplies the search
CONCEPTS = Bound(0, 1 << 20)  # concepts per beam step (Broden has 1,197)


@dataclass(frozen=True)
class DissectionSettings:
    """Protocol settings (seed 002 defaults). `sweep_length` N records the best-IoU formula at max lengths 1..N
    (the seed uses 10; it costs about N / 2 times a length-3 search, so it is off by default); `da_limit` is the
    safety cap on atoms for da-select / da-stop. `device`, `cache_mb` and `jobs` change speed, never results."""

    quantile: float = field(default=0.005, metadata=_help("top quantile q: T_u = quantile(1 - q)", FRACTION))
    beam_size: int = field(default=5, metadata=_help("formulas kept per step of the beam search", Bound(1, 10_000)))
    beam_limit: int = field(default=0, metadata=_help(
        "candidate concepts added at each beam step: 0 = every concept that passes --min-samples, those disjoint from "
        "the unit's mask included (the default of Mu & Andreas' code, BEAM_SEARCH_LIMIT = None); N = the N concepts "
        "with the highest IoU among those with IoU > 0 (the Detection Accuracy paper's code used 50)", CONCEPTS))
    beam_dedupe: str = field(default="mask", metadata=_help(
        "mask: a formula whose mask over the dataset equals one already in the pool takes no beam slot (the one with "
        "fewer atoms, then lower label numbers, stays); none: the original code's beams, duplicates included"))
    max_length: int = field(default=3, metadata=_help("atoms in compositional explanations", LENGTH))
    min_samples: int = field(default=5, metadata=_help("drop concepts present in fewer images", UNITS))
    searches: tuple[str, ...] = field(default=("iou",), metadata=_help(
        f"comma list of {', '.join(SEARCH_MODES)} (optimal: the best formula of up to --max-length atoms over all "
        "concepts, by branch and bound, and how far the iou beam search is from it)"))
    iou_scope: str = field(default="dataset", metadata=_help(
        "dataset: IoU over every image (Mu & Andreas, the Detection Accuracy paper); category: a concept's IoU counts "
        "the unit's pixels only in images where the unit meets a label of that concept's category (NetDissect and "
        "NetDissect-Lite, for the full Broden index); a formula's scope is its concepts' categories together"))
    sweep_length: int = field(default=0, metadata=_help(
        "length sweep: best IoU and its DA at max lengths 1..N per unit (the seed's is 10; costs about N/2 times "
        "the length-3 search; 0 = none)", Bound(0, LENGTH.high)))
    da_limit: int = field(default=10, metadata=_help("safety cap on atoms for da-select / da-stop", LENGTH))
    device: str = field(default="cpu", metadata=_help("cpu or cuda (mask upsampling)"))
    cache_mb: int = field(default=256, metadata=_help(
        "memory for the formulas' cached dataset-wide counts and region sets, in MiB (per process)", MEBIBYTES))
    jobs: int = field(default=0, metadata=_help(
        "processes dissecting units at once: 0 = one per core, 1 = this process alone; the results are the same "
        "(byte for byte) for any number", PROCESSES))

    def __post_init__(self) -> None:
        bad = [m for m in self.searches if m not in SEARCH_MODES]
        if bad:
            raise InputError(f"unknown search mode(s) {', '.join(bad)} (choose from {', '.join(SEARCH_MODES)})")
        for name, value, choices in (("beam dedupe", self.beam_dedupe, DEDUPE_MODES),
                                     ("IoU scope", self.iou_scope, IOU_SCOPES)):
            if value not in choices:
                raise InputError(f"unknown {name} {value!r} (choose from {', '.join(choices)})")
        if not 0 < self.quantile < 1:
            raise InputError(f"quantile must lie in (0, 1), got {self.quantile}")
        for f in fields(self):
            if "bound" in f.metadata:
                f.metadata["bound"].check(getattr(self, f.name), f.name)
        check_device(self.device, "device", here=False)  # where it runs decides whether it is there (batch on Ray)

    @property
    def cache_bytes(self) -> int:
        return self.cache_mb << 20

    def to_mapping(self) -> dict[str, Any]:
        """Every setting as plain JSON/TOML values (searches as a list)."""
        d = asdict(self)
        d["searches"] = list(self.searches)
        return d

    def protocol(self) -> dict[str, Any]:
        """The settings that determine results (what a saved result records and a resumed run must match)."""
        d = self.to_mapping()
        for k in SPEED_ONLY:
            d.pop(k)
        return d

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any], where: str = "settings") -> DissectionSettings:
        """Settings from plain values (a manifest's [settings], a saved result's protocol, parsed arguments).

        Missing keys take the defaults; `searches` may be a list or a comma string; unknown keys and values of the
        wrong type raise InputError naming `where`."""
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(mapping) - set(known))
        if unknown:
            raise InputError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(known)})")
        kwargs: dict[str, Any] = {}
        for name, value in mapping.items():
            default = known[name].default
            if name == "searches":
                items = value.split(",") if isinstance(value, str) else value
                if not isinstance(items, list | tuple) or not all(isinstance(s, str) for s in items):
                    raise InputError(f"{where}: searches must be a list of names or a comma string, got {value!r}")
                kwargs[name] = tuple(s.strip() for s in items if s.strip())
            else:
                expected = type(default)  # float, int or str
                if isinstance(value, bool) or not (isinstance(value, expected)
                                                   or (expected is float and isinstance(value, int))):
                    raise InputError(f"{where}: {name} must be {expected.__name__}, got {value!r}")
                kwargs[name] = expected(value)
        try:
            return cls(**kwargs)
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None


# The window's preset. The window shows the Detection Accuracy paper's (seed 002) comparison of one layer at once:
# the compositional explanation (iou) beside the two searches driven by Detection Accuracy (da-select, da-stop:
# Figure 4's lengths, Figure 6's specialised units), and the length sweep up to 10 (Figure 2: DA against IoU as the
# maximum length grows). The command line and a batch keep the dataclass's defaults (iou only, no sweep: the fastest
# run), as the papers' code does.
WINDOW_SETTINGS = DissectionSettings(searches=("iou", "da-select", "da-stop"), sweep_length=10)
