"""Pre-processing on the server: Triton's ensemble of `preprocess` and the ONNX classifier.

For the ensemble section (issue 26; notebook not written yet).

    from servelab import ensemble
    ensemble.place()                       # copies preprocess/ + food_classifier_ensemble/ into the repository
    ensemble.load()                        # Triton loads the ensemble (and its steps)
    ensemble.classify(["artifacts/test_images/plate_640x480.jpg"])   # [('Meat', 0.62)], untrained weights
    ensemble.write_perf_inputs(images)     # perf_analyzer --input-data files for the three paths
    ensemble.step_table(before, after)     # each step's queue and compute, from Triton's statistics

The client sends the image FILE (raw bytes, BYTES tensor IMAGE_BYTES); `preprocess` (Python
backend, servelab.food11.tensor_from_bytes) turns it into the normalised tensor and Triton hands
that to food_classifier_onnx (onnxruntime backend in the Docker image; local mode's
Python-backend stand-in, same name and I/O). The steps are ordinary models: each has its own
queue, instances and statistics, so the cost of every stage can be read apart.

The three ways to get a class for a photo that the section compares:
    PATHS["ensemble"]     raw JPEG -> food_classifier_ensemble (preprocess -> food_classifier_onnx)
    PATHS["python"]       base64 JPEG -> food_classifier (one Python model decodes and runs PyTorch)
    PATHS["client_onnx"]  the client decodes; FP32 tensor -> food_classifier_onnx
"""
from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import numpy as np
import requests

from servelab import food11, model_repository, perf, triton_config, triton_stats
from servelab.paths import RESULTS

ENSEMBLE = "food_classifier_ensemble"
STEPS = ("preprocess", "food_classifier_onnx")   # in the order the ensemble runs them
INPUT = "IMAGE_BYTES"
OUTPUT = "LOGITS"
# path name -> (model perf_analyzer targets, models whose statistics describe it)
PATHS = {
    "ensemble": (ENSEMBLE, (ENSEMBLE, *STEPS)),
    "python": ("food_classifier", ("food_classifier",)),
    "client_onnx": ("food_classifier_onnx", ("food_classifier_onnx",)),
}


def place(dest: Path | str = model_repository.DEFAULT_DEST, mode: str = "local", kind: str = "auto",
          verbose: bool = True) -> list[Path]:
    """Copy the two new models (preprocess, the ensemble) into the repository. The classifier step,
    food_classifier_onnx, is already there (model_repository.populate places it in both modes)."""
    return [model_repository.add_model(m, dest, mode=mode, kind=kind, verbose=verbose)
            for m in ("preprocess", ENSEMBLE)]


def load(url: str | None = None, timeout: float = 300.0) -> float:
    """Ask Triton to load the ensemble. In explicit model control, loading an ensemble (re)loads the
    steps it names as well: seen in Triton 2.51's log, food_classifier_onnx, although already
    loaded, is loaded again and the old copy unloaded (its statistics start from zero). Returns the
    seconds it took; raises with Triton's message if it refused."""
    ok, seconds, error = triton_config.load_model(ENSEMBLE, url, timeout=timeout)
    if not ok:
        raise RuntimeError(f"Triton did not load {ENSEMBLE}: {error}")
    missing = [m for m in STEPS if not triton_config.model_ready(m, url)]
    if missing:
        raise RuntimeError(f"{ENSEMBLE} loaded but its steps {missing} are not READY")
    return seconds


def _client(url: str | None):
    import tritonclient.http as httpclient

    base = (url or triton_stats.default_url()).split("://")[-1]
    return httpclient.InferenceServerClient(base)


def infer_bytes(files: list[bytes], url: str | None = None, model: str = ENSEMBLE) -> np.ndarray:
    """One request holding these image files (raw bytes, one per row); the ensemble's logits [n, 11]."""
    import tritonclient.http as httpclient

    data = np.array([[f] for f in files], dtype=np.object_)
    tensor = httpclient.InferInput(INPUT, list(data.shape), "BYTES")
    tensor.set_data_from_numpy(data)
    result = _client(url).infer(model, [tensor], outputs=[httpclient.InferRequestedOutput(OUTPUT)])
    return result.as_numpy(OUTPUT)


def classify(paths: list[Path | str], url: str | None = None) -> list[tuple[str, float]]:
    """Class name and probability of each image file, sent as raw bytes to the ensemble."""
    logits = infer_bytes([Path(p).read_bytes() for p in paths], url)
    return [food11.top_class(row) for row in logits]


# ---------------------------------------------------------------- perf_analyzer inputs

def direct_logits(images: list[Path | str], url: str | None = None) -> list[np.ndarray]:
    """The direct path's answer for each image: the tensor made here (food11.tensor_from_bytes),
    one request each to food_classifier_onnx. What the ensemble must answer, bit for bit."""
    import tritonclient.http as httpclient

    client, out = _client(url), []
    for path in images:
        x = food11.tensor_from_bytes(Path(path).read_bytes())[None]
        tensor = httpclient.InferInput("input", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        result = client.infer("food_classifier_onnx", [tensor], outputs=[httpclient.InferRequestedOutput("output")])
        out.append(result.as_numpy("output")[0])
    return out


def write_perf_inputs(images: list[Path | str], folder: Path | str = RESULTS / "ensemble",
                      expected: list[np.ndarray] | None = None) -> dict[str, Path]:
    """perf_analyzer --input-data JSON files, one per path of PATHS, each cycling through `images`.

    expected (e.g. direct_logits(images)): the ensemble's file also carries them as
    "validation_data", and perf_analyzer then checks every response against them and fails
    ("Output doesn't match expected output") on the first that differs.

    perf_analyzer sends {"b64": ...} as the tensor's serialised bytes: for a BYTES tensor that is
    each element's length (4 bytes, little-endian) and then the element (here the JPEG file);
    for the ONNX model's FP32 input the little-endian floats that food11.tensor_from_bytes made
    on the client. food_classifier takes base64 text, which is a plain JSON string."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = [Path(p).read_bytes() for p in images]
    b64 = [base64.b64encode(f).decode("ascii") for f in files]
    tensors = [food11.tensor_from_bytes(f) for f in files]
    content = {
        "ensemble": [{INPUT: {"b64": _serialised_bytes(f)}} for f in files],
        "python": [{"INPUT_IMAGE": [text]} for text in b64],
        "client_onnx": [{"input": {"b64": base64.b64encode(t.astype("<f4").tobytes()).decode("ascii"),
                                   "shape": list(t.shape)}} for t in tensors],
    }
    out = {}
    for name, data in content.items():
        document: dict = {"data": data}
        if name == "ensemble" and expected is not None:
            document["validation_data"] = [
                {OUTPUT: {"b64": base64.b64encode(np.asarray(e, dtype="<f4").tobytes()).decode("ascii")}}
                for e in expected]
        out[name] = folder / f"perf_input_{name}.json"
        out[name].write_text(json.dumps(document))
    return out


def _serialised_bytes(element: bytes) -> str:
    """One BYTES element as Triton serialises it (length prefix + bytes), base64 for the JSON file."""
    return base64.b64encode(struct.pack("<I", len(element)) + element).decode("ascii")


# ---------------------------------------------------------------- per-step statistics

def snapshot(models: tuple[str, ...] = (ENSEMBLE, *STEPS), url: str | None = None) -> dict[str, dict]:
    """Triton's cumulative statistics of each model now (GET /v2/models/<m>/stats, one per model)."""
    return {m: triton_stats.model_stats(m, url) for m in models}


def step_table(before: dict[str, dict], after: dict[str, dict]):
    """What each model did between two snapshot()s: requests, executions, mean batch, and per
    request the time waiting in its queue and computing (input, infer, output), in ms.

    For the ensemble's own row Triton reports the whole request (queue and compute summed over
    its steps); the step rows say where that time went."""
    import pandas as pd

    rows = []
    for model, stats in after.items():
        d = triton_stats.stats_delta(before[model], stats)
        compute = d["compute_input_ms_avg"] + d["compute_infer_ms_avg"] + d["compute_output_ms_avg"]
        rows.append({"model": model, "requests": d["requests"], "executions": d["execution_count"],
                     "avg_batch": round(d["avg_batch_size"], 2), "queue_ms": round(d["queue_ms_avg"], 2),
                     "compute_ms": round(compute, 2), "compute_infer_ms": round(d["compute_infer_ms_avg"], 2),
                     "failures": d["failures"]})
    return pd.DataFrame(rows)


def set_instances(model: str, count: int, url: str | None = None, repo: Path | str | None = None,
                  verbose: bool = True):
    """Change one step's instance count (config.pbtxt edit + reload, as notebook 6 does), e.g.
    set_instances("preprocess", 2): the lever of "add instances to the pre-processing stage alone"."""
    result = triton_config.update_model(model, repo=repo, url=url, instances=count, verbose=verbose)
    if not result.ok:
        raise RuntimeError(f"{model}: {count} instance(s) not loaded: {result.error}")
    return result


def set_dynamic_batching(model: str, delay_us: int = 100, url: str | None = None, repo: Path | str | None = None,
                         verbose: bool = True):
    """Turn on dynamic batching for one step (config edit + reload), e.g. on the classifier step, so
    requests the ensemble hands it one by one can be run together."""
    result = triton_config.update_model(model, repo=repo, url=url, max_queue_delay_us=delay_us, verbose=verbose)
    if not result.ok:
        raise RuntimeError(f"{model}: dynamic batching not loaded: {result.error}")
    return result


def served_steps(url: str | None = None) -> list[dict]:
    """The ensemble's step mapping as Triton loaded it (GET /v2/models/<ensemble>/config)."""
    resp = requests.get(f"{(url or triton_stats.default_url()).rstrip('/')}/v2/models/{ENSEMBLE}/config",
                        timeout=10)
    resp.raise_for_status()
    return resp.json().get("ensemble_scheduling", {}).get("step", [])


# ---------------------------------------------------------------- the measured comparison

def measure_path(path: str, inputs: dict[str, Path], url: str | None = None, metrics_url: str | None = None,
                 label: str | None = None, verbose: bool = True, fallback_request_count: int = 40,
                 **load) -> tuple[dict, object]:
    """One perf_analyzer run against one of PATHS (load: concurrency=N or request_rate=R, and any
    other perf.perf_analyzer_command keyword). Returns (row, step table): the row has throughput
    and latency percentiles, the mean CPU/GPU utilisation and, per model of the path, its queue
    and compute per request (`<model>_queue_ms`, `<model>_compute_ms`) from Triton's statistics.
    When perf_analyzer's windows disagree more than tenfold, the run is repeated for a fixed
    `fallback_request_count` requests (row["mode"] says which)."""
    model, models = PATHS[path]
    settings = {"measurement_interval_ms": 3000, "stability_percentage": 1000, "max_trials": 3, **load}
    tag = label or f"{path}_" + "_".join(f"{k}{v}" for k, v in load.items())
    csv = Path(inputs[path]).parent / f"perf_{tag}.csv"
    cmd = perf.perf_analyzer_command(model, url, input_data=inputs[path], csv_path=csv, **settings)
    before = snapshot(models, url)
    mode = "windows"
    with triton_stats.UtilisationSampler(metrics_url) as sampler:
        try:
            result = perf.run(cmd, verbose=verbose, label=tag)
        except perf.PerfAnalyzerError as exc:
            # windows more than 10x apart (seen: the PyTorch model on a busy 2-core machine): measure
            # a fixed number of requests instead, and say so in the row
            if "stable measurement" not in str(exc) or "request_count" in load:
                raise
            settings = {**settings, "request_count": fallback_request_count}
            cmd = perf.perf_analyzer_command(model, url, input_data=inputs[path], csv_path=csv, **settings)
            result = perf.run(cmd, verbose=verbose, label=tag)
            mode = f"count ({fallback_request_count} requests: windows did not settle)"
    table = step_table(before, snapshot(models, url))
    row = {"run": tag, "path": path, "model": model, **{k: result.row[k] for k in
           ("throughput_infer_s", "p50_ms", "p95_ms", "p99_ms", "avg_latency_ms", "delayed_pct")},
           "mode": mode, "command": perf.shell_line(cmd), **sampler.summary()}
    for _, step in table.iterrows():
        if step["model"] == model and len(models) > 1:
            continue  # the ensemble's own row is the sum of its steps
        row[f"{step['model']}_queue_ms"] = step["queue_ms"]
        row[f"{step['model']}_compute_ms"] = step["compute_ms"]
        row[f"{step['model']}_avg_batch"] = step["avg_batch"]
    return row, table
