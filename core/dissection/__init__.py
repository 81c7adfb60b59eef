"""Network Dissection: thresholds, IoU, Detection Accuracy and compositional explanations by beam search.

Modules: `labels` (label maps read once into a compact store), `unitmasks` (thresholds, unit masks), `counts`
(IoU/DA from counts instead of masks), `formula` (formulas, text form, parser), `search` (beam search, da-select,
da-stop, length sweep), `engine` (`dissect`: one layer, with progress, cancel and resume), `results` (dissection.json,
tally.csv), `correlation` (the accuracy-correlation experiment), `masks` (per-image masks for display), `inputs`
(what a dissection job reads). The slow mask-based reference and the generated problems that test the engine live in
`tests/oracles/`.
"""
