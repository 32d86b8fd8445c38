"""Triton's Prometheus metrics, watched while a load runs.

Introduced in notebook 6 (its 6.3 and 6.6 runs); notebook 8 watches its ensemble with it.

    from servelab.triton import live_metrics
    watch = live_metrics.Watch(METRICS, models=["food_classifier"])
    run = watch.during(lambda: perf.run_line(line, "6.3 2 inst c8", out=OUT))  # figure redrawn live
    watch.table()        # a row per interval: inferences/s, queue and compute ms, utilisation

Triton publishes its metrics as Prometheus text at http://<host>:8002/metrics. Counters grow
from the model's load on (requests, inferences, and the total microseconds spent queued and
computing); gauges are a reading now (requests waiting, CPU and per-GPU utilisation, refreshed
every --metrics-interval-ms: 500 ms in local mode, 2000 ms by default). Over one sampling
interval, for each model:

    inferences/s  = delta nv_inference_count / delta t
    queue ms      = delta nv_inference_queue_duration_us / delta nv_inference_request_success / 1000
    compute ms    = delta (compute_input + compute_infer + compute_output)_duration_us
                    / delta success / 1000

The scrapes are taken and read by servelab/triton/triton_stats.py (its Sampler and reading()), the
lab's one reader of Triton's metrics. Utilisation: nv_gpu_utilization per GPU where Triton reports
GPUs (the Docker image on a GPU node); the pip-installed Triton of local mode has no GPU metrics,
so there the figure shows nv_cpu_utilization (all cores together) and says so.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from servelab import passes
from servelab.triton import triton_stats
from servelab.triton.triton_stats import COUNTERS


def interval(before: dict, after: dict, seconds: float, models: list[str] | None = None) -> dict:
    """What happened between two readings (triton_stats.reading) `seconds` apart: per model
    inferences/s, mean queue and compute ms per request, requests waiting now; utilisation now
    (percent, triton_stats.utilisation)."""
    row: dict = {}
    for model in models or sorted(after["models"]):
        a, b = after["models"].get(model, {}), before["models"].get(model, {})
        delta = {k: a.get(k, 0.0) - b.get(k, 0.0) for k in COUNTERS.values()}
        if any(v < 0 for v in delta.values()):  # the model was reloaded: its counters restarted
            delta = {k: a.get(k, 0.0) for k in COUNTERS.values()}
        done = delta["requests"]
        compute = delta["compute_input_us"] + delta["compute_infer_us"] + delta["compute_output_us"]
        row[f"{model}:infer_per_s"] = delta["inferences"] / seconds if seconds > 0 else 0.0
        row[f"{model}:queue_ms"] = delta["queue_us"] / done / 1000 if done else float("nan")
        row[f"{model}:compute_ms"] = compute / done / 1000 if done else float("nan")
        row[f"{model}:pending"] = a.get("pending", float("nan"))
    return {**row, **triton_stats.utilisation(after)}


@dataclass
class Watch:
    """Samples Triton's /metrics every `interval_s` (a triton_stats.Sampler); `rows` holds one dict
    per interval (t_s = seconds since start()), `figure()` draws them, `during()` refreshes the
    figure in a notebook while a function (a perf_analyzer run) executes."""

    metrics_url: str | None = None  # None: TRITON_METRICS_URL (labenv.metrics_url)
    models: list[str] | None = None
    interval_s: float = 0.5

    def __post_init__(self):
        self.kept_rows = None
        self.sampler = triton_stats.Sampler(self.metrics_url, self.interval_s)
        self.metrics_url = self.sampler.metrics_url

    @property
    def rows(self) -> list[dict]:
        if self.kept_rows is not None:  # the review pass: the measure pass's rows
            return self.kept_rows
        seen = list(self.sampler.readings)
        return [
            {"t_s": b["t_s"], **interval(a, b, b["t_s"] - a["t_s"], self.models)}
            for a, b in zip(seen, seen[1:])
        ]

    @property
    def errors(self) -> list[str]:
        return self.sampler.errors

    def start(self) -> Watch:
        self.sampler.scrape()  # fail now, in the caller, if the endpoint is wrong
        self.sampler.start()
        return self

    def stop(self) -> None:
        self.sampler.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def table(self):
        import pandas as pd

        return pd.DataFrame(self.rows)

    # ------------------------------------------------------------ the figure

    def figure(self, fig=None):
        """Three panels over time: inferences/s per model; queue and compute ms per request per
        model; utilisation (each GPU, or the CPU where Triton reports no GPU)."""
        import matplotlib.pyplot as plt

        if fig is None:
            fig = plt.figure(figsize=(10, 6.5))
        fig.clf()
        axes = fig.subplots(3, 1, sharex=True)
        table = self.table()
        if table.empty:
            axes[0].set_title("waiting for the first interval ...")
            return fig
        _draw_models(axes[0], axes[1], table)
        _draw_utilisation(axes[2], table)
        for ax in axes:
            if ax.lines:
                ax.legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        return fig

    def during(
        self,
        work,
        refresh_s: float = 1.0,
        display: bool | None = None,
        save: Path | str | None = None,
    ):
        """Run work() (e.g. lambda: perf.run_line(line, name)) in a thread while sampling; in a
        notebook the figure is redrawn every refresh_s in one output (display=None: only when
        IPython runs). save="results/triton/live_6.3": the last figure as .png, the table as .csv.
        Returns work()'s result; its exception is raised here after the sampling stopped.

        The measure pass keeps the rows in the notebook's bundle; the review pass runs work()
        (which reads its run from the bundle) and draws the kept rows once."""
        key = f"live metrics, {Path(save).name if save else 'a run'}"
        if passes.replays():
            value = work()
            import matplotlib.pyplot as plt

            self.kept_rows = passes.on_node(key, "table", list, load=_read_rows)
            fig = self.figure()
            self._finish(fig, bool(_in_ipython() if display is None else display), save)
            plt.close(fig)
            return value
        value = self._watched(work, refresh_s, display, save)
        passes.on_node(key, "table", lambda: self.rows, save=_write_rows)
        return value

    def _watched(self, work, refresh_s: float, display: bool | None, save):
        import matplotlib.pyplot as plt

        display = _in_ipython() if display is None else display
        fig, handle = plt.figure(figsize=(10, 6.5)), None
        self.start()
        runner, outcome = _in_a_thread(work)
        try:
            while runner.is_alive():
                runner.join(timeout=refresh_s)
                if display:
                    handle = _show(self.figure(fig), handle)
        finally:
            runner.join()
            self.stop()
            self.figure(fig)
            if display:
                _show(fig, handle)
            plt.close(fig)
        self._finish(fig, False, save)
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("value")

    def _finish(self, fig, display: bool, save) -> None:
        """The last figure kept (shown once where asked), and saved with the table."""
        self.last_figure = fig
        if display:
            _show(fig, None)
        if save is not None:
            save = Path(save)  # a stem: "live_6.3" keeps its dot (no with_suffix)
            save.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(save.parent / f"{save.name}.png", dpi=100)
            self.table().to_csv(save.parent / f"{save.name}.csv", index=False)


def _write_rows(rows: list[dict], folder: Path) -> None:
    import pandas as pd

    pd.DataFrame(rows).to_csv(folder / "metrics.csv", index=False)


def _read_rows(folder: Path) -> list[dict]:
    import pandas as pd

    try:
        return pd.read_csv(folder / "metrics.csv", float_precision="round_trip").to_dict("records")
    except pd.errors.EmptyDataError:
        return []


def _draw_models(throughput_ax, times_ax, table) -> None:
    """Per model: inferences/s; queue (solid) and compute (dashed) ms per request."""
    for model in sorted({c.split(":")[0] for c in table.columns if ":" in c}):
        throughput_ax.plot(table["t_s"], table[f"{model}:infer_per_s"], label=model)
        (line,) = times_ax.plot(table["t_s"], table[f"{model}:queue_ms"], label=f"{model} queue")
        times_ax.plot(
            table["t_s"],
            table[f"{model}:compute_ms"],
            ls="--",
            color=line.get_color(),
            label=f"{model} compute",
        )
    throughput_ax.set_ylabel("inferences/s")
    times_ax.set_ylabel("ms per request")


def _draw_utilisation(ax, table) -> None:
    """Each GPU's utilisation, or the CPU's (all cores) where Triton reports no GPU, and says so."""
    util = [c for c in table.columns if c.endswith("_util_pct")]
    for column in util:
        ax.plot(table["t_s"], table[column], label=column.replace("_util_pct", ""))
    ax.set_ylim(0, 105)
    ax.set_ylabel("utilisation %")
    if util == ["cpu_util_pct"]:
        ax.set_title("CPU (all cores): this Triton reports no GPU metrics", fontsize=9)
    ax.set_xlabel("seconds")


def _in_a_thread(work) -> tuple[threading.Thread, dict]:
    """work() started in a thread; the dict gets its "value", or the "error" it raised."""
    outcome: dict = {}

    def target():
        try:
            outcome["value"] = work()
        except BaseException as exc:  # handed to the caller of during()
            outcome["error"] = exc

    runner = threading.Thread(target=target, name="live-metrics-work", daemon=True)
    runner.start()
    return runner, outcome


def _in_ipython() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return get_ipython() is not None


def _show(fig, handle):
    """Show fig in the notebook's output, replacing the previous drawing (one output, updated)."""
    from IPython.display import display

    if handle is None:
        return display(fig, display_id=True)
    handle.update(fig)
    return handle
