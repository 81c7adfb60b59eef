"""Feature visualisation: the input a unit or a direction of a layer responds to most, by activation maximisation
(Olah et al. 2017, "Feature Visualization", Distill; the lucid and lucent libraries).

Modules: `image` (the Fourier-parameterised, colour-decorrelated image), `transforms` (lucid's random jitter, scale
and rotation), `render` (settings, directions, the optimisation with progress and cancel, and its cache),
`directions` (a concept's mean activation vector over a dissected dataset).
"""
