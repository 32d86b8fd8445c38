"""Triton's Prometheus metrics, watched while a load runs.

Introduced in notebook 8 (and meant for the 6.3 and 6.6 runs of notebook 6).

    from servelab import live_metrics
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

The text is parsed with prometheus_client's own parser (text_string_to_metric_families), not with
regular expressions. Utilisation: nv_gpu_utilization per GPU where Triton reports GPUs (the Docker
image on a GPU node); the pip-installed Triton of local mode has no GPU metrics, so there the
figure shows nv_cpu_utilization (all cores together) and says so.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests
from prometheus_client.parser import text_string_to_metric_families

from servelab import labenv

COUNTERS = {
    "nv_inference_count": "inferences",
    "nv_inference_request_success": "requests",
    "nv_inference_queue_duration_us": "queue_us",
    "nv_inference_compute_input_duration_us": "compute_input_us",
    "nv_inference_compute_infer_duration_us": "compute_infer_us",
    "nv_inference_compute_output_duration_us": "compute_output_us",
}
GAUGES = {"nv_inference_pending_request_count": "pending"}


def parse(text: str) -> dict:
    """One scrape -> {"models": {model: {counter or gauge short name: value}}, "gpus": {uuid: 0..1},
    "gpu_memory_bytes": {uuid: bytes}, "cpu": 0..1 or None}. Versions of a model are added up."""
    out: dict = {"models": {}, "gpus": {}, "gpu_memory_bytes": {}, "cpu": None}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            # the parser names a counter's samples <family>_total (Prometheus' convention), and a
            # family by Triton's own name: match on the family, keep only the counter's value
            if family.type == "counter" and sample.name != f"{family.name}_total":
                continue
            name, labels, value = family.name, sample.labels, float(sample.value)
            key = COUNTERS.get(name) or GAUGES.get(name)
            if key and "model" in labels:
                model = out["models"].setdefault(labels["model"], {})
                model[key] = model.get(key, 0.0) + value
            elif name == "nv_gpu_utilization":
                out["gpus"][labels.get("gpu_uuid", str(len(out["gpus"])))] = value
            elif name == "nv_gpu_memory_used_bytes":
                out["gpu_memory_bytes"][
                    labels.get("gpu_uuid", str(len(out["gpu_memory_bytes"])))
                ] = value
            elif name == "nv_cpu_utilization":
                out["cpu"] = value
    return out


def interval(before: dict, after: dict, seconds: float, models: list[str] | None = None) -> dict:
    """What happened between two parse()d scrapes `seconds` apart: per model inferences/s, mean
    queue and compute ms per request, requests waiting now; utilisation now (percent)."""
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
    for i, uuid in enumerate(sorted(after["gpus"])):
        row[f"gpu{i}_util_pct"] = 100 * after["gpus"][uuid]
    if not after["gpus"] and after["cpu"] is not None:
        row["cpu_util_pct"] = 100 * after["cpu"]
    return row


@dataclass
class Watch:
    """Samples Triton's /metrics every `interval_s` in a background thread; `rows` holds one dict
    per interval (t_s = seconds since start()), `figure()` draws them, `during()` refreshes the
    figure in a notebook while a function (a perf_analyzer run) executes."""

    metrics_url: str | None = None  # None: TRITON_METRICS_URL (labenv.triton_url)
    models: list[str] | None = None
    interval_s: float = 0.5
    rows: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.metrics_url = self.metrics_url or labenv.triton_url("TRITON_METRICS_URL")
        if "://" not in self.metrics_url:
            self.metrics_url = "http://" + self.metrics_url
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._session = requests.Session()

    def scrape(self) -> dict:
        resp = self._session.get(self.metrics_url, timeout=2)
        resp.raise_for_status()
        return parse(resp.text)

    def _loop(self) -> None:
        start = previous_t = time.monotonic()
        previous = self.scrape()
        while not self._stop.wait(self.interval_s):
            try:
                now_scrape, now = self.scrape(), time.monotonic()
            except (requests.RequestException, ValueError) as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
                continue
            self.rows.append(
                {
                    "t_s": round(now - start, 3),
                    **interval(previous, now_scrape, now - previous_t, self.models),
                }
            )
            previous, previous_t = now_scrape, now

    def start(self) -> "Watch":
        self.rows, self.errors = [], []
        self.scrape()  # fail now, in the caller, if the endpoint is wrong
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="triton-live-metrics", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def table(self):
        import pandas as pd

        return pd.DataFrame(list(self.rows))

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
        models = sorted({c.split(":")[0] for c in table.columns if ":" in c})
        for model in models:
            axes[0].plot(table["t_s"], table[f"{model}:infer_per_s"], label=model)
            (line,) = axes[1].plot(table["t_s"], table[f"{model}:queue_ms"], label=f"{model} queue")
            axes[1].plot(
                table["t_s"],
                table[f"{model}:compute_ms"],
                ls="--",
                color=line.get_color(),
                label=f"{model} compute",
            )
        axes[0].set_ylabel("inferences/s")
        axes[1].set_ylabel("ms per request")
        util = [c for c in table.columns if c.endswith("_util_pct")]
        for column in util:
            axes[2].plot(table["t_s"], table[column], label=column.replace("_util_pct", ""))
        axes[2].set_ylim(0, 105)
        axes[2].set_ylabel("utilisation %")
        if util == ["cpu_util_pct"]:
            axes[2].set_title("CPU (all cores): this Triton reports no GPU metrics", fontsize=9)
        axes[2].set_xlabel("seconds")
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
        Returns work()'s result; its exception is raised here after the sampling stopped."""
        import matplotlib.pyplot as plt

        if display is None:
            display = _in_ipython()
        outcome: dict = {}

        def target():
            try:
                outcome["value"] = work()
            except BaseException as exc:  # handed to the caller below
                outcome["error"] = exc

        fig = plt.figure(figsize=(10, 6.5))
        handle = None
        self.start()
        runner = threading.Thread(target=target, name="live-metrics-work", daemon=True)
        runner.start()
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
        self.last_figure = fig
        if save is not None:
            save = Path(save)  # a stem: "live_6.3" keeps its dot (no with_suffix)
            save.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(save.parent / f"{save.name}.png", dpi=100)
            self.table().to_csv(save.parent / f"{save.name}.csv", index=False)
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("value")


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
