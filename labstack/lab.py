"""`make lab`: start the local stack, run the benchmark notebooks headless, write results/, stop.

The notebooks run are the solved editions (labstack/editions.py: solutions/, written from
notebook_sources/ when stale), in notebooks/ as a student's would.

    python -m labstack.lab [--quick]

results/
  index.md               summary page: what ran, key numbers, every claim checked, the plots
  notebooks/*.ipynb      the executed (solved) notebooks (open them to see every output)
  fastapi/, triton/, hardware/
                         CSVs of every run (one row per request or per perf_analyzer level),
                         PNG plots
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

import pandas as pd

from labstack import launcher
from servelab.food11 import read_metadata
from servelab.paths import RESULTS

# the notebooks `make lab` runs, in order, and the folder of results/ each one writes
BENCHMARK_NOTEBOOKS = {
    "04_fastapi_benchmarks.ipynb": "fastapi",
    "06_triton_benchmarks.ipynb": "triton",
    "07_how_close_to_the_hardware.ipynb": "hardware",
}
SUMMARY_COLUMNS = [
    "run",
    "concurrency",
    "request_rate",
    "requests",
    "errors",
    "median_ms",
    "p95_ms",
    "p99_ms",
    "throughput_rps",
    "queue_median_ms",
    "infer_median_ms",
    "mode",
    "throughput_infer_s",
    "served_over_limit",
    "p50_ms",
    "server_queue_ms",
    "server_compute_infer_ms",
    "avg_batch_size",
    "delayed_pct",
    # the laws beside every measured row (servelab.queueing.laws): U = X·S and N = X·R
    "lock_busy_U",
    "busy_U",  # notebook 6: per Triton instance (servelab.queueing.laws)
    "in_flight_N",
    "waiting_N",
]
# utilisation columns are named after what they measured: gpu0_util_pct, gpu1_util_pct, ...
# or cpu_util_pct
# Answers for the notebooks' prediction cells in headless test runs (LAB_PREDICTIONS): a student's
# reasonable guesses, so the compare-with-prediction path runs; `make lab` leaves them unanswered.
SCRIPTED_PREDICTIONS = {
    "4.4 PyTorch sequential median (ms)": 40,
    "4.5 ONNX speed-up, sequential (x)": 2,
    "4.6 ONNX median at 16 in flight (ms)": 150,
    "4.7 two workers vs one, ONNX throughput (rise/stay/fall)": "rise",
    "6.1 queue at c16 (ms)": 400,
    "6.2 compute of 16 images / compute of 1 (x)": 4,
    "6.3 throughput, 2 instances / 1 instance at c8 (x)": 1.8,
    "6.3 all on GPU 0 / spread over the GPUs (throughput, x)": 0.9,
    "6.4 ONNX / Python-backend throughput at c1 (x)": 3,
    "6.6 queue, Poisson / constant at 60% load (x)": 5,
    "6.6 mean latency at 140% of capacity, with batching (ms)": 50,
    "7.2 served / limit at the start": 0.2,
    "8.2 ensemble / Python-backend model throughput (x)": 3,
    "8.2 ensemble / client-side ONNX throughput (x)": 0.8,
    "8.4 throughput, 2 preprocess instances / 1 (x)": 1.2,
    "8.6 Model Analyzer's best / notebook 7's best, served/limit (x)": 1,
    "9.2 served by 2 replicas at 150% of one (requests/s)": 20,
    "9.2 served by 4 replicas / by 2 (x)": 1.5,
    "9.3 recovery after the step up (s)": 10,
    "9.5 Ray's median - Triton's, one at a time (ms)": 5,
}
# `make lab`: the notebooks' defaults, with 3 s perf_analyzer windows (as the H100 reference ran)
# instead of the class's 5 s, so the whole run fits in 15 minutes on 2 cores
# make lab (not QUICK=1, not the tests) also runs the notebooks' optional "going further" parts
FULL_PARAMS = {"PERF_INTERVAL_MS": 3000, "GOING_FURTHER": 1}
QUICK_PARAMS = {
    "N_SEQUENTIAL": 20,
    "N_CONCURRENT": 96,
    "CONCURRENCY": 16,
    "PERF_INTERVAL_MS": 1200,
    "PERF_STABILITY": 30,
    "PERF_RATE_SECONDS": 6,
    "HW_CLIENTS": 8,
    "HW_MAX_CLIENTS": 16,
    "HW_RAW_SECONDS": 1,
    "HW_MAX_BATCH": "8",  # 7.6 sweeps two configurations, not four: each is a reload and a run
}


def summary_markdown(summary_csv: Path) -> str:
    """A benchmark's summary.csv as a markdown table of the columns a page shows (all of them stay
    in the CSV)."""
    table = pd.read_csv(summary_csv)
    columns = [c for c in SUMMARY_COLUMNS if c in table] + [
        c for c in table if c.endswith("_util_pct")
    ]
    return table[columns].round(2).to_markdown(index=False)


def claims_with_verdicts(claims_csv: Path) -> pd.DataFrame:
    """claims.csv as the page shows it: the verdict (a failed one in bold), the measured interval
    and the rule."""
    table = pd.read_csv(claims_csv, keep_default_na=False)
    table["verdict"] = table["verdict"].map(lambda v: f"**{v}**" if v == "does not hold" else v)
    return table[["claim", "verdict", "value", "interval", "rule", "how", "note"]]


def figure_and_csv_links(folder: Path, prefix: str) -> list[str]:
    """Markdown lines: every PNG of a results folder shown, every CSV linked (paths start with
    prefix)."""
    return [
        *(f"![{png.stem}]({prefix}/{png.name})" for png in sorted(folder.glob("*.png"))),
        "",
        "CSV files: "
        + ", ".join(f"[{c.name}]({prefix}/{c.name})" for c in sorted(folder.glob("*.csv"))),
    ]


def write_summary(executed: list[dict], params: dict) -> Path:
    meta = read_metadata()
    lines = [
        "# Lab results (local mode)",
        "",
        f"Run on {time.strftime('%F %T')} on `{platform.node()}` ({platform.machine()}, "
        f"Python {platform.python_version()}).",
        "",
        f"Model weights: **{meta['weights']}** — {meta['weights_note']}",
        "",
        "Settings: "
        + (", ".join(f"LAB_{k}={v}" for k, v in params.items()) or "the notebooks' defaults")
        + " (plus any LAB_* variables you set).",
        "",
        "| notebook | status | minutes |",
        "|---|---|---|",
    ]
    lines += [
        f"| [{e['name']}](notebooks/{e['name']}) | {e['status']} | {e['seconds'] / 60:.1f} |"
        for e in executed
    ]
    bundles = sorted((RESULTS / "bundles").glob("*/manifest.json"))
    if bundles:  # the measure pass's bundles (servelab/passes): what a review pass reads
        lines += [
            "",
            "Results bundles (plain CSV/JSON; `LAB_PASS=review` reads them, no service needed): "
            + ", ".join(f"[{b.parent.name}](bundles/{b.parent.name}/)" for b in bundles),
        ]
    for folder in BENCHMARK_NOTEBOOKS.values():
        part = RESULTS / folder
        if not part.exists():
            continue
        lines += ["", f"## {folder}", ""]
        if (part / "summary.csv").exists():
            lines += [summary_markdown(part / "summary.csv"), ""]
        if (part / "claims.csv").exists():
            lines += [
                "What to notice, judged on these numbers (an interval that straddles the rule is "
                "*inconclusive*: noise could decide it):",
                "",
                claims_with_verdicts(part / "claims.csv").to_markdown(index=False),
                "",
            ]
        lines += figure_and_csv_links(part, folder)
    index = RESULTS / "index.md"
    index.write_text("\n".join(lines) + "\n")
    return index


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small request counts (a few minutes)")
    args = parser.parse_args(argv)
    # nbclient and jupytext: only `make lab` itself needs them (the GPU machine has neither)
    from labstack import editions, notebook_runner

    params = QUICK_PARAMS if args.quick else FULL_PARAMS
    params = {k: v for k, v in params.items() if f"LAB_{k}" not in os.environ}  # yours win
    if RESULTS.exists():
        shutil.rmtree(RESULTS)
    RESULTS.mkdir(parents=True)
    executed, failed = [], False
    # a model repository of its own, fresh from models_staging/: the run does not depend on configs
    # edited by hand in model_repository/ (`make up`'s), and leaves them as they are
    repository = launcher.LAB_DIR / "make_lab_model_repository"
    shutil.rmtree(repository, ignore_errors=True)
    os.environ["TRITON_MODEL_REPOSITORY"] = str(repository)
    try:
        launcher.up(jupyter=False)  # FastAPI, Flask and Triton: the notebooks use all three
        env = launcher.client_urls(launcher.read_state())
        for name in BENCHMARK_NOTEBOOKS:
            print(f"\n>>> running {name} headless ...", flush=True)
            out = RESULTS / "notebooks" / name
            start = time.time()
            try:
                notebook_runner.execute(
                    editions.solved_notebook(name),
                    out,
                    params=params,
                    extra_env=env,
                    echo=True,
                    cwd=editions.STUDENT,
                )
                status = "ok"
            except Exception as exc:  # keep going: the executed copy shows the failing cell
                status, failed = f"FAILED: {type(exc).__name__}", True
                print(f"{name} failed; see {out}\n{str(exc)[-2000:]}", file=sys.stderr)
            executed.append({"name": name, "status": status, "seconds": time.time() - start})
    finally:
        launcher.down()
    index = write_summary(executed, params)
    (RESULTS / "run.json").write_text(
        json.dumps({"executed": executed, "params": params}, indent=2)
    )
    print(
        f"\nResults: {RESULTS}\n  summary page: {index}\n  executed notebooks: "
        f"{RESULTS / 'notebooks'}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
