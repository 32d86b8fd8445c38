"""A step's table: its perf_analyzer runs as rows with the two laws, the queueing model's mean
latency beside each, and where the model misses, which of its assumptions the run broke.

Introduced in notebook 6.

    table = step_table.table([c1, c8])                             # a row per run, with the laws
    table = step_table.against_model(table, [model_c1, model_c8])  # + model_ms, measured/model
    step_table.model_readings(table, SERVICE_MS)                   # a sentence per row
"""

from __future__ import annotations

from servelab import queueing

# what a step's table shows of each run: the load, what came back, and the two laws
COLUMNS = [
    "concurrency",
    "request_rate",
    "throughput_infer_s",
    "avg_latency_ms",
    "p50_ms",
    "p99_ms",
    "server_queue_ms",
    "execution_ms",
    "avg_batch_size",
    "instances",
    "busy_U",
    "in_flight_N",
    "waiting_N",
    "delayed_pct",
]


def table(runs):
    """The runs (perf.Run objects, in the order given) as one table, a row per run named by the
    run: the load (concurrency or request_rate), throughput, mean, median and p99 latency,
    Triton's queue, the time of one execution, the mean batch, the instances, the utilisation law
    (busy_U) and Little's law (in_flight_N, waiting_N), and each device's mean utilisation."""
    import pandas as pd

    rows = [{**run.row, "run": run.name} for run in runs]
    frame = pd.DataFrame(rows).set_index("run")
    util = [c for c in frame if c.endswith("_util_pct")]
    shown = [c for c in COLUMNS if c in frame and frame[c].notna().any()] + util
    if "request_rate" not in shown and "delayed_pct" in shown:  # only a rate run can send late
        shown.remove("delayed_pct")
    return frame[shown].round(3)


def against_model(frame, model_ms):
    """`frame` (from table()) with the queueing model's mean latency beside each measured one:
    model_ms (one per row) and measured_over_model."""
    frame = frame.copy()
    frame["model_ms"] = [round(float(m), 3) for m in model_ms]
    frame["measured_over_model"] = (frame["avg_latency_ms"] / frame["model_ms"]).round(2)
    return frame


def model_readings(frame, alone_ms, open_loop: bool = False) -> None:
    """Print, for each row of against_model()'s frame, queueing.model_miss's sentence: the model
    within ±30 %, or which of its assumptions the run broke (read from the row's laws, its service
    time against `alone_ms`, the one the model was given: one per row, or one for all, and, for
    open-loop runs, the latency's tail p99 / median)."""
    alone = list(alone_ms) if hasattr(alone_ms, "__len__") else [alone_ms] * len(frame)
    for (name, row), service in zip(frame.iterrows(), alone):
        tail = row["p99_ms"] / row["p50_ms"] if open_loop and row["p50_ms"] else None
        said = queueing.model_miss(
            row["model_ms"],
            row["avg_latency_ms"],
            row["busy_U"],
            service,
            row["execution_ms"],
            open_loop=open_loop,
            tail=tail,
        )
        print(f"{name}: {said}")
