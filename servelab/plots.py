"""The end-of-part plots. Each function takes a summary table and returns a matplotlib Figure."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def latency_throughput(table: pd.DataFrame, title: str) -> plt.Figure:
    """Grouped median/p95/p99 latency bars and a throughput bar per run."""
    fig, (ax_lat, ax_thr) = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    x = np.arange(len(table))
    for i, (col, name) in enumerate([("median_ms", "median"), ("p95_ms", "p95"), ("p99_ms", "p99")]):
        ax_lat.bar(x + (i - 1) * 0.27, table[col], width=0.27, label=name)
    ax_lat.set_xticks(x, table["run"], rotation=20, ha="right")
    ax_lat.set_ylabel("latency (ms)")
    ax_lat.set_title("client-side latency")
    ax_lat.legend()
    ax_thr.bar(x, table["throughput_rps"], color="tab:green")
    ax_thr.set_xticks(x, table["run"], rotation=20, ha="right")
    ax_thr.set_ylabel("requests / s")
    ax_thr.set_title("throughput")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def latency_breakdown(table: pd.DataFrame, title: str) -> plt.Figure:
    """Median client latency split into the service's infer, its queue and the rest (HTTP, decode, client)."""
    fig, ax = plt.subplots(figsize=(8, 4))
    x = np.arange(len(table))
    infer = table["infer_median_ms"].fillna(0).to_numpy()
    queue = table["queue_median_ms"].fillna(0).to_numpy()
    rest = np.clip(table["median_ms"].to_numpy() - infer - queue, 0, None)
    ax.bar(x, infer, label="model (infer)")
    ax.bar(x, queue, bottom=infer, label="waiting for the model (queue)")
    ax.bar(x, rest, bottom=infer + queue, label="everything else (HTTP, decode, client)")
    ax.set_xticks(x, table["run"], rotation=20, ha="right")
    ax.set_ylabel("median latency (ms)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig
