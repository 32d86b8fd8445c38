"""Served/limit over separately started servers: notebook 7's best configuration, one fresh start
of the local stack per invocation (a device call has 10 minutes; on the H100 one start, with its
compile and two perf_analyzer runs, took 191-277 s), each start appended to
DIR/results/stability/starts.json. Run it once per device call until enough starts are recorded:

    python3 gpu_reference/run_reference.py --out DIR --parts stability   # one more start
    LAB_STABILITY_DEADLINE_S=540 ...   # more starts while the longest so far fits in 540 s
    LAB_STABILITY_BEST=FILE ...   # the best configuration's record (default: DIR's notebook 7)

The spread of a served/limit figure lies between server starts (which instance lands where, the
batcher's rhythm, the compile), not between repeats inside one start. Each start: the stack up,
food_classifier_tuned placed with the best run's full config.pbtxt and loaded, one uncounted
warm-up run (the compile and CUDA graphs happen on the first batches), one counted run with the
best run's perf_analyzer line at WINDOW_MS windows, the stack down.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import time
from pathlib import Path

WINDOW_MS = 3000  # notebook 7's reference windows; 5 s did not finish inside one call (11-24)
WARM_UP = "--measurement-interval 2000 --max-trials 5 --stability-percentage 1000"
COUNTED = f"--measurement-interval {WINDOW_MS}"  # perf adds the stability rule and its retry


def best_record(out: Path) -> Path:
    return Path(
        os.environ.get("LAB_STABILITY_BEST")
        or out / "results" / "hardware" / "served_over_limit.json"
    )


def run_one_start(out: Path) -> dict:
    """One more fresh start; returns its entry (with "error" if it failed) after saving it."""
    from labstack import launcher
    from servelab import perf
    from servelab.triton import model_repository, triton_config

    source = best_record(out)
    best = json.loads(source.read_text())
    folder = out / "results" / "stability"
    folder.mkdir(parents=True, exist_ok=True)
    record = load(out) or {
        "best": best["best"],
        "best_record": str(source),
        "command": best["command"],
        "limit_images_per_s": best["limit"]["images_per_s"],
        "window_ms": WINDOW_MS,
        "starts": [],
    }
    entry = {"start": len(record["starts"]) + 1, "started": time.strftime("%F %T %Z")}
    t0 = time.time()
    try:
        launcher.up(jupyter=False, triton=True)
        urls = launcher.client_urls(launcher.read_state())
        url, grpc = urls["TRITON_SERVER_URL"], urls["TRITON_GRPC_URL"]
        os.environ.update(urls)  # this start's URLs and its secret (the repository API's)
        model = model_repository.add_model("food_classifier_tuned", kind="gpu", verbose=False)
        (model / "config.pbtxt").write_text(best["best_config"])
        ok, entry["load_s"], error = triton_config.load_model("food_classifier_tuned", url, 900)
        if not ok:
            raise RuntimeError(f"the best config did not load: {error}")
        target = grpc if " -i grpc" in best["command"] else url.split("://")[-1]
        line = re.sub(r"-u \S+", f"-u {target}", best["command"])
        tag = f"start_{entry['start']}"
        try:  # only there to compile and fill the CUDA graphs: its numbers are not the result
            warm = perf.run_line(f"{line} {WARM_UP}", f"{tag}_warm-up", out=folder, url=url)
            entry["warm_up_infer_s"] = warm.row["throughput_infer_s"]
        except perf.PerfAnalyzerError as exc:
            entry["warm_up"] = f"did not settle: {str(exc)[:120]}"
        run = perf.run_line(f"{line} {COUNTED}", tag, out=folder, url=url, timeout=200)
        entry["infer_s"] = run.row["throughput_infer_s"]
        entry["served_over_limit"] = entry["infer_s"] / record["limit_images_per_s"]
        entry["mode"] = run.row["mode"]
    except Exception as exc:  # noqa: BLE001 - a failed start is recorded as such, with its reason
        entry["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
    finally:
        launcher.down()
    entry["seconds"] = round(time.time() - t0)
    record["starts"].append(entry)
    (folder / "starts.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"fresh start {entry['start']}: {entry}", flush=True)
    return entry


def load(out: Path) -> dict | None:
    path = out / "results" / "stability" / "starts.json"
    return json.loads(path.read_text()) if path.exists() else None


def report_lines(out: Path, goal: float) -> list[str]:
    """The page's section: the line over the starts that measured, each start, the failures."""
    record = load(out)
    if not record:
        return []
    ratios = [s["served_over_limit"] for s in record["starts"] if "served_over_limit" in s]
    lines = ["## Served / limit over separately started servers", ""]
    if ratios:
        median = statistics.median(ratios)
        lines += [
            f"**served/limit over {len(ratios)} separately started servers: median {median:.3f}, "
            f"min {min(ratios):.3f}, max {max(ratios):.3f}** (goal: median >= {goal:.2f}: "
            f"{'holds' if median >= goal and len(ratios) >= 3 else 'does not hold yet'}"
            + ("" if len(ratios) >= 3 else f", {len(ratios)} of the 3 starts it needs")
            + ")",
            "",
        ]
    lines += [
        f"Configuration: {record['best']} (from `{Path(record['best_record']).name}`); limit "
        f"{record['limit_images_per_s']:.0f} images/s; each start's counted run at "
        f"{record['window_ms'] / 1000:g} s windows after an uncounted warm-up run.",
        "",
        "| start | began | load s | warm-up infer/s | infer/s | served/limit | whole start s | "
        "note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in record["starts"]:
        cells = [
            f"{s[k]:.0f}" if isinstance(s.get(k), float) else str(s.get(k, ""))
            for k in ("load_s", "warm_up_infer_s", "infer_s")
        ]
        ratio = f"{s['served_over_limit']:.3f}" if "served_over_limit" in s else ""
        note = s.get("error") or s.get("mode", "")
        lines.append(
            f"| {s['start']} | {s['started']} | {' | '.join(cells)} | {ratio} | {s['seconds']} "
            f"| {note} |"
        )
    return [*lines, ""]
