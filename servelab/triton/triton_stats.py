"""What Triton itself says: its per-model statistics, and its Prometheus metrics read and sampled.

Introduced in notebook 6; notebook 8's live view (servelab/triton/live_metrics.py) samples with
it too.

- model_stats(): GET /v2/models/<m>/versions/<v>/stats (cumulative counters since the model loaded).
- stats_delta(before, after): what happened in between, above all how many times the model ran
  with each batch size (batch_stats): 1 everywhere means no request was ever combined.
- parse_metrics(): the metrics endpoint's Prometheus text, read with prometheus_client's own
  parser; reading(): one scrape as per-model counters, per-GPU and CPU utilisation.
- Sampler: scrapes the metrics endpoint every interval_s in a background thread during a run;
  its utilisation is nv_gpu_utilization of each GPU when Triton sees GPUs (each GPU by the index
  `gpus: [ i ]` and nvidia-smi give it: servelab/triton/gpu_names.py), else nv_cpu_utilization,
  in columns named after what they measured (gpu0_util_pct, ... or cpu_util_pct).
- gpu_count(), onnx_provider(): the devices the server's models use, as the server says.

The parsing functions take plain dicts/strings, so they are tested without a server.
"""

from __future__ import annotations

import threading
import time

import requests

from servelab import labenv, passes
from servelab.triton import gpu_names, triton_config

# ---------------------------------------------------------------- model statistics


def model_stats(
    model: str, url: str | None = None, version: str | int = 1, timeout: float = 10.0
) -> dict:
    """The model_stats entry of one model version (cumulative since that version was loaded)."""
    versions = f"/versions/{version}" if version not in (None, "") else ""
    path = f"{labenv.triton_url(url)}/v2/models/{model}{versions}/stats"
    resp = requests.get(path, timeout=timeout)
    if resp.status_code != 200:
        raise RuntimeError(f"{path}: HTTP {resp.status_code}: {resp.text}")
    entries = resp.json().get("model_stats", [])
    if not entries:
        raise RuntimeError(f"{path}: no statistics for {model}")
    return entries[0]


def batch_executions(stats: dict) -> dict[int, int]:
    """{batch size: number of model executions with that batch size} from one stats entry."""
    return {
        int(b["batch_size"]): int(b.get("compute_infer", {}).get("count", 0))
        for b in stats.get("batch_stats", [])
    }


def _count_ns(stats: dict, key: str) -> tuple[int, int]:
    item = stats.get("inference_stats", {}).get(key, {})
    return int(item.get("count", 0)), int(item.get("ns", 0))


def _execution_ns(stats: dict) -> int:
    """Total time of the model's executions (compute input + infer + output), from batch_stats."""
    return sum(
        int(b.get(key, {}).get("ns", 0))
        for b in stats.get("batch_stats", [])
        for key in ("compute_input", "compute_infer", "compute_output")
    )


def _times(after: dict, base: dict, executions: int) -> dict:
    """stats_delta's times: per part a total and a mean per request (ms), and the mean time of
    one execution. Per execution, not per request: a request's compute times are those of the
    batch it was in, so their mean over requests weighs large batches more."""
    done = _count_ns(after, "success")[0] - _count_ns(base, "success")[0]
    out = {"requests": done, "failures": _count_ns(after, "fail")[0] - _count_ns(base, "fail")[0]}
    for key in ("queue", "compute_input", "compute_infer", "compute_output"):
        ms = (_count_ns(after, key)[1] - _count_ns(base, key)[1]) / 1e6
        out[f"{key}_ms_total"], out[f"{key}_ms_avg"] = ms, ms / done if done else 0.0
    ns = _execution_ns(after) - _execution_ns(base)
    out["execution_ms_avg"] = ns / 1e6 / executions if executions else 0.0
    return out


def stats_delta(before: dict, after: dict) -> dict:
    """Counters of `after` minus `before` (both from model_stats()).

    If the model was reloaded in between, its counters restarted; then `after` alone is used.
    Times are totals in ms and averages in ms per request (inference_stats.success count).
    """
    reloaded = int(after.get("execution_count", 0)) < int(before.get("execution_count", 0))
    base = {} if reloaded else before
    execs_before = batch_executions(base)
    batches = {s: n - execs_before.get(s, 0) for s, n in sorted(batch_executions(after).items())}
    batches = {size: n for size, n in batches.items() if n > 0}
    counts = {
        key: int(after.get(key, 0)) - int(base.get(key, 0))
        for key in ("inference_count", "execution_count")
    }
    executions = counts["execution_count"]
    return {
        **counts,
        "batch_executions": batches,
        "counters_restarted": reloaded,
        "avg_batch_size": counts["inference_count"] / executions if executions else 0.0,
        "max_batch_size_seen": max(batches) if batches else 0,
        **_times(after, base, executions),
    }


def batch_table(delta: dict):
    """The batch_executions of a stats_delta() as a small pandas table (batch size, executions,
    images)."""
    import pandas as pd

    rows = [
        {"batch_size": size, "executions": n, "images": size * n}
        for size, n in delta["batch_executions"].items()
    ]
    return pd.DataFrame(rows, columns=["batch_size", "executions", "images"])


# ---------------------------------------------------------------- the metrics endpoint

COUNTERS = {
    "nv_inference_count": "inferences",
    "nv_inference_request_success": "requests",
    "nv_inference_queue_duration_us": "queue_us",
    "nv_inference_compute_input_duration_us": "compute_input_us",
    "nv_inference_compute_infer_duration_us": "compute_infer_us",
    "nv_inference_compute_output_duration_us": "compute_output_us",
}
GAUGES = {"nv_inference_pending_request_count": "pending"}


def parse_metrics(text: str) -> list[tuple[str, dict, float]]:
    """Prometheus text -> [(metric name, labels, value)], by prometheus_client's parser. The
    parser names a counter's samples <name>_total (Prometheus' convention) and its family by
    Triton's own name: a counter keeps that name and only its value sample."""
    from prometheus_client.parser import text_string_to_metric_families  # where Triton runs

    out = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if family.type != "counter":
                out.append((sample.name, sample.labels, float(sample.value)))
            elif sample.name == f"{family.name}_total":
                out.append((family.name, sample.labels, float(sample.value)))
    return out


def reading(text: str) -> dict:
    """One scrape -> {"models": {model: {counter or gauge short name: value}}, "gpus": {uuid: 0..1},
    "gpu_memory_bytes": {uuid: bytes}, "cpu": 0..1 or None}. Versions of a model are added up.
    Where a Python-backend instance on a GPU reports itself (servelab/serving/gpu_report.py), also
    "cuda_devices": {uuid: index as gpus: [ i ] means it} and "instances": [{model, instance,
    device_id, gpu_uuid, pid}] (servelab/triton/gpu_names.py names the GPUs with them)."""
    out: dict = {"models": {}, "gpus": {}, "gpu_memory_bytes": {}, "cpu": None}
    out.update(cuda_devices={}, instances=[])
    per_gpu = {"nv_gpu_utilization": "gpus", "nv_gpu_memory_used_bytes": "gpu_memory_bytes"}
    for name, labels, value in parse_metrics(text):
        key = COUNTERS.get(name) or GAUGES.get(name)
        if key and "model" in labels:
            model = out["models"].setdefault(labels["model"], {})
            model[key] = model.get(key, 0.0) + value
        elif name in per_gpu:
            per_uuid = out[per_gpu[name]]
            per_uuid[labels.get("gpu_uuid", str(len(per_uuid)))] = value
        elif name == "nv_cpu_utilization":
            out["cpu"] = value
        elif name == gpu_names.DEVICE_METRIC and value > 0:
            out["cuda_devices"][labels["gpu_uuid"]] = int(labels["gpu_index"])
        elif name == gpu_names.INSTANCE_METRIC:
            out["instances"].append({**labels, "pid": int(value)})
    return out


def utilisation(scrape: dict) -> dict:
    """A reading's utilisation in percent, named after what it measured: {gpu0_util_pct: ..,
    gpu1_util_pct: ..} where Triton reports GPUs, each by the index `gpus: [ i ]` and nvidia-smi
    give it (gpu_names.names: Triton names GPUs by uuid alone), else {cpu_util_pct: ..} (all cores
    together), else {}."""
    row = gpu_names.util_row(scrape["gpus"], gpu_names.names(scrape)) if scrape["gpus"] else {}
    if not scrape["gpus"] and scrape["cpu"] is not None:
        row["cpu_util_pct"] = round(100 * scrape["cpu"], 1)
    return row


class Sampler:
    """Scrapes Triton's metrics endpoint every `interval_s` in a background thread: `readings`
    holds each scrape as reading() reads it, with t_s (seconds since start()); `errors` what
    failed. perf.run_line keeps its utilisation; live_metrics.Watch draws it as it comes.

        with Sampler(METRICS) as sampler:
            ... run the load ...
        sampler.summary()  # {'util_samples': 12, 'cpu_util_pct': 71.3}

    Triton refreshes its utilisation every --metrics-interval-ms (local mode: 500 ms; default 2000).
    """

    def __init__(self, metrics_url: str | None = None, interval_s: float = 0.5):
        self.metrics_url = labenv.metrics_url(metrics_url)
        self.interval_s = interval_s
        self.readings: list[dict] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._session = requests.Session()

    def scrape(self) -> dict:
        resp = self._session.get(self.metrics_url, timeout=2)
        resp.raise_for_status()
        return reading(resp.text)

    def _loop(self, start: float) -> None:
        while True:
            try:
                scrape = self.scrape()
                self.readings.append({"t_s": round(time.monotonic() - start, 3), **scrape})
            except (requests.RequestException, ValueError) as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            if self._stop.wait(self.interval_s):
                return

    def start(self) -> Sampler:
        self.readings, self.errors = [], []
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._loop, args=(time.monotonic(),), name="triton-metrics", daemon=True
        )
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

    def __getstate__(self) -> dict:
        # its readings are data a later cell reads: kept when a notebook's namespace is saved
        # between two device calls (maintainers/reference/resume_state.py), the thread and
        # session not
        return {k: v for k, v in vars(self).items() if k not in ("_stop", "_thread", "_session")}

    def __setstate__(self, state: dict) -> None:
        vars(self).update(state)
        self._stop, self._thread, self._session = threading.Event(), None, requests.Session()

    def over_time(self) -> list[dict]:
        """The utilisation of each reading as rows {t_s, gpu0_util_pct, ...} (or cpu_util_pct)."""
        return [{"t_s": r["t_s"], **utilisation(r)} for r in self.readings]

    def summary(self) -> dict:
        """Mean utilisation during the run, per device (one busy GPU of two is 100% busy, not
        50%), labelled as in utilisation(); and the CPU's (all cores) wherever Triton reports it,
        GPUs or not: a run's row says whether the cores were full (the figure over time shows
        the GPUs where there are any)."""
        rows = [utilisation(r) for r in self.readings]
        out: dict = {"util_samples": len(self.readings)}
        for column in dict.fromkeys(c for row in rows for c in row):
            values = [row[column] for row in rows if column in row]
            out[column] = round(sum(values) / len(values), 1)
        cpu = [100 * r["cpu"] for r in self.readings if r.get("cpu") is not None]
        if cpu and "cpu_util_pct" not in out:
            out["cpu_util_pct"] = round(sum(cpu) / len(cpu), 1)
        return out


# ---------------------------------------------------------------- the devices, as Triton says


def _metrics(metrics_url: str | None) -> list[tuple[str, dict, float]]:
    return parse_metrics(requests.get(labenv.metrics_url(metrics_url), timeout=10).text)


def gpu_count(
    url: str | None = None, metrics_url: str | None = None, model: str = "food_classifier"
) -> int:
    """How many GPUs the server's model instances can use: the GPUs in Triton's metrics (Triton
    collects them for the GPUs its process sees), else those an instance's process sees (its
    report in the same metrics), else, when `model` runs KIND_GPU, nvidia-smi's list here
    through CUDA_VISIBLE_DEVICES (a container's nvidia-smi lists only the GPUs it was given).
    So a server started with CUDA_VISIBLE_DEVICES=0 on a two-GPU node counts one. The measure
    pass keeps the answer; the review pass reads it back."""
    count = lambda: _gpu_count(url, metrics_url, model)  # noqa: E731
    return passes.on_node(f"GPUs of the server ({model})", "value", count)


def _gpu_count(url: str | None, metrics_url: str | None, model: str) -> int:
    metrics = _metrics(metrics_url)
    uuids = {labels.get("gpu_uuid") for name, labels, _ in metrics if name == "nv_gpu_utilization"}
    if uuids:
        return len(uuids)
    seen = {
        labels.get("gpu_uuid")
        for name, labels, value in metrics
        if name == gpu_names.DEVICE_METRIC and value > 0
    }
    if seen:
        return len(seen)
    groups = triton_config.served_config(model, url).get("instance_group", [{}])
    if groups[0].get("kind") != "KIND_GPU":
        return 0
    return len(gpu_names.from_smi(gpu_names.listing()))


def onnx_provider(
    model: str = "food_classifier_onnx", url: str | None = None, metrics_url: str | None = None
) -> str:
    """Where the server runs an ONNX model, as the server says: "CUDAExecutionProvider" or
    "CPUExecutionProvider". Local mode's stand-in publishes its session's provider in Triton's
    metrics (lab_onnx_execution_provider); Triton's own onnxruntime backend runs KIND_GPU
    instances with CUDA and KIND_CPU ones on the CPU, so its served config says it. The measure
    pass keeps the answer; the review pass reads it back."""
    found = lambda: _onnx_provider(model, url, metrics_url)  # noqa: E731
    return passes.on_node(f"ONNX provider of {model}", "value", found)


def _onnx_provider(model: str, url: str | None, metrics_url: str | None) -> str:
    used = {
        labels.get("provider")
        for name, labels, value in _metrics(metrics_url)
        if name == "lab_onnx_execution_provider" and labels.get("model") == model and value > 0
    }
    if used:
        return "CUDAExecutionProvider" if "CUDAExecutionProvider" in used else used.pop()
    served = triton_config.served_config(model, url)
    kinds = {g.get("kind") for g in served.get("instance_group", [])}
    return "CUDAExecutionProvider" if "KIND_GPU" in kinds else "CPUExecutionProvider"
