"""Readers for similarity-judgment files in their real layouts, all returning `Judgments` with 0-based ids.

- psiz HDF5 observations (`obs-118.hdf5`, `obs-195.hdf5` of ImageNet-HSJ, or any psiz RankObservations file):
  `stimulus_set` rows `[query, pick 1, pick 2, ..., other references]`, `n_select`, `is_ranked`, `groups` or
  `group_id`, `agent_id`, `session_id`, `weight`, `rt_ms`; type string `class_name` or `trial_type`. psiz 0.4 files
  are 0-based with -1 padding, later ones 1-based with 0 padding: the reader tells which from the evidence (and
  says so in `notes`), and asks for the base (`index_base`) when the evidence could mean either.
- the zip release (a .zip or its unpacked folder): `stimuli.txt` and one JSON per session under `train_seqs/` and
  `test_seqs/` (probescope.core.similarity.release).
- plain CSV, for people running their own experiments (see `read_trials_csv`).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from probescope.core.errors import InputError
from probescope.core.files import folder_problem, readable_file
from probescope.core.similarity.catalog import Catalog, read_catalog
from probescope.core.similarity.judgments import Judgments, check_distinct_references, check_ids
from probescope.core.similarity.release import read_zip_release
from probescope.core.similarity.trials import MAX_ID, PAD, Trials, whole_ids

# ----------------------------------------------------------------------------------------------------------- psiz
INDEX_BASE_HINT = "give the base: --index-base 0 or 1 (in the app: Stimulus ids, in the Open Judgments dialog)"


def _detect_base(stimulus_set: np.ndarray, catalog: Catalog | None, index_base: int | None,
                 path: Path) -> tuple[int, str]:
    """0 (psiz 0.4: 0-based, -1 padding) or 1 (later psiz: 1-based, 0 padding), with the reason. Only evidence
    decides: -1 padding, a 0 inside a trial (0-based), runs of trailing zeros (1-based padding), or the catalog;
    without any, InputError asks for `index_base`."""
    zeros = stimulus_set == 0
    inner_zero = bool(zeros[:, 0].any() or (zeros[:, :-1] & ~zeros[:, 1:]).any())  # a query, or before an id
    padded = not inner_zero and bool((zeros.sum(axis=1) >= 2).any())  # a 0-based trial never shows 0 twice
    negative = bool((stimulus_set < 0).any())
    if index_base is not None:
        if index_base not in (0, 1):
            raise InputError(f"the index base must be 0 or 1, got {index_base}", path)
        if index_base == 1 and (negative or inner_zero):
            found = "-1 padding" if negative else "stimulus 0 inside a trial"
            raise InputError(f"index base 1 does not fit the file: {found} means 0-based ids", path)
        if index_base == 0 and padded:
            raise InputError("index base 0 does not fit the file: trailing runs of 0 are 1-based padding", path)
        return index_base, f"{index_base}-based ids (as given)"
    if negative:
        return 0, "0-based ids with -1 padding (psiz 0.4 layout): -1 found"
    if inner_zero:
        return 0, "0-based ids (psiz 0.4 layout): stimulus 0 appears inside trials"
    if padded:
        return 1, "1-based ids with 0 padding (later psiz layout): trials end in runs of 0"
    if catalog is not None:
        if int(stimulus_set.max()) == len(catalog):
            return 1, f"1-based ids (later psiz layout): id {len(catalog)} is the catalog's last stimulus"
        return catalog.id_base, f"{catalog.id_base}-based ids, as the catalog numbers its stimuli"
    where = ("stimulus 0 appears only as some trials' last reference (a stimulus, or 1-based padding)"
             if zeros.any() else "no id 0 appears (unused, or 1-based)")
    raise InputError("cannot tell whether the stimulus ids are 0-based (psiz 0.4) or 1-based (later psiz) without "
                     f"a catalog: no -1 padding, and {where}; {INDEX_BASE_HINT}", path)


def read_psiz_hdf5(path: str | Path, catalog: Catalog | None = None, index_base: int | None = None) -> Judgments:
    """psiz RankObservations HDF5 -> Judgments (picks first in `stimulus_set`, so choices are positions 0..c-1).
    `index_base` (0 or 1) says how the file numbers stimuli when its content cannot tell."""
    import h5py  # (h5py: the window's process imports this module)

    path = Path(path)
    try:
        with h5py.File(path, "r") as fh:
            kind = next((fh[k][()] for k in ("class_name", "trial_type") if k in fh), None)
            kind = kind.decode() if isinstance(kind, bytes) else (None if kind is None else str(kind))
            if kind is None or "Rank" not in kind:
                raise InputError(f"not a psiz rank observation file (class_name/trial_type = {kind!r})", path)
            for name in ("stimulus_set", "n_select"):
                if name not in fh:
                    raise InputError(f"dataset '{name}' missing", path)
            data = {k: np.asarray(fh[k][()]) for k in fh.keys() if isinstance(fh[k], h5py.Dataset)}
    except OSError as exc:
        raise InputError(f"cannot read HDF5 file ({exc})", path) from None
    sset = data["stimulus_set"]
    if sset.ndim != 2 or sset.shape[1] < 3:
        raise InputError(f"stimulus_set must be (trials, 1 + references), got shape {sset.shape}", path)
    m = len(sset)
    if m == 0:
        raise InputError("no trials in stimulus_set", path)
    def where(row: int) -> str:
        return f"trial {row} (stimulus_set row {row})"

    sset = whole_ids(sset, -1, path, where)
    n_select = whole_ids(data["n_select"].reshape(-1), 0, path, lambda row: f"trial {row}", "n_select")
    if len(n_select) != m:
        raise InputError(f"n_select has {len(n_select)} rows, stimulus_set {m}", path)
    if "is_ranked" in data and not data["is_ranked"].astype(bool).reshape(-1)[n_select > 1].all():
        raise InputError("unranked trials with several picks are not supported", path)
    base, note = _detect_base(sset, catalog, index_base, path)
    ids = sset - base
    pad = ids < 0
    ids[pad] = PAD
    query, refs = ids[:, 0], ids[:, 1:]
    check_distinct_references(refs, path, where)
    n_ref = (refs != PAD).sum(1)
    if (query == PAD).any() or (n_select < 1).any() or (n_select >= n_ref).any():
        raise InputError("every trial needs a query, at least one pick and more references than picks", path)
    c = int(n_select.max())
    choices = np.where(np.arange(c)[None, :] < n_select[:, None], np.arange(c)[None, :], PAD)

    def column(*names: str) -> np.ndarray | None:
        for name in names:
            if name in data:
                values = data[name].reshape(m, -1)[:, 0]
                return values
        return None

    try:
        trials = Trials.make(
            query, refs, choices,
            session=column("session_id"), participant=column("agent_id"),
            rt_ms=column("rt_ms"), weight=column("weight"),
        )
    except ValueError as exc:
        raise InputError(str(exc), path) from None
    notes = [f"psiz HDF5: {note}"]
    if catalog is not None:
        check_ids(trials, len(catalog), path, where)
    return Judgments(trials, catalog, path, "psiz-hdf5", tuple(notes))


# -------------------------------------------------------------------------------------------------------------- CSV
def read_trials_csv(path: str | Path, catalog: Catalog | None = None) -> Judgments:
    """Plain CSV trials, one row per trial, comma-separated with a header.

    Columns: `query` and `ref_1` .. `ref_R` (0-based catalog ids, whole numbers; R >= 2; a blank ref ends the trial
    early; a stimulus at most once among a trial's references), optional `choice_1` .. `choice_C` (the ids of the
    1st, 2nd, ... pick, each one of the trial's references; blank when not (yet) answered, and never blank before a
    filled one), optional `session`, `participant` (whole numbers; without `session`, no session is known and no
    session grade applies), `rt_ms` (response time in ms) and `weight` (default 1). Other columns are ignored
    (proposal files add `kind` and `info_gain`).
    """
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:  # spreadsheets save CSV with a byte-order mark
            reader = csv.DictReader(fh)
            header = list(reader.fieldnames or [])
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot read CSV ({exc})", path) from None
    r = 0
    while f"ref_{r + 1}" in header:
        r += 1
    c = 0
    while f"choice_{c + 1}" in header:
        c += 1
    if "query" not in header or r < 2:
        raise InputError("a trials CSV needs the columns 'query', 'ref_1', 'ref_2', ...", path)
    if not rows:
        raise InputError("no trials: the file has a header only", path)
    m = len(rows)
    query = np.zeros(m, dtype=np.int64)
    refs = np.full((m, r), PAD, dtype=np.int64)
    picks = np.full((m, max(c, 1)), PAD, dtype=np.int64)
    extra = {k: np.full(m, np.nan) for k in ("session", "participant", "rt_ms", "weight")}

    def number(text: str | None, line: int, name: str, whole: bool = True, low: int = 0) -> float:
        """The cell's value, nan when blank; ids (`whole`) must be whole numbers from `low` to MAX_ID: 9.5 is no
        stimulus, nor is -3 or 1e30."""
        text = (text or "").strip()
        if not text:
            return float("nan")
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"line {line}: column '{name}' holds '{text}', not a number", path) from None
        if whole and not value.is_integer():
            raise InputError(f"line {line}: column '{name}' holds '{text}', not a whole-number id", path)
        if whole and not low <= value <= MAX_ID:
            raise InputError(f"line {line}: column '{name}' holds '{text}', out of range ({low} to {MAX_ID})", path)
        return value

    for i, row in enumerate(rows):
        line = i + 2
        q = number(row["query"], line, "query")
        ref_values = [number(row[f"ref_{k + 1}"], line, f"ref_{k + 1}") for k in range(r)]
        n_ref = next((k for k, v in enumerate(ref_values) if np.isnan(v)), r)
        if np.isnan(q) or n_ref < 2 or not all(np.isnan(v) for v in ref_values[n_ref:]):
            raise InputError(f"line {line}: a trial needs a query and at least 2 leading references", path)
        query[i] = int(q)
        refs[i, :n_ref] = [int(v) for v in ref_values[:n_ref]]
        row_refs = refs[i, :n_ref].tolist()
        twice = next((s for s in row_refs if row_refs.count(s) > 1), None)
        if twice is not None:
            raise InputError(f"line {line}: stimulus {twice} appears twice among the references", path)
        choice_values = [number(row[f"choice_{k + 1}"], line, f"choice_{k + 1}") for k in range(c)]
        n_picks = next((k for k, v in enumerate(choice_values) if np.isnan(v)), c)
        later = next((k for k in range(n_picks, c) if not np.isnan(choice_values[k])), None)
        if later is not None:
            raise InputError(f"line {line}: choice_{later + 1} is filled but choice_{n_picks + 1} is blank", path)
        for k, v in enumerate(choice_values[:n_picks]):
            if int(v) not in row_refs or int(v) in refs[i, picks[i, :k]]:
                raise InputError(f"line {line}: choice_{k + 1} = {int(v)} is not a new reference of the trial", path)
            picks[i, k] = row_refs.index(int(v))
        for k in extra:
            if k in row:
                extra[k][i] = number(row[k], line, k, whole=k in ("session", "participant"), low=-1)
    weight = np.where(np.isnan(extra["weight"]), 1.0, extra["weight"])
    trials = Trials.make(
        query, refs, picks,
        np.nan_to_num(extra["session"], nan=-1).astype(np.int64),
        np.nan_to_num(extra["participant"], nan=-1).astype(np.int64),
        extra["rt_ms"], weight,
    )
    if catalog is not None:
        check_ids(trials, len(catalog), path, lambda row: f"line {row + 2}")
    return Judgments(trials, catalog, path, "csv", ("CSV: 0-based ids",))


# --------------------------------------------------------------------------------------------------------- dispatch
def load_judgments(
    path: str | Path, catalog: str | Path | None = None, image_root: str | Path | None = None,
    index_base: int | None = None,
) -> Judgments:
    """Read judgments by layout: .hdf5/.h5 (psiz), .zip or a folder with stimuli.txt (zip release), .csv.

    The catalog defaults to `catalog.hdf5` (psiz) or `catalog.csv` (CSV) beside the file when present; the zip
    release carries its own `stimuli.txt`. `image_root` is the folder the catalog's image paths are relative to;
    `index_base` how a psiz file numbers its stimuli, when its content cannot tell (the other layouts define it).
    """
    path = Path(path)
    if folder_problem(path) is not None:
        readable_file(path, "judgments file not found")
    suffix = path.suffix.lower()
    if index_base is not None and suffix not in (".hdf5", ".h5"):
        raise InputError("an index base is read only for psiz HDF5 files (this layout defines its own)", path)
    if path.is_dir() or suffix == ".zip":
        judgments = read_zip_release(path, image_root)
        if catalog is None:
            return judgments
        cat = read_catalog(catalog, image_root)
        check_ids(judgments.trials, len(cat), path)
        return Judgments(judgments.trials, cat, path, judgments.format, judgments.notes,
                         judgments.session_grade, judgments.test)
    default_name = {".hdf5": "catalog.hdf5", ".h5": "catalog.hdf5", ".csv": "catalog.csv"}.get(suffix)
    if default_name is None:
        raise InputError("unknown judgments format (expected .hdf5, .zip, a release folder or .csv)", path)
    cat_path = Path(catalog) if catalog is not None else path.parent / default_name
    cat = read_catalog(cat_path, image_root) if (catalog is not None or cat_path.is_file()) else None
    if suffix == ".csv":
        return read_trials_csv(path, cat)
    return read_psiz_hdf5(path, cat, index_base)
