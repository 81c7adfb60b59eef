"""The zip release of a similarity-judgment dataset (a .zip or its unpacked folder): `stimuli.txt` and one JSON per
session under `train_seqs/` and `test_seqs/` (see `read_zip_release` for the keys), read into `Judgments`.
"""

from __future__ import annotations

import json
import re
import zipfile
import zlib
from pathlib import Path, PurePosixPath

import numpy as np

from probescope.core.errors import InputError
from probescope.core.files import walk_files, zip_member_problem
from probescope.core.similarity.catalog import read_stimuli_txt
from probescope.core.similarity.judgments import Judgments, check_ids
from probescope.core.similarity.trials import MAX_ID, PAD, Trials

_PARTICIPANT_KEYS = ("participant_id", "worker_id", "agent_id", "participant")
_RT_KEYS = ("rt_ms", "response_time_ms", "rt")


def _release_id(value: object, where: str, path: Path) -> int:
    """A release id (a base-36 string, 1-based; a JSON integer is read as its digits) as a 0-based row."""
    text = str(value).strip()
    if isinstance(value, bool) or not isinstance(value, str | int) or not re.fullmatch(r"[0-9A-Za-z]+", text):
        raise InputError(f"{where}: stimulus id {value!r} is not a base-36 id", path)
    number = int(text, 36)
    if not 1 <= number <= MAX_ID + 1:
        raise InputError(f"{where}: stimulus id {value!r} is out of range (ids count from 1)", path)
    return number - 1


def _session_trials(doc: object, where: str, path: Path) -> tuple[str, float | None, list[tuple]]:
    if not isinstance(doc, dict) or not isinstance(doc.get("trials"), list):
        raise InputError(f"{where}: a session JSON needs a 'trials' list", path)
    participant = next((str(doc[k]) for k in _PARTICIPANT_KEYS if k in doc), "")
    grade = doc.get("grade")
    rows = []
    for t, trial in enumerate(doc["trials"]):
        try:
            query = trial["query"]
            refs = trial["references"] if "references" in trial else [trial[f"ref_{k}"] for k in range(8)]
            picks = trial["choices"] if "choices" in trial else [trial[f"choice_{k}"] for k in range(2)]
            rt = next((float(trial[k]) for k in _RT_KEYS if k in trial), float("nan"))
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{where}: trial {t} lacks query, references, choices or has a bad response time",
                             path) from None
        rows.append((query, list(refs), list(picks), rt))
    return participant, None if grade is None else float(grade), rows


MAX_RELEASE_MEMBER = 256 << 20  # bytes a release's stimuli.txt or session JSON may inflate to (they are kilobytes)


def _release_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path) -> bytes:
    """One member of a release zip, read in bounded chunks: InputError for an encrypted member, an unknown
    compression method or one that inflates past MAX_RELEASE_MEMBER (checked before a byte is inflated)."""
    problem = zip_member_problem(info)
    if problem:
        raise InputError(f"cannot read the release ({problem})", path)
    if info.file_size > MAX_RELEASE_MEMBER:
        raise InputError(f"cannot read the release (its member {info.filename!r} inflates to {info.file_size} "
                         f"bytes, more than {MAX_RELEASE_MEMBER})", path)
    chunks, size = [], 0
    with zf.open(info) as member:
        while chunk := member.read(1 << 20):
            size += len(chunk)
            if size > MAX_RELEASE_MEMBER:
                raise InputError(f"cannot read the release (its member {info.filename!r} inflates past "
                                 f"{MAX_RELEASE_MEMBER} bytes)", path)
            chunks.append(chunk)
    return b"".join(chunks)


def read_zip_release(path: str | Path, root: str | Path | None = None) -> Judgments:
    """The newer raw release: a .zip (or its unpacked folder) with stimuli.txt, train_seqs/*.json, test_seqs/*.json.

    Session JSON keys read: `participant_id` (or `worker_id`/`agent_id`), `grade` (0-100), `trials`: a list of
    objects with `query`, `references` (8 ids; or `ref_0`..`ref_7`), `choices` (the ranked picks as ids; or
    `choice_0`, `choice_1`) and `rt_ms` (or `response_time_ms`/`rt`). Ids are base-36 strings, 1-based, as in
    stimuli.txt. The file grade becomes the session grade in [0, 1].
    """
    path = Path(path)
    files: dict[str, bytes] = {}
    try:
        if path.is_dir():
            for f in walk_files(path, lambda name: name == "stimuli.txt" or name.endswith(".json")):
                files[f.relative_to(path).as_posix()] = f.read_bytes()
        else:
            with zipfile.ZipFile(path) as zf:
                for info in zf.infolist():
                    if info.filename.endswith("stimuli.txt") or info.filename.endswith(".json"):
                        files[info.filename] = _release_member(zf, info, path)
    except (OSError, ValueError, EOFError, RuntimeError, NotImplementedError, zlib.error, zipfile.BadZipFile) as exc:
        raise InputError(f"cannot read the release ({exc})", path) from None
    stimuli = sorted((n for n in files if PurePosixPath(n).name == "stimuli.txt"), key=len)
    if not stimuli:
        raise InputError("no stimuli.txt in the release", path)
    catalog = read_stimuli_txt(files[stimuli[0]].decode("utf-8-sig"), path / stimuli[0], root)
    split_of = {n: PurePosixPath(n).parent.name for n in files if n.endswith(".json")}
    sessions = sorted((n for n, s in split_of.items() if s in ("train_seqs", "test_seqs")),
                      key=lambda n: (split_of[n] != "train_seqs", n))  # session ids: training sessions first
    if not sessions:
        raise InputError("no session JSON files under train_seqs/ or test_seqs/", path)

    participants: dict[str, int] = {}
    grades: dict[int, float] = {}
    columns: dict[str, list] = {"train_seqs": [], "test_seqs": []}
    for s, name in enumerate(sessions):
        try:
            doc = json.loads(files[name].decode("utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"{name}: not valid JSON ({exc.__class__.__name__})", path) from None
        participant, grade, rows = _session_trials(doc, name, path)
        pid = participants.setdefault(participant, len(participants))
        if grade is not None:
            grades[s] = grade / 100.0
        for number, (query, refs, picks, rt) in enumerate(rows):
            where = f"{name} trial {number}"
            ref_ids = [_release_id(r, where, path) for r in refs]
            pick_ids = [_release_id(p, where, path) for p in picks]
            if any(p not in ref_ids for p in pick_ids) or len(set(pick_ids)) != len(pick_ids):
                raise InputError(f"{where}: choices must be distinct references", path)
            twice = next((r for r, i in zip(refs, ref_ids) if ref_ids.count(i) > 1), None)
            if twice is not None:
                raise InputError(f"{where}: stimulus {twice} appears twice among the references", path)
            columns[split_of[name]].append(
                (_release_id(query, where, path), ref_ids, [ref_ids.index(p) for p in pick_ids], s, pid, rt, where)
            )

    def to_trials(rows: list) -> Trials | None:
        if not rows:
            return None
        r = max(len(x[1]) for x in rows)
        c = max(len(x[2]) for x in rows)
        refs = np.full((len(rows), r), PAD, dtype=np.int64)
        picks = np.full((len(rows), c), PAD, dtype=np.int64)
        for i, x in enumerate(rows):
            refs[i, : len(x[1])] = x[1]
            picks[i, : len(x[2])] = x[2]
        trials = Trials.make([x[0] for x in rows], refs, picks, [x[3] for x in rows], [x[4] for x in rows],
                             [x[5] for x in rows])
        check_ids(trials, len(catalog), path, lambda row: rows[row][6])
        return trials

    train = to_trials(columns["train_seqs"])
    if train is None:
        raise InputError("no trials under train_seqs/", path)
    notes = ("zip release: base-36 1-based ids, converted to 0-based rows",)
    return Judgments(train, catalog, path, "zip-release", notes, grades, to_trials(columns["test_seqs"]))
