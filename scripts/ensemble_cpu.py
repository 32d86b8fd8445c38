"""The ensemble comparison of issue 26 on this machine (local mode, CPU): a script until the
notebook section exists. Starts its own Triton (temp repository: the lab's models, preprocess and
food_classifier_ensemble), then measures at the same offered loads

  1. the three paths (servelab.ensemble.PATHS): ensemble (raw JPEG), food_classifier (base64
     JPEG, decode + PyTorch in one Python model), client-side pre-processing + food_classifier_onnx;
  2. the ensemble again with 2 instances of `preprocess` (and nothing else changed);

repeated --repeat times (the machine is shared: one run says little), and writes
results/ensemble/runs.csv plus markdown tables (every run; median [min-max]) to stdout.

    .venv/bin/python scripts/ensemble_cpu.py [--concurrency 4] [--rate 20] [--repeat 3]
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

COLUMNS = ["run", "mode", "throughput_infer_s", "p50_ms", "p95_ms", "p99_ms", "delayed_pct", "cpu_util_pct",
           "preprocess_queue_ms", "preprocess_compute_ms", "preprocess_avg_batch", "food_classifier_onnx_queue_ms",
           "food_classifier_onnx_compute_ms", "food_classifier_onnx_avg_batch", "food_classifier_queue_ms",
           "food_classifier_compute_ms"]


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """One row per run name: median [min-max] over the repetitions of each measured column."""
    out = []
    for run, rows in table.groupby("run", sort=False):
        row = {"run": run}
        for col in COLUMNS[2:]:
            if col in rows and rows[col].notna().any():
                v = rows[col].dropna()
                row[col] = f"{v.median():.1f} [{v.min():.1f}-{v.max():.1f}]"
        out.append(row)
    return pd.DataFrame(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=4, help="closed loop: requests in flight")
    parser.add_argument("--rate", type=float, default=20.0, help="open loop: requests per second (constant)")
    parser.add_argument("--interval-ms", type=int, default=3000, help="perf_analyzer window")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of the whole sequence")
    parser.add_argument("--classifier-batching", action="store_true",
                        help="dynamic batching (100 us) on food_classifier_onnx first, for every run")
    parser.add_argument("--paths", nargs="+", default=list(ensemble.PATHS), choices=list(ensemble.PATHS))
    parser.add_argument("--out", type=Path, default=RESULTS / "ensemble")
    args = parser.parse_args()

    start = time.perf_counter()
    print(f"load average before: {os.getloadavg()[0]:.2f} (1 min), cores: {os.cpu_count()}")
    with tempfile.TemporaryDirectory(prefix="ensemble_cpu_") as tmp:
        repo = Path(tmp) / "model_repository"
        model_repository.populate(repo, mode="local", kind="cpu")
        ensemble.place(repo, mode="local", kind="cpu")
        key = os.environ.setdefault("TRITON_ADMIN_KEY", "ensemble-cpu-script")
        record = launcher.start(launcher.triton_service(repo, key))
        url = launcher._url(record["port"])
        metrics = f"{launcher._url(record['metrics_port'])}/metrics"
        print(f"Triton READY at {url} after {time.perf_counter() - start:.1f} s")

        def measure(path: str, run: str, rep: int, load: dict) -> dict:
            row, _ = ensemble.measure_path(path, inputs, url, metrics, label=f"{run}_rep{rep}", verbose=False,
                                           measurement_interval_ms=args.interval_ms, **load)
            print(f"  rep {rep} {run}: {row['throughput_infer_s']:.1f} infer/s, p95 {row['p95_ms']:.1f} ms "
                  f"({row['mode']})", flush=True)
            return {**row, "run": run, "rep": rep}

        try:
            jpegs = sorted(p for p in TEST_IMAGES.iterdir() if p.suffix == ".jpg")
            inputs = ensemble.write_perf_inputs(jpegs, args.out)
            if args.classifier_batching:
                ensemble.set_dynamic_batching("food_classifier_onnx", 100, url=url, repo=repo)
            # warm-up: the first requests of each model pay one-off costs
            for path in args.paths:
                ensemble.measure_path(path, inputs, url, metrics, label=f"warmup_{path}", verbose=False,
                                      concurrency=1, request_count=20)
            rows = []
            loads = {f"c{args.concurrency}": {"concurrency": args.concurrency},
                     f"r{args.rate:g}": {"request_rate": args.rate}}
            for rep in range(1, args.repeat + 1):
                if rep > 1:
                    ensemble.set_instances("preprocess", 1, url=url, repo=repo, verbose=False)
                for tag, load in loads.items():
                    for path in args.paths:
                        rows.append(measure(path, f"{path}_{tag}", rep, load))
                ensemble.set_instances("preprocess", 2, url=url, repo=repo, verbose=rep == 1)
                for tag, load in loads.items():
                    rows.append(measure("ensemble", f"ensemble_pre2_{tag}", rep, load))
        finally:
            launcher._stop(record["pid"], record["marker"], grace=5)
    table = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "runs.csv", index=False)
    print(table[[c for c in ["rep", *COLUMNS] if c in table]].to_markdown(index=False, floatfmt=".1f"))
    print(f"\nmedian [min-max] of {args.repeat} repetitions:")
    print(summary(table).to_markdown(index=False))
    print("\ncommands (repetition 1):\n" + "\n".join(table[table["rep"] == 1]["command"]))
    print(f"\nwhole script: {time.perf_counter() - start:.0f} s; load average after: {os.getloadavg()[0]:.2f}; "
          f"rows in {args.out / 'runs.csv'}")


if __name__ == "__main__":
    main()
