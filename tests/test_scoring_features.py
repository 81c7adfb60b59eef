"""Features beside the logits for FID, KID and precision/recall: the input of a model's last linear layer (the
demo CNN's 128-d pool), read in the same forward pass; models that run no hooks say so."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from probescope.core.errors import InputError
from probescope.core.scoring.classifiers import classifier_of_model, load_classifier
from probescope.core.scoring.pipeline import classify_source, embed_source
from probescope.core.scoring.sources import ArraySource
from probescope.core.trust import Trust


def test_demo_classifier_features_are_the_pool_before_fc(small_world):
    from probescope.core.models.loading import load_model

    model = load_model(small_world["model"])
    classifier = classifier_of_model(model)
    images = np.random.default_rng(0).integers(0, 256, (5, 64, 64, 3), dtype=np.uint8)
    features, logits = classifier.embed(classifier.prepare(list(images)))
    net = model.module
    with torch.inference_mode():
        x = classifier.prepare(list(images))
        pooled = torch.flatten(net.avgpool(net.layer4(net.layer3(net.layer2(net.layer1(x))))), 1).numpy()
    np.testing.assert_allclose(features, pooled, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(logits, classifier.classify(list(images)))
    assert features.shape == (5, net.fc.in_features)
    assert "'fc'" in classifier.feature_note and classifier.key.startswith("model:")
    assert not net.fc._forward_pre_hooks  # the hook lives for one pass only


def test_embed_source_equals_classify_source(small_world):
    classifier = load_classifier(small_world["model"])
    source = ArraySource(np.random.default_rng(1).integers(0, 256, (11, 48, 48, 3), dtype=np.uint8))
    features, logits = embed_source(source, classifier, batch_size=4)
    assert features.shape[0] == logits.shape[0] == 11
    np.testing.assert_array_equal(logits, classify_source(source, classifier, batch_size=4))


@pytest.mark.filterwarnings("ignore:`torch.jit:FutureWarning")
def test_torchscript_classifier_has_no_features(tmp_path):
    path = tmp_path / "lin.pt"
    torch.jit.script(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 3))).save(str(path))
    classifier = load_classifier(f"torchscript:{path}", trust=Trust(everything=True))
    batch = torch.zeros(2, 3, 8, 8)
    assert classifier.logits(batch).shape == (2, 3)
    with pytest.raises(InputError, match="gives no features"):
        classifier.embed(batch)
