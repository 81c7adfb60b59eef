"""Writers for trials: psiz HDF5 observations (0-based, -1 padding, picks first) and the plain CSV layout.

The CSV layout is the one `readers.read_trials_csv` documents; proposals add `kind` and `info_gain` columns.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from probescope.core.atomic import atomic_open, write_text
from probescope.core.similarity.trials import PAD, Trials


def write_psiz_hdf5(path: str | Path, trials: Trials, attrs: dict[str, object] | None = None) -> None:
    """psiz 0.4 RankObservations layout; every trial must be answered (its picks are stored first)."""
    import h5py  # (h5py: the window's process imports this module)

    n_select = trials.n_select
    if (n_select < 1).any():
        raise ValueError("psiz observation files hold answered trials only")
    stimulus_set = np.concatenate([trials.query[:, None], trials.chosen_first()], axis=1)
    m = len(trials)
    with atomic_open(path, "w+b") as raw, h5py.File(raw, "w") as fh:
        fh.create_dataset("class_name", data="RankObservations", dtype=h5py.string_dtype())
        fh.create_dataset("stimulus_set", data=stimulus_set.astype(np.int32))
        fh.create_dataset("n_select", data=n_select.astype(np.int32))
        fh.create_dataset("is_ranked", data=np.ones(m, dtype=bool))
        fh.create_dataset("groups", data=np.zeros((m, 1), dtype=np.int32))
        fh.create_dataset("agent_id", data=trials.participant.astype(np.int32))
        fh.create_dataset("session_id", data=trials.session.astype(np.int32))
        fh.create_dataset("weight", data=trials.weight.astype(np.float64))
        fh.create_dataset("rt_ms", data=trials.rt_ms.astype(np.float64))
        for key, value in (attrs or {}).items():
            fh.attrs[key] = value


def trials_csv_text(trials: Trials, extra: dict[str, np.ndarray] | None = None) -> str:
    """The CSV text of `trials` (0-based ids; picks as ids; blanks for padding, missing picks and unknowns)."""
    r = trials.references.shape[1]
    c = trials.choices.shape[1]
    extra = extra or {}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["query", *(f"ref_{k + 1}" for k in range(r)), *(f"choice_{k + 1}" for k in range(c)),
                     "session", "participant", "rt_ms", "weight", *extra])
    rows = np.arange(len(trials))[:, None]
    pick_ids = np.where(trials.choices != PAD, trials.references[rows, np.maximum(trials.choices, 0)], PAD)

    def cell(v: float | int) -> str:
        if isinstance(v, (float, np.floating)):
            return "" if np.isnan(v) else repr(float(v))
        return "" if v == PAD else str(int(v))

    for i in range(len(trials)):
        writer.writerow([
            int(trials.query[i]),
            *(cell(v) for v in trials.references[i]),
            *(cell(v) for v in pick_ids[i]),
            cell(trials.session[i]), cell(trials.participant[i]), cell(trials.rt_ms[i]), cell(trials.weight[i]),
            *(cell(extra[k][i]) if not isinstance(extra[k][i], str) else extra[k][i] for k in extra),
        ])
    return out.getvalue()


def write_trials_csv(path: str | Path, trials: Trials, extra: dict[str, np.ndarray] | None = None) -> None:
    write_text(path, trials_csv_text(trials, extra))
