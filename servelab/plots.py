"""The end-of-part plots. Each function takes a summary table and returns a matplotlib Figure.

Introduced in notebook 4.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def latency_throughput(table: pd.DataFrame, title: str) -> plt.Figure:
    """Grouped median/p95/p99 latency bars and a throughput bar per run."""
    fig, (ax_lat, ax_thr) = plt.subplots(
        1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [3, 2]}
    )
    x = np.arange(len(table))
    for i, (col, name) in enumerate(
        [("median_ms", "median"), ("p95_ms", "p95"), ("p99_ms", "p99")]
    ):
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
    """Median client latency split into the service's infer, its queue and the rest (HTTP, decode,
    client)."""
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


# ---------------------------------------------------------------- Triton (perf_analyzer rows, ms)


def _throughput_lines(lines, x: str, xlabel: str, title: str) -> tuple[plt.Figure, plt.Axes]:
    """One line per (label, rows): inferences/s against column x."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, rows in lines:
        rows = rows.sort_values(x)
        ax.plot(rows[x], rows["throughput_infer_s"], marker="o", label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("inferences / s")
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig, ax


def throughput_vs_concurrency(table: pd.DataFrame, title: str) -> plt.Figure:
    """One line per configuration: inferences/s against the number of requests in flight."""
    lines = table.dropna(subset=["concurrency"]).groupby("config", sort=False)
    return _throughput_lines(lines, "concurrency", "concurrency (requests in flight)", title)[0]


def latency_split_stacked(table: pd.DataFrame, title: str) -> plt.Figure:
    """perf_analyzer's average latency split into queue / compute / network+client, one bar per run;
    one panel per step (each with its own scale, since steps differ by 100x)."""
    groups = list(table.groupby("step", sort=False)) if "step" in table else [("", table)]
    widths = [max(1.5, len(rows)) for _, rows in groups]
    fig, axes = plt.subplots(
        1,
        len(groups),
        figsize=(max(8, 1.1 * sum(widths)), 4.8),
        gridspec_kw={"width_ratios": widths},
        squeeze=False,
    )
    for ax, (step, rows) in zip(axes[0], groups):
        x = np.arange(len(rows))
        queue = rows["server_queue_ms"].to_numpy()
        compute = (
            rows["server_compute_input_ms"]
            + rows["server_compute_infer_ms"]
            + rows["server_compute_output_ms"]
        ).to_numpy()
        network = (
            rows["client_send_ms"] + rows["network_server_send_recv_ms"] + rows["client_recv_ms"]
        ).to_numpy()
        ax.bar(x, queue, label="server queue", color="tab:blue")
        ax.bar(
            x,
            compute,
            bottom=queue,
            label="server compute (input + infer + output)",
            color="tab:orange",
        )
        ax.bar(x, network, bottom=queue + compute, label="network + client", color="tab:green")
        labels = [r.split(": ", 1)[-1] for r in rows["run"]]
        ax.set_xticks(x, labels, rotation=35, ha="right", fontsize=7)
        ax.set_title(f"step {step}" if step else "", fontsize=9)
    axes[0][0].set_ylabel("average latency (ms)")
    axes[0][-1].legend(fontsize=7, loc="upper left")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def batch_size_histogram(executions: dict[str, dict[int, int]], title: str) -> plt.Figure:
    """Model executions per batch size, one group of bars per run (from Triton's batch_stats)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    sizes = sorted({size for counts in executions.values() for size in counts})
    width = 0.8 / max(1, len(executions))
    for i, (run, counts) in enumerate(executions.items()):
        ax.bar(
            np.arange(len(sizes)) + i * width,
            [counts.get(s, 0) for s in sizes],
            width=width,
            label=run,
        )
    ax.set_xticks(np.arange(len(sizes)) + 0.4 - width / 2, [str(s) for s in sizes])
    ax.set_xlabel("batch size the model ran with")
    ax.set_ylabel("executions")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def steps_vs_limit(
    table: pd.DataFrame, limit: dict, eager_limit: dict, title: str, goal: float = 0.7
) -> plt.Figure:
    """Notebook 7: inferences/s served per run (batch-1 clients), with the raw model's limits and
    the goal (a share of the limit)."""
    fig, ax = plt.subplots(figsize=(max(8, 0.55 * len(table) + 3), 4.8))
    x = np.arange(len(table))
    ax.bar(x, table["throughput_infer_s"], color="tab:blue")
    ax.axhline(
        limit["images_per_s"],
        color="tab:red",
        linestyle="--",
        label=f"limit: {limit['path']}, batch {limit['batch']} ({limit['images_per_s']:.0f}/s)",
    )
    if eager_limit["path"] != limit["path"]:
        ax.axhline(
            eager_limit["images_per_s"],
            color="tab:gray",
            linestyle=":",
            label=f"{eager_limit['path']}, batch {eager_limit['batch']} "
            f"({eager_limit['images_per_s']:.0f}/s)",
        )
    ax.axhline(
        goal * limit["images_per_s"],
        color="tab:green",
        linestyle="-.",
        linewidth=1,
        label=f"goal: {goal:.0%} of the limit",
    )
    for i, value in enumerate(table["throughput_infer_s"]):
        ax.text(
            i, value, f"{value / limit['images_per_s']:.0%}", ha="center", va="bottom", fontsize=7
        )
    ax.set_xticks(x, table["run"], rotation=35, ha="right", fontsize=7)
    ax.set_ylabel("inferences / s (one image per request)")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="lower right", framealpha=0.9)
    fig.tight_layout()
    return fig


def sweep_throughput(sweep: pd.DataFrame, title: str) -> plt.Figure:
    """Notebook 7, step 7.6: inferences/s by instance count, one line per (max batch, delay)."""
    lines = (
        (f"max batch {max_batch}, delay {delay} us", rows)
        for (max_batch, delay), rows in sweep.groupby(["max_batch", "delay_us"])
    )
    fig, ax = _throughput_lines(lines, "instances", "model instances", title)
    ax.set_xticks(sorted(sweep["instances"].unique()))
    return fig


def measured_vs_model(
    table: pd.DataFrame,
    x: str,
    y: str,
    by: str,
    model_y: str | None,
    title: str,
    xlabel: str,
    ylabel: str,
    logy: bool = False,
) -> plt.Figure:
    """One solid curve per configuration (`by`) of measured y against x, and beside it, dashed in
    the same colour, the queueing model's prediction (column model_y), so where they part shows."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for i, (config, rows) in enumerate(table.groupby(by, sort=False)):
        rows = rows.sort_values(x)
        colour = f"C{i}"
        ax.plot(rows[x], rows[y], marker="o", color=colour, label=f"{config}: measured")
        if model_y and model_y in rows and rows[model_y].notna().any():
            finite = rows[np.isfinite(rows[model_y])]
            ax.plot(
                finite[x],
                finite[model_y],
                linestyle="--",
                color=colour,
                label=f"{config}: queueing model",
            )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def utilisation_over_time(samples: dict[str, list[dict]], title: str) -> plt.Figure:
    """Per-GPU utilisation (or the CPU's, where Triton reports no GPU) over each run's time, one
    panel per run, from the samples perf.run_line takes (perf.Run.utilisation)."""
    fig, axes = plt.subplots(
        1,
        max(1, len(samples)),
        figsize=(max(7, 3.2 * len(samples)), 3.6),
        sharey=True,
        squeeze=False,
    )
    for ax, (run, rows) in zip(axes[0], samples.items()):
        table = pd.DataFrame(rows)
        columns = [c for c in table if c.endswith("_util_pct")]
        for column in columns:
            name = column.replace("_util_pct", "")
            label = f"GPU {name[3:]}" if name.startswith("gpu") else "CPU, all cores"
            ax.plot(table["t_s"], table[column], label=label)
        ax.set_title(run, fontsize=9)
        ax.set_xlabel("seconds into the run")
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
        if columns:
            ax.legend(fontsize=7, loc="lower right")
    gpus = any(c.startswith("gpu") for rows in samples.values() for r in rows for c in r)
    axes[0][0].set_ylabel(
        "GPU busy (% of time a kernel ran)" if gpus else "CPU busy (% of all cores)"
    )
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def load_step(
    windows: pd.DataFrame,
    replicas: pd.DataFrame,
    marks: dict[str, float],
    budget_ms: float,
    title: str,
) -> plt.Figure:
    """Notebook 9's autoscaling run over time, three panels sharing the time axis: replicas
    (running, starting), requests in the system (open_loop.over_time's in_flight: queued or in
    service) against the offered rate, and the p95 of each window against the budget; `marks`
    draws a vertical line at each named moment (the step up, the step down)."""
    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    top.step(replicas["t_s"], replicas.get("RUNNING", 0), where="post", label="running")
    if "STARTING" in replicas:
        top.step(replicas["t_s"], replicas["STARTING"], where="post", label="starting", ls="--")
    top.set_ylabel("replicas")
    middle.plot(windows["t_s"], windows["in_flight"], label="in the system (queued + served)")
    rate = middle.twinx()
    rate.plot(windows["t_s"], windows["offered_per_s"], color="grey", alpha=0.5, label="offered")
    rate.set_ylabel("offered (requests/s)")
    middle.set_ylabel("requests in flight")
    bottom.plot(windows["t_s"], windows["p95_ms"], marker=".", label="p95 of the window")
    bottom.axhline(budget_ms, color="red", ls=":", label=f"budget {budget_ms:.0f} ms")
    bottom.set_yscale("log")
    bottom.set_ylabel("p95 latency (ms)")
    bottom.set_xlabel("seconds into the run")
    for ax in (top, middle, bottom):
        for name, t in marks.items():
            ax.axvline(t, color="black", alpha=0.4, ls="--")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    for name, t in marks.items():
        top.annotate(name, (t, 0), fontsize=8, rotation=90, va="bottom")
    fig.suptitle(title)
    fig.tight_layout()
    return fig
