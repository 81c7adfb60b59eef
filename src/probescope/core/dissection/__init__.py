"""Network Dissection: thresholds, IoU, Detection Accuracy and compositional explanations by beam search.

Modules: `labels` (label maps read once into a compact store of regions), `unitmasks` (thresholds, unit masks),
`counts` (IoU/DA from counts instead of masks, and bounds for pruning), `formula` (formulas, text form, parser),
`search` (beam search, da-select, da-stop, length sweep), `optimal` (the exact best formula by branch and bound),
`settings` (every setting and its command-line option), `engine` (`dissect`: one layer, with progress, cancel and
resume), `results` (dissection.json, tally.csv), `correlation` (the accuracy-correlation experiment), `masks`
(per-image masks for display), `image_view` (one image segmented by every unit that fires in it, labelled with
their explanations), `inputs` (what a dissection job reads), `saved` (dissect into a file, resumably). The
slow mask-based reference, the brute force and the generated problems that test the engine live in `tests/oracles/`.
"""
