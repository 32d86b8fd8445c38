"""A load run's rows read: the summary row with the two laws, and the median and throughput with
the intervals that decide a claim. Both loops' runs read alike (closed_loop.py, open_loop.py).

Introduced in notebook 4.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from servelab import claims, queueing


def summarize(df: pd.DataFrame) -> dict:
    """One table row: the numbers the notebooks compare (ms, requests/s), with the laws beside
    them: lock_busy_U = X·S (throughput × mean `infer`: how many model locks were busy on average,
    at most one per worker process) and in_flight_N = X·R (throughput × mean latency: how many
    requests were in flight on average; Little's law)."""
    ok = df[df["status"] == 200]
    lat = ok["latency_ms"].to_numpy()
    row = {
        "run": df.attrs.get("label", ""),
        "concurrency": df.attrs.get("concurrency", 1),
        "requests": len(df),
        "errors": int(len(df) - len(ok)),
        "median_ms": float(np.median(lat)) if len(lat) else float("nan"),
        "p95_ms": float(np.percentile(lat, 95)) if len(lat) else float("nan"),
        "p99_ms": float(np.percentile(lat, 99)) if len(lat) else float("nan"),
        "throughput_rps": len(ok) / df.attrs["wall_s"] if df.attrs.get("wall_s") else float("nan"),
        "mean_ms": float(np.mean(lat)) if len(lat) else float("nan"),
    }
    for part in ("decode", "queue", "infer"):
        column = f"server_{part}_ms"
        row[f"{part}_median_ms"] = (
            float(ok[column].median()) if column in ok and len(ok) else float("nan")
        )
    infer = "server_infer_ms"
    row["infer_mean_ms"] = float(ok[infer].mean()) if infer in ok and len(ok) else float("nan")
    laws = queueing.laws(row["throughput_rps"], row["mean_ms"], row["infer_mean_ms"])
    row["lock_busy_U"], row["in_flight_N"] = laws["busy_U"], laws["in_flight_N"]
    if (
        "late_ms" in df
    ):  # an open loop (servelab/loadgen/open_loop.py): what it offered, what left late
        row["request_rate"] = df.attrs.get("request_rate")
        row["delayed_pct"] = float((df["late_ms"] > df.attrs.get("late_limit_ms", 10)).mean() * 100)
    return row


def median_ms(df: pd.DataFrame, column: str = "latency_ms"):
    """The median of a column over the run's successful requests, with its 95% bootstrap interval
    (claims.Measured): what the notebooks compare, so noise cannot decide a claim unnoticed."""
    ok = df[df["status"] == 200]
    return claims.Measured.from_samples(ok[column].dropna().to_numpy())


def throughput(df: pd.DataFrame, windows: int = 5):
    """Requests per second of a run (summarize's throughput_rps), with an interval: the run cut
    into `windows` equal spans of time and the rate of answers in each, as perf_analyzer's
    measurement windows (claims.Measured.from_windows)."""
    ok = df[df["status"] == 200]
    done = (ok["t_start"] + ok["latency_ms"] / 1000).to_numpy()
    start, end = float(ok["t_start"].min()), float(done.max())
    edges = np.linspace(start, end, windows + 1)
    counts, _ = np.histogram(done, bins=edges)
    rates = counts / np.diff(edges)
    return claims.Measured.from_windows(rates, summarize(df)["throughput_rps"])
