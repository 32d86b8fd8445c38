"""What Triton itself says about a run: per-model statistics and server metrics.

Introduced in notebook 6.

- model_stats(): GET /v2/models/<m>/versions/<v>/stats (cumulative counters since the model loaded).
- stats_delta(before, after): what happened in between, above all how many times the model ran
  with each batch size (batch_stats): 1 everywhere means no request was ever combined.
- UtilisationSampler: reads the metrics endpoint (Prometheus text) in a background thread during
  a run: nv_gpu_utilization of each GPU when Triton sees GPUs, else nv_cpu_utilization, in
  columns named after what they measured (gpu0_util_pct, ... or cpu_util_pct).

The parsing functions take plain dicts/strings, so they are tested without a server.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time

import requests

from servelab import labenv


def _http(url: str | None) -> str:
    url = (url or labenv.triton_url()).rstrip("/")
    return url if "://" in url else f"http://{url}"


# ---------------------------------------------------------------- model statistics


def model_stats(
    model: str, url: str | None = None, version: str | int = 1, timeout: float = 10.0
) -> dict:
    """The model_stats entry of one model version (cumulative since that version was loaded)."""
    path = (
        f"{_http(url)}/v2/models/{model}"
        + (f"/versions/{version}" if version not in (None, "") else "")
        + "/stats"
    )
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


def stats_delta(before: dict, after: dict) -> dict:
    """Counters of `after` minus `before` (both from model_stats()).

    If the model was reloaded in between, its counters restarted; then `after` alone is used.
    Times are totals in ms and averages in ms per request (inference_stats.success count).
    """
    reloaded = int(after.get("execution_count", 0)) < int(before.get("execution_count", 0))
    base = {} if reloaded else before
    execs_after, execs_before = batch_executions(after), batch_executions(base)
    batches = {size: n - execs_before.get(size, 0) for size, n in sorted(execs_after.items())}
    batches = {size: n for size, n in batches.items() if n > 0}
    out = {
        "inference_count": int(after.get("inference_count", 0))
        - int(base.get("inference_count", 0)),
        "execution_count": int(after.get("execution_count", 0))
        - int(base.get("execution_count", 0)),
        "batch_executions": batches,
        "counters_restarted": reloaded,
    }
    out["avg_batch_size"] = (
        (out["inference_count"] / out["execution_count"]) if out["execution_count"] else 0.0
    )
    out["max_batch_size_seen"] = max(batches) if batches else 0
    requests_done = _count_ns(after, "success")[0] - _count_ns(base, "success")[0]
    out["requests"] = requests_done
    out["failures"] = _count_ns(after, "fail")[0] - _count_ns(base, "fail")[0]
    for key in ("queue", "compute_input", "compute_infer", "compute_output"):
        ns = _count_ns(after, key)[1] - _count_ns(base, key)[1]
        out[f"{key}_ms_total"] = ns / 1e6
        out[f"{key}_ms_avg"] = ns / 1e6 / requests_done if requests_done else 0.0
    # per execution, not per request: a request's compute times are those of the batch it was in,
    # so their mean over requests weighs large batches more (batch_stats count executions)
    ns = _execution_ns(after) - _execution_ns(base)
    out["execution_ms_avg"] = ns / 1e6 / out["execution_count"] if out["execution_count"] else 0.0
    return out


def _execution_ns(stats: dict) -> int:
    """Total time of the model's executions (compute input + infer + output), from batch_stats."""
    return sum(
        int(b.get(key, {}).get("ns", 0))
        for b in stats.get("batch_stats", [])
        for key in ("compute_input", "compute_infer", "compute_output")
    )


def batch_table(delta: dict):
    """The batch_executions of a stats_delta() as a small pandas table (batch size, executions,
    images)."""
    import pandas as pd

    rows = [
        {"batch_size": size, "executions": n, "images": size * n}
        for size, n in delta["batch_executions"].items()
    ]
    return pd.DataFrame(rows, columns=["batch_size", "executions", "images"])


# ---------------------------------------------------------------- metrics endpoint

_METRIC_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text: str) -> list[tuple[str, dict, float]]:
    """Prometheus text format -> [(metric name, labels, value)] (comments skipped)."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _METRIC_LINE.match(line)
        if not match:
            continue
        name, labels, value = match.groups()
        try:
            number = float(value)
        except ValueError:
            continue
        out.append((name, dict(_LABEL.findall(labels or "")), number))
    return out


def utilisation(text: str) -> dict:
    """One reading: {'gpus': [0..1 per GPU, in the metrics' order], 'cpu': 0..1 or None}."""
    metrics = parse_metrics(text)
    gpus = [v for name, _, v in metrics if name == "nv_gpu_utilization"]
    cpu = [v for name, _, v in metrics if name == "nv_cpu_utilization"]
    return {"gpus": gpus, "cpu": cpu[0] if cpu else None}


def gpu_count(
    url: str | None = None, metrics_url: str | None = None, model: str = "food_classifier"
) -> int:
    """How many GPUs the server's model instances can use: the GPUs in Triton's metrics, else (a
    server built without GPU metrics, e.g. local mode's) the driver's list when `model` runs
    KIND_GPU."""
    from servelab.triton_config import served_config

    metrics = parse_metrics(
        requests.get(metrics_url or labenv.triton_url("TRITON_METRICS_URL"), timeout=10).text
    )
    gpus = {labels.get("gpu_uuid") for name, labels, _ in metrics if name == "nv_gpu_utilization"}
    if gpus:
        return len(gpus)
    if served_config(model, url).get("instance_group", [{}])[0].get("kind") != "KIND_GPU":
        return 0
    listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    return sum(line.startswith("GPU ") for line in listing.splitlines())


class UtilisationSampler:
    """Samples utilisation from Triton's metrics endpoint every `interval_s` in a background thread.

        with UtilisationSampler() as sampler:
            ... run the load ...
        sampler.summary()  # {'util_source': 'nv_cpu_utilization', 'util_mean_pct': 71.3, ...}

    Triton refreshes these gauges every --metrics-interval-ms (local mode: 500 ms; default 2000 ms).
    """

    def __init__(self, metrics_url: str | None = None, interval_s: float = 0.5):
        self.metrics_url = metrics_url or labenv.triton_url("TRITON_METRICS_URL")
        if "://" not in self.metrics_url:
            self.metrics_url = "http://" + self.metrics_url
        self.interval_s = interval_s
        self.samples: list[dict] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _loop(self) -> None:
        start = time.monotonic()
        while not self._stop.is_set():
            try:
                reading = utilisation(requests.get(self.metrics_url, timeout=2).text)
                self.samples.append({"t_s": round(time.monotonic() - start, 3), **reading})
            except requests.RequestException:
                self.errors += 1
            self._stop.wait(self.interval_s)

    def start(self) -> "UtilisationSampler":
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="triton-utilisation", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return self.summary()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def over_time(self) -> list[dict]:
        """The samples as rows {t_s, gpu0_util_pct, ...} (or cpu_util_pct), for a plot over time."""
        rows = []
        for sample in self.samples:
            row = {"t_s": sample["t_s"]}
            for i, value in enumerate(sample["gpus"]):
                row[f"gpu{i}_util_pct"] = round(100 * value, 1)
            if not sample["gpus"] and sample["cpu"] is not None:
                row["cpu_util_pct"] = round(100 * sample["cpu"], 1)
            rows.append(row)
        return rows

    def summary(self) -> dict:
        """Mean utilisation during the run, per device and labelled with what was measured:
        gpu0_util_pct, gpu1_util_pct, ... when Triton reports GPUs (each GPU on its own: one busy
        GPU of two is 100% busy, not 50%), else cpu_util_pct (all cores of the machine together)."""
        out: dict = {"util_samples": len(self.samples)}
        n_gpus = max((len(s["gpus"]) for s in self.samples), default=0)
        for i in range(n_gpus):
            values = [s["gpus"][i] for s in self.samples if len(s["gpus"]) > i]
            out[f"gpu{i}_util_pct"] = round(100 * sum(values) / len(values), 1)
        if not n_gpus:
            values = [s["cpu"] for s in self.samples if s["cpu"] is not None]
            if values:
                out["cpu_util_pct"] = round(100 * sum(values) / len(values), 1)
        return out


def gpu_util_columns(row: dict, n_gpus: int) -> list[str]:
    """The per-GPU utilisation columns a run's row should have on a server with n_gpus GPUs
    (gpu0_util_pct, gpu1_util_pct, ...), in GPU order; ValueError when the row lacks one (the
    metrics did not report that GPU during the run)."""
    columns = [f"gpu{i}_util_pct" for i in range(n_gpus)]
    missing = [c for c in columns if c not in row or row[c] != row[c]]
    if missing:
        raise ValueError(f"no {', '.join(missing)} in this run's row: Triton did not report it")
    return columns


def claim_each_gpu(check, claim: str, run, n_gpus: int, threshold: float) -> list[str]:
    """Decide a claim about utilisation on each GPU of the server on its own (check is
    claims.at_least or claims.at_most, run a perf run whose row has gpuN_util_pct), so "every
    GPU" means each of them, however many there are; on a server without GPU (or whose metrics
    do not report one) the claim is not checkable, and says why."""
    from servelab import claims

    if n_gpus <= 0:
        cpu = run.row.get("cpu_util_pct")
        seen = (
            f"; the CPU (all cores) was {cpu:.0f}% busy" if cpu == cpu and cpu is not None else ""
        )
        return [claims.not_checkable(claim, f"this server has no GPU{seen}")]
    try:
        columns = gpu_util_columns(run.row, n_gpus)
    except ValueError as exc:
        return [claims.not_checkable(claim, str(exc))]
    return [
        check(f"{claim} (GPU {i} of {n_gpus}, mean %)", run.measured(column), threshold)
        for i, column in enumerate(columns)
    ]


def python_stubs(model: str, repository: str | None = None) -> list[dict] | None:
    """The Python-backend processes ("stubs") serving `model`, one per instance, as this machine's
    process list shows them: [{pid, instance, cpu_pct}], or None where Triton's processes are not
    visible from here (Docker: the Triton container's processes are its own; read `nvidia-smi` or
    `ps` on the node instead). `repository` keeps only the stubs of that model repository (several
    servers may run on one machine)."""
    try:
        listing = subprocess.run(
            ["ps", "-eo", "pid=,pcpu=,args="], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    stubs, found_any = [], False
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) < 3 or not parts[2].endswith("triton_python_backend_stub"):
            continue
        found_any = True
        args = parts[3:]
        model_py = args[0] if args else ""
        if f"/{model}/" not in model_py or (
            repository and not model_py.startswith(str(repository))
        ):
            continue
        instance = next((a for a in args if a.startswith(f"{model}_")), "?")
        stubs.append({"pid": int(parts[0]), "instance": instance, "cpu_pct": float(parts[1])})
    return stubs if found_any else None


def busiest_gpu_pct(row: dict) -> float | None:
    """The highest per-GPU utilisation of a run's row (None without GPU readings)."""
    values = [
        v for k, v in row.items() if k.startswith("gpu") and k.endswith("_util_pct") and v == v
    ]
    return max(values) if values else None


def onnx_provider(
    model: str = "food_classifier_onnx", url: str | None = None, metrics_url: str | None = None
) -> str:
    """Where the server runs an ONNX model, as the server says: "CUDAExecutionProvider" or
    "CPUExecutionProvider". Local mode's stand-in publishes its session's provider in Triton's
    metrics (lab_onnx_execution_provider); Triton's own onnxruntime backend runs KIND_GPU
    instances with CUDA and KIND_CPU ones on the CPU, so its served config says it."""
    from servelab.triton_config import served_config

    metrics = parse_metrics(
        requests.get(metrics_url or labenv.triton_url("TRITON_METRICS_URL"), timeout=10).text
    )
    used = {
        labels.get("provider")
        for name, labels, value in metrics
        if name == "lab_onnx_execution_provider" and labels.get("model") == model and value > 0
    }
    if used:
        return "CUDAExecutionProvider" if "CUDAExecutionProvider" in used else used.pop()
    kinds = {g.get("kind") for g in served_config(model, url).get("instance_group", [])}
    return "CUDAExecutionProvider" if "KIND_GPU" in kinds else "CPUExecutionProvider"
