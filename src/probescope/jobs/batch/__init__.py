"""Batch dissection of a model zoo: a TOML manifest of models and layers, run locally or on a Ray cluster.

Modules: `manifest` (read_manifest), `inputs` (dataset and model identity, activation files, extraction),
`chunks` (per-chunk results, merge into dissection.json / tally.csv), `status` (status.json and stderr progress),
`executors` (local, one task after another), `ray_executor` (Ray tasks; imports ray, only when asked for),
`runner` (run_batch), `reader` (open_batch: the finished layers of an output folder).
"""
