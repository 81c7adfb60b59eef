"""The similarity workflows, one home each for every front end (`probescope similarity`, `embed`, `propose`, the
Similarity workspace, a notebook): `trials` (quality control, the trial list), `scores` (triplet accuracy of model
features), `embedding` (fitting the psychological embedding), `propose` (active learning) and `tasks` (the window's
Jobs over them)."""
