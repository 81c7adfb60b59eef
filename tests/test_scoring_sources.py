"""Sample sources (folder, arrays, TorchScript generator, demo sampler) and the prefetching pipeline."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from probescope.core.errors import InputError
from probescope.core.scoring.classifiers import Classifier
from probescope.core.scoring.live import LiveInceptionScore
from probescope.core.scoring.pipeline import classify_source
from probescope.core.scoring.sources import (
    ArraySource,
    ImageFolderSource,
    TorchScriptGeneratorSource,
    open_source,
    parse_extensions,
    quantize_to_uint8,
)
from probescope.core.tasks import Cancelled
from probescope.core.trust import Trust, UntrustedFile


def mean_colour_classifier() -> Classifier:
    """A transparent stand-in: logits are the image's mean R, G, B (scaled), any image size."""

    def prepare(images):
        return torch.stack([torch.from_numpy(im.astype(np.float32)).mean(dim=(0, 1)) / 16.0 for im in images])

    return Classifier("mean colour", torch.nn.Identity(), prepare, ("red", "green", "blue"), "cpu", False, "test")


def write_images(folder, images, suffix=".png"):
    folder.mkdir(exist_ok=True)
    for k, im in enumerate(images):
        Image.fromarray(im).save(folder / f"img_{k:03d}{suffix}")


def test_folder_source_sorted_rgb_and_flags_jpeg(tmp_path):
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (8 + k, 10, 3), dtype=np.uint8) for k in range(5)]
    write_images(tmp_path / "png", images)
    Image.fromarray(images[0][:, :, 0]).save(tmp_path / "png" / "img_005.png")  # greyscale: decoded to RGB
    (tmp_path / "png" / "notes.txt").write_text("not an image")
    source = open_source(tmp_path / "png")
    assert isinstance(source, ImageFolderSource) and source.length == 6 and not source.lossy
    got = [im for batch in source.batches(4) for im in batch]
    for a, b in zip(got[:5], images, strict=True):
        np.testing.assert_array_equal(a, b)
    assert got[5].shape == (8, 10, 3) and (got[5][..., 0] == got[5][..., 2]).all()
    write_images(tmp_path / "jpg", images[:2], ".jpg")
    assert open_source(tmp_path / "jpg").lossy


def test_corrupt_image_names_the_file(tmp_path):
    write_images(tmp_path / "f", [np.zeros((4, 4, 3), np.uint8)])
    bad = tmp_path / "f" / "img_001.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n broken")
    with pytest.raises(InputError, match="img_001.png: image does not decode"):
        classify_source(open_source(tmp_path / "f"), mean_colour_classifier(), batch_size=1)


def test_empty_or_missing_inputs(tmp_path):
    with pytest.raises(InputError, match="no image files"):
        open_source(tmp_path)
    with pytest.raises(InputError, match="missing.npz: file not found"):
        open_source(tmp_path / "missing.npz")


def test_array_sources(tmp_path):
    images = np.random.default_rng(1).integers(0, 256, (7, 6, 5, 3), dtype=np.uint8)
    np.save(tmp_path / "a.npy", images)
    np.savez(tmp_path / "b.npz", images=images, labels=np.arange(7))
    np.savez(tmp_path / "c.npz", images)
    for name in ("a.npy", "b.npz", "c.npz"):
        source = open_source(tmp_path / name)
        assert isinstance(source, ArraySource) and source.length == 7
        np.testing.assert_array_equal(np.stack([im for b in source.batches(3) for im in b]), images)
    np.save(tmp_path / "chw.npy", images.transpose(0, 3, 1, 2).copy())
    with pytest.raises(InputError, match="channels first"):
        open_source(tmp_path / "chw.npy")
    np.save(tmp_path / "float.npy", images.astype(np.float32))
    with pytest.raises(InputError, match="expected uint8"):
        open_source(tmp_path / "float.npy")
    np.savez(tmp_path / "two.npz", x=images, y=images)
    with pytest.raises(InputError, match="none named 'images'"):
        open_source(tmp_path / "two.npz")


def test_uncompressed_npz_is_memory_mapped(tmp_path):
    """np.savez (stored) members are read in place, as .npy files are; compressed ones are read whole; a zip64
    archive (what np.savez writes for large arrays) too."""
    import zipfile

    images = np.random.default_rng(2).integers(0, 256, (9, 4, 5, 3), dtype=np.uint8)
    np.savez(tmp_path / "stored.npz", labels=np.arange(9), images=images)
    np.savez_compressed(tmp_path / "packed.npz", images=images)
    with zipfile.ZipFile(tmp_path / "zip64.npz", "w") as archive, archive.open("images.npy", "w",
                                                                                  force_zip64=True) as fh:
        np.lib.format.write_array(fh, images)
    stored, packed, zip64 = (open_source(tmp_path / f"{n}.npz") for n in ("stored", "packed", "zip64"))
    assert isinstance(stored.images, np.memmap) and isinstance(zip64.images, np.memmap)
    assert not isinstance(packed.images, np.memmap)
    for source in (stored, packed, zip64):
        np.testing.assert_array_equal(np.asarray(source.images), images)


def test_quantisation_rule():
    x = np.array([-1.0, -0.999, 0.0, 1.0, 2.0, -3.0])
    # (x + 1) * 127.5 -> 0, 0.1275, 127.5, 255, 382.5, -255 -> round half up, clamp
    assert quantize_to_uint8(x, -1.0, 1.0).tolist() == [0, 0, 128, 255, 255, 0]


class _Generator(torch.nn.Module):
    def forward(self, z: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        value = torch.tanh(z[:, :1] + label[:, None].float())
        return value[:, :, None, None].expand(z.shape[0], 3, 4, 4)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning")
def test_torchscript_generator_source(tmp_path):
    path = tmp_path / "g.pt"
    torch.jit.script(_Generator()).save(str(path))
    with pytest.raises(UntrustedFile, match="TorchScript generator runs code"):
        TorchScriptGeneratorSource(path, z_dim=5, n=10, num_classes=3)
    source = TorchScriptGeneratorSource(path, z_dim=5, n=10, num_classes=3, output_range=(-1, 1), seed=4,
                                        trust=Trust.of_files([path]))
    images = [im for b in source.batches(4) for im in b]
    assert len(images) == 10 and images[0].shape == (4, 4, 3) and images[0].dtype == np.uint8
    rng = np.random.RandomState(4)  # torch-fidelity's noise order: per batch, noise then labels
    z = rng.randn(4, 5).astype(np.float32)
    labels = rng.randint(0, 3, size=4)
    expected = quantize_to_uint8(np.tanh(z[:, 0] + labels), -1, 1)
    assert [im[0, 0, 0] for im in images[:4]] == expected.tolist()
    again = [im for b in source.batches(4) for im in b]
    assert all((a == b).all() for a, b in zip(images, again, strict=True))
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"junk")
    with pytest.raises(InputError, match="not a TorchScript generator"):
        TorchScriptGeneratorSource(bad, z_dim=5, n=1)


def test_pipeline_order_live_updates_and_cancel():
    images = np.zeros((23, 5, 5, 3), np.uint8)
    images[:, :, :, 0] = np.arange(23)[:, None, None] * 10
    source = ArraySource(images)
    live = LiveInceptionScore()
    seen = []
    logits = classify_source(
        source, mean_colour_classifier(), batch_size=4, workers=3, live=live, progress=lambda f, m: seen.append(f)
    )
    np.testing.assert_allclose(logits[:, 0], np.arange(23) * 10 / 16.0)
    assert live.n == 23 and seen[-1] == 1.0 and len(seen) == 6
    with pytest.raises(Cancelled):
        classify_source(source, mean_colour_classifier(), batch_size=4, cancel=lambda: True)


def test_demo_sampler_knobs_and_determinism():
    from probescope.core.demo.sampler import DemoSampler
    from probescope.core.demo.world import IMAGE_SIZE, SCENES

    a = DemoSampler(6, diversity=2, fidelity=0.7, seed=3)
    first = [im for b in a.batches(4) for im in b]
    second = [im for b in a.batches(5) for im in b]  # same images whatever the batch size
    assert all((x == y).all() for x, y in zip(first, second, strict=True))
    assert first[0].shape == (IMAGE_SIZE, IMAGE_SIZE, 3)
    assert {a.sample(k)[1] for k in range(6)} <= set(SCENES[:2])
    assert {DemoSampler(40, diversity=1).sample(k)[1] for k in range(40)} == {SCENES[0]}
    with pytest.raises(InputError, match="diversity"):
        DemoSampler(5, diversity=0)
    with pytest.raises(InputError, match="fidelity"):
        DemoSampler(5, fidelity=1.5)


def test_folder_listing_equals_torch_fidelity(tmp_path):
    """Extensions, case, symbolic links (ordered by their targets), link-to-folder and hidden files as
    torch-fidelity's glob_samples_paths lists them."""
    from torch_fidelity.utils import glob_samples_paths

    from probescope.core.scoring.sources import list_image_files

    store, folder = tmp_path / "store", tmp_path / "samples"
    store.mkdir()
    folder.mkdir()
    image = np.zeros((4, 4, 3), np.uint8)
    for name in ("b.png", "a.jpg", "c.JPEG", "d.bmp", "e.webp", "f.tif", ".hidden.png", "noext"):
        Image.fromarray(image).save(folder / name, format="PNG")
    for name in ("zz_target.png", "aa_target.png"):
        Image.fromarray(image).save(store / name)
    (folder / "0_link.png").symlink_to(store / "zz_target.png")  # first by name, last by target
    (folder / "y_link.jpg").symlink_to(store / "aa_target.png")  # last by name, first by target
    (folder / "sub.png").mkdir()  # a folder named like an image is not a file
    (folder / "dirlink.png").symlink_to(store)
    expected = glob_samples_paths(str(folder), False, "png,jpg,jpeg", verbose=False)
    got = list_image_files(folder)
    assert [str(p) for p in got] == expected
    assert len(got) == 6  # torch-fidelity's N, not the 9 image files
    assert [p.name for p in got[-2:]] == ["aa_target.png", "zz_target.png"]  # links sort by target: y_link first
    wider = ImageFolderSource(folder, parse_extensions("png,jpg,jpeg,bmp,webp,TIF"))
    assert [str(p) for p in wider.files] == glob_samples_paths(str(folder), False, "png,jpg,jpeg,bmp,webp,tif",
                                                               verbose=False)


def test_folder_listing_refuses_broken_links_and_special_files(tmp_path):
    import os

    from probescope.core.scoring.sources import list_image_files

    (tmp_path / "gone.png").symlink_to(tmp_path / "missing.png")
    with pytest.raises(InputError, match="gone.png: broken symbolic link"):
        list_image_files(tmp_path)
    (tmp_path / "gone.png").unlink()
    os.mkfifo(tmp_path / "pipe.png")  # reading it would hang
    with pytest.raises(InputError, match="pipe.png: not a regular file"):
        ImageFolderSource(tmp_path)


@pytest.mark.parametrize("text,expected", [("png,jpg,jpeg", ("png", "jpg", "jpeg")),
                                           (" .PNG, webp ,png", ("png", "webp"))])
def test_parse_extensions(text, expected):
    assert parse_extensions(text) == expected


@pytest.mark.parametrize("text", ["", ",", " . "])
def test_parse_extensions_refuses_empty_lists(text):
    with pytest.raises(InputError, match="no file extensions"):
        parse_extensions(text)
