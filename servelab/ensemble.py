"""Pre-processing on the server: Triton's ensemble of `preprocess` and the ONNX classifier.

Introduced in notebook 8.

    from servelab import ensemble
    ensemble.place()                     # preprocess/, food_classifier_ensemble/ into the repo
    ensemble.classify([jpeg_path])       # [('Meat', 0.62)] (untrained weights)
    ensemble.write_perf_inputs(images)   # perf_analyzer --input-data files for the three paths
    run = ensemble.measure(line, "8.3 ensemble c4")   # perf.run_line + each step's statistics
    run.steps                            # per step: requests, mean batch, queue and compute ms

The client sends the image FILE (raw bytes, BYTES tensor IMAGE_BYTES); `preprocess` (Python
backend, servelab.food11.tensor_from_bytes) turns it into the normalised tensor and Triton hands
that to food_classifier_onnx (onnxruntime backend in the Docker image; local mode's
Python-backend stand-in, same name and I/O). The steps are ordinary models: each has its own
queue, instances and statistics, so the cost of every stage can be read apart. Your step
mapping (8.1) and the claims of 8.2 and 8.4 are checked by servelab/verdicts/ensemble.py.

The three ways to get a class for a photo that notebook 8 compares (PATHS):
    ensemble     raw JPEG -> food_classifier_ensemble (preprocess -> food_classifier_onnx)
    python       base64 JPEG -> food_classifier (one Python model decodes and runs PyTorch)
    client_onnx  the client decodes; FP32 tensor -> food_classifier_onnx
"""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import numpy as np
import requests

from servelab import food11, labenv, perf
from servelab.paths import RESULTS
from servelab.perf import command as perf_command
from servelab.perf import output as perf_output
from servelab.triton import config_text, model_repository, triton_config, triton_stats

ENSEMBLE = "food_classifier_ensemble"
STEPS = ("preprocess", "food_classifier_onnx")  # in the order the ensemble runs them
INPUT = "IMAGE_BYTES"
OUTPUT = "LOGITS"
# path name -> (model perf_analyzer targets, models whose statistics describe it)
PATHS = {
    "ensemble": (ENSEMBLE, (ENSEMBLE, *STEPS)),
    "python": ("food_classifier", ("food_classifier",)),
    "client_onnx": ("food_classifier_onnx", ("food_classifier_onnx",)),
}


def place(
    dest: Path | str | None = None,
    mode: str = "local",
    kind: str = "auto",
    steps: bool = True,
    verbose: bool = True,
) -> list[Path]:
    """Copy the two new models (preprocess, the ensemble) into the repository. The classifier step,
    food_classifier_onnx, is already there (model_repository.populate places it in both modes).
    steps=False: the ensemble's config is placed without its step mapping (ensemble_scheduling),
    which notebook 8 has you write."""
    placed = [
        model_repository.add_model(m, dest, mode=mode, kind=kind, verbose=verbose)
        for m in ("preprocess", ENSEMBLE)
    ]
    if not steps:
        config = placed[1] / "config.pbtxt"
        config.write_text(
            config_text.replace_fields(config.read_text(), "", ("ensemble_scheduling",))
        )
    return placed


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


# ---------------------------------------------------------------- requests


def _client(url: str | None):
    import tritonclient.http as httpclient

    return httpclient.InferenceServerClient(labenv.triton_url(url).split("://")[-1])


def infer_bytes(files: list[bytes], url: str | None = None, model: str = ENSEMBLE) -> np.ndarray:
    """One request holding these image files (raw bytes, one per row); the logits [n, 11]."""
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


def direct_logits(images: list[Path | str], url: str | None = None) -> list[np.ndarray]:
    """The direct path's answer for each image: the tensor made here (food11.tensor_from_bytes),
    one request each to food_classifier_onnx. What the ensemble must answer."""
    import tritonclient.http as httpclient

    client, out = _client(url), []
    for path in images:
        x = food11.tensor_from_bytes(Path(path).read_bytes())[None]
        tensor = httpclient.InferInput("input", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        wanted = [httpclient.InferRequestedOutput("output")]
        out.append(
            client.infer("food_classifier_onnx", [tensor], outputs=wanted).as_numpy("output")[0]
        )
    return out


# ---------------------------------------------------------------- perf_analyzer inputs


def write_perf_inputs(
    images: list[Path | str],
    folder: Path | str = RESULTS / "ensemble",
    expected: list[np.ndarray] | None = None,
) -> dict[str, Path]:
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
    tensors = [food11.tensor_from_bytes(f) for f in files]
    content = {
        "ensemble": [{INPUT: {"b64": _serialised_bytes(f)}} for f in files],
        "python": [{"INPUT_IMAGE": [base64.b64encode(f).decode("ascii")]} for f in files],
        "client_onnx": [
            {"input": {"b64": _b64(t.astype("<f4").tobytes()), "shape": list(t.shape)}}
            for t in tensors
        ],
    }
    out = {}
    for name, data in content.items():
        document: dict = {"data": data}
        if name == "ensemble" and expected is not None:
            document["validation_data"] = [
                {OUTPUT: {"b64": _b64(np.asarray(e, dtype="<f4").tobytes())}} for e in expected
            ]
        out[name] = folder / f"perf_input_{name}.json"
        out[name].write_text(json.dumps(document))
    return out


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _serialised_bytes(element: bytes) -> str:
    """One BYTES element as Triton serialises it (length prefix + bytes), base64 for the JSON."""
    return _b64(struct.pack("<I", len(element)) + element)


# ---------------------------------------------------------------- per-step statistics


def snapshot(models: tuple[str, ...] = (ENSEMBLE, *STEPS), url: str | None = None) -> dict:
    """Triton's cumulative statistics of each model now (GET /v2/models/<m>/stats, one each)."""
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
        rows.append(
            {
                "model": model,
                "requests": d["requests"],
                "executions": d["execution_count"],
                "avg_batch": round(d["avg_batch_size"], 2),
                "queue_ms": round(d["queue_ms_avg"], 2),
                "compute_ms": round(compute, 2),
                "compute_infer_ms": round(d["compute_infer_ms_avg"], 2),
                "failures": d["failures"],
            }
        )
    return pd.DataFrame(rows)


def served_steps(url: str | None = None) -> list[dict]:
    """The ensemble's step mapping as Triton loaded it (GET /v2/models/<ensemble>/config)."""
    resp = requests.get(f"{labenv.triton_url(url)}/v2/models/{ENSEMBLE}/config", timeout=10)
    resp.raise_for_status()
    return resp.json().get("ensemble_scheduling", {}).get("step", [])


def measure(
    line: str,
    name: str,
    *,
    out: Path | None = None,
    url: str | None = None,
    metrics_url: str | None = None,
    timeout: float | None = None,
    verbose: bool = True,
    fallback_requests: int = 40,
) -> perf.Run:
    """perf.run_line(line, name, ...) with the statistics of every model the request passes
    through, read before and after the run: `run.steps` is step_table() of the run, and the row
    gains `<model>_queue_ms`, `<model>_compute_ms` and `<model>_avg_batch` for each step (for
    the ensemble, its steps; the ensemble's own row is their sum).

    A path too slow for perf_analyzer's windows (none answered, or they never agree: PyTorch on a
    busy 2-core machine) is measured again for `fallback_requests` requests, and says so."""
    line = perf_command.model_line(line)  # read once, here
    model, (url, metrics_url) = line.value("-m"), perf_command.triton_of(line, url, metrics_url)
    models = next((m for target, m in PATHS.values() if target == model), (model,))
    settings = dict(out=out, url=url, metrics_url=metrics_url, timeout=timeout, verbose=verbose)
    before = snapshot(models, url)
    try:
        run = perf.run_line(line, name, **settings)
    except perf.PerfAnalyzerError as exc:
        counted = line.has("--request-count")
        if counted or not (fallback_requests and perf_output.unsettled(str(exc))):
            raise
        line = line.with_load(f"--request-count {fallback_requests}")
        print(f"-> {model} answered too slowly for perf_analyzer's windows: {line}", flush=True)
        before = snapshot(models, url)
        run = perf.run_line(line, name, **settings)
    run.steps = step_table(before, snapshot(models, url))
    run.extra.update(_step_columns(run.steps, model if len(models) > 1 else None))
    return run


def _step_columns(steps, ensemble: str | None) -> dict:
    """<model>_queue_ms, <model>_compute_ms and <model>_avg_batch of each step's row, but the
    ensemble's own (the sum of its steps)."""
    return {
        f"{step['model']}_{column}": step[column]
        for _, step in steps.iterrows()
        if step["model"] != ensemble
        for column in ("queue_ms", "compute_ms", "avg_batch")
    }
