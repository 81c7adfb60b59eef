"""The TF-ported Inception v3 adapter against torch-fidelity's own extractor, on a random file of the same layout."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from oracles.inception_weights import random_state_dict
from probescope.core.errors import InputError
from probescope.core.scoring.classifiers import load_classifier
from probescope.core.scoring.inception_tf import (
    INPUT_SIZE,
    N_CLASSES,
    WEIGHTS_FILE_NAME,
    prepare_tf_inception,
    tf1_resize,
)


@pytest.fixture(scope="module")
def weights_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("inception") / WEIGHTS_FILE_NAME
    torch.save(random_state_dict(seed=1), path)
    return path


@pytest.mark.parametrize("size", [(32, 32), (61, 47), (299, 299), (400, 350)])
def test_tf1_resize_matches_torch_fidelity(size):
    from torch_fidelity.interpolate_compat_tensorflow import interpolate_bilinear_2d_like_tensorflow1x

    image = np.random.default_rng(0).integers(0, 256, (2, 3, *size), dtype=np.uint8)
    x = torch.from_numpy(image).float()
    ours = tf1_resize(x)
    ref = interpolate_bilinear_2d_like_tensorflow1x(x, size=(INPUT_SIZE, INPUT_SIZE), align_corners=False)
    assert ours.shape == (2, 3, INPUT_SIZE, INPUT_SIZE)
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), atol=2e-4)  # pixel values 0..255 in float32


def test_logits_and_pool_features_match_torch_fidelity_extractor(weights_file):
    """One forward pass gives torch-fidelity's unbiased logits and its '2048' pool features."""
    from torch_fidelity.feature_extractor_inceptionv3 import FeatureExtractorInceptionV3

    reference = FeatureExtractorInceptionV3(
        "inception-v3-compat", ["2048", "logits_unbiased"], feature_extractor_weights_path=str(weights_file)
    )
    classifier = load_classifier(f"inception-tf:{weights_file}")
    rng = np.random.default_rng(2)
    images = rng.integers(0, 256, (2, 40, 56, 3), dtype=np.uint8)
    images[1] = images[1] // 4  # a darker image: different logits
    ours = classifier.classify(list(images))
    features, logits = classifier.embed(classifier.prepare(list(images)))
    with torch.inference_mode():
        ref_features, ref = (t.numpy() for t in reference(torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()))
    assert ours.shape == (2, N_CLASSES) and features.shape == (2, 2048) and features.dtype == np.float32
    assert np.abs(ours - ref).max() <= 1e-4 * np.abs(ref).max()
    assert np.abs(features - ref_features).max() <= 1e-4 * np.abs(ref_features).max()
    np.testing.assert_array_equal(logits, ours)
    assert classifier.comparable and classifier.class_names is None
    assert "2048-d pool" in classifier.feature_note and classifier.key.startswith("inception-tf:")


def test_mixed_image_sizes_share_a_batch():
    a = np.random.default_rng(3).integers(0, 256, (30, 40, 3), dtype=np.uint8)
    b = np.full((299, 299, 3), 200, np.uint8)
    batch = prepare_tf_inception([a, b])  # mixed sizes: resized here, to 299 float
    assert batch.shape == (2, 3, INPUT_SIZE, INPUT_SIZE)
    alone = tf1_resize(torch.from_numpy(a).permute(2, 0, 1)[None].float())  # the uniform path's resize
    np.testing.assert_allclose(batch[0].numpy(), alone[0].numpy(), atol=1e-4)
    assert (batch[1] == 200).all()
    uniform = prepare_tf_inception([a, a])  # one size: kept uint8, resized by the network
    assert uniform.dtype == torch.uint8 and uniform.shape == (2, 3, 30, 40)


def test_missing_weights_say_what_and_where(tmp_path):
    missing = tmp_path / WEIGHTS_FILE_NAME
    with pytest.raises(InputError, match="download weights-inception-2015-12-05-6726825d.pth") as err:
        load_classifier(f"inception-tf:{missing}")
    assert err.value.path == missing
    with pytest.raises(InputError, match="inception_v3_google"):
        load_classifier(f"inception-tv:{missing}")
    with pytest.raises(InputError, match="names no weights file"):
        load_classifier("inception-tf:")


def test_wrong_layout_is_rejected(tmp_path):
    path = tmp_path / "other.pth"
    torch.save({"fc.weight": torch.zeros(10, 2048)}, path)
    with pytest.raises(InputError, match="not the layout"):
        load_classifier(f"inception-tf:{path}")
    path.write_bytes(b"not a torch file")
    with pytest.raises(InputError, match="not a PyTorch weights file"):
        load_classifier(f"inception-tf:{path}")


def test_torchvision_inception_from_local_file(tmp_path):
    from torchvision.models import inception_v3

    torch.manual_seed(0)
    path = tmp_path / "inception_v3_google.pth"
    torch.save(inception_v3(weights=None, aux_logits=True, init_weights=False).state_dict(), path)
    classifier = load_classifier(f"inception-tv:{path}")
    logits = classifier.classify([np.zeros((80, 80, 3), np.uint8), np.full((299, 299, 3), 255, np.uint8)])
    assert logits.shape == (2, 1000) and np.isfinite(logits).all()
    assert not classifier.comparable and len(classifier.class_names) == 1000
    assert "NOT comparable" in classifier.note

