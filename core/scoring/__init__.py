"""Inception Score: the reference split protocol, a live estimate, per-image contributions.

distributions  logits / probabilities -> float64 rows p(y|x) and their entropies (validation, 0 log 0 = 0)
protocol       torch-fidelity's split protocol -> SplitScore
live           LiveInceptionScore: running IS, entropies, contributions, IS-vs-N history
report         ScoreReport: everything the command line and the GUI show about one set of scores
examples       the seed note's worked example (generators A-D)
inception_tf   the TF-ported Inception v3 (1008 classes) and TF1's bilinear resize
classifiers    classifier adapters: inception-tf, inception-tv, any load_model spec
sources        image folders, uint8 arrays, TorchScript generators
pipeline       images -> logits with decoding overlapped with inference
"""
