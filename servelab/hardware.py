"""Notebook 7's bookkeeping: the limit per runtime, served/limit per run, the best run's record.

Introduced in notebook 7.

    hardware.measure_limit(args, path)     # raw_limit.py run alone (local) or in Triton's container
    hardware.runtime_table(raw)            # raw_limit's JSON -> one row per runtime, its best
    hardware.summary(runs, limit)          # one row per perf run, served/limit and two laws
    hardware.spread_line(ratios, "runs")   # "served/limit over 2 runs: median .., min .., max .."
    hardware.time_split(row, raw)          # the best run's time per execution beside the raw model
    hardware.laws_worked_out(row, n)       # N = X·R and U = X_exec·S / instances, written out
    hardware.record(path, raw, ...)        # results/hardware/served_over_limit.json

served/limit is the inferences per second a run served (one image per request, perf_analyzer)
divided by the limit: the most images per second any runtime of the lab does with this model on
this device, batched, with no server (servelab/serving/raw_limit.py). The notebook does that
division once by hand; summary() does it for every row.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from servelab import queueing, services
from servelab.triton import config_text

LIMIT_DEFINITION = (
    "the most images/s any runtime of the lab does with this model on this device, batched, "
    "with no server and nothing else running (servelab/serving/raw_limit.py)"
)
# issue 27's goal for the H100 reference: the best configuration's median served/limit
GOAL = 0.70


def measure_limit(args: str, path: Path, model: str, local: bool) -> dict:
    """Run servelab/serving/raw_limit.py with `args` and return the JSON it writes to `path`. In
    local mode here, with the lab's services paused so it has the cores to itself
    (services.run_alone); with Docker, where the device is: in the Triton container, by the command
    printed for the host (services.ask_host), waited for."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).unlink(missing_ok=True)
    if local:
        command = [sys.executable, "-m", "servelab.serving.raw_limit", *args.split()]
        why = "the raw model gets the cores to itself"
        services.run_alone([*command, "--json", str(path)], why)
        return json.loads(Path(path).read_text())
    services.ask_host(
        f"docker compose {services.compose_files()} exec -T "
        f"-e FOOD11_MODEL_PATH=/models/{model}/1/food11.pth "
        "-e FOOD11_ONNX_PATH=/models/food_classifier_onnx/1/model.onnx triton_server "
        f"python3 -m servelab.serving.raw_limit {args} --json - > {services.host_path(path)}"
    )
    done = services.wait_for_file(path, lambda text: text.rstrip().endswith("}"), timeout=1800)
    return json.loads(done)


def runtime_table(raw: dict) -> pd.DataFrame:
    """One row per runtime the limit tried: its best images/s and at which batch, how many times
    eager fp32's best that is, and whether it gives eager fp32's answers (a path that does not is
    left out of the limit; a path this device cannot run is listed with the reason)."""
    eager = raw["eager_limit"]["images_per_s"]
    checks, rows = raw.get("same_classes", {}), []
    for path, top in raw["per_runtime"].items():
        answers = checks[path]["summary"] if path in checks else "the reference"
        if path.startswith("onnxruntime"):
            answers = "the same model, exported to ONNX (not compared here)"
        rows.append(
            {
                "runtime": path,
                "images_per_s": top["images_per_s"],
                "at_batch": top["batch"],
                "x_eager_fp32": round(top["images_per_s"] / eager, 2),
                "answers": answers,
            }
        )
    for path, check in checks.items():
        if path not in raw["per_runtime"]:
            rows.append({"runtime": path, "answers": f"left out of the limit: {check['summary']}"})
    for path, why in (raw.get("skipped") or {}).items():
        rows.append({"runtime": path, "answers": f"skipped: {why}"})
    return pd.DataFrame(rows)


def summary(runs, limit: dict) -> pd.DataFrame:
    """One row per perf run (perf.Run objects, in order): its step (the name's first word), the
    parsed row, served_over_limit = throughput_infer_s / limit images_per_s, and the two laws
    (queueing.laws: in_flight_N, instance_busy_U) with the instances of the config Triton served
    for the run."""
    table = pd.DataFrame(
        [
            {
                **run.row,
                "run": run.name,
                "step": run.name.split(" ")[0],
                "instances": instances(run.served_config),
            }
            for run in runs
        ]
    )
    table["served_over_limit"] = table["throughput_infer_s"] / limit["images_per_s"]
    laws = queueing.laws(
        table["throughput_infer_s"],
        table["avg_latency_ms"],
        table.apply(execution_ms, axis=1),
        batch=table["avg_batch_size"].clip(lower=1),
        instances=table["instances"],
    )
    table["in_flight_N"], table["instance_busy_U"] = laws["in_flight_N"], laws["busy_U"]
    return table


# what notebook 7's summary shows of each run (with each device's utilisation)
SHOWN = [
    "run",
    "throughput_infer_s",
    "served_over_limit",
    "p99_ms",
    "server_queue_ms",
    "server_compute_infer_ms",
    "avg_batch_size",
    "in_flight_N",
    "instance_busy_U",
]


def shown(table: pd.DataFrame) -> pd.DataFrame:
    """summary()'s columns a reader compares (SHOWN), then each device's utilisation."""
    return table[[*SHOWN, *(c for c in table if c.endswith("_util_pct"))]].round(3)


def execution_ms(row) -> float:
    """The mean time of one model execution (input + infer + output) in a run: from Triton's
    per-batch statistics (perf.run_line's execution_ms), else from perf_analyzer's per-request
    averages, which weigh large batches more (a request's times are its batch's)."""
    measured = row.get("execution_ms")
    if measured and pd.notna(measured):
        return float(measured)
    return float(sum(row[f"server_compute_{p}_ms"] for p in ("input", "infer", "output")))


def instances(config) -> int:
    """How many instances a config asks for (every instance_group's count; unset: 1): its
    config.pbtxt text, or the config Triton served (a dict, as perf.Run.served_config holds)."""
    if isinstance(config, dict):
        return sum(max(1, int(g.get("count", 1))) for g in config.get("instance_group", [])) or 1
    groups = config_text.parse_config(config).instance_group
    return sum(max(1, group.count) for group in groups) or 1


def sweep_table(swept) -> pd.DataFrame:
    """Step 7.6: one row per configuration of the sweep ((fragment, its perf.Run) pairs), with its
    run's throughput, p99 and the batch size the batcher formed on average."""
    rows = []
    for fragment, run in swept:
        config, row = config_text.parse_config(fragment), run.row
        rows.append(
            {
                "instances": instances(fragment),
                "max_batch": config.max_batch_size,
                "delay_us": config.dynamic_batching.max_queue_delay_microseconds,
                "clients": row["concurrency"],
                **{k: row[k] for k in ("throughput_infer_s", "p99_ms", "avg_batch_size")},
            }
        )
    return pd.DataFrame(rows)


def laws_worked_out(row: dict, n_instances: int) -> str:
    """Little's law and the utilisation law on one perf run (queueing.laws), with the arithmetic
    written out: N = X·R (requests in flight = throughput × mean latency; a closed loop keeps its
    clients) and U = X_exec·S / instances (executions per second × mean time of one execution, per
    instance: the share of time each model instance was working)."""
    x, r_ms, s_ms = row["throughput_infer_s"], row["avg_latency_ms"], execution_ms(row)
    batch = max(1.0, float(row["avg_batch_size"]))
    laws = queueing.laws(x, r_ms, s_ms, batch=batch, instances=n_instances)
    return (
        f"N = X·R = {x:.0f}/s × {r_ms:.1f} ms = {laws['in_flight_N']:.0f} requests in flight (the "
        f"line keeps {row['concurrency']:.0f})\n"
        f"U = X_exec·S / instances = {x / batch:.0f} executions/s × {s_ms:.2f} ms / "
        f"{n_instances} = {laws['busy_U']:.2f} (each instance's share of time busy executing)"
    )


def spread_line(ratios: list[float], what: str) -> str:
    """The figure to quote for a repeated configuration: median, lowest and highest."""
    return (
        f"served/limit over {len(ratios)} {what}: median {np.median(ratios):.3f}, "
        f"min {min(ratios):.3f}, max {max(ratios):.3f}"
    )


def time_split(row: dict, raw: dict) -> str:
    """A run's time per execution (Triton's batch statistics, execution_ms) split as perf_analyzer
    splits it (input, infer, output), beside what the raw model, on the limit's path, takes for a
    batch of the run's average size. perf_analyzer's own parts are per-request averages, which
    count a batch of 60 sixty times: they overstate an execution when batches vary in size, so
    they are scaled to the per-execution total."""
    batch = max(1.0, float(row["avg_batch_size"]))
    path = raw["limit"]["path"]
    points = sorted((r["batch"], r["images_per_s"]) for r in raw["rows"] if r["path"] == path)
    raw_ms = 1000 * batch / float(np.interp(batch, *zip(*points)))
    per_request = [row[f"server_compute_{p}_ms"] for p in ("input", "infer", "output")]
    total = execution_ms(row)
    parts = [part * total / sum(per_request) for part in per_request]
    return (
        f"average batch {batch:.1f}; per execution: input {parts[0]:.2f} + infer {parts[1]:.2f}"
        f" + output {parts[2]:.2f} = {total:.2f} ms (per request, weighted by batch size: "
        f"{sum(per_request):.2f} ms); the raw model ({path}) takes {raw_ms:.2f} ms for a batch of "
        f"{batch:.0f}: the execution takes {total / raw_ms:.1f}x the raw model's time"
    )


def record(
    path: Path, raw: dict, best_run, best_config: str, repeats: list, transport: dict
) -> dict:
    """Write served_over_limit.json: the best run (the perf.Run: its name, perf_analyzer line and
    the full config.pbtxt it ran with, which maintainers/reference/run_reference.py's stability part
    serves again on freshly started servers), the limit, and the repeats of step 7.8."""
    limit = raw["limit"]["images_per_s"]
    ratios = [run.throughput.value / limit for run in repeats]
    served = best_run.row["throughput_infer_s"]
    data = {
        "served_infer_s": served,
        "best": best_run.name,
        "command": best_run.row["command"],
        "best_config": best_config,
        "served_over_limit": served / limit,
        "goal": GOAL,
        "limit": raw["limit"],
        "eager_limit": raw["eager_limit"],
        "per_runtime": raw.get("per_runtime", {}),
        "device": raw["device_name"],
        "compute_capability": raw.get("compute_capability"),
        "transport": transport,
        "repeated": best_run.name,
        "repeats_served_over_limit": ratios,
        "repeats_median": float(np.median(ratios)),
        "limit_definition": LIMIT_DEFINITION,
    }
    Path(path).write_text(json.dumps(data, indent=2) + "\n")
    return data
