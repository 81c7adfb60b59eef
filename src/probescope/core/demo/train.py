"""Train the demo world's scene classifier: `python -m probescope.core.demo.train --out assets/demo_model.pt`.

Seeded and single-process: with the same torch version and thread count it reproduces the shipped weights.
Training images come from one seed of the demo world, held-out images from another (and the probing dataset that
`probescope demo-data` writes uses yet another), so the reported accuracy is on images the model never saw.
A few minutes on one or two CPU cores.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from probescope.core.atomic import atomic_open, write_json
from probescope.core.demo.model import DEMO_ARCH, DEMO_LAYER, DEMO_PREPROCESS, DEMO_WIDTHS, DemoNet
from probescope.core.demo.world import SCENES, render_batch
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel, report

TRAIN_SEED = 101
HELDOUT_SEED = 202


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 4
    batch_size: int = 64
    lr: float = 3e-3
    weight_decay: float = 5e-4
    seed: int = 0


def render_split(seed: int, n: int, fidelity: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 images (n, 128, 128, 3), int64 scene indices (n,)) from the demo world."""
    samples = render_batch(seed, n, fidelity=fidelity)
    index = {s: k for k, s in enumerate(SCENES)}
    return np.stack([s.image for s in samples]), np.array([index[s.scene] for s in samples], dtype=np.int64)


def evaluate(model: DemoNet, images: np.ndarray, labels: np.ndarray, batch_size: int = 256) -> float:
    """Top-1 accuracy of `model` (eval mode) on uint8 images."""
    model.eval()
    correct = 0
    with torch.inference_mode():
        for s in range(0, len(images), batch_size):
            logits = model(DEMO_PREPROCESS(images[s : s + batch_size]))
            correct += int((logits.argmax(1).numpy() == labels[s : s + batch_size]).sum())
    return correct / len(images)


def train(
    images: np.ndarray,
    labels: np.ndarray,
    num_classes: int,
    config: TrainConfig = TrainConfig(),
    progress: ProgressCallback | None = None,
    cancel: CancelCheck | None = None,
) -> DemoNet:
    """AdamW with a one-cycle schedule, random horizontal flips; returns the model in eval mode."""
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    model = DemoNet(num_classes, DEMO_WIDTHS)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    steps_per_epoch = -(-len(images) // config.batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, config.lr, total_steps=config.epochs * steps_per_epoch)
    y_all = torch.from_numpy(labels)
    for epoch in range(config.epochs):
        model.train()
        order = rng.permutation(len(images))
        total = 0.0
        for step in range(steps_per_epoch):
            check_cancel(cancel)
            idx = np.sort(order[step * config.batch_size : (step + 1) * config.batch_size])
            x = DEMO_PREPROCESS(images[idx])
            flip = torch.from_numpy(rng.random(len(idx)) < 0.5)
            x = torch.where(flip.view(-1, 1, 1, 1), x.flip(-1), x)
            loss = F.cross_entropy(model(x), y_all[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
            report(progress, (epoch + (step + 1) / steps_per_epoch) / config.epochs, f"epoch {epoch + 1}")
        report(progress, (epoch + 1) / config.epochs, f"epoch {epoch + 1}: loss {total / len(images):.4f}")
    return model.eval()


def save(model: DemoNet, out: Path, record: dict) -> None:
    """Plain state dict (loads with weights_only=True) plus the training record beside it as JSON."""
    with atomic_open(out, "wb") as fh:
        torch.save(model.state_dict(), fh)
    write_json(out.with_suffix(".json"), record)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m probescope.core.demo.train", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="weights file to write (a .json record goes beside)")
    parser.add_argument("--n-train", type=int, default=3000)
    parser.add_argument("--n-heldout", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=TrainConfig.epochs)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (results depend on it slightly)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    config = TrainConfig(epochs=args.epochs)
    t0 = time.perf_counter()
    train_x, train_y = render_split(TRAIN_SEED, args.n_train)
    held_x, held_y = render_split(HELDOUT_SEED, args.n_heldout)
    low_x, low_y = render_split(HELDOUT_SEED + 1, args.n_heldout, fidelity=0.5)
    t_render = time.perf_counter() - t0

    def progress(fraction: float, message: str) -> None:
        print(f"\r{fraction:6.1%} {message}", end="", file=sys.stderr, flush=True)

    model = train(train_x, train_y, len(SCENES), config, progress=progress)
    t_train = time.perf_counter() - t0 - t_render
    print(file=sys.stderr)
    record = {
        "arch": DEMO_ARCH,
        "widths": list(DEMO_WIDTHS),
        "default_layer": DEMO_LAYER,
        "classes": list(SCENES),
        "preprocess": DEMO_PREPROCESS.describe(),
        "train": {"seed": TRAIN_SEED, "n": args.n_train, "fidelity": 1.0, "epochs": config.epochs,
                  "batch_size": config.batch_size, "lr": config.lr, "weight_decay": config.weight_decay,
                  "init_seed": config.seed},
        "heldout_accuracy": round(evaluate(model, held_x, held_y), 4),
        "heldout": {"seed": HELDOUT_SEED, "n": args.n_heldout, "fidelity": 1.0},
        "heldout_accuracy_fidelity_0.5": round(evaluate(model, low_x, low_y), 4),
        "heldout_low_fidelity": {"seed": HELDOUT_SEED + 1, "n": args.n_heldout, "fidelity": 0.5},
        "train_accuracy": round(evaluate(model, train_x, train_y), 4),
        "seconds": {"render": round(t_render, 1), "train": round(t_train, 1)},
        "threads": args.threads,
        "torch": torch.__version__,
    }
    save(model, args.out, record)
    print(
        f"held-out accuracy {record['heldout_accuracy']:.4f} (fidelity 0.5: "
        f"{record['heldout_accuracy_fidelity_0.5']:.4f}), train {record['train_accuracy']:.4f}; "
        f"{t_render:.0f} s rendering, {t_train:.0f} s training -> {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
