"""Every reader that walks a folder or opens the files a folder names, fed an entry that cannot be read: a link to
itself, a link to nothing, a file this process may not read. Each answers in one line naming the entry (the
guide's "a broken link or a FIFO is an error"), never an OSError traceback or a hang.

Permissions do not stop root, and the suite may run as root: there the unreadable case runs in a forked child
that has dropped to the `nobody` user (a real EACCES, not a simulation); the child needs nothing from disk that the
parent has not imported already.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import traceback
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from probescope.core.errors import InputError
from probescope.core.files import DANGLING, LOOP, SPECIAL, UNREADABLE

NOBODY = 65534
KINDS = ("self-link", "dangling", "unreadable")
MESSAGES = {"self-link": LOOP, "dangling": DANGLING, "unreadable": UNREADABLE}


def spoil(path: Path, kind: str) -> None:
    """Make `path` an entry that cannot be read, of the given kind."""
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "self-link":
        path.symlink_to(path.name)  # self.png -> self.png
    elif kind == "dangling":
        path.symlink_to(path.with_name("gone-" + path.name))
    else:
        Image.new("RGB", (8, 8)).save(path, format="PNG") if path.suffix == ".png" else path.write_text("x")
        path.chmod(0)


def unprivileged(fn: Callable[[], object]) -> str:
    """fn() where permissions apply: here when not root, else in a fork that dropped to `nobody`. Returns 'ok' or
    'InputError: <message>'; anything else fails the test with the child's traceback."""
    def outcome() -> str:
        try:
            fn()
            return "ok"
        except InputError as exc:
            return f"InputError: {exc}"

    if os.geteuid() != 0:
        return outcome()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop root, run, report through the pipe, never return into pytest
        code = 0
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            text = outcome()
        except BaseException:  # noqa: BLE001  (reported to the parent, which fails the test)
            text, code = "crash: " + traceback.format_exc(), 1
        os.write(write, text.encode())
        os._exit(code)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    text = b"".join(chunks).decode()
    assert not text.startswith("crash"), text
    return text


@pytest.fixture
def place():
    """A folder every user may enter (the unprivileged child must reach it), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="probescope-links-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


def _png(path: Path, value: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (value, 0, 0)).save(path)


# ------------------------------------------------------------------------------------------------ the readers
def score_images(root: Path) -> tuple[Path, Callable[[], object]]:
    """score --images DIR (and the gallery's samples folder): the listing."""
    from probescope.core.scoring.sources import open_source

    for k in range(3):
        _png(root / "samples" / f"{k}.png", k)
    return root / "samples" / "self.png", lambda: list(open_source(root / "samples").batches(8))


def fid_reference(root: Path) -> tuple[Path, Callable[[], object]]:
    """score --fid DIR: the reference folder, listed and hashed for its cache key."""
    from probescope.core.scoring.reference import content_hash, reference_source

    for k in range(3):
        _png(root / "real" / f"{k}.png", k)
    return root / "real" / "self.png", lambda: content_hash(reference_source(root / "real"))


def _broden(root: Path) -> Path:
    from probescope.core.demo.dataset import write_demo_dataset

    write_demo_dataset(root / "broden", n_images=3)
    return root / "broden"


def broden_image(root: Path) -> tuple[Path, Callable[[], object]]:
    """A Broden dataset's images folder (dissect --dataset, score --fid BRODEN): read in index order."""
    from probescope.core.data.broden import BrodenDataset
    from probescope.core.scoring.reference import BrodenImageSource

    dataset = BrodenDataset.open(_broden(root))
    return dataset.image_path(1), lambda: list(BrodenImageSource(dataset).batches(8))


def broden_label_map(root: Path) -> tuple[Path, Callable[[], object]]:
    """A Broden dataset's label PNGs (the label store reads them all)."""
    from probescope.core.data.broden import BrodenDataset

    dataset = BrodenDataset.open(_broden(root))
    row = dataset._rows[0]
    entry = next(e for _c, entries in row.cells for e in entries if not e.isdigit())
    return dataset.root / "images" / entry, lambda: [dataset.pixel_layers(i) for i in range(dataset.n_images)]


def broden_index(root: Path) -> tuple[Path, Callable[[], object]]:
    """A Broden dataset's index.csv (and label.csv) inside its folder."""
    from probescope.core.data.broden import BrodenDataset

    folder = _broden(root)
    return folder / "index.csv", lambda: BrodenDataset.open(folder)


def catalog_images(root: Path) -> tuple[Path, Callable[[], object]]:
    """A catalog's images under --image-root (similarity --model, the Similarity workspace's stimuli)."""
    from probescope.core.similarity.catalog import read_catalog
    from probescope.core.similarity.sources import CatalogImages

    (root / "stimuli").mkdir()
    for k in range(3):
        _png(root / "stimuli" / f"{k}.png", k)
    (root / "catalog.csv").write_text("id,path\n" + "".join(f"{k},{k}.png\n" for k in range(3)))
    images = CatalogImages(read_catalog(root / "catalog.csv", root / "stimuli"))
    return root / "stimuli" / "1.png", lambda: [images[k] for k in range(len(images))]


def release_folder(root: Path) -> tuple[Path, Callable[[], object]]:
    """The unpacked zip release: stimuli.txt and the session JSONs, found by walking the folder."""
    from probescope.core.similarity.readers import load_judgments

    folder = root / "release"
    (folder / "train_seqs").mkdir(parents=True)
    (folder / "stimuli.txt").write_text("".join(f"{k + 1}|img_{k}.jpg|n0\n" for k in range(9)))
    trial = {"query": "1", "references": [str(k) for k in range(2, 10)], "choices": ["2", "3"], "rt_ms": 2000}
    (folder / "train_seqs" / "s0.json").write_text(json.dumps({"participant_id": "a", "trials": [trial]}))
    (folder / "train_seqs" / "s1.json").write_text(json.dumps({"participant_id": "b", "trials": [trial]}))
    return folder / "train_seqs" / "s1.json", lambda: load_judgments(folder)


def dropped_folder(root: Path) -> tuple[Path, Callable[[], object]]:
    """A folder dropped on the window (or named to `gui --samples`): told apart by what it holds, then opened."""
    from probescope.core.scoring.sources import open_source
    from probescope.jobs.inputs import classify_path

    for k in range(2):
        _png(root / "dropped" / f"{k}.png", k)
    return root / "dropped" / "self.png", lambda: open_source(classify_path(root / "dropped").spec)


def linked_root(root: Path) -> tuple[Path, Callable[[], object]]:
    """The folder itself is the bad link (a --images, --fid or --image-root that cannot be resolved)."""
    from probescope.core.scoring.sources import open_source

    (root / "store").mkdir()
    return root / "images", lambda: open_source(root / "images")


READERS = [score_images, fid_reference, broden_image, broden_label_map, broden_index, catalog_images,
           release_folder, dropped_folder, linked_root]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.__name__)
def test_every_folder_reader_names_an_entry_it_cannot_read(place, reader, kind, isolated_cache):
    bad, read = reader(place)
    if kind == "unreadable" and reader is linked_root:
        bad.mkdir()
        bad.chmod(0)  # a folder that cannot be listed
    else:
        spoil(bad, kind)
    outcome = unprivileged(read)
    assert outcome.startswith("InputError: "), outcome
    message = outcome.removeprefix("InputError: ")
    assert "\n" not in message
    assert message.startswith(f"{bad}: "), message
    expected = "cannot be listed (permission denied)" if (reader is linked_root and kind == "unreadable") \
        else MESSAGES[kind]
    assert expected in message


def test_a_link_into_a_loop_names_the_looping_folder(place):
    """An image root that is itself a loop: each image's message says which link to look at."""
    from probescope.core.data.images import read_rgb

    (place / "root").symlink_to("root")
    with pytest.raises(InputError) as caught:
        read_rgb(place / "root" / "a.png")
    assert str(caught.value) == f"{place / 'root' / 'a.png'}: {LOOP} (through {place / 'root'})"


@pytest.mark.parametrize("reader", [score_images, catalog_images, broden_image], ids=lambda r: r.__name__)
def test_a_fifo_among_the_images_is_refused_before_it_is_opened(place, reader, isolated_cache):
    """Opening a FIFO blocks until someone writes to it: refused from its type, never opened."""
    bad, read = reader(place)
    bad.unlink(missing_ok=True)
    os.mkfifo(bad)
    with pytest.raises(InputError) as caught:
        read()
    assert str(caught.value) == f"{bad}: {SPECIAL}"


def test_the_command_line_answers_a_self_link_in_one_line(place, tmp_path, capsys, isolated_cache):
    """`score --images` and `score --fid`: exit 2 and one line, the traceback of the issue is gone."""
    from probescope.main import main

    for k in range(3):
        _png(place / "samples" / f"{k}.png", k)
    (place / "samples" / "self.png").symlink_to("self.png")
    arrays = tmp_path / "samples.npz"
    np.savez(arrays, images=np.zeros((4, 16, 16, 3), np.uint8))
    for args in (["--images", str(place / "samples")], ["--images", str(arrays), "--fid", str(place / "samples")]):
        assert main(["score", *args]) == 2
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if "error" in line or "Traceback" in line]
        assert lines == [f"probescope score: error: {place / 'samples' / 'self.png'}: {LOOP}"], err


def test_a_zip_release_still_reads_when_an_unrelated_entry_is_broken(place):
    """Only what a reader reads is checked: a dangling README link beside the sessions stops nothing."""
    from probescope.core.similarity.readers import load_judgments

    _bad, read = release_folder(place)
    (place / "release" / "README.md").symlink_to("nowhere.md")
    assert len(read().trials) == 2
    with zipfile.ZipFile(place / "release.zip", "w") as zf:  # the packed release reads the same
        for path in (place / "release").rglob("*.*"):
            if path.is_file():
                zf.write(path, path.relative_to(place / "release").as_posix())
    assert len(load_judgments(place / "release.zip").trials) == 2
