"""The ensemble comparison of issue 26 on this machine (local mode, CPU): a script until the
notebook section exists. Starts its own Triton (temp repository: the lab's models, preprocess and
food_classifier_ensemble), then measures at the same offered loads

  1. the three paths (servelab.ensemble.PATHS): ensemble (raw JPEG), food_classifier (base64
     JPEG, decode + PyTorch in one Python model), client-side pre-processing + food_classifier_onnx;
  2. the ensemble again with 2 instances of `preprocess` (and nothing else changed);

and writes results/ensemble/runs.csv plus a markdown table to stdout.

    .venv/bin/python scripts/ensemble_cpu.py [--concurrency 4] [--rate 20] [--quick]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import pandas as pd

from servelab import ensemble, model_repository
from servelab.paths import RESULTS, TEST_IMAGES
from servelab.stack import launcher

COLUMNS = ["run", "throughput_infer_s", "p50_ms", "p95_ms", "p99_ms", "delayed_pct", "cpu_util_pct",
           "preprocess_queue_ms", "preprocess_compute_ms", "food_classifier_onnx_queue_ms",
           "food_classifier_onnx_compute_ms", "food_classifier_queue_ms", "food_classifier_compute_ms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=4, help="closed loop: requests in flight")
    parser.add_argument("--rate", type=float, default=20.0, help="open loop: requests per second (constant)")
    parser.add_argument("--interval-ms", type=int, default=3000, help="perf_analyzer window")
    parser.add_argument("--out", type=Path, default=RESULTS / "ensemble")
    args = parser.parse_args()

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ensemble_cpu_") as tmp:
        repo = Path(tmp) / "model_repository"
        model_repository.populate(repo, mode="local", kind="cpu")
        ensemble.place(repo, mode="local", kind="cpu")
        key = os.environ.setdefault("TRITON_ADMIN_KEY", "ensemble-cpu-script")
        record = launcher.start(launcher.triton_service(repo, key))
        url = launcher._url(record["port"])
        metrics = f"{launcher._url(record['metrics_port'])}/metrics"
        print(f"Triton READY at {url} after {time.perf_counter() - start:.1f} s")
        try:
            jpegs = sorted(p for p in TEST_IMAGES.iterdir() if p.suffix == ".jpg")
            inputs = ensemble.write_perf_inputs(jpegs, args.out)
            # warm-up: the first requests of each model pay one-off costs
            for path in ensemble.PATHS:
                ensemble.measure_path(path, inputs, url, metrics, label=f"warmup_{path}", verbose=False,
                                      concurrency=1, request_count=20)
            rows = []
            loads = {f"c{args.concurrency}": {"concurrency": args.concurrency},
                     f"r{args.rate:g}": {"request_rate": args.rate}}
            for tag, load in loads.items():
                for path in ensemble.PATHS:
                    row, _ = ensemble.measure_path(path, inputs, url, metrics, label=f"{path}_{tag}",
                                                   verbose=False, measurement_interval_ms=args.interval_ms, **load)
                    rows.append(row)
            ensemble.set_instances("preprocess", 2, url=url, repo=repo)
            for tag, load in loads.items():
                row, _ = ensemble.measure_path("ensemble", inputs, url, metrics, label=f"ensemble_pre2_{tag}",
                                               verbose=False, measurement_interval_ms=args.interval_ms, **load)
                rows.append(row)
        finally:
            launcher._stop(record["pid"], record["marker"], grace=5)
    table = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "runs.csv", index=False)
    print(table[[c for c in COLUMNS if c in table]].to_markdown(index=False, floatfmt=".1f"))
    print("\ncommands:\n" + "\n".join(table["command"]))
    print(f"\nwhole script: {time.perf_counter() - start:.0f} s; rows in {args.out / 'runs.csv'}")


if __name__ == "__main__":
    main()
