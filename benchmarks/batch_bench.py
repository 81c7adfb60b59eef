"""`probescope batch` locally (one task after another) vs on a local Ray instance, on the demo world.

Writes a demo dataset of `--images` images, warms the activation cache (extraction is the same work either way),
then times the whole batch (label store, chunks, merge) sequentially and on Ray with `--cpus` workers (a first run
that also starts the workers, and a second with them started), checks both wrote identical files, and prints wall
times and the speed-up. Ray's own start-up is timed separately. Wall times: run it on an otherwise idle machine.

    python benchmarks/batch_bench.py                    # demo model layer3 + layer4, 300 images, 2 CPUs
    python benchmarks/batch_bench.py --images 1500 --cpus 8
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(var, "1")  # one thread per task, so Ray's parallelism is what is measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--chunk-units", type=int, default=16)
    parser.add_argument("--layers", default="layer3,layer4")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["PROBESCOPE_CACHE"] = str(root / "cache")  # before Ray starts: its workers inherit it
        import ray

        from probescope.core.demo.dataset import write_demo_dataset
        from probescope.core.dissection.inputs import extract_model_layers
        from probescope.jobs.batch.manifest import read_manifest
        from probescope.jobs.batch.ray_executor import RayExecutor
        from probescope.jobs.batch.runner import run_batch

        write_demo_dataset(root / "data", n_images=args.images)
        layers = [x.strip() for x in args.layers.split(",")]
        (root / "m.toml").write_text(f'[dataset]\npath = "data"\n[settings]\nchunk_units = {args.chunk_units}\n'
                                     f'[[models]]\nspec = "demo"\nlayers = {layers!r}\n'.replace("'", '"'))
        manifest = read_manifest(root / "m.toml")
        extract_model_layers("demo", layers, root / "data", "index.csv", "")  # warm the activation cache

        t0 = time.perf_counter()
        run_batch(manifest, root / "local", log=None)
        local = time.perf_counter() - t0

        t0 = time.perf_counter()
        ray.init(address="local", num_cpus=args.cpus, include_dashboard=False, logging_level="warning",
                 log_to_driver=False)
        start = time.perf_counter() - t0
        try:
            t0 = time.perf_counter()
            run_batch(manifest, root / "ray", RayExecutor(None), log=None)
            on_ray = time.perf_counter() - t0
            t0 = time.perf_counter()  # again, into a new folder: workers already started (a long batch's case)
            run_batch(manifest, root / "ray2", RayExecutor(None), log=None)
            warm = time.perf_counter() - t0
        finally:
            ray.shutdown()
        same = all((root / "local" / "demo" / folder / name).read_bytes()
                   == (root / "ray" / "demo" / folder / name).read_bytes()
                   for folder in layers for name in ("dissection.json", "tally.csv"))
        print(f"demo world: {args.images} images, layers {', '.join(layers)}, chunks of {args.chunk_units} units")
        print(f"sequential (local)      {local:8.2f} s")
        print(f"Ray, {args.cpus} CPUs            {on_ray:8.2f} s   (+ {start:.2f} s to start Ray)")
        print(f"Ray, workers started    {warm:8.2f} s")
        print(f"speed-up                {local / on_ray:8.2f} x   ({local / warm:.2f} x with workers started);"
              f" identical files: {same}")
        print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
