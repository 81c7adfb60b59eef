"""The one image opener on odd files: formats by name only (a PostScript file named .png never reaches Ghostscript),
the pixel limit before decoding, 16-bit pixels scaled instead of clipped; and scoring that does not depend on the
batch size when images differ in size."""

from __future__ import annotations

import json
import struct
import zlib

import numpy as np
import pytest
from PIL import EpsImagePlugin, Image

from probescope.core import environment
from probescope.core.data import images
from probescope.core.data.images import read_rgb, set_max_pixels
from probescope.core.errors import InputError
from probescope.core.scoring.classifiers import load_classifier
from probescope.core.scoring.pipeline import classify_source
from probescope.core.scoring.sources import open_source
from probescope.main import main

# pytest resets warning filters for each test: the image module's own filter of Pillow's warning (probescope refuses
# oversized images itself) applies outside tests only
pytestmark = pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 8 8\n0 0 moveto 8 8 lineto stroke\nshowpage\n%%EOF\n"


def png_bytes(width: int, height: int, bit_depth: int, colour_type: int, raw_rows: bytes) -> bytes:
    """A PNG file written by hand (Pillow cannot write 48-bit colour): signature, IHDR, one IDAT, IEND."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, bit_depth, colour_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw_rows))
            + chunk(b"IEND", b""))


@pytest.fixture
def limit(monkeypatch):
    """The pixel limit as the environment sets it, restored after the test (it is process-wide)."""
    monkeypatch.setattr(images, "_max_pixels", [0])
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", Image.MAX_IMAGE_PIXELS)
    monkeypatch.delenv(environment.MAX_PIXELS, raising=False)
    return monkeypatch


def test_postscript_named_png_never_reaches_its_decoder(tmp_path, monkeypatch, capsys):
    marker = tmp_path / "ghostscript-ran"

    def payload(*_args, **_kwargs):
        marker.write_text("the EPS plugin ran")
        raise SyntaxError("payload")

    monkeypatch.setattr(EpsImagePlugin.EpsImageFile, "_open", payload)
    folder = tmp_path / "samples"
    folder.mkdir()
    (folder / "a.png").write_bytes(EPS)
    with pytest.raises(InputError, match=r"a\.png: image does not decode: not a PNG, JPEG, BMP, WebP or TIFF file"):
        read_rgb(folder / "a.png")
    assert main(["score", "--images", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "a.png: image does not decode" in err and len(err.strip().splitlines()) == 2  # 'scoring ...', error
    assert not marker.exists()
    with pytest.raises(Exception):  # noqa: B017  (the test's own check that the payload is live)
        Image.open(folder / "a.png")
    assert marker.exists()


def test_probing_images_and_stimuli_open_by_the_same_list(tmp_path, monkeypatch):
    """A PostScript file in a Broden dataset's images or among a catalog's stimuli is refused by name like a sample:
    the dataset and the stimulus source read through the same opener."""
    from oracles.synthetic_broden import SyntheticBroden, SyntheticSpec, write_synthetic_broden
    from probescope.core.data.broden import BrodenDataset
    from probescope.core.similarity.catalog import Catalog
    from probescope.core.similarity.sources import CatalogImages

    marker = tmp_path / "ghostscript-ran"
    monkeypatch.setattr(EpsImagePlugin.EpsImageFile, "_open", lambda *a, **k: marker.write_text("ran"))
    root = write_synthetic_broden(tmp_path / "broden", SyntheticBroden(SyntheticSpec(n_images=3, seg_size=8,
                                                                                      feat_size=2)))
    dataset = BrodenDataset.open(root)
    dataset.image_path(1).write_bytes(EPS)
    with pytest.raises(InputError, match="image does not decode: not a PNG, JPEG"):
        dataset.load_image(1)
    stimuli = CatalogImages(Catalog(("a.png",), np.array([-1]), tmp_path))
    (tmp_path / "a.png").write_bytes(EPS)
    with pytest.raises(InputError, match=r"a\.png: image does not decode"):
        stimuli[0]
    assert not marker.exists()


def test_score_error_after_progress_starts_its_own_line(tmp_path, capsys):
    folder = tmp_path / "samples"
    folder.mkdir()
    for k in range(3):
        Image.new("RGB", (16, 16), (40 * k, 0, 0)).save(folder / f"{k}.png")
    (folder / "z.png").write_bytes(EPS)
    assert main(["score", "--images", str(folder), "--batch-size", "1"]) == 2
    err = capsys.readouterr().err
    assert "%" in err  # progress was shown first
    [line] = [text for text in err.split("\n") if "error:" in text]
    assert line.startswith("probescope score: error:") and "z.png: image does not decode" in line


def test_other_formats_are_refused_by_name(tmp_path):
    Image.new("RGB", (4, 4)).save(tmp_path / "x.png", format="GIF")
    with pytest.raises(InputError, match="x.png: image does not decode: not a PNG"):
        read_rgb(tmp_path / "x.png")
    with pytest.raises(InputError, match="y.png: image file not found"):
        read_rgb(tmp_path / "y.png")


@pytest.mark.parametrize("side", [12_000, 14_000])
def test_oversized_images_are_refused_before_decoding(tmp_path, limit, capsys, side):
    folder = tmp_path / "big"
    folder.mkdir()
    # a header that announces side x side pixels: nothing is decoded, so the test stays small and fast
    (folder / "huge.png").write_bytes(png_bytes(side, side, 8, 2, b"\x00" * 10))
    with pytest.raises(InputError, match=rf"huge.png: image is (over the limit|{side}x{side} = [\d,]+ pixels, over "
                                         r"the limit) of 50,000,000"):
        read_rgb(folder / "huge.png")
    assert main(["score", "--images", str(folder)]) == 2
    assert "huge.png: image is" in capsys.readouterr().err


def test_pixel_limit_is_settable(tmp_path, limit, capsys):
    Image.new("RGB", (10, 10)).save(tmp_path / "a.png")
    limit.setenv(environment.MAX_PIXELS, "99")
    with pytest.raises(InputError, match="a.png: image is 10x10 = 100 pixels, over the limit of 99"):
        read_rgb(tmp_path / "a.png")
    set_max_pixels(100)
    assert read_rgb(tmp_path / "a.png").shape == (10, 10, 3)
    folder = tmp_path / "f"
    folder.mkdir()
    Image.new("RGB", (64, 64)).save(folder / "b.png")
    assert main(["score", "--images", str(folder), "--max-pixels", "4000"]) == 2
    assert "over the limit of 4,000" in capsys.readouterr().err
    limit.setattr(images, "_max_pixels", [0])
    limit.setenv(environment.MAX_PIXELS, "lots")
    with pytest.raises(InputError, match="PROBESCOPE_MAX_PIXELS must be a positive whole number"):
        read_rgb(tmp_path / "a.png")


def test_16_bit_greyscale_is_scaled_not_clipped(tmp_path):
    grey8 = np.random.default_rng(0).integers(0, 256, (6, 7), dtype=np.uint8)
    Image.fromarray(grey8.astype(np.uint16) * 257).save(tmp_path / "g16.png")  # the same picture, 16 bits deep
    assert Image.open(tmp_path / "g16.png").mode == "I;16"
    np.testing.assert_array_equal(read_rgb(tmp_path / "g16.png"), np.repeat(grey8[..., None], 3, axis=2))
    values = np.arange(0, 65536, 7, dtype=np.uint16)[None, :]
    Image.fromarray(values).save(tmp_path / "ramp.png")
    want = np.floor(values.astype(np.float64) * 255 / 65535 + 0.5).astype(np.uint8)
    np.testing.assert_array_equal(read_rgb(tmp_path / "ramp.png")[..., 0], want)


def test_16_bit_colour_within_one_level(tmp_path):
    rgb16 = np.random.default_rng(1).integers(0, 65536, (5, 4, 3)).astype(np.uint16)
    rows = b"".join(b"\x00" + rgb16[y].astype(">u2").tobytes() for y in range(5))
    (tmp_path / "c16.png").write_bytes(png_bytes(4, 5, 16, 2, rows))
    exact = np.floor(rgb16 / 257 + 0.5)
    assert np.abs(read_rgb(tmp_path / "c16.png").astype(float) - exact).max() <= 1


def test_pixels_without_a_standard_scaling_are_refused(tmp_path):
    Image.fromarray(np.ones((3, 3), np.float32)).save(tmp_path / "f.tiff")
    with pytest.raises(InputError, match="f.tiff: image has 32-bit float pixels"):
        read_rgb(tmp_path / "f.tiff")
    Image.fromarray(np.ones((3, 3), np.uint16)).save(tmp_path / "label.png")
    with pytest.raises(InputError, match="label.png: label image has 16-bit pixels"):
        read_rgb(tmp_path / "label.png", ("PNG",), exact=True, what="label image")


@pytest.fixture
def mixed_folder(tmp_path):
    """Images of three sizes, interleaved: sizes change inside any batch of more than one."""
    rng = np.random.default_rng(2)
    folder = tmp_path / "mixed"
    folder.mkdir()
    for k, (h, w) in enumerate([(64, 64), (48, 64), (64, 64), (72, 56), (48, 64), (64, 64), (72, 56)]):
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(folder / f"{k}.png")
    return folder


def test_scores_do_not_depend_on_the_batch_size(mixed_folder, small_world, capsys):
    classifier = load_classifier(small_world["model"])
    source = open_source(mixed_folder)
    alone = classify_source(source, classifier, 1, workers=1)
    for batch_size in (2, 3, 64):
        np.testing.assert_allclose(classify_source(source, classifier, batch_size, workers=1), alone,
                                   rtol=1e-5, atol=1e-5)
    argv = ["score", "--images", str(mixed_folder), "--classifier", small_world["model"], "--splits", "1", "--json"]
    scores = []
    for batch_size in ("64", "1"):
        assert main([*argv, "--batch-size", batch_size]) == 0
        scores.append(json.loads(capsys.readouterr().out))
    assert scores[0]["is_all"] == pytest.approx(scores[1]["is_all"], rel=1e-6)  # up to float summation order


def test_resize_setting(mixed_folder, small_world, capsys):
    resized = load_classifier(small_world["model"], resize=40)
    assert "stretch to 40x40" in resized.note
    source = open_source(mixed_folder)
    decoded = [read_rgb(p) for p in source.files]
    assert tuple(resized.prepare(decoded).shape) == (7, 3, 40, 40)  # one batch: every image stretched to 40x40
    np.testing.assert_allclose(classify_source(source, resized, 3, workers=1), resized.classify(decoded),
                               rtol=1e-5, atol=1e-5)
    assert main(["score", "--images", str(mixed_folder), "--classifier", small_world["model"], "--resize", "40",
                 "--splits", "1"]) == 0
    capsys.readouterr()
    with pytest.raises(InputError, match="takes 299x299 inputs and resizes every image to that itself"):
        load_classifier("inception-tf:/w.pth", resize=300)
    with pytest.raises(InputError, match="--resize must be a positive size"):
        load_classifier(small_world["model"], resize=0)
