"""The maintainers' repeated run of notebook 8's ensemble comparison (local mode, CPU).

    .venv/bin/python -m maintainers.experiments.ensemble_compare \
        [--concurrency 4] [--rate 20] [--repeat 3]

Notebook 8 measures each path once; one run on a shared machine says little, so this repeats
the same sequence and reports median [min-max]. It starts its own Triton (a temporary repository:
the lab's models, preprocess and food_classifier_ensemble), then, at the same offered loads:

  1. the three paths (servelab.ensemble.PATHS): ensemble (raw JPEG), food_classifier (base64
     JPEG, decode + PyTorch in one Python model), client-side pre-processing + food_classifier_onnx;
  2. the ensemble again with 2 instances of `preprocess` (and nothing else changed);

and writes <out>/runs.csv plus markdown tables (every run; median [min-max]) to stdout.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import pandas as pd

from labstack import launcher
from servelab import ensemble
from servelab.paths import RESULTS, TEST_IMAGES
from servelab.triton import model_repository, triton_config

COLUMNS = [
    "run",
    "mode",
    "throughput_infer_s",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "delayed_pct",
    "cpu_util_pct",
    "preprocess_queue_ms",
    "preprocess_compute_ms",
    "preprocess_avg_batch",
    "food_classifier_onnx_queue_ms",
    "food_classifier_onnx_compute_ms",
    "food_classifier_onnx_avg_batch",
    "food_classifier_queue_ms",
    "food_classifier_compute_ms",
]


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


def measure(line: str, name: str, url: str, metrics: str, out: Path) -> dict:
    """One run (ensemble.measure falls back to a fixed request count when the windows saw no
    answer or never agreed: seen for the PyTorch model on the busy 2 cores)."""
    return ensemble.measure(line, name, out=out, url=url, metrics_url=metrics, verbose=False).row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=4, help="closed loop: in flight")
    parser.add_argument("--rate", type=float, default=20.0, help="open loop: requests/s, constant")
    parser.add_argument("--interval-ms", type=int, default=3000, help="perf_analyzer window")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of the whole sequence")
    parser.add_argument(
        "--classifier-batching",
        action="store_true",
        help="dynamic batching (100 us) on food_classifier_onnx first, for every run",
    )
    parser.add_argument(
        "--paths", nargs="+", default=list(ensemble.PATHS), choices=list(ensemble.PATHS)
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "ensemble")
    args = parser.parse_args()

    start = time.perf_counter()
    print(f"load average before: {os.getloadavg()[0]:.2f} (1 min), cores: {os.cpu_count()}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="ensemble_compare_") as tmp:
        repo = Path(tmp) / "model_repository"
        model_repository.populate(repo, mode="local", kind="cpu")
        ensemble.place(repo, mode="local", kind="cpu")
        key = os.environ.setdefault("TRITON_ADMIN_KEY", "ensemble-compare")
        record = launcher.start(launcher.triton_service(repo, key))
        url = launcher.service_url(record["port"])
        metrics = f"{launcher.service_url(record['metrics_port'])}/metrics"
        host = url.split("://")[-1]
        print(f"Triton READY at {url} after {time.perf_counter() - start:.1f} s")
        ensemble.load(url)
        # the same settings for every run, whatever the machine's load: 3 windows, any spread
        settings = (
            f"--measurement-interval {args.interval_ms} --stability-percentage 1000 --max-trials 3"
        )

        def line(path: str, load: str) -> str:
            model = ensemble.PATHS[path][0]
            return f"perf_analyzer -m {model} -u {host} --input-data {inputs[path]} {load}"

        def edit(model: str, fragment: str, **kw) -> None:
            result = triton_config.edit(model, fragment, repo=repo, url=url, verbose=False, **kw)
            if not result.ok:
                raise RuntimeError(str(result))

        try:
            jpegs = sorted(p for p in TEST_IMAGES.iterdir() if p.suffix == ".jpg")
            inputs = ensemble.write_perf_inputs(jpegs, args.out)
            if args.classifier_batching:
                edit(
                    "food_classifier_onnx", "dynamic_batching { max_queue_delay_microseconds: 100 }"
                )
            for path in args.paths:  # warm-up: the first requests of each model pay one-off costs
                measure(
                    line(path, "--concurrency-range 1 --request-count 20"),
                    f"warmup_{path}",
                    url,
                    metrics,
                    args.out,
                )
            loads = {
                f"c{args.concurrency}": f"--concurrency-range {args.concurrency} {settings}",
                f"r{args.rate:g}": f"--request-rate-range {args.rate} {settings}",
            }
            one, two = (f"instance_group [ {{ count: {n}, kind: KIND_CPU }} ]" for n in (1, 2))
            for rep in range(1, args.repeat + 1):
                if rep > 1:
                    edit("preprocess", one)
                for tag, load in loads.items():
                    for path in args.paths:
                        row = measure(
                            line(path, load), f"{path}_{tag}_rep{rep}", url, metrics, args.out
                        )
                        rows.append({**row, "run": f"{path}_{tag}", "rep": rep})
                        print(
                            f"  rep {rep} {path}_{tag}: {row['throughput_infer_s']:.1f} infer/s,"
                            f" p95 {row['p95_ms']:.1f} ms ({row['mode']})",
                            flush=True,
                        )
                edit("preprocess", two)
                for tag, load in loads.items():
                    name = f"ensemble_pre2_{tag}"
                    row = measure(
                        line("ensemble", load), f"{name}_rep{rep}", url, metrics, args.out
                    )
                    rows.append({**row, "run": name, "rep": rep})
        finally:
            launcher.stop_process(record["pid"], record["marker"], grace=5)
    table = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "runs.csv", index=False)
    shown = [c for c in ["rep", *COLUMNS] if c in table]
    print(table[shown].to_markdown(index=False, floatfmt=".1f"))
    print(f"\nmedian [min-max] of {args.repeat} repetitions:")
    print(summary(table).to_markdown(index=False))
    print("\ncommands (repetition 1):\n" + "\n".join(table[table["rep"] == 1]["command"]))
    print(
        f"\nwhole script: {time.perf_counter() - start:.0f} s; load average after: "
        f"{os.getloadavg()[0]:.2f}; rows in {args.out / 'runs.csv'}"
    )


if __name__ == "__main__":
    main()
