# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 6. Triton benchmarks: instances, runtimes, batching and bursty load
#
# Every step below is one measurement with **perf_analyzer**, Triton's load generator. For each
# you see the exact command (you could retype it in a terminal), its raw output, the parsed row,
# Triton's own statistics for the run (which batch sizes the model really ran with) and the
# GPU (or CPU) utilisation read from Triton's metrics endpoint during the run.
#
# | step | what changes | what to look for |
# |---|---|---|
# | a | Python backend, 1 instance, concurrency 1 → 8 → 16 | queue delay grows with concurrency; the GPU is underused |
# | b | client-side batches of 16 | a batch costs little more than one image (on a GPU) |
# | c | 2, then 4 instances per GPU | better at first, then not: the limit is not the GPU |
# | d | the ONNX model on the onnxruntime backend | much faster; with 2 instances the GPU gets busy |
# | e | Flask calls the ONNX model | pre/post-processing moves into the web app |
# | f | bursty (Poisson) arrivals, then dynamic batching | same mean rate, more queuing; batching fixes it |
# | g | tear down | |
#
# Config changes never rebuild anything: the helper edits `config.pbtxt` in the model
# repository (a mounted folder), shows you the diff, and asks Triton to reload that model through
# its repository API while the server keeps running.
#
# **Your hardware decides the numbers.** The lab's reference is a node with 2 P100 GPUs. On a
# 1-GPU host the "both GPUs" steps use the one GPU; in local mode without a GPU every instance
# is a CPU instance, and claims that only a GPU can show are marked *not checked here*.

# %%
import os
import re

import pandas as pd
import requests

from servelab import claims, food11, labenv, perf, plots, triton_config, triton_http, triton_stats
from servelab.paths import PERF_INPUT_JSON, RESULTS, TEST_IMAGES

labenv.load()
TRITON, _, METRICS = labenv.triton_urls()
OUT = RESULTS / "triton"
OUT.mkdir(parents=True, exist_ok=True)

# Measurement settings (make lab and the tests shrink these).
INTERVAL_MS = labenv.param("PERF_INTERVAL_MS", 5000)       # perf_analyzer window length
STABILITY = labenv.param("PERF_STABILITY", 20)             # % spread allowed between windows
RATE_SECONDS = labenv.param("PERF_RATE_SECONDS", 10)       # length of each fixed-rate run
REQUEST_COUNT = labenv.param("PERF_REQUEST_COUNT", 2000)   # bounded runs (batches of step b: 1/20 of it)

N_GPUS = triton_stats.gpu_count(TRITON, METRICS)  # from Triton's metrics, else from the driver
KIND = "gpu" if N_GPUS else "cpu"
GPUS = list(range(N_GPUS))
ON_GPU = KIND == "gpu"


def onnx_runs_on_gpu() -> bool:
    """Triton's onnxruntime backend uses the GPU. Without it (local mode) food_classifier_onnx is a
    Python-backend stand-in running this environment's ONNX Runtime: on the GPU only if that has
    the CUDA provider."""
    if not ON_GPU or triton_config.served_config("food_classifier_onnx", TRITON)["backend"] != "python":
        return ON_GPU
    import onnxruntime
    return "CUDAExecutionProvider" in onnxruntime.get_available_providers()


ONNX_ON_GPU = onnx_runs_on_gpu()
print(f"Triton at {TRITON}; {N_GPUS} GPU(s) seen by the server -> instances are KIND_{KIND.upper()}")
print(f"{INTERVAL_MS=} {STABILITY=} {RATE_SECONDS=} {REQUEST_COUNT=}; results go to {OUT}")
for model in ("food_classifier", "food_classifier_onnx"):
    served = triton_config.served_config(model, TRITON)
    print(f"  {model:22s} backend={served['backend']:12s} ready={triton_http.model_ready(TRITON, model)}")
if triton_config.served_config("food_classifier_onnx", TRITON)["backend"] == "python":
    print("\nNOTE: this server has no onnxruntime backend (local mode), so food_classifier_onnx runs the same "
          "model.onnx\nwith ONNX Runtime inside a small Python-backend model: same name, inputs and outputs.")

# %% [markdown]
# Every measurement goes through one function, so each step's cell stays short. It starts the
# run with the command shown, keeps the parsed row, and remembers the batch sizes Triton ran.
# perf_analyzer normally measures in timing windows until three agree; on a busy machine they
# may never agree, and then the function measures once more accepting any spread (the row's
# `mode` column says so). Fixed-rate runs send a fixed number of requests instead.

# %%
rows, batch_runs = [], {}


def measure(step: str, config: str, model: str, **load) -> dict:
    tag = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{step}_{config}")
    if "request_rate" in load:
        load.setdefault("request_count", int(load["request_rate"] * RATE_SECONDS))
        load.setdefault("timeout", 90 + 3 * RATE_SECONDS)
    else:
        load.setdefault("stability_percentage", STABILITY)
        load.setdefault("timeout", 120 + 12 * INTERVAL_MS / 1000)
    if model == "food_classifier":
        load.setdefault("input_data", PERF_INPUT_JSON)  # a real base64 JPEG (random bytes are no image)
    result = perf.measure(model, url=TRITON, metrics_url=METRICS, measurement_interval_ms=INTERVAL_MS,
                          csv_path=OUT / f"perf_{tag}.csv", accept_unsettled=True, **load)
    row = {"step": step, "config": config, "run": f"{step}: {config}", "model": model,
           "command": result.shell, **result.row}
    rows.append(row)
    batch_runs[row["run"]] = result.stats["batch_executions"]
    shown = ["throughput_infer_s", "p50_ms", "p99_ms", "server_queue_ms", "server_compute_infer_ms",
             "avg_batch_size", "util_source", "util_mean_pct"]
    print(pd.DataFrame([row])[["run"] + [c for c in shown if c in row]].round(2).to_string(index=False))
    return row


def util(row: dict):
    value = row.get("util_mean_pct")
    return None if value is None or pd.isna(value) else float(value)


def busy(row: dict) -> str:
    return "n/a" if util(row) is None else f"{util(row):.0f}%"


def check_gpu_util(claim: str, row: dict, holds) -> None:
    if util(row) is None:
        claims.not_checkable(claim, "this server reports no GPU utilisation (no nv_gpu_utilization metric)")
    else:
        claims.check(claim, holds(util(row)), {"gpu_util_mean_pct": util(row)})


def reconfigure(model: str, **change) -> None:
    result = triton_config.update_model(model, url=TRITON, **change)
    if not result.ok:
        raise RuntimeError(str(result))

# %% [markdown]
# Start from the configuration of notebook 5: one instance of each model, no dynamic batching.

# %%
for model in ("food_classifier", "food_classifier_onnx"):
    reconfigure(model, instances=1, kind=KIND, gpus=GPUS[:1] or None, dynamic_batching=False)

# %% [markdown]
# ## a. Python backend, one instance: concurrency 1, 8, 16
# perf_analyzer keeps *N* requests in flight (closed loop: a new one as soon as one returns).
# With one model instance only one request runs at a time; the others wait in Triton's queue.

# %%
step_a = {c: measure("a", f"python 1 inst c{c}", "food_classifier", concurrency=c) for c in (1, 8, 16)}

# %% [markdown]
# **What to notice.** Throughput hardly moves from concurrency 1 to 16, while the server queue
# time grows about linearly: with *N* requests in flight and one instance, each request waits for
# the *N − 1* ahead of it. Compute time per request stays about the same. And look at the
# utilisation column: on a GPU this model leaves most of it idle.
#
# *Question:* from the concurrency-1 row, predict the queue time at concurrency 16. How close is
# the measurement?

# %%
q1, q8, q16 = (step_a[c]["server_queue_ms"] for c in (1, 8, 16))
claims.check("a: queue delay grows with concurrency, about linearly (q16/q8 between 1.4 and 3.2)",
             q1 < q8 < q16 and 1.4 <= q16 / q8 <= 3.2,
             {"queue_c1_ms": q1, "queue_c8_ms": q8, "queue_c16_ms": q16, "q16/q8": q16 / max(q8, 1e-9)})
if ON_GPU:
    check_gpu_util("a: one Python-backend instance leaves the GPU underused (mean utilisation < 70% at c16)",
                   step_a[16], lambda u: u < 70)
else:
    claims.not_checkable("a: the GPU is underused", f"no GPU; the CPU was {busy(step_a[16])} busy")

# %% [markdown]
# ## b. Client-side batches: one request carrying 16 images
# `-b 16` makes every request a batch of 16 images (the model config allows up to
# `max_batch_size: 16`). The model decodes all 16 and runs one forward pass over them.

# %%
# A batch takes long on a CPU, so this run sends a fixed number of batches instead of timing windows.
step_b = measure("b", "python 1 inst batch16 c1", "food_classifier", concurrency=1, batch_size=16,
                 request_count=max(10, REQUEST_COUNT // 20))

# %% [markdown]
# **What to notice.** On a GPU the forward pass of 16 images takes only a little longer than one,
# so inferences per second jump. But this model also decodes and resizes every JPEG on the CPU
# inside its compute time, one image after another: on a fast GPU, whose forward pass is a few
# milliseconds, the 16 decodes can be most of the batch's time. On a CPU the arithmetic grows with
# the batch too, so the gain is small or none. Batching is the lever for the GPU's part; the next
# steps let Triton build batches itself.
#
# *Question:* which part of the per-image time does batching amortise, and which part not?

# %%
ratio = step_b["server_compute_infer_ms"] / step_a[1]["server_compute_infer_ms"]
if ON_GPU:
    claims.check("b: on the GPU a batch of 16 costs less than 4x one image (compute time)", ratio < 4,
                 {"compute_b1_ms": step_a[1]["server_compute_infer_ms"],
                  "compute_b16_ms": step_b["server_compute_infer_ms"], "ratio": ratio},
                 needs="compute includes 16 JPEG decodes on the CPU: a GPU whose forward pass is much faster "
                       "than a decode (e.g. an H100) does not show it")
else:
    claims.not_checkable("b: a batch of 16 costs little more than one image",
                         f"CPU compute grows with the batch (measured {ratio:.1f}x for 16x the images)")

# %% [markdown]
# ## c. More instances of the Python-backend model
# `count: 2` in an instance group means two copies of the model *per listed GPU*. Listing every
# GPU spreads them over both (on a 2-GPU node: 4 copies). Watch the diff the helper prints.

# %%
step_c = {}
for per_gpu in (2, 4):
    reconfigure("food_classifier", instances=per_gpu, kind=KIND, gpus=GPUS or None)
    step_c[per_gpu] = measure("c", f"python {per_gpu} inst/{'GPU' if ON_GPU else 'CPU'} c16", "food_classifier",
                              concurrency=16)

# %% [markdown]
# **What to notice.** A second instance lets two requests run at once, so queue time drops and
# throughput rises. More instances than that help less, or hurt: every instance runs its own
# Python process that decodes images and hands tensors to the GPU, and those per-request steps,
# not the GPU's arithmetic, are what limits this model. How soon that happens depends on the CPU
# cores per GPU: on a host with many free cores and a fast GPU, 4 instances can still add a lot.
#
# *Question:* where would you look to confirm that the GPU is not the bottleneck here?

# %%
t1, t2, t4 = step_a[16]["throughput_infer_s"], step_c[2]["throughput_infer_s"], step_c[4]["throughput_infer_s"]
if ON_GPU:
    claims.check("c: 2 instances per GPU beat 1; 4 do not beat 2 by more than 5%", t2 > t1 and t4 <= 1.05 * t2,
                 {"c16_1inst_infer_s": t1, "c16_2inst_infer_s": t2, "c16_4inst_infer_s": t4},
                 needs=f"each instance decodes on its own CPU core; this host has {os.cpu_count()} cores "
                       f"for {N_GPUS} GPU(s)")
else:
    claims.check(
        "c: instances beyond the CPU cores add little throughput (4 per CPU within 15% of the best of 1-2)",
        t4 <= 1.15 * max(t1, t2),
        {"c16_1inst_infer_s": t1, "c16_2inst_infer_s": t2, "c16_4inst_infer_s": t4},
        needs="on a GPU node the lesson is 'better at first, then worse'; here the cores are the limit",
    )
reconfigure("food_classifier", instances=1, kind=KIND, gpus=GPUS[:1] or None)

# %% [markdown]
# ## d. The ONNX model on the onnxruntime backend
# `food_classifier_onnx` takes the already pre-processed tensor (`input`, FP32 [3, 224, 224]) and
# returns the 11 logits (`output`). perf_analyzer fills the input with random data of that shape.
# First one instance at concurrency 1, to compare with step a:

# %%
step_d1 = measure("d", "onnx 1 inst c1", "food_classifier_onnx", concurrency=1)

# %% [markdown]
# Then 2 instances (one per GPU on a 2-GPU node), at concurrency 8 and 16, after a short warm-up
# run that is not recorded (perf_analyzer 2.51 has no warm-up option, so the warm-up is its own
# run). Each measured run is bounded: at most 10 timing windows.

# %%
if N_GPUS >= 2:
    reconfigure("food_classifier_onnx", instances=1, kind="gpu", gpus=GPUS[:2])
else:
    reconfigure("food_classifier_onnx", instances=2, kind=KIND, gpus=GPUS[:1] or None)
perf.run(
    perf.perf_analyzer_command(
        "food_classifier_onnx",
        TRITON,
        concurrency=8,
        measurement_interval_ms=1000,
        stability_percentage=1000,
        max_trials=3,
        csv_path=OUT / "warmup.csv",
    ),
    verbose=False,
    timeout=120,
)
step_d = {c: measure("d", f"onnx 2 inst c{c}", "food_classifier_onnx", concurrency=c, max_trials=10) for c in (8, 16)}

# %% [markdown]
# **What to notice.** At concurrency 1 the ONNX model answers several times faster than the
# Python-backend model: no image decoding in the server, no Python in the request path (on
# Triton's onnxruntime backend), and an optimised graph. With two instances the GPU is now
# busy, yet at concurrency 16 requests still queue: the hardware is the limit now.
#
# *Question:* the ONNX model receives 224×224×3 floats (600 kB) per image instead of a JPEG of a
# few tens of kB. When would that trade-off stop paying off?

# %%
claims.check(
    "d: the ONNX model serves faster than the Python-backend model (concurrency 1 throughput)",
    step_d1["throughput_infer_s"] > step_a[1]["throughput_infer_s"],
    {
        "python_c1_infer_s": step_a[1]["throughput_infer_s"],
        "onnx_c1_infer_s": step_d1["throughput_infer_s"],
        "speed-up": step_d1["throughput_infer_s"] / step_a[1]["throughput_infer_s"],
    },
)
claims.check(
    "d: with 2 instances, requests still queue at concurrency 16 (queue c16 > queue c8)",
    step_d[16]["server_queue_ms"] > step_d[8]["server_queue_ms"],
    {"queue_c8_ms": step_d[8]["server_queue_ms"], "queue_c16_ms": step_d[16]["server_queue_ms"]},
)
if ONNX_ON_GPU:
    check_gpu_util("d: the GPU is busy now (mean utilisation > 50% at c16)", step_d[16], lambda u: u > 50)
elif ON_GPU:
    claims.not_checkable(
        "d: the GPU is busy now",
        "this onnxruntime has no CUDA provider, so the ONNX model "
        f"ran on the CPU (GPU utilisation {step_d[16]['util_mean_pct']:.0f}%)",
    )
else:
    claims.not_checkable("d: the GPU is busy now", f"no GPU; the CPU was {busy(step_d[16])} busy")

# %% [markdown]
# ## e. The Flask UI with the ONNX model
# The ONNX model expects a tensor, not a photo, so the web app must now do the pre-processing
# (decode, resize, normalise) and the post-processing (softmax, class name) itself, with the same
# shared module (`servelab/food11.py`) the services use. Switch Flask to that model:

# %%
labenv.use_flask_triton_model("food_classifier_onnx")
FLASK = labenv.url("FLASK_SERVER_URL")
image_path = sorted(TEST_IMAGES.glob("*.jpg"))[0]
with open(image_path, "rb") as f:
    page = requests.post(f"{FLASK}/predict", files={"file": (image_path.name, f, "image/jpeg")}, timeout=60)
shown = re.search(r'class="label">([^<]+)<', page.text)
flask_label = shown.group(1) if shown else None
direct = triton_http.infer(
    TRITON, "food_classifier", {"INPUT_IMAGE": [food11.encode_file(image_path)]}, ["FOOD_LABEL", "PROBABILITY"]
)
print(f"Flask page (ONNX model, pre/post-processing in Flask): {flask_label}   HTTP {page.status_code}")
print(f"food_classifier (Python backend, pre/post-processing in Triton): {direct['FOOD_LABEL'][0].decode()}")
claims.check(
    "e: Flask with the ONNX model shows the same class as the Python-backend model",
    page.status_code == 200 and flask_label == direct["FOOD_LABEL"][0].decode(),
    {"flask_onnx": flask_label, "python_backend": direct["FOOD_LABEL"][0].decode()},
)

# %% [markdown]
# ## f. Bursty load, then dynamic batching
# Real users do not arrive evenly. perf_analyzer can send requests at a fixed **rate**, either
# evenly spaced (`constant`) or at random moments with the same mean (`poisson`). One instance of
# the ONNX model, same mean rate both times. The spec's rate is 120 requests/s; on slower
# hardware the notebook lowers it to 40% of what one instance served at concurrency 1, so both
# runs stay below capacity.

# %%
reconfigure("food_classifier_onnx", instances=1, kind=KIND, gpus=GPUS[:1] or None, dynamic_batching=False)
BASE_RATE = int(min(120, 0.4 * step_d1["throughput_infer_s"]))
print(f"rate: {BASE_RATE} requests/s")
step_f = {
    dist: measure(
        "f", f"onnx 1 inst {dist} {BASE_RATE}/s", "food_classifier_onnx", request_rate=BASE_RATE, distribution=dist
    )
    for dist in ("constant", "poisson")
}

# %% [markdown]
# **What to notice.** Same mean rate, same model, but with random arrivals requests sometimes
# come in clumps, and a clump has to wait: queue time and p99 latency rise although the server is
# far from busy on average.
#
# *Question:* why does a server that is idle 60% of the time still make requests wait?

# %%
claims.check(
    "f: Poisson arrivals queue more than constant arrivals at the same mean rate",
    step_f["poisson"]["server_queue_ms"] > step_f["constant"]["server_queue_ms"]
    and step_f["poisson"]["p99_ms"] > step_f["constant"]["p99_ms"],
    {
        "queue_constant_ms": step_f["constant"]["server_queue_ms"],
        "queue_poisson_ms": step_f["poisson"]["server_queue_ms"],
        "p99_constant_ms": step_f["constant"]["p99_ms"],
        "p99_poisson_ms": step_f["poisson"]["p99_ms"],
    },
)

# %% [markdown]
# Now turn on **dynamic batching**: when requests are waiting, Triton hands them to the model
# together (preferably 4, 6 or 8 at a time), waiting at most 100 µs for more to arrive. Read the
# model's per-batch-size statistics before and after a Poisson run at the same rate.

# %%
reconfigure("food_classifier_onnx", preferred_batch_sizes=[4, 6, 8], max_queue_delay_us=100)
before = triton_stats.model_stats("food_classifier_onnx", TRITON)
print("batch statistics before the run:", triton_stats.batch_executions(before) or "none (counters restart on reload)")
step_f_db = {
    BASE_RATE: measure(
        "f",
        f"onnx 1 inst + dyn. batching poisson {BASE_RATE}/s",
        "food_classifier_onnx",
        request_rate=BASE_RATE,
        distribution="poisson",
    )
}
after = triton_stats.model_stats("food_classifier_onnx", TRITON)
delta = triton_stats.stats_delta(before, after)
print(triton_stats.batch_table(delta).to_string(index=False))

# %% [markdown]
# Then raise the rate: 1.5×, 2× and 2.5× (the spec's 180, 240 and 300 requests/s on a GPU node).

# %%
for factor in (1.5, 2.0, 2.5):
    rate = int(BASE_RATE * factor)
    step_f_db[rate] = measure(
        "f",
        f"onnx 1 inst + dyn. batching poisson {rate}/s",
        "food_classifier_onnx",
        request_rate=rate,
        distribution="poisson",
    )

# %% [markdown]
# **What to notice.** With dynamic batching the statistics show executions with batch sizes
# above 1: requests that arrived together were served together. As the rate rises the batches get
# larger, and latency stays bounded instead of exploding.
#
# *Question:* what does `max_queue_delay_microseconds` trade, and why is 100 µs enough here?

# %%
top = max(step_f_db)
claims.check(
    "f: with dynamic batching requests are served in batches > 1",
    delta["max_batch_size_seen"] > 1 or step_f_db[top]["max_batch_size_seen"] > 1,
    {"batch_executions": str(delta["batch_executions"]), "avg_batch_at_top_rate": step_f_db[top]["avg_batch_size"]},
)
claims.check(
    "f: latency stays bounded as the rate rises 2.5x (p99 at the top rate < 3x p99 at the base rate)",
    step_f_db[top]["p99_ms"] < 3 * step_f_db[BASE_RATE]["p99_ms"],
    {
        "p99_base_ms": step_f_db[BASE_RATE]["p99_ms"],
        "p99_top_ms": step_f_db[top]["p99_ms"],
        "rates": f"{BASE_RATE}->{top}/s",
    },
)

# %% [markdown]
# ## All runs: table and plots

# %%
table = pd.DataFrame(rows)
table.to_csv(OUT / "summary.csv", index=False)
columns = [
    "run",
    "throughput_infer_s",
    "p50_ms",
    "p99_ms",
    "server_queue_ms",
    "server_compute_infer_ms",
    "avg_batch_size",
    "util_mean_pct",
]
print(table[columns].round(2).to_string(index=False))
plots.throughput_vs_concurrency(table[table["concurrency"].notna()], "Throughput vs concurrency").savefig(
    OUT / "throughput_vs_concurrency.png", dpi=110
)
plots.latency_split_stacked(table, "Average latency: queue / compute / network").savefig(
    OUT / "latency_split.png", dpi=110
)
plots.batch_size_histogram(
    {k: v for k, v in batch_runs.items() if k.startswith("f:")}, "Step f: batch sizes the model ran with"
).savefig(OUT / "batch_sizes.png", dpi=110)
claims.save(OUT / "claims.csv")
print("saved:", sorted(p.name for p in OUT.iterdir() if p.suffix in (".csv", ".png"))[:12], "...")

# %% [markdown]
# ## g. Tear down
# Put both models back to one instance without dynamic batching (so the lab can be run again), and
# the Flask UI back on the first model:

# %%
for model in ("food_classifier", "food_classifier_onnx"):
    reconfigure(model, instances=1, kind=KIND, gpus=GPUS[:1] or None, dynamic_batching=False)
labenv.use_flask_triton_model("food_classifier")

# %% [markdown]
# Then, on the host: `docker compose -f docker-compose-triton.yaml down` (Docker) or `make down`
# (local mode). Copy `results/` off a Chameleon node before your lease ends: the tables, the CSV
# of every run and the plots are what you hand in.
