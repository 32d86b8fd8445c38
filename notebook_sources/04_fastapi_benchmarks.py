# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 4. FastAPI benchmarks: where does a request's time go?
#
# A user who uploads a photo waits for three things: the HTTP round trip, the model's own
# computation, and, when others are served at the same time, **waiting in line**. This notebook
# separates the three, one change at a time:
#
# | step | what you do | what it shows |
# |---|---|---|
# | 4.1-4.3 | call the service from Swagger, Python and the Flask page | the API |
# | 4.4 | 100 sequential requests, PyTorch | the best-case latency |
# | 4.5 | the same with ONNX Runtime | a faster runtime, same HTTP layer |
# | 4.6 | 16 concurrent senders | queuing |
# | 4.7 | two worker processes | what a second copy of the model buys here |
#
# **How this lab works** (notebooks 4 to 8). An exercise cell holds a blank, `...`, for the line
# that matters; the next cell checks it. You **predict** before measuring; after it you explain
# what you see in an answer cell, and the lab's verdict appears once your answer is there. A
# **decision** is judged against your own numbers. A verdict is *holds*, *does not hold*, or
# *inconclusive* when the 95 % interval straddles the line, so noise could decide.
#
# The model is an *untrained* MobileNetV2 (unless your instructor gave you a checkpoint): arbitrary
# labels, real timings.
#
# **Three passes** (notebook 0): *prepare* before the lease (read, predict, write each line and
# check it), *measure* on the node (cells marked `%%runs_in measure` need it), *review* after the
# lease from the results bundle (cells marked `%%runs_in measure review` read your runs). The first
# cell says which pass this is.

# %%
from servelab import passes

PASS = passes.start("04_fastapi_benchmarks")  # LAB_PASS: prepare, measure (default) or review

# %% [markdown]
# ## Setup

# %%
import base64
import re
import time

import pandas as pd
import requests

from servelab import claims, exercises, food11, labenv, loadgen, plots, queueing, services
from servelab.exercises import judgement
from servelab.paths import RESULTS, test_photo
from servelab.verdicts import fastapi as verdicts

# %%
labenv.load()
FASTAPI, FLASK = labenv.url("FASTAPI_SERVER_URL"), labenv.url("FLASK_SERVER_URL")
exercises.given(FASTAPI=FASTAPI)  # the checks read your answers with it
N_SEQUENTIAL = labenv.param("N_SEQUENTIAL", 100)  # requests per run (make lab QUICK=1: fewer)
N_CONCURRENT = labenv.param("N_CONCURRENT", 1000)
CONCURRENCY = labenv.param("CONCURRENCY", 16)
OUT = RESULTS / "fastapi"
OUT.mkdir(parents=True, exist_ok=True)
print(f"FastAPI at {FASTAPI}, Flask at {FLASK}; {N_SEQUENTIAL=} {N_CONCURRENT=} {CONCURRENCY=}")

# %% [markdown]
# ## 4.1 Is the service up?
# `GET /health` answers 200 once the model is loaded, with the runtime, the device, the worker
# processes and whether the weights are trained.

# %%
# %%runs_in measure
health = labenv.wait_healthy(f"{FASTAPI}/health", timeout=300)
health

# %% [markdown]
# ## 4.2 One request by hand
# Open the API docs (`/docs`) in your browser and try **POST /predict** (*Try it out*, *Execute*).
# In Docker, tunnel first: `ssh -L 8000:127.0.0.1:8000 cc@<floating IP>`, then
# `http://127.0.0.1:8000/docs`.
#
# **Exercise 4.2: the request's body.** `/predict` takes JSON with one field, `image`: the photo's
# file as base64 text. `image_path.read_bytes()` gives its bytes, `base64.b64encode(...)` base64
# bytes, `.decode("ascii")` text. Replace the `...` with the dict the service expects.

# %%
print(f"Swagger UI: {FASTAPI}/docs")
image_path = test_photo()  # a photo of artifacts/test_images
payload = (
    ### BEGIN SOLUTION
    {"image": base64.b64encode(image_path.read_bytes()).decode("ascii")}
    ### END SOLUTION
)

# %%
exercises.result(payload, "4.2", image_path)

# %%
# %%runs_in measure
resp = requests.post(f"{FASTAPI}/predict", json=payload, timeout=60)
print(resp.status_code, resp.json())
print("Server-Timing:", resp.headers.get("Server-Timing"))

# %% [markdown]
# The `Server-Timing` header says how long the service spent **decoding** the photo, **waiting**
# for the model (`queue`) and running it (`infer`), in ms: "the model is slow" or "the request
# waited". Bad input must get a clear 4xx while the service keeps serving:

# %%
# %%runs_in measure
bad = {
    "not base64": {"image": "%%%"},
    "not an image": {"image": base64.b64encode(b"hello").decode()},
    "empty": {"image": ""},
    "missing field": {"img": "..."},
}
for name, body in bad.items():
    r = requests.post(f"{FASTAPI}/predict", json=body, timeout=30)
    print(f"{name:14s} -> {r.status_code}: {r.json()['detail'][:100]}")
assert requests.post(f"{FASTAPI}/predict", json=payload, timeout=60).ok, (
    "the service stopped serving"
)

# %% [markdown]
# ## 4.3 The Flask UI, end to end
# Open the Flask page (URL below; in Docker, port 80 of your node) and upload a photo. The cell
# does the same upload.

# %%
# %%runs_in measure
print(f"Flask UI: {FLASK}/")
with open(image_path, "rb") as f:
    page = requests.post(
        f"{FLASK}/predict", files={"file": (image_path.name, f, "image/jpeg")}, timeout=60
    )
label = re.search(r'class="label">([^<]+)<', page.text)
print("status:", page.status_code, "| label shown:", label and label.group(1))
assert page.status_code == 200 and label and label.group(1) in food11.CLASSES

# %% [markdown]
# ## 4.4 Sequential requests, PyTorch
# One request at a time: nothing waits for another request, so this is the best-case latency,
# the floor every later run is compared with. A single request is a poor measurement (the first
# pays for warming caches and connections, any one can be delayed by the machine), so a run sends
# many and reports the median, which one slow request cannot move, and the 95th and 99th
# percentiles, the tail your slowest users see.
#
# **Predict.** From the `Server-Timing` of 4.2, what median latency (ms) for 100 requests in a row?

# %%
predicted_sequential = claims.predict("4.4 PyTorch sequential median (ms)", None, why="")

# %% [markdown]
# **Exercise 4.4: send one request, time it, collect what came back**, the core of any load
# generator. Write the body of `send_one`: note the time (`time.perf_counter()`, seconds), send
# with the session (`session.post(url, json=payload, timeout=60)`: a session keeps the connection
# open), note the time again, and return the four things its docstring names
# (`resp.headers.get("Server-Timing")` is the header).
#
# Why these choices: `time.perf_counter()` is a clock that only moves forward, at the finest
# resolution the machine has (the wall clock, `time.time()`, can jump when the system corrects
# it); a latency is the difference of two readings taken around the request and nothing else, so
# the first reading comes just before the request leaves. The status and `Server-Timing` go in
# the record so that a failed request is never counted as a fast one, and the server's own time
# can be set beside the client's. The check calls your function once against the service and
# compares your latency with the server's own time for the same request.


# %%
def send_one(session, url, payload):
    """POST payload to url once; return {"t_start": time.perf_counter() when it left,
    "latency_ms": how long until the answer (ms), "status": the HTTP status code,
    "server_timing": the response's Server-Timing header}."""
    ### BEGIN SOLUTION
    start = time.perf_counter()
    resp = session.post(url, json=payload, timeout=60)
    latency_ms = (time.perf_counter() - start) * 1000
    return {
        "t_start": start,
        "latency_ms": latency_ms,
        "status": resp.status_code,
        "server_timing": resp.headers.get("Server-Timing"),
    }
    ### END SOLUTION


# %%
record = exercises.function(send_one, "4.4", payload)
record

# %% [markdown]
# `loadgen.run` (`servelab/loadgen/`) calls your `send_one` from one sender or several at once
# and keeps one row per request. Each summary row also carries two laws that hold for any run:
# **U = X·S** (`lock_busy_U`: throughput × mean `infer`) and **N = X·R** (`in_flight_N`:
# throughput × mean latency, Little's law). 4.6 uses them.

# %%
runs = {}  # label -> its run, for the summary at the end (a cell run again replaces its run)


def measure(label: str, n: int, concurrency: int) -> pd.DataFrame:
    """n requests from `concurrency` senders, each sent by your send_one; saves them and
    returns the run (its requests, one row each), kept in `runs` for the summary."""
    run = loadgen.run(
        f"{FASTAPI}/predict", payload, n=n, concurrency=concurrency, label=label, send=send_one
    )
    run.to_csv(OUT / f"requests_{label}.csv", index=False)
    runs[label] = run
    return run


def row(run: pd.DataFrame) -> pd.DataFrame:
    """A run's summary row, as a table."""
    return pd.DataFrame([loadgen.summarize(run)]).round(2)


# %%
# %%runs_in measure review
pytorch_sequential = measure("pytorch_sequential", N_SEQUENTIAL, 1)
row(pytorch_sequential)

# %%
# %%runs_in measure review
claims.compare_prediction(predicted_sequential, loadgen.median_ms(pytorch_sequential))

# %% [markdown]
# ## 4.5 Switch to ONNX Runtime
# Same API, same HTTP code; only the runtime differs: ONNX Runtime runs a graph exported from the
# same PyTorch model. In Docker, run the command the next cell prints on the host; the cell waits
# until the service answers with ONNX Runtime.
#
# **Predict.** How many times faster (median) will ONNX Runtime serve a sequential request?

# %%
predicted_speedup = claims.predict("4.5 ONNX speed-up, sequential (x)", None, why="")

# %%
# %%runs_in measure review
services.use_fastapi_backend("onnx")
onnx_sequential = measure("onnx_sequential", N_SEQUENTIAL, 1)
row(onnx_sequential)

# %% [markdown]
# **What do you see, and why?** Compare the two rows: the median, then `infer` and `decode`. Which
# part did the runtime change, and why is the end-to-end speed-up smaller than the runtime's own?
# Write your answer between the quotes.

# %%
answer_45 = """
### BEGIN SOLUTION
(solved edition: the expected answer is in docs/answer_key.md, 4.5)
### END SOLUTION
"""

# %% jupyter={"source_hidden": true}
# %%runs_in measure review
with judgement.verdict_after(answer_45, "4.5"):
    verdicts.onnx_is_faster(pytorch_sequential, onnx_sequential, predicted_speedup)

# %% [markdown]
# ## 4.6 Sixteen concurrent senders
# Now 16 clients send requests as fast as they get answers: a **closed loop**, in which each
# sender sends its next request the moment its last answer arrives, so 16 requests are always in
# flight. The service runs **one copy of the model in one Python process**, behind a lock
# (`servelab/serving/inference_api.py`): the model computes one request at a time, and the wait
# for the lock is the `queue` part of `Server-Timing`.
#
# **Why latency must grow.** Suppose the model takes *t* per request and nothing else is slow.
# One copy can then finish at most 1/*t* requests a second, however many are sent: with 16 in
# flight, one computes and fifteen wait. **Little's law**, N = X·R, holds for any steady system:
# the requests inside it (N) equal the rate they leave at (X) times the time each stays (R). Here
# N = 16 and X cannot pass 1/*t*, so R cannot fall below 16 *t*: every request added to the loop
# adds one *t* of waiting. The **utilisation law**, U = X·S, says how busy the model is: the
# rate times the time each request holds it. At U = 1 it never rests, and sending more only
# lengthens the line. The laws are bookkeeping, true whatever the cause: where the measured
# latency exceeds 16 *t*, the lock was idle at times while 16 requests were in flight, so they
# were somewhere else (decoding, in HTTP, waiting for the interpreter), and `Server-Timing`
# says where.
#
# **Predict.** One request's model time is *t* (the `infer` median of 4.5). With 16 in flight and
# one served at a time, about how long does each take (ms)?

# %%
predicted_in_flight = claims.predict("4.6 ONNX median at 16 in flight (ms)", None, why="")

# %%
# %%runs_in measure review
onnx_concurrent = measure(f"onnx_concurrent_{CONCURRENCY}", N_CONCURRENT, CONCURRENCY)
row(onnx_concurrent)

# %%
# %%runs_in measure review
claims.compare_prediction(predicted_in_flight, loadgen.median_ms(onnx_concurrent))

# %% [markdown]
# **The queueing model's line** (`servelab/queueing.py`): one station, the model behind its lock,
# with service time *S* = the mean `infer` of 4.5, assumed constant, and the rest of a request's
# time a delay that never waits: about *N* × *S* with *N* in flight. Then the laws by hand:
# **U = X·S** (the lock's busy share), **N = X·R** (in flight) and X·W with W = the mean `queue`
# (waiting for the lock).

# %%
# %%runs_in measure review
# Worth reading: the model's line, then the laws by hand
seq = loadgen.summarize(onnx_sequential)
outside = seq["mean_ms"] - seq["infer_mean_ms"]  # a pure delay, in the model
model = queueing.closed_loop(CONCURRENCY, seq["infer_mean_ms"], outside)
loaded = loadgen.summarize(onnx_concurrent)
print(f"model:    {model['latency_ms']:6.1f} ms mean, {model['throughput_per_s']:5.0f} requests/s")
print(f"measured: {loaded['mean_ms']:6.1f} ms mean, {loaded['throughput_rps']:5.0f} requests/s")
X = loaded["throughput_rps"]  # requests per second
S = loaded["infer_mean_ms"] / 1000  # seconds holding the lock
R = loaded["mean_ms"] / 1000  # seconds from send to answer
W = onnx_concurrent["server_queue_ms"].mean() / 1000  # waiting for it
print(f"U = X·S = {X:.0f}/s × {S * 1000:.2f} ms = {X * S:.2f}  (share of time the lock was busy)")
print(f"N = X·R = {X:.0f}/s × {R * 1000:.1f} ms = {X * R:.1f}  (in flight; {CONCURRENCY} senders)")
print(f"X·W     = {X:.0f}/s × {W * 1000:.1f} ms = {X * W:.1f}  (waiting for the lock, on average)")

# %% [markdown]
# The same load with PyTorch, to compare both runtimes:

# %%
# %%runs_in measure review
services.use_fastapi_backend("pt")
pytorch_concurrent = measure(f"pytorch_concurrent_{CONCURRENCY}", N_CONCURRENT, CONCURRENCY)
row(pytorch_concurrent)

# %% [markdown]
# **What do you see, and why?** From the lines above. How far was the model's mean from the
# measured one? A request ready to run takes a free lock at once: by the lock's busy share (U) and
# the requests waiting for it (X·W), what were the waiting ones waiting for? For each runtime, how
# many times did the median grow from sequential, against the model's own time (`infer`)? Write
# your answer between the quotes.

# %%
answer_46 = """
### BEGIN SOLUTION
(solved edition: the expected answer is in docs/answer_key.md, 4.6)
### END SOLUTION
"""

# %% jupyter={"source_hidden": true}
# %%runs_in measure review
with judgement.verdict_after(answer_46, "4.6"):
    print(
        queueing.model_miss(
            model["latency_ms"],
            loaded["mean_ms"],
            loaded["lock_busy_U"],
            seq["infer_mean_ms"],
            loaded["infer_mean_ms"],
        )
    )
    verdicts.growth_is_queuing(onnx_sequential, onnx_concurrent, "onnx")
    verdicts.growth_is_queuing(pytorch_sequential, pytorch_concurrent, "pytorch")

# %% [markdown]
# ## 4.7 Two worker processes
# uvicorn can run the app in several **worker processes**, each with its own copy of the model and
# its share of the cores (cores ÷ workers threads each). A process is the unit that runs Python
# in parallel: one process runs one interpreter, which runs one thread of Python at a time, so
# the decoding, JSON and HTTP work of every request in it takes turns. A second process brings a
# second interpreter, a second lock and a second model: it serves in parallel as far as there are
# free cores to run it on, and costs its own memory (the model's weights, the framework) whether
# busy or not. Where the first worker already kept the cores busy, the second only takes turns
# with it.

# %%
# %%runs_in measure review
services.use_fastapi_backend("onnx", workers=2)
onnx_two_workers = measure(f"onnx_concurrent_{CONCURRENCY}_2_workers", N_CONCURRENT, CONCURRENCY)
row(onnx_two_workers)

# %% [markdown]
# **Decision 4.7: is the second worker's gain real?** A colleague says the difference between
# your one-worker and two-worker runs is noise: run them again and the order could flip. Each
# throughput below comes with its interval, the slowest and fastest of five equal spans of the
# run (a run is a sample of a busy machine, not one exact number). From your two rows, is the
# difference `"real"`, or could it be `"noise"`? Write your reason beside it, with the numbers
# you decided on.

# %%
# %%runs_in measure review
one_worker = loadgen.throughput(onnx_concurrent)
two_workers = loadgen.throughput(onnx_two_workers)
print(f"requests/s: one worker {one_worker}, two workers {two_workers}")
real = (
    ### BEGIN SOLUTION
    "real" if one_worker.hi < two_workers.lo or two_workers.hi < one_worker.lo else "noise"
    ### END SOLUTION
)
why_47 = """
### BEGIN SOLUTION
The slowest span of one run against the fastest of the other: whether they overlap.
### END SOLUTION
"""

# %%
# %%runs_in measure review
real = judgement.decide("4.7", real, why_47, one_worker, two_workers)

# %% [markdown]
# **What do you see, and why?** Compare this row with the one-worker run: throughput, median and
# `infer`. What on this machine decides how much a second copy helps? Write your answer between
# the quotes.

# %%
answer_47 = """
### BEGIN SOLUTION
(solved edition: the expected answer is in docs/answer_key.md, 4.7)
### END SOLUTION
"""

# %% jupyter={"source_hidden": true}
# %%runs_in measure review
with judgement.verdict_after(answer_47, "4.7"):
    verdicts.workers_share_the_cores(onnx_concurrent, onnx_two_workers)

# %%
# %%runs_in measure
services.use_fastapi_backend("pt")

# %% [markdown]
# ## 4.8 Exercise: latency against the number in flight (optional: homework when time is short)
# Measure the PyTorch service at a few concurrencies (change `LEVELS`), put the queueing
# model's prediction beside each, and plot both. Where does the measurement part from the model,
# and why? (Hint: what does the model assume about the time a request spends outside the queue?)

# %%
# %%runs_in measure review
LEVELS = [1, 4, CONCURRENCY]
base = loadgen.summarize(pytorch_sequential)
SERVICE_MS, OUTSIDE_MS = base["infer_median_ms"], base["median_ms"] - base["infer_median_ms"]
sweep = []
for n in LEVELS:
    label = f"exercise_c{n}"
    run = loadgen.run(f"{FASTAPI}/predict", payload, n=max(20, 6 * n), concurrency=n, label=label)
    measured = loadgen.summarize(run)["median_ms"]
    model_ms = queueing.closed_loop(n, SERVICE_MS, OUTSIDE_MS)["latency_ms"]
    sweep.append({"concurrency": n, "measured_median_ms": measured, "model_ms": model_ms})

# %%
# %%runs_in measure review
sweep = pd.DataFrame(sweep).round(1)
sweep.plot(
    x="concurrency",
    y=["measured_median_ms", "model_ms"],
    marker="o",
    title="PyTorch: latency vs in flight",
)
sweep

# %% [markdown]
# ## What you measured

# %%
# %%runs_in measure review
summary = pd.DataFrame([loadgen.summarize(run) for run in runs.values()])
summary.to_csv(OUT / "summary.csv", index=False)
plots.latency_throughput(summary, "FastAPI: runtimes, senders, workers").savefig(
    OUT / "fastapi_runs.png", dpi=110
)
plots.latency_breakdown(summary, "Where the median request's time goes").savefig(
    OUT / "fastapi_breakdown.png", dpi=110
)
claims.save(OUT)
summary.round(2)

# %% [markdown]
# **Hand in** `summary.csv`, the two plots, your predictions (`predictions.csv`), your decision
# with its reason (`decisions.csv`) and your answers above, and answer:
#
# 1. A colleague proposes a GPU twice as fast to fix the concurrent p99. Using the breakdown plot,
#    what would you answer?
# 2. On a machine with twice the cores, would the second worker's gain grow, shrink or stay the
#    same, and why?

# %%
passes.finish()
