"""What a feature network spec may say, without loading anything: the names the command line, the settings and the
window share (the networks themselves, which need torch, are in features.py)."""

from __future__ import annotations

from probescope.core.errors import InputError

CLASSIFIER = "classifier"  # the classifier's own features
KINDS = ("inception-tf", "dinov2", "openclip", "model")
RESIZES = ("torch-fidelity", "dgm-eval")  # how DINOv2 sees the images: its TF1 bilinear resize, or PIL bicubic
PRECISIONS = ("auto", "fp32", "bf16", "fp16")  # auto: bf16 autocast on a GPU, float32 elsewhere
SPEC_HELP = ("network whose features every distance uses: classifier (the classifier's own, default), "
             "inception-tf:FILE, dinov2:vits14|vitb14|vitl14|vitg14[-reg]:FILE, openclip:NAME:FILE or "
             "model:LAYER:SPEC")


def check_spec(spec: str) -> None:
    """Refuse a spec of no known kind before anything loads (the command line's first check)."""
    if spec != CLASSIFIER and spec.split(":", 1)[0] not in KINDS:
        raise InputError(f"unknown feature network {spec!r}: {SPEC_HELP}")
