#!/usr/bin/env python3
"""Notebook 9 (Ray Serve, optional) headless on this machine, its results kept as a page's files.

    .venv/bin/python maintainers/reference/run_notebook_9.py \
        --out docs/results/cpu/09_ray_serve_cluster

What tests/test_notebook_09.py does, at the notebook's own settings unless LAB_RAY_* variables
say otherwise (the test uses smaller ones): a fresh local stack with Triton and the lab's Ray
cluster (a head and a second node, one core each, token auth, 127.0.0.1 only) in a folder of its
own, the solved edition run top to bottom with the scripted predictions (labstack.lab), the
stack stopped. Then the notebook's results folder (results/ray/: summary.csv, claims.csv,
predictions.csv, the autoscaling windows, replicas and plot) is copied to --out, with run.json:
when it ran, how long, the settings, and the machine's load before and after (on a shared 2-core
machine a figure means little without it). Facts that do not hold stop the notebook
(LAB_STRICT_CLAIMS=facts); a measured claim that does not hold is its finding, in claims.csv.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

NAME = "09_ray_serve_cluster"
KEPT = (
    "summary.csv",
    "claims.csv",
    "predictions.csv",
    "autoscaling_windows.csv",
    "autoscaling_replicas.csv",
    "autoscaling_step.png",
)


def machine() -> dict:
    return {
        "cores": os.cpu_count(),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "time": time.strftime("%F %T %Z"),
    }


def launcher(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "labstack.launcher", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the page's folder")
    args = parser.parse_args(argv)
    from labstack import editions, lab, notebook_runner

    work = Path(tempfile.mkdtemp(prefix="nb9_"))
    env = {
        **os.environ,
        "LAB_STATE_DIR": str(work / "lab"),
        "LAB_RESULTS_DIR": str(work / "results"),
        "TRITON_MODEL_REPOSITORY": str(work / "model_repository"),
        "LAB_STRICT_CLAIMS": "facts",
        "LAB_PREDICTIONS": json.dumps(lab.SCRIPTED_PREDICTIONS),
    }
    settings = {k: v for k, v in os.environ.items() if k.startswith("LAB_RAY_")}
    record = {"notebook": NAME, "settings": settings or "the notebook's defaults"}
    record["before"] = machine()
    up = launcher(env, "up", "--ray")
    print(up.stdout[-2000:], up.stderr[-2000:], flush=True)
    if up.returncode != 0:
        return up.returncode
    urls = dict(line.split("=", 1) for line in (work / "lab" / "urls.env").read_text().splitlines())
    env["TRITON_ADMIN_KEY"] = urls["TRITON_ADMIN_KEY"]
    start, failed = time.monotonic(), None
    try:
        notebook_runner.execute(
            editions.solved_notebook(NAME, work / "solved"),
            work / f"{NAME}.ipynb",
            extra_env=env,
            cwd=editions.STUDENT,
        )
    except Exception as exc:  # noqa: BLE001 - kept in run.json, the files so far copied
        failed = f"{type(exc).__name__}: {str(exc)[-1500:]}"
    finally:
        record["notebook_s"] = round(time.monotonic() - start, 1)
        down = launcher(env, "down")
        record["down_returncode"] = down.returncode
    record["after"] = machine()
    if failed:
        record["failed"] = failed
    args.out.mkdir(parents=True, exist_ok=True)
    results = work / "results" / "ray"
    record["files"] = []
    for name in KEPT:
        if (results / name).exists():
            shutil.copy(results / name, args.out / name)
            record["files"].append(name)
    (args.out / "run.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
