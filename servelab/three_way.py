"""The same model, the same load, three ways to serve it, measured alike: Triton (notebook 7's
best configuration), Ray Serve (notebook 9's deployment) and FastAPI (notebook 4's ONNX service);
and, for Triton's ONNX Runtime model and for Ray Serve, the same with and without batching.

Introduced in notebook 9's optional section; maintainers/reference/three_way.py runs it on the GPU
machine and on a CPU, starting the three servers itself.

    ways = three_way.ways(photo, triton=URL, ray=URL, fastapi=URL)   # what each is sent
    three_way.same_answer(ways)                 # the same photo: the same class from each
    seq = three_way.sequential(ways["ray"], n)  # one at a time: the path's cost without a queue
    steps = three_way.ladder(ways["ray"], setting, senders)   # rates up to the latency objective
    three_way.at_objective(steps, setting)      # the highest rate that held it, and the next
    rounds = three_way.fixed_rate(ways, setting, senders)     # one rate, rounds interleaved

**Batching against none, in the same ladder.** Triton's dynamic batcher and Ray Serve's
`@serve.batch` do the same thing: requests that arrive within a wait of the first, up to a
largest batch, run as one. Each is compared with the same server without it, the same runtime
(ONNX Runtime on the same device, one session per batch size) and the same number of model
copies: Triton's food_classifier_onnx (2 instances, no batching, notebook 9.5's) against
food_classifier_onnx_batch (the same with `dynamic_batching`), Ray's deployment (notebook 9's)
against BatchedFoodClassifier (servelab/serving/ray_app.py). BATCHING sets both batchers alike:
the ONNX model's max_batch_size (16) and the wait of notebook 7's best configuration on a GPU
(500 us; on a CPU notebook 7's CPU sweep's 2000 us). rate_ratio() is the ratio of the highest
rates that held the objective (rate_ratio), with the bracket the two ladders leave.

**What each receives.** One photo per request (the same test photo for all three) and the class
back, as each path's own client sends it in the lab:
- FastAPI: the JPEG file, base64 in JSON (notebook 4's API): the service decodes, resizes and
  normalises it on its CPU, then runs ONNX Runtime on one image;
- Ray Serve: the photo already decoded, resized and normalised by the client, 3x224x224 float32
  as raw bytes (notebook 9's deployment, the bytes Triton's food_classifier_onnx takes);
- Triton: the same decoded and resized photo as 224x224x3 uint8 pixels in Triton's binary tensor
  format (notebook 7's step 7.3: the model normalises them on its device), answer as JSON.
Why that is fair: the model's input is the same values for all three (the same resize; uint8
pixels normalised on the server give Ray's floats), each path does what its clients send it to
do, and the part that differs is measured, not hidden: FastAPI's decode is in its Server-Timing
(`decode`), the bytes on the wire are in each row (JPEG+base64, 602,112 float32 bytes, 150,528
uint8 bytes), and same_answer() checks that the three give the same class for the photo.

**The load** is the lab's open loop (servelab/loadgen/open_loop.py: Poisson arrivals, whatever
the answers), from several processes where one cannot send the rate (servelab/loadgen/spread.py);
perf_analyzer measures Triton too, where it fits (it speaks only Triton's protocol). A step where
the generator itself sent late (the 95th percentile of its delay over a tenth of the objective:
generator_slack_ms) is no measurement of the server: the ladder stops there and says so.

**Throughput at a latency objective**: a ladder of rates (each `factor` times the last) until the
first that does not hold the objective; a rate holds when the 95 % bootstrap interval of its p95
is under the objective, it served at least 90 % of what it was offered and nothing failed. The
figure is the highest rate that held, with the next one tried (the bracket the truth lies in).
**Latency at a fixed rate**: `rounds` runs of each way at one rate, interleaved (A B C, B C A,
...) so drift of a shared machine falls on all three; the median and p95 over all rounds' requests
with 95 % bootstrap intervals, and each round's own; latency_ratio() divides two ways' figures
with a bootstrap interval of the ratio itself.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import requests
from PIL import Image

from servelab import claims, food11, loadgen
from servelab.loadgen import open_loop
from servelab.paths import REPO_ROOT
from servelab.triton import triton_stats

TRITON_MODEL = "food_classifier_tuned"  # notebook 7's model
ONNX_MODEL = "food_classifier_onnx"  # notebook 6's and 9.5's: ONNX Runtime, as Ray's and FastAPI's
ONNX_BATCH_MODEL = "food_classifier_onnx_batch"  # the same with Triton's dynamic batching
ORDER = ("triton", "triton_onnx", "triton_onnx_batch", "ray", "ray_batch", "fastapi")
# each batching way and the same way without batching
BATCHED = {"triton_onnx_batch": "triton_onnx", "ray_batch": "ray"}
# notebook 7's best configuration on its H100 page (that run's served_over_limit.json)
REFERENCE_BEST = (
    REPO_ROOT
    / "docs/results/h100/07_how_close_to_the_hardware"
    / "results/hardware/served_over_limit.json"
)
NAMES = {
    "triton": "Triton (notebook 7's best)",
    "triton_onnx": "Triton, ONNX Runtime (9.5's)",
    "triton_onnx_batch": "Triton, ONNX Runtime, dynamic batching",
    "ray": "Ray Serve",
    "ray_batch": "Ray Serve, @serve.batch",
    "fastapi": "FastAPI",
}


@dataclass(frozen=True)
class Setting:
    """How big a comparison is: the objective, the ladder, the fixed rate and the senders."""

    name: str
    objective_ms: float  # the p95 a rate must stay under
    start_rps: float  # the ladder's first rate
    factor: float  # each next rate is this times the last
    max_rps: float  # the ladder stops here at the latest
    step_s: float  # seconds of each ladder rate
    fixed_rps: float  # the fixed open-loop rate, the same for all three
    fixed_s: float  # seconds of each fixed-rate round
    rounds: int  # fixed-rate rounds of each way
    sequential_n: int  # requests one at a time
    warm_up_n: int  # requests before anything counts
    senders: int  # load-generator processes


SETTINGS = {
    # the 2-core development machine: everything shares two cores with the load generator
    "cpu": Setting("cpu", 300.0, 1.0, 1.5, 200.0, 10.0, 4.0, 10.0, 3, 40, 10, 1),
    # the GPU machine (16 cores): a generator process sends a few hundred requests/s at most
    "gpu": Setting("gpu", 50.0, 100.0, 1.5, 40_000.0, 4.0, 200.0, 5.0, 3, 200, 200, 8),
}


# notebook 7's CPU sweep: one instance, max batch 8, 2000 us (notebook 7's CPU defaults)
CPU_FORM = {"instances": 1, "max_batch": 8, "delay_us": 2000}
# Triton's dynamic batcher and Ray's @serve.batch, set alike: the ONNX model's max_batch_size and
# the queue delay of notebook 7's best configuration (GPU) or of its CPU sweep
BATCHING = {
    "gpu": {"max_batch_size": 16, "wait_us": 500},
    "cpu": {"max_batch_size": 16, "wait_us": CPU_FORM["delay_us"]},
}


def batching_fragment(setting_name: str) -> str:
    """The config.pbtxt line that gives Triton's ONNX model BATCHING's dynamic batcher."""
    wait = BATCHING[setting_name]["wait_us"]
    return f"dynamic_batching {{ max_queue_delay_microseconds: {wait} }}"


def best_config(own: Path | None = None, gpu: bool = True) -> tuple[str, Path]:
    """Notebook 7's best configuration (its config.pbtxt) and the record it came from: `own`
    (your notebook 7's results/hardware/served_over_limit.json) where it exists, else the H100
    reference's. gpu=False: its CPU form (fp32, no CUDA graphs or compile, CPU_FORM's sizes)."""
    record = own if own is not None and Path(own).exists() else REFERENCE_BEST
    text = json.loads(Path(record).read_text())["best_config"]
    return (text if gpu else cpu_form(text)), Path(record)


def cpu_form(text: str) -> str:
    """A GPU configuration of food_classifier_tuned as a CPU can run it."""
    c = CPU_FORM
    text = re.sub(r"max_batch_size: \d+", f"max_batch_size: {c['max_batch']}", text)
    group = f"instance_group [ {{ count: {c['instances']}, kind: KIND_CPU }} ]"
    text = re.sub(r"instance_group \[[^\n]*\]", group, text, count=1)
    delay = f"max_queue_delay_microseconds: {c['delay_us']}"
    text = re.sub(r"max_queue_delay_microseconds: \d+", delay, text)
    for key, value in (("precision", "fp32"), ("cuda_graphs", "off"), ("compile", "off")):
        text = re.sub(
            rf'(key: "{key}" value {{ string_value: ")[^"]*(")', rf"\g<1>{value}\g<2>", text
        )
    return text


@dataclass
class Way:
    """One way to serve the model: where to POST, what, and how to read its answer."""

    name: str
    url: str
    body: bytes
    headers: dict
    receives: str
    answer_key: str  # where its JSON answer has the class (or "outputs" for Triton's)
    triton_url: str | None = None  # Triton's base URL: its statistics around a run
    triton_model: str | None = None
    extra: dict = field(default_factory=dict)

    def label(self, answer: dict) -> str:
        if self.answer_key == "outputs":
            return food11.top_class(np.asarray(answer["outputs"][0]["data"], np.float32))[0]
        return answer[self.answer_key]


def inputs(photo: Path) -> dict:
    """The photo as each way takes it: its file, its 224x224 uint8 pixels, its float32 tensor
    (the same resize as the services': servelab.food11.preprocess)."""
    jpeg = Path(photo).read_bytes()
    image = food11.load_image(jpeg).convert("RGB")
    size = (food11.INPUT_SIZE, food11.INPUT_SIZE)
    pixels = np.asarray(image.resize(size, Image.BILINEAR), dtype=np.uint8)
    tensor = food11.preprocess(image)[None]
    return {"jpeg": jpeg, "pixels": pixels, "tensor": tensor}


def triton_body(array: np.ndarray, datatype: str) -> tuple[bytes, dict]:
    """One image (uint8 pixels or float32 tensor) as Triton's HTTP binary tensor body, the logits
    asked as JSON."""
    import tritonclient.http as httpclient

    batch = array if array.shape[0] == 1 and array.ndim == 4 else array[None]
    tensor = httpclient.InferInput("input", list(batch.shape), datatype)
    tensor.set_data_from_numpy(batch, binary_data=True)
    output = httpclient.InferRequestedOutput("output", binary_data=False)
    body, json_size = httpclient.InferenceServerClient.generate_request_body([tensor], [output])
    headers = {
        "Content-Type": "application/octet-stream",
        "Inference-Header-Content-Length": str(json_size),
    }
    return body, headers


def _triton_way(name: str, base: str, model: str, array, dtype: str, what: str) -> Way:
    body, headers = triton_body(array, dtype)
    described = f"{what}, Triton's binary tensor format ({len(body):,} bytes)"
    return Way(
        name, f"{base}/v2/models/{model}/infer", body, headers, described, "outputs", base, model
    )


def ways(photo: Path, urls: dict[str, str]) -> dict[str, Way]:
    """The ways named in `urls` (ORDER's names: Triton's base URL for the three Triton ways, each
    Ray app's route, FastAPI's base URL), each with the same photo as it takes it."""
    made = inputs(photo)
    fastapi_body = json.dumps({"image": base64.b64encode(made["jpeg"]).decode()}).encode()
    out = {}
    if "triton" in urls:
        pixels = "uint8 pixels 224x224x3"
        out["triton"] = _triton_way(
            "triton", urls["triton"], TRITON_MODEL, made["pixels"], "UINT8", pixels
        )
    tensor = "float32 tensor 3x224x224"
    for name, model in (("triton_onnx", ONNX_MODEL), ("triton_onnx_batch", ONNX_BATCH_MODEL)):
        if name in urls:
            out[name] = _triton_way(name, urls[name], model, made["tensor"], "FP32", tensor)
    for name in ("ray", "ray_batch"):
        if name in urls:
            out[name] = Way(
                name,
                urls[name],
                made["tensor"].tobytes(),
                {"Content-Type": "application/octet-stream"},
                f"float32 tensor 3x224x224, raw bytes ({made['tensor'].nbytes:,} bytes)",
                "label",
            )
    if "fastapi" in urls:
        out["fastapi"] = Way(
            "fastapi",
            f"{urls['fastapi']}/predict",
            fastapi_body,
            {"Content-Type": "application/json"},
            f"the JPEG file ({len(made['jpeg']):,} bytes), base64 in JSON "
            f"({len(fastapi_body):,} bytes)",
            "prediction",
        )
    return out


def ask(way: Way, timeout: float = 60.0) -> str:
    """One request; the class it answered (raises with the service's words on an error)."""
    resp = requests.post(way.url, data=way.body, headers=way.headers, timeout=timeout)
    if resp.status_code != 200:
        raise RuntimeError(f"{way.name}: HTTP {resp.status_code}: {resp.text[:300]}")
    return way.label(resp.json())


def same_answer(all_ways: dict[str, Way]) -> dict:
    """Each way's class for the photo, and whether they agree (fp16 on a GPU may flip a near-tie
    of the untrained model's logits: then it says so, it is no failure of the path)."""
    labels = {name: ask(way) for name, way in all_ways.items()}
    return {"labels": labels, "agree": len(set(labels.values())) == 1}


def _triton_before(way: Way):
    return triton_stats.model_stats(way.triton_model, way.triton_url) if way.triton_url else None


def _triton_after(way: Way, before, df: pd.DataFrame) -> None:
    if before is not None:
        after = triton_stats.model_stats(way.triton_model, way.triton_url)
        df.attrs["triton"] = triton_stats.stats_delta(before, after)


def warm_up(way: Way, n: int, concurrency: int = 4) -> None:
    """Requests that do not count: the first ones pay for loading, compiling, CUDA graphs."""
    loadgen.run(
        way.url,
        way.body,
        n,
        concurrency,
        f"{way.name} warm-up",
        progress=False,
        headers=way.headers,
    )


def sequential(way: Way, n: int) -> pd.DataFrame:
    """n requests one at a time: the path's own cost, nothing queued (Triton's statistics of the
    run in attrs["triton"])."""
    before = _triton_before(way)
    df = loadgen.run(
        way.url, way.body, n, 1, f"{way.name} sequential", progress=False, headers=way.headers
    )
    _triton_after(way, before, df)
    return df


def request_timeout_s(objective_ms: float) -> float:
    """How long a request of an open-loop run is waited for: a hundred times the objective, at
    least 5 s (a request that late fails the objective anyway; the overloaded Triton step of the
    first H200 run waited 60 s for each of 1,088 answers that never came)."""
    return max(5.0, objective_ms / 10)


def at_rate(way: Way, rate: float, seconds: float, senders, label: str, seed: int = 0, **kw):
    """The open loop at `rate` for `seconds` from `senders` (a spread.Senders); `timeout` in kw:
    how long each request is waited for."""
    before = _triton_before(way)
    df = senders.run(way.url, way.body, rate, seconds, way.headers, label, seed, **kw)
    _triton_after(way, before, df)
    return df


MIN_ANSWERS = 10  # fewer answers give no p95 worth an interval
STEP_REQUESTS = 20  # a ladder step lasts long enough to send this many


def generator_slack_ms(objective_ms: float) -> float:
    """How late the generator may send its requests (their 95th percentile) and still offer the
    rate it claims: a tenth of the latency objective, at least open_loop's LATE_MS. (open_loop's
    own rule, at most 5 % later than 10 ms, is stricter than a 300 ms objective needs; on a busy
    2-core machine a sender thread often wakes 10-20 ms late while the arrivals stay Poisson.)"""
    return max(open_loop.LATE_MS, objective_ms / 10)


def p95(samples) -> claims.Measured:
    return claims.Measured.from_samples(samples, stat=functools.partial(np.percentile, q=95))


def step_row(df: pd.DataFrame, objective_ms: float) -> dict:
    """One open-loop run as a ladder step: offered, served, p95 with its interval, and whether it
    held the objective (holds / fails / inconclusive / generator late)."""
    row = loadgen.summarize(df)
    ok = df[df["status"] == 200]["latency_ms"].dropna().to_numpy()
    tail = p95(ok) if len(ok) >= MIN_ANSWERS else None
    served_share = row["throughput_rps"] / row["request_rate"] if row["request_rate"] else 0.0
    batch = df.attrs.get("triton", {}).get("avg_batch_size")
    if batch is None and "server_batch_ms" in df:  # Ray's batches: their size per request
        batch = float(df["server_batch_ms"].mean())
    late_p95 = float(np.percentile(df["late_ms"], 95)) if len(df) else 0.0
    if late_p95 > generator_slack_ms(objective_ms):
        verdict = "generator late"  # the load generator did not offer this rate
    elif row["errors"] or served_share < 0.9:
        verdict = "fails"
    elif tail is None:
        verdict = "too few requests"
    elif tail.hi <= objective_ms:
        verdict = "holds"
    elif tail.lo > objective_ms:
        verdict = "fails"
    else:
        verdict = "inconclusive"
    return {
        "way": df.attrs.get("way", ""),
        "offered_rps": row["request_rate"],
        "served_rps": row["throughput_rps"],
        "served_share": served_share,
        "requests": row["requests"],
        "errors": row["errors"],
        "delayed_pct": row["delayed_pct"],
        "late_p95_ms": late_p95,
        "median_ms": row["median_ms"],
        "p95_ms": tail.value if tail else float("nan"),
        "p95_lo_ms": tail.lo if tail else float("nan"),
        "p95_hi_ms": tail.hi if tail else float("nan"),
        "in_flight_N": row["in_flight_N"],
        "mean_batch": float("nan") if batch is None else float(batch),
        "verdict": verdict,
    }


def ladder(way: Way, setting: Setting, senders, runs: dict | None = None) -> list[dict]:
    """Rates from setting.start_rps, each setting.factor times the last, setting.step_s each (or
    long enough for STEP_REQUESTS requests),
    until the first that does not hold the objective (or setting.max_rps); a row per rate.
    `runs`, if given, keeps each run's rows by label."""
    rows, rate = [], setting.start_rps
    while rate <= setting.max_rps:
        label = f"{way.name} ladder {rate:g}/s"
        seconds = max(setting.step_s, STEP_REQUESTS / rate)  # enough requests for a p95
        timeout = request_timeout_s(setting.objective_ms)
        df = at_rate(way, rate, seconds, senders, label, seed=len(rows), timeout=timeout)
        df.attrs["way"] = way.name
        if runs is not None:
            runs[label] = df
        rows.append({**step_row(df, setting.objective_ms), "rate_rps": rate})
        print(f"  {label}: {_step_text(rows[-1])}", flush=True)
        if rows[-1]["verdict"] != "holds":
            break
        rate = round(rate * setting.factor, 1)
    return rows


def _step_text(row: dict) -> str:
    return (
        f"served {row['served_rps']:.1f}/s of {row['offered_rps']:.1f}, p95 {row['p95_ms']:.1f} "
        f"[{row['p95_lo_ms']:.1f}, {row['p95_hi_ms']:.1f}] ms, sent late: p95 "
        f"{row['late_p95_ms']:.1f} ms, "
        f"errors {row['errors']}: {row['verdict']}"
    )


def at_objective(steps: list[dict], setting: Setting) -> dict:
    """The highest rate that held the objective, the next rate tried and why it did not hold."""
    held = [s for s in steps if s["verdict"] == "holds"]
    after = next((s for s in steps if s["verdict"] != "holds"), None)
    out = {
        "objective_ms": setting.objective_ms,
        "held_rps": held[-1]["rate_rps"] if held else 0.0,
        "served_rps": held[-1]["served_rps"] if held else 0.0,
        "next_rps": after["rate_rps"] if after else None,
        "next_verdict": after["verdict"] if after else f"not tried (max {setting.max_rps:g}/s)",
    }
    out["limited_by"] = (
        "the load generator" if out["next_verdict"] == "generator late" else "the server"
    )
    return out


def fixed_rate(
    all_ways: dict[str, Way], setting: Setting, senders, runs: dict | None = None
) -> pd.DataFrame:
    """setting.rounds runs of every way at setting.fixed_rps, interleaved with the order turned
    each round; one row per run."""
    names, rows = list(all_ways), []
    for r in range(setting.rounds):
        turn = names[r % len(names) :] + names[: r % len(names)]
        for name in turn:
            label = f"{name} fixed {setting.fixed_rps:g}/s round {r + 1}"
            way, wait = all_ways[name], request_timeout_s(setting.objective_ms)
            df = at_rate(way, setting.fixed_rps, setting.fixed_s, senders, label, r, timeout=wait)
            df.attrs["way"] = name
            if runs is not None:
                runs[label] = df
            rows.append({**step_row(df, setting.objective_ms), "round": r + 1})
            print(f"  {label}: {_step_text(rows[-1])}", flush=True)
    return pd.DataFrame(rows)


def of_way(runs: dict, way: str) -> list[pd.DataFrame]:
    """The runs (fixed_rate's, kept by label) that `way` served: each run says its way."""
    return [df for df in runs.values() if df.attrs.get("way") == way]


def latency_at_fixed_rate(dfs: list[pd.DataFrame], name: str) -> dict:
    """One way's fixed-rate rounds (`dfs`, its runs) pooled: median and p95 with their 95 %
    bootstrap intervals."""
    ok = pd.concat([df[df["status"] == 200] for df in dfs])["latency_ms"].dropna().to_numpy()
    median, tail = claims.Measured.from_samples(ok), p95(ok)
    return {
        "way": name,
        "requests": int(sum(len(df) for df in dfs)),
        "answered": int(len(ok)),
        "median_ms": median.value,
        "median_lo_ms": median.lo,
        "median_hi_ms": median.hi,
        "p95_ms": tail.value,
        "p95_lo_ms": tail.lo,
        "p95_hi_ms": tail.hi,
    }


def rate_ratio(a: dict, b: dict) -> dict:
    """How many times the rate way a held the objective at is way b's (at_objective() of each;
    batching against none too): the ratio of the rates that held, and the bracket the two
    ladders leave (each true figure lies between its rate that held and its next one tried);
    an end not known (no next rate, nothing held) is None. Where a ladder's next step measured
    the load generator ("generator late"), that way's figure has no known upper end: the
    server was not shown to fail there."""

    def upper(way: dict) -> float | None:
        return None if way.get("next_verdict") == "generator late" else way.get("next_rps")

    hi_a, hi_b, lo_b = upper(a), upper(b), b["held_rps"]
    return {
        "ratio": a["held_rps"] / lo_b if lo_b else None,
        "lo": a["held_rps"] / hi_b if hi_b else None,
        "hi": hi_a / lo_b if hi_a and lo_b else None,
    }


def latency_ratio(a, b, stat: str = "median", rounds: int = 1000, seed: int = 0) -> dict:
    """a's latency over b's (each the answered requests' latencies, ms) by `stat` ("median" or
    "p95"), with the 95 % bootstrap interval of the ratio: both samples drawn again `rounds`
    times, the ratio of each draw's figures."""
    q = 50 if stat == "median" else 95
    a, b = np.asarray(a, float), np.asarray(b, float)
    rng = np.random.default_rng(seed)
    draws_a = np.percentile(rng.choice(a, (rounds, len(a))), q, axis=1)
    draws_b = np.percentile(rng.choice(b, (rounds, len(b))), q, axis=1)
    ratios = draws_a / draws_b
    return {
        "ratio": float(np.percentile(a, q) / np.percentile(b, q)),
        "lo": float(np.percentile(ratios, 2.5)),
        "hi": float(np.percentile(ratios, 97.5)),
    }


def compare(a: dict, b: dict, column: str) -> str:
    """'lower', 'higher' or 'inconclusive': a's figure against b's, by their intervals."""
    if a[f"{column}_hi_ms"] < b[f"{column}_lo_ms"]:
        return "lower"
    if a[f"{column}_lo_ms"] > b[f"{column}_hi_ms"]:
        return "higher"
    return "inconclusive"


def where_time_goes(way: Way, seq: pd.DataFrame) -> dict:
    """One request alone, split, in means (they add up, medians do not): the client's latency,
    what the server says it spent (FastAPI: decode, queue, infer by Server-Timing; Ray: infer;
    Triton: its statistics per request: queue, compute input, infer, output) and the rest (HTTP,
    serialisation, the framework's hops between processes, the client's own work), in ms; the
    median latency with its 95 % bootstrap interval beside them."""
    ok = seq[seq["status"] == 200]
    latency = claims.Measured.from_samples(ok["latency_ms"].to_numpy())
    out = {
        "way": way.name,
        "bytes_sent": len(way.body),
        "latency_median_ms": latency.value,
        "latency_lo_ms": latency.lo,
        "latency_hi_ms": latency.hi,
        "latency_mean_ms": float(ok["latency_ms"].mean()),
    }
    if "triton" in seq.attrs:
        stats = seq.attrs["triton"]
        for part in ("queue", "compute_input", "compute_infer", "compute_output"):
            out[f"server_{part}_ms"] = stats[f"{part}_ms_avg"]
        out["model_ms"] = stats["compute_infer_ms_avg"]
        server = sum(out[f"server_{p}_ms"] for p in ("queue", "compute_input", "compute_output"))
    else:
        for part in ("decode", "queue", "infer"):
            column = f"server_{part}_ms"
            if column in ok:
                out[column] = float(ok[column].mean())
        out["model_ms"] = out.get("server_infer_ms", float("nan"))
        server = out.get("server_decode_ms", 0.0) + out.get("server_queue_ms", 0.0)
    out["server_other_ms"] = server
    out["outside_ms"] = out["latency_mean_ms"] - out["model_ms"] - server
    return out


def run_all(all_ways: dict[str, Way], setting: Setting, senders) -> dict[str, pd.DataFrame]:
    """The whole comparison on running servers, as notebook 9's optional section runs it: the
    answers, each way warmed up and one at a time, its ladder, then the fixed-rate rounds. Tables:
    answers, sequential, ladder, at_objective, fixed (each round), pooled (the rounds pooled)."""
    for way in all_ways.values():
        warm_up(way, setting.warm_up_n)
    answers = same_answer(all_ways)
    sequential_rows = [
        where_time_goes(w, sequential(w, setting.sequential_n)) for w in all_ways.values()
    ]
    steps = [row for way in all_ways.values() for row in ladder(way, setting, senders)]
    runs: dict = {}
    fixed = fixed_rate(all_ways, setting, senders, runs)
    steps_df = pd.DataFrame(steps)
    return {
        "answers": pd.DataFrame([answers["labels"]]),
        "sequential": pd.DataFrame(sequential_rows).set_index("way"),
        "ladder": steps_df,
        "at_objective": pd.DataFrame(
            {
                way: at_objective(rows.to_dict("records"), setting)
                for way, rows in steps_df.groupby("way", sort=False)
            }
        ).T,
        "fixed": fixed,
        "pooled": pd.DataFrame(
            [latency_at_fixed_rate(of_way(runs, n), n) for n in all_ways]
        ).set_index("way"),
    }


CPU_PAGE = REPO_ROOT / "docs" / "results" / "cpu" / "three_way"


def cpu_page(folder: Path = CPU_PAGE) -> str:
    """What the committed CPU page measured, in a few lines (notebook 9 without a GPU)."""
    path = folder / "three_way.json"
    if not path.exists():
        return f"(the CPU page's figures are in {folder}/README.md of the lab's repository)"
    f = json.loads(path.read_text())
    s = f["setup"]["setting"]
    lines = [
        f"On {f['setup']['machine']['cores']} CPU cores, no GPU "
        f"(docs/results/cpu/three_way/, objective p95 <= {s['objective_ms']:g} ms):"
    ]
    pooled = {row["way"]: row for row in f["fixed_pooled"]}
    for way in [w for w in ORDER if w in pooled]:
        o, p = f["at_objective"][way], pooled[way]
        lines.append(
            f"  {NAMES[way]}: held the objective up to {o['held_rps']:g}/s (next tried: "
            f"{o['next_rps']}/s, {o['next_verdict']}); at {s['fixed_rps']:g}/s median "
            f"{p['median_ms']:.1f} ms, p95 {p['p95_ms']:.1f} ms"
        )
    return "\n".join(lines)
