"""The Broden reader and writer: round trip, the demo world's dataset, and every kind of bad input."""

from __future__ import annotations

import time

import numpy as np
import pytest
from PIL import Image

from probescope.core.data.broden import BrodenDataset, Label, primary_category
from probescope.core.data.broden_write import BrodenImage, encode_label_png, write_broden
from probescope.core.demo import dataset as demo_dataset
from probescope.core.demo import world
from probescope.core.errors import InputError

LABELS = [Label(1, "red-c", "color"), Label(2, "blue-c", "color"), Label(3, "tree", "object"),
          Label(4, "trunk", "part"), Label(5, "crown", "part"), Label(6, "handle", "part"),
          Label(300, "forest-s", "scene")]


def _tiny(root, n=3):
    rng = np.random.default_rng(0)
    items = []
    for k in range(n):
        color = rng.integers(1, 3, size=(4, 5))
        obj = np.zeros((4, 5), int)
        obj[1:3, 1:4] = 3
        part1 = np.where(obj == 3, 4, 0)
        part2 = np.zeros((4, 5), int)
        part2[1, 1] = 6
        items.append(BrodenImage(f"src/{k}", rng.integers(0, 255, (8, 10, 3), dtype=np.uint8),
                                 {"color": [color], "object": [obj], "part": [part1, part2]},
                                 {"scene": [300]}, split="train" if k else "val"))
    return write_broden(root, items, LABELS, image_format="png"), items


def test_round_trip(tmp_path):
    root, items = _tiny(tmp_path / "b")
    ds = BrodenDataset.open(root)
    assert ds.n_images == 3
    assert ds.pixel_categories == ("color", "object", "part")
    assert ds.image_categories == ("scene",)
    assert ds.labels[300] == Label(300, "forest-s", "scene")
    assert ds.split(0) == "val"
    layers = ds.pixel_layers(1)
    assert [c for c, _ in layers] == ["color", "object", "part", "part"]
    np.testing.assert_array_equal(layers[0][1], items[1].layers["color"][0])
    np.testing.assert_array_equal(layers[3][1], items[1].layers["part"][1])
    assert ds.image_labels(2) == [("scene", 300)]
    np.testing.assert_array_equal(ds.load_image(2), items[2].image)
    assert ds.seg_shape(0) == (4, 5) and ds.image_shape(0) == (8, 10)
    import pickle

    copy = pickle.loads(pickle.dumps(ds, protocol=5))  # (to a worker process; the kernel sends its spec instead)
    assert copy._rows == ds._rows and copy.labels == ds.labels and copy.pixel_categories == ds.pixel_categories
    assert copy.image_labels(2) == [("scene", 300)] and copy.image_path(1) == ds.image_path(1)


def test_label_png_encoding_above_255(tmp_path):
    labels = np.array([[0, 255, 256, 1093]])
    path = tmp_path / "l.png"
    path.write_bytes(encode_label_png(labels))
    rgb = np.asarray(Image.open(path).convert("RGB")).astype(np.int32)
    np.testing.assert_array_equal(rgb[..., 0] + 256 * rgb[..., 1], labels)


def test_primary_category():
    assert primary_category("material(36);object(3)") == "material"
    assert primary_category("object(3);part(30)") == "part"
    assert primary_category("scene") == "scene"


def test_only_source_selects_rows(tmp_path):
    root, _ = _tiny(tmp_path / "b")
    assert BrodenDataset.open(root, only_source="src/").n_images == 3
    with pytest.raises(InputError, match="no images"):
        BrodenDataset.open(root, only_source="ade20k/")


def test_demo_dataset_has_stated_categories_and_counts(tmp_path):
    root = demo_dataset.write_demo_dataset(tmp_path / "demo", n_images=56)
    ds = BrodenDataset.open(root)
    assert ds.n_images == 56
    counts = {c: sum(lb.category == c for lb in ds.labels.values()) for c in ("color", "object", "part", "scene")}
    assert counts == {"color": 11, "object": len(world.OBJECTS), "part": len(world.PARTS), "scene": 14}
    assert sum(counts.values()) >= 50
    assert {ds.labels[n].name for _, n in (lab for i in range(56) for lab in ds.image_labels(i))} == set(world.SCENES)
    parts = [m for _, m in ds.pixel_layers(0) if _ == "part"]
    assert all(m.shape == (world.SEG_SIZE, world.SEG_SIZE) for m in parts)
    assert demo_dataset.is_complete(root, 56)


def test_demo_dataset_is_deterministic_and_regenerated_when_damaged(tmp_path):
    first = demo_dataset.ensure_demo_dataset(tmp_path, n_images=14)
    index = (first / "index.csv").read_bytes()
    again = demo_dataset.write_demo_dataset(tmp_path / "other", n_images=14)
    assert (again / "index.csv").read_bytes() == index
    np.testing.assert_array_equal(BrodenDataset.open(first).load_image(5), BrodenDataset.open(again).load_image(5))
    (first / "index.csv").write_text("image\n")  # damage
    assert not demo_dataset.is_complete(first, 14)
    assert demo_dataset.ensure_demo_dataset(tmp_path, n_images=14) == first
    assert (first / "index.csv").read_bytes() == index


def _contents(root) -> dict:
    return {str(f.relative_to(root)): f.read_bytes() for f in sorted(root.rglob("*")) if f.is_file()}


@pytest.mark.parametrize("in_child", [False, True], ids=["here", "in its own process"])
def test_demo_dataset_comes_in_stages_and_the_whole_is_as_written_at_once(tmp_path, in_child):
    """The first stage is a dataset of its own (the first rows, their files, label tables of those images); the
    whole dataset holds the same bytes as one written in one go, plus the first stage's index."""
    stages = []
    for index in demo_dataset.demo_dataset_stages(tmp_path / "cache", n_images=30, first_batch=12, in_child=in_child):
        ds = BrodenDataset.open(index.parent, index.name)
        scenes = [int(row.split(",")[3]) for row in (index.parent / "label.csv").read_text().splitlines()[1:]
                  if row.split(",")[2].startswith("scene")]
        stages.append((index.name, ds.n_images, sum(scenes), [ds.image_path(i) for i in range(ds.n_images)]))
    assert [stage[:3] for stage in stages] == [("index_first12.csv", 12, 12), ("index.csv", 30, 30)]
    assert stages[0][3] == stages[1][3][:12]
    root = tmp_path / "cache" / f"demo-broden-v{demo_dataset.GENERATOR_VERSION}-30-0"
    lines = (root / "index.csv").read_text().splitlines()
    assert (root / "index_first12.csv").read_text().splitlines() == lines[:13]
    whole = _contents(root)
    whole.pop("index_first12.csv")
    assert whole == _contents(demo_dataset.write_demo_dataset(tmp_path / "at-once", n_images=30))
    again = demo_dataset.demo_dataset_stages(tmp_path / "cache", n_images=30, first_batch=12, in_child=in_child)
    assert [index.name for index in again] == ["index.csv"]  # complete: no stages, nothing written


def test_cancelling_a_generation_in_its_own_process_ends_it(tmp_path):
    from probescope.core.tasks import Cancelled

    cancelled = [False]
    stages = demo_dataset.demo_dataset_stages(tmp_path, n_images=3000, first_batch=14, in_child=True,
                                              cancel=lambda: cancelled[0])
    first = next(stages)
    cancelled[0] = True
    with pytest.raises(Cancelled):
        next(stages)
    written = len(list(first.parent.rglob("*")))
    time.sleep(0.3)
    assert len(list(first.parent.rglob("*"))) == written  # the child writes nothing more
    assert not demo_dataset.is_complete(first.parent, 3000)


def test_a_generation_in_its_own_process_fails_in_one_line(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(InputError, match="cache folder is not writable") as failed:
        list(demo_dataset.demo_dataset_stages(tmp_path / "file", n_images=20, in_child=True))
    assert failed.value.path == tmp_path / "file" / f"demo-broden-v{demo_dataset.GENERATOR_VERSION}-20-0"


# ---- bad input ---------------------------------------------------------------------------------------------------


def test_missing_folder(tmp_path):
    with pytest.raises(InputError, match="not a folder"):
        BrodenDataset.open(tmp_path / "nope")


def test_missing_index_columns(tmp_path):
    root, _ = _tiny(tmp_path / "b")
    (root / "index.csv").write_text("image,ih,iw,color\nsrc/0.png,8,10,\n")
    with pytest.raises(InputError, match=r"index.csv: missing column\(s\) sh, sw"):
        BrodenDataset.open(root)


def test_malformed_index_value(tmp_path):
    root, _ = _tiny(tmp_path / "b")
    text = (root / "index.csv").read_text().replace(",8,10,4,5,", ",8,ten,4,5,", 1)
    (root / "index.csv").write_text(text)
    with pytest.raises(InputError, match="line 2: column 'iw' is 'ten'"):
        BrodenDataset.open(root)


def test_index_without_category_columns(tmp_path):
    root, _ = _tiny(tmp_path / "b")
    (root / "index.csv").write_text("image,ih,iw,sh,sw\nsrc/0.png,8,10,4,5\n")
    with pytest.raises(InputError, match="no category columns"):
        BrodenDataset.open(root)


def test_missing_label_csv(tmp_path):
    root, _ = _tiny(tmp_path / "b")
    (root / "label.csv").unlink()
    with pytest.raises(InputError, match="label.csv: file not found"):
        BrodenDataset.open(root)


def test_image_label_not_in_label_csv(tmp_path):
    root, _ = _tiny(tmp_path / "b")
    (root / "index.csv").write_text((root / "index.csv").read_text().replace(",300,", ",301,"))
    with pytest.raises(InputError, match="scene label 301 is not in label.csv"):
        BrodenDataset.open(root)


def test_label_png_with_unknown_number(tmp_path):
    root, _ = _tiny(tmp_path / "b")
    (root / "images" / "src/0_color.png").write_bytes(encode_label_png(np.full((4, 5), 77)))
    ds = BrodenDataset.open(root)
    with pytest.raises(InputError, match=r"0_color.png: label number\(s\) 77 not in label.csv"):
        ds.pixel_layers(0)


def test_label_png_wrong_size(tmp_path):
    root, _ = _tiny(tmp_path / "b")
    (root / "images" / "src/1_object.png").write_bytes(encode_label_png(np.zeros((5, 5), int)))
    with pytest.raises(InputError, match="1_object.png: label image is 5x5, index.csv says 4x5"):
        BrodenDataset.open(root).pixel_layers(1)


def test_label_png_does_not_decode(tmp_path):
    root, _ = _tiny(tmp_path / "b")
    (root / "images" / "src/2_color.png").write_bytes(b"not a png")
    with pytest.raises(InputError, match="2_color.png: label image does not decode"):
        BrodenDataset.open(root).pixel_layers(2)


def test_image_does_not_decode(tmp_path):
    root, _ = _tiny(tmp_path / "b")
    (root / "images" / "src/1.png").write_bytes(b"\x89PNG garbage")
    with pytest.raises(InputError, match="1.png: image does not decode"):
        BrodenDataset.open(root).load_image(1)


def test_cancelled_demo_generation_is_never_taken_as_complete(tmp_path):
    from probescope.core.tasks import Cancelled

    calls = []
    with pytest.raises(Cancelled):
        demo_dataset.ensure_demo_dataset(tmp_path, n_images=120, cancel=lambda: len(calls) > 0,
                                         progress=lambda f, m: calls.append(f))
    assert not demo_dataset.is_complete(tmp_path / f"demo-broden-v{demo_dataset.GENERATOR_VERSION}-120-0", 120)
