"""Scores of generated images: the Inception Score, and against real images FID, KID, precision/recall, coverage.

distributions    logits / probabilities -> float64 rows p(y|x) and their entropies (validation, 0 log 0 = 0)
protocol         torch-fidelity's split protocol -> SplitScore
live             LiveInceptionScore: running IS, entropies, contributions, IS-vs-N history
report           ScoreReport: everything the command line and the GUI show about one set of scores
examples         the seed note's worked example (generators A-D)
inception_tf     the TF-ported Inception v3 (1008 classes, 2048-d pool features) and TF1's bilinear resize
classifiers      classifier adapters: inception-tf, inception-tv, any load_model spec; logits and features
sources          image folders (torch-fidelity's listing), uint8 arrays, TorchScript generators
pipeline         images -> logits, or features and logits, with decoding overlapped with inference
frechet          FID: Gaussian fits, running mean/covariance, the reference's factor, pytorch-fid mu/sigma files
kernel           KID: unbiased polynomial-kernel MMD^2, the subset protocol and a running estimate
precision_recall k-NN precision and recall (Kynkaanniemi et al.)
extrapolate      FID and IS at infinite N (Chong & Forsyth): 1/N fits over random subsets
coverage         per-class coverage of the classifier's predictions, real vs generated
reference        reference sets (folder, array, Broden dataset, mu/sigma file) and their cache
growing          rows kept batch by batch for estimators that look back at every sample
live_scores      LiveScores: every score above, updated one batch at a time (the gallery's state)
distances        DistanceReport: the command line's FID/KID/PRC/coverage/infinite-N summary
settings         ScoreSettings: every default, bound and help of scoring (the command line's options)
"""
