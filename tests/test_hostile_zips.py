"""Hostile zip archives, as a class: whatever reads a zip-based file to tell (or check) its kind must neither crash
nor inflate more than it needs. Four damaged archives are built by writing a zip and patching its bytes (an
encrypted member, an unknown compression method, a damaged deflate stream, a bomb member: small compressed, huge
inflated), and each zip-sniffing reader and command is given each of them: a reader answers False or raises
InputError naming the file, a command ends in one line naming the file, exit 2. No member is ever read whole while
a kind is told, and an untrusted file is hashed in chunks, never read whole."""

from __future__ import annotations

import struct
import tracemalloc
import zipfile
from pathlib import Path

import pytest
import torch

from probescope.core.errors import InputError
from probescope.core.models import checkpoint
from probescope.core.models.archives import is_exported_program, is_torchscript
from probescope.core.models.checkpoint import read_torch_file
from probescope.core.models.exported import load_program
from probescope.core.trust import NO_TRUST, UntrustedFile, read_trusted
from probescope.main import main

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")

HARMS = ("encrypted", "unknown method", "damaged", "bomb")
BOMB_SIZE = 64 << 20  # zeros, deflated to ~64 KB; the limits under test are patched down to well below this


def hostile_zip(path: Path, members: dict[str, bytes], target: str, harm: str) -> Path:
    """A deflated zip of `members` whose member `target` is made hostile by patching the written bytes."""
    if harm == "bomb":
        members = {**members, target: bytes(BOMB_SIZE)}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(target)
        central = [i.filename for i in zf.infolist()]
    raw = bytearray(path.read_bytes())
    local = info.header_offset
    assert raw[local:local + 4] == b"PK\x03\x04"
    name_len, extra_len = struct.unpack_from("<HH", raw, local + 26)
    data_start = local + 30 + name_len + extra_len
    cd = raw.find(b"PK\x01\x02")
    for _ in range(central.index(target)):  # walk the central directory to the target's entry
        n, e, c = struct.unpack_from("<HHH", raw, cd + 28)
        cd += 46 + n + e + c
    if harm == "encrypted":
        raw[local + 6] |= 0x1
        raw[cd + 8] |= 0x1
    elif harm == "unknown method":
        struct.pack_into("<H", raw, local + 8, 99)
        struct.pack_into("<H", raw, cd + 10, 99)
    elif harm == "damaged":
        for i in range(data_start, data_start + min(info.compress_size, 8)):
            raw[i] = 0xFF  # BTYPE 11: an invalid deflate block
    path.write_bytes(bytes(raw))
    return path


def _pt2(tmp_path: Path, harm: str) -> Path:
    """A torch.export-shaped archive whose `archive_format` member is hostile."""
    members = {"model/archive_format": b"pt2", "model/version": b"1", "model/data/weights/w": bytes(64)}
    return hostile_zip(tmp_path / "model.pt2", members, "model/archive_format", harm)


def _torch_zip(tmp_path: Path, harm: str) -> Path:
    """A torch.save-shaped archive whose pickle is hostile."""
    import pickle

    members = {"archive/data.pkl": pickle.dumps({"w": 1}), "archive/version": b"3"}
    return hostile_zip(tmp_path / "weights.pt", members, "archive/data.pkl", harm)


def _release(tmp_path: Path, harm: str) -> Path:
    members = {"release/stimuli.txt": b"a.jpg\nb.jpg\n", "release/train_seqs/s1.json": b'{"trials": []}'}
    return hostile_zip(tmp_path / "release.zip", members, "release/train_seqs/s1.json", harm)


@pytest.fixture(autouse=True)
def _bounded(monkeypatch):
    """Limits patched below the bomb, and no zip member read whole: ZipExtFile.read(n) only for a bounded n."""
    monkeypatch.setattr(checkpoint, "MAX_INFLATED", 1 << 20)
    original = zipfile.ZipExtFile.read

    def bounded_read(self, n=-1):
        if n is None or n < 0 or n > 8 << 20:
            raise AssertionError(f"a zip member was read whole ({self.name})")
        return original(self, n)

    monkeypatch.setattr(zipfile.ZipExtFile, "read", bounded_read)


def _input_error_or_false(call, path: Path) -> None:
    try:
        result = call(path)
    except InputError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc), str(exc)
        return
    assert result is False or result is None


@pytest.mark.parametrize("harm", HARMS)
@pytest.mark.parametrize("make", [_pt2, _torch_zip], ids=["pt2", "torch-zip"])
@pytest.mark.parametrize("reader", [is_exported_program, is_torchscript], ids=["is_exported_program",
                                                                                "is_torchscript"])
def test_sniffing_a_hostile_zip_answers_or_names_the_file(tmp_path, make, harm, reader):
    _input_error_or_false(reader, make(tmp_path, harm))


@pytest.mark.parametrize("harm", HARMS)
@pytest.mark.parametrize("make", [_pt2, _torch_zip], ids=["pt2", "torch-zip"])
@pytest.mark.parametrize("reader", [read_torch_file, lambda p: load_program(p, NO_TRUST)],
                         ids=["read_torch_file", "load_program"])
def test_loading_a_hostile_zip_is_one_input_error(tmp_path, make, harm, reader):
    path = make(tmp_path, harm)
    with pytest.raises(InputError) as err:
        reader(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("harm", ["encrypted", "unknown method", "damaged"])
def test_a_hostile_archive_format_member_is_named(tmp_path, harm):
    path = _pt2(tmp_path, harm)
    with pytest.raises(InputError, match="damaged zip archive .*archive_format"):
        is_exported_program(path)


@pytest.mark.parametrize("harm", HARMS)
@pytest.mark.parametrize("make", [_pt2, _torch_zip], ids=["pt2", "torch-zip"])
@pytest.mark.parametrize("prefix", ["", "export:"])
def test_info_on_a_hostile_zip_is_one_line_exit_2(tmp_path, capsys, make, harm, prefix):
    path = make(tmp_path, harm)
    capsys.readouterr()
    assert main(["info", f"{prefix}{path}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("harm", HARMS)
def test_a_hostile_judgments_release_is_one_input_error(tmp_path, harm, monkeypatch):
    from probescope.core.similarity import release
    from probescope.core.similarity.release import read_zip_release

    monkeypatch.setattr(release, "MAX_RELEASE_MEMBER", 1 << 20)
    path = _release(tmp_path, harm)
    with pytest.raises(InputError) as err:
        read_zip_release(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def _npz_readers():
    """Every reader of a .npz (or a .npy that may be given one) the user hands in: (name, read(path))."""
    from probescope.core.scoring.frechet import read_npz
    from probescope.core.scoring.sources import read_image_array
    from probescope.core.similarity.ensemble import Ensemble
    from probescope.core.similarity.sources import load_features
    from probescope.jobs.dissection.layer import _read_predictions

    return [("samples", read_image_array), ("fid stats", read_npz), ("embedding", Ensemble.load),
            ("features", lambda p: load_features(p, None)), ("predictions", _read_predictions)]


@pytest.mark.parametrize("harm", HARMS)
@pytest.mark.parametrize("reader", [name for name, _ in _npz_readers()])
def test_a_hostile_npz_is_one_input_error(tmp_path, harm, reader, monkeypatch):
    import io

    import numpy as np

    from probescope.core import files

    read = dict(_npz_readers())[reader]
    buf = io.BytesIO()
    np.save(buf, np.zeros((2, 4, 4, 3), np.uint8))
    path = hostile_zip(tmp_path / "samples.npz", {"images.npy": buf.getvalue()}, "images.npy", harm)
    monkeypatch.setattr(files, "MAX_NPZ_INFLATED", 1 << 20)  # a bomb: refused above the limit, unread
    with pytest.raises(InputError) as err:
        read(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("harm", HARMS)
def test_score_probs_from_a_hostile_npz_is_one_line(tmp_path, harm, capsys, monkeypatch):
    import io

    import numpy as np

    from probescope.core import files

    buf = io.BytesIO()
    np.save(buf, np.full((4, 3), 1 / 3))
    path = hostile_zip(tmp_path / "probs.npz", {"probs.npy": buf.getvalue()}, "probs.npy", harm)
    monkeypatch.setattr(files, "MAX_NPZ_INFLATED", 1 << 20)
    assert main(["score", "--probs", str(path), "--splits", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0]


class _Tiny(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def test_an_untrusted_program_behind_padding_is_refused_without_reading_it_whole(tmp_path, capsys):
    """A valid program behind 64 MiB of zeros (a sparse file; the issue's was 6 GiB): sniffed from its directory,
    hashed in 1 MiB reads, refused in one line; Python never holds more than a few MiB of it."""
    program = tmp_path / "p.pt2"
    torch.export.save(torch.export.export(_Tiny(), (torch.zeros(2, 3),)), program)
    padded = tmp_path / "padded.pt2"
    pad = 64 << 20
    with open(padded, "wb") as fh:
        fh.truncate(pad)
        fh.seek(pad)
        fh.write(program.read_bytes())
    assert is_exported_program(padded)
    tracemalloc.start()
    try:
        with pytest.raises(UntrustedFile):
            read_trusted(padded, NO_TRUST, "torch.export program")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak
    capsys.readouterr()
    assert main(["info", f"export:{padded}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(padded) in err and "refusing to load" in err, err


def test_a_bomb_is_detected_by_its_declared_size_not_by_inflating(tmp_path):
    path = _torch_zip(tmp_path, "bomb")
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("archive/data.pkl")
    assert info.file_size == BOMB_SIZE and info.compress_size < BOMB_SIZE // 100
    with pytest.raises(InputError, match="inflates to"):
        read_torch_file(path)
