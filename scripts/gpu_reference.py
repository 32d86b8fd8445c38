#!/usr/bin/env python3
"""Reference run of the lab on a GPU machine, in local mode (no Docker), into one folder.

    python scripts/gpu_reference.py --out DIR [--quick]

Builds the artifacts with the machine's own torch, starts the local stack (Triton with KIND_GPU
instances), runs notebooks 4 and 6 as plain scripts (their jupytext sources) with the lab's
default request counts, samples nvidia-smi throughout, runs scripts/gpu_limit.py, stops the
stack and writes DIR/README.md: versions, the tables, every "what to notice" claim with its
verdict and numbers, and the served/limit ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--quick", action="store_true", help="the CI-sized request counts")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    # servelab reads these at import: set them first
    os.environ.update(LAB_RESULTS_DIR=str(out / "results"), LAB_STATE_DIR=str(out / "lab"),
                      TRITON_MODEL_REPOSITORY=str(out / "model_repository"))
    sys.path.insert(0, str(REPO))
    from servelab import artifacts, lab, launcher

    started = time.strftime("%F %T %Z")
    meta = artifacts.build()
    smi_log = open(out / "nvidia_smi.csv", "w")
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,index,name,utilization.gpu,memory.used,power.draw",
                            "--format=csv", "-lms", "500"], stdout=smi_log, stderr=subprocess.STDOUT)
    logs = {}
    try:
        launcher.up(jupyter=False, triton=True)
        env = {**os.environ, **launcher._urls_for_clients(launcher.read_state()), "PYTHONUNBUFFERED": "1"}
        if args.quick:
            env.update({f"LAB_{k}": str(v) for k, v in lab.QUICK_PARAMS.items()})
        for name in ("04_fastapi_benchmarks", "06_triton_benchmarks"):
            print(f"\n>>> {name}", flush=True)
            log = out / f"{name}.log"
            start = time.time()
            with open(log, "w") as f:
                rc = subprocess.run([sys.executable, str(REPO / "notebooks" / f"{name}.py")], cwd=REPO / "notebooks",
                                    env=env, stdout=f, stderr=subprocess.STDOUT).returncode
            logs[name] = {"rc": rc, "seconds": round(time.time() - start)}
            print(f"    rc={rc} in {logs[name]['seconds']} s; tail:\n" + "\n".join(log.read_text().splitlines()[-8:]))
        print("\n>>> limit", flush=True)
        limit_rc = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu_limit.py"), "--triton",
                                   env["TRITON_SERVER_URL"], "--out", str(out / "limit")], env=env).returncode
        logs["gpu_limit"] = {"rc": limit_rc}
    finally:
        launcher.down()
        smi.terminate()
        smi_log.close()
    write_report(out, started, meta, logs, args.quick)
    return 0 if all(v["rc"] == 0 for v in logs.values()) else 1


def write_report(out: Path, started: str, meta: dict, logs: dict, quick: bool) -> None:
    import pandas as pd
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    lines = [f"# Reference run: {gpu}", "",
             f"Command: `python scripts/gpu_reference.py --out DIR{' --quick' if quick else ''}` "
             f"(from the repository root; started {started})", "",
             f"Machine: {gpu} x {torch.cuda.device_count()}, {os.cpu_count()} CPU cores, {platform.platform()}; "
             f"Python {platform.python_version()}, torch {torch.__version__}; Triton 2.51 (nvidia-pytriton 0.7.0, "
             "local mode: no Docker); model weights: " + meta["weights"], "",
             "Runs: " + ", ".join(f"{k} rc={v['rc']}" + (f" ({v['seconds']} s)" if "seconds" in v else "")
                                  for k, v in logs.items()), ""]
    res = out / "results"
    for part in ("fastapi", "triton"):
        summary = res / part / "summary.csv"
        if summary.exists():
            table = pd.read_csv(summary)
            keep = [c for c in ("run", "requests", "errors", "median_ms", "p95_ms", "p99_ms", "throughput_rps",
                                "infer_median_ms", "queue_median_ms", "mode", "throughput_infer_s", "p50_ms",
                                "server_queue_ms", "server_compute_infer_ms", "avg_batch_size", "util_mean_pct")
                    if c in table]
            lines += [f"## {part}", "", table[keep].round(2).to_markdown(index=False), ""]
        claims = res / part / "claims.csv"
        if claims.exists():
            table = pd.read_csv(claims).fillna("")
            table["verdict"] = table["holds"].astype(str).map({"True": "holds", "False": "DOES NOT HOLD"}).fillna("not checked")
            lines += ["What to notice, on this machine:", "",
                      table[["claim", "verdict", "measured", "note"]].to_markdown(index=False), ""]
    limit = out / "limit" / "limit.json"
    if limit.exists():
        data = json.loads(limit.read_text())
        lines += ["## The limit", "", pd.DataFrame(data["raw"]).to_markdown(index=False), "",
                  pd.DataFrame(data["served"]).drop(columns=["command"], errors="ignore").to_markdown(index=False), ""]
        if "served_over_limit" in data:
            lines += [f"**served/limit = {data['best_served']['infer_per_s']:.0f} / {data['limit']['images_per_s']:.0f} "
                      f"= {data['served_over_limit']:.3f}** (limit: {data['limit']['path']}, batch "
                      f"{data['limit']['batch']}; against eager fp32: {data['served_over_eager_limit']:.3f})", ""]
    (out / "README.md").write_text("\n".join(lines) + "\n")
    print(f"\nreport: {out / 'README.md'}")


if __name__ == "__main__":
    sys.exit(main())
