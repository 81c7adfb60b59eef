"""A plain-torch DINOv2 backbone in Meta's key layout, written from the architecture's description (not from timm,
which probescope builds on): patch convolution, class token, position embeddings interpolated on every forward
pass as Meta's hub model does (bicubic with the scale factor (grid + 0.1) / M, no antialiasing), pre-norm blocks
with LayerScale, final LayerNorm; forward() returns the class token after the norm, as Meta's model does. It stands
in for `torch.hub.load('facebookresearch/dinov2', 'dinov2_vits14')` where there is no internet.

`random_state(seed)` makes ViT-S/14 weights in the layout of Meta's dinov2_vits14_pretrain.pth (518-pixel position
grid, mask_token included)."""

from __future__ import annotations

import math

import torch
from torch import nn

DIM, DEPTH, HEADS, PATCH, GRID = 384, 12, 6, 14, 37  # ViT-S/14 trained at 518 = 37 x 14 pixels


def random_state(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)

    def normal(*shape: int, std: float = 0.02) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * std

    state = {"cls_token": normal(1, 1, DIM, std=0.5), "pos_embed": normal(1, 1 + GRID * GRID, DIM, std=0.5),
             "mask_token": torch.zeros(1, DIM), "patch_embed.proj.weight": normal(DIM, 3, PATCH, PATCH, std=0.05),
             "patch_embed.proj.bias": normal(DIM), "norm.weight": 1 + normal(DIM, std=0.1), "norm.bias": normal(DIM)}
    for i in range(DEPTH):
        b = f"blocks.{i}."
        state.update({b + "norm1.weight": 1 + normal(DIM, std=0.1), b + "norm1.bias": normal(DIM),
                      b + "attn.qkv.weight": normal(3 * DIM, DIM, std=0.08), b + "attn.qkv.bias": normal(3 * DIM),
                      b + "attn.proj.weight": normal(DIM, DIM, std=0.05), b + "attn.proj.bias": normal(DIM),
                      b + "ls1.gamma": 0.1 + normal(DIM, std=0.05), b + "norm2.weight": 1 + normal(DIM, std=0.1),
                      b + "norm2.bias": normal(DIM), b + "mlp.fc1.weight": normal(4 * DIM, DIM, std=0.05),
                      b + "mlp.fc1.bias": normal(4 * DIM), b + "mlp.fc2.weight": normal(DIM, 4 * DIM, std=0.05),
                      b + "mlp.fc2.bias": normal(DIM), b + "ls2.gamma": 0.1 + normal(DIM, std=0.05)})
    return state


class MetaDinoV2(nn.Module):
    """ViT-S/14 as Meta's DinoVisionTransformer computes it (no registers), from a state dict in its layout."""

    def __init__(self, state: dict[str, torch.Tensor]):
        super().__init__()
        self.w = {k: v.clone().float() for k, v in state.items()}

    def positions(self, rows: int, cols: int) -> torch.Tensor:
        pos = self.w["pos_embed"]
        if (rows, cols) == (GRID, GRID):
            return pos
        grid = pos[:, 1:].reshape(1, GRID, GRID, DIM).permute(0, 3, 1, 2)
        scale = ((rows + 0.1) / GRID, (cols + 0.1) / GRID)
        grid = nn.functional.interpolate(grid, scale_factor=scale, mode="bicubic", antialias=False)
        return torch.cat([pos[:, :1], grid.permute(0, 2, 3, 1).reshape(1, -1, DIM)], dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.w
        rows, cols = x.shape[2] // PATCH, x.shape[3] // PATCH
        t = nn.functional.conv2d(x, w["patch_embed.proj.weight"], w["patch_embed.proj.bias"], stride=PATCH)
        t = t.flatten(2).transpose(1, 2)
        t = torch.cat([w["cls_token"].expand(len(t), -1, -1), t], dim=1) + self.positions(rows, cols)
        for i in range(DEPTH):
            b = f"blocks.{i}."
            h = nn.functional.layer_norm(t, (DIM,), w[b + "norm1.weight"], w[b + "norm1.bias"], eps=1e-6)
            t = t + w[b + "ls1.gamma"] * self.attention(h, b)
            h = nn.functional.layer_norm(t, (DIM,), w[b + "norm2.weight"], w[b + "norm2.bias"], eps=1e-6)
            h = nn.functional.linear(h, w[b + "mlp.fc1.weight"], w[b + "mlp.fc1.bias"])
            h = nn.functional.linear(nn.functional.gelu(h), w[b + "mlp.fc2.weight"], w[b + "mlp.fc2.bias"])
            t = t + w[b + "ls2.gamma"] * h
        t = nn.functional.layer_norm(t, (DIM,), w["norm.weight"], w["norm.bias"], eps=1e-6)
        return t[:, 0]

    def attention(self, h: torch.Tensor, b: str) -> torch.Tensor:
        n, tokens, _ = h.shape
        qkv = nn.functional.linear(h, self.w[b + "attn.qkv.weight"], self.w[b + "attn.qkv.bias"])
        q, k, v = qkv.reshape(n, tokens, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        weights = torch.softmax((q / math.sqrt(DIM // HEADS)) @ k.transpose(-2, -1), dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(n, tokens, DIM)
        return nn.functional.linear(out, self.w[b + "attn.proj.weight"], self.w[b + "attn.proj.bias"])
