"""Ablation: remove units of a layer and measure which of the model's decisions change (Bau et al., PNAS 2020).

Modules: `tail` (the network after a layer, separated from the model's modules by tracing), `ablate`
(`LayerAblation`: units replaced by zero or their mean, on the cached activations through the tail or in full
forward passes through a hook; per class accuracy and probability of the true class), `groups` (units to ablate
together: single units, a hand-picked list, the units whose explanation names a concept, the specialised units,
the units that hurt a class most), `results` (`AblationResult`, ablation.json, ablation.csv).
"""
