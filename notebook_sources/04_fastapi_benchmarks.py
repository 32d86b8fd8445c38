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
# You have a Flask page and a FastAPI inference service (PyTorch first). A user who uploads a
# photo waits for three things: the HTTP round trip, the model's own computation, and, when other
# users are served at the same time, **waiting in line**. This notebook separates the three by
# measuring, one change at a time:
#
# | step | what you do | what it shows |
# |---|---|---|
# | 4.1-4.3 | call the service from Swagger and Python; the Flask page | the API; what a request's time is |
# | 4.4 | 100 sequential requests, PyTorch | the best-case latency |
# | 4.5 | the same with ONNX Runtime | a faster runtime, same HTTP layer |
# | 4.6 | 16 concurrent senders | queuing: latency grows, the model's time does not |
# | 4.7 | two worker processes | what a second copy of the model buys on this machine |
#
# **Predict, then measure.** Before each measurement you write down what you expect, as a number
# with one line of why, in the prediction cell. After it, a cell sets your prediction beside the
# measurement. Predictions that miss teach the most.
#
# **You write the lines that matter.** An exercise cell holds a blank, `...`, for you to replace:
# the request's body (4.2) and the function that sends one request and times it (4.4), which
# every measurement of this notebook then uses. The cell after each checks your answer before
# anything long runs, and says in one sentence what is missing. After each measurement, **What do
# you see, and why?** asks you to explain it in the answer cell; the lab's own verdict on the same
# numbers follows, folded (click to open it after you have written yours).
#
# **How the lab judges a claim.** Every number measured here comes with an interval: the 95%
# bootstrap interval of a median over the run's requests. A "what to notice" claim **holds** when
# the whole interval agrees with it, **does not hold** when the whole interval contradicts it, and
# is **inconclusive** when the interval straddles the line: noise could decide it, so the lab does
# not.
#
# **About the model.** Unless your instructor gave you a trained checkpoint, the lab builds an
# *untrained* MobileNetV2 (seeded random weights). Its labels are arbitrary, but it does exactly
# the same computation as a trained one, so every latency and throughput number here is real.
#
# ## Setup

# %%
import base64
import re
import time

import pandas as pd
import requests

from servelab import claims, exercises, food11, labenv, loadgen, plots, queueing
from servelab.paths import RESULTS, TEST_IMAGES

labenv.load()
FASTAPI, FLASK = labenv.url("FASTAPI_SERVER_URL"), labenv.url("FLASK_SERVER_URL")
# requests per run (`make lab QUICK=1` shrinks them)
N_SEQUENTIAL = labenv.param("N_SEQUENTIAL", 100)
N_CONCURRENT = labenv.param("N_CONCURRENT", 1000)
CONCURRENCY = labenv.param("CONCURRENCY", 16)
OUT = RESULTS / "fastapi"
OUT.mkdir(parents=True, exist_ok=True)
print(f"FastAPI at {FASTAPI}, Flask at {FLASK}; {N_SEQUENTIAL=} {N_CONCURRENT=} {CONCURRENCY=}")

# %% [markdown]
# ## 4.1 Is the service up?
# `GET /health` answers 200 only once the model is loaded. It also says which runtime serves
# (`pytorch` or `onnx`), on which device, in how many worker processes with how many threads each,
# and whether the weights are trained.

# %%
health = labenv.wait_healthy(f"{FASTAPI}/health", timeout=300)
health

# %% [markdown]
# ## 4.2 One request by hand
# Open the interactive API docs (`/docs`, URL below) in your browser: expand **POST /predict**,
# press *Try it out*, then *Execute*; the example body is a tiny valid PNG. In Docker the service
# listens on the node only, so open an SSH tunnel first (`ssh -L 8000:127.0.0.1:8000
# cc@<floating IP>`) and use `http://127.0.0.1:8000/docs`.
#
# Then the same call from Python, with one of the lab's test photos.
#
# **Exercise 4.2: the request's body.** `/predict` takes JSON with one field, `image`: the photo's
# file, bytes and all, as base64 text (JSON has no bytes). `image_path.read_bytes()` gives the
# file's bytes, `base64.b64encode(...)` turns bytes into base64 bytes, and `.decode("ascii")`
# makes those text. Replace the `...` with the dict the service expects.

# %%
print(f"Swagger UI: {FASTAPI}/docs")
image_path = sorted(TEST_IMAGES.glob("*.jpg"))[0]
payload = (
    ### BEGIN SOLUTION
    {"image": base64.b64encode(image_path.read_bytes()).decode("ascii")}
    ### END SOLUTION
)

# %%
exercises.result(
    payload,
    "4.2",
    "the body of a /predict request",
    check=lambda body: (
        isinstance(body["image"], str)
        and base64.b64decode(body["image"]) == image_path.read_bytes()
    ),
    hint='the service expects {"image": the file\'s bytes in base64, as text}',
    noun="the dict",
    where="the text above it says what it holds",
)
resp = requests.post(f"{FASTAPI}/predict", json=payload, timeout=60)
print(resp.status_code, resp.json())
print("Server-Timing:", resp.headers.get("Server-Timing"))

# %% [markdown]
# The `Server-Timing` header is the service telling you how long it spent **decoding** the
# photo, **waiting** for the model (`queue`), and running the model (`infer`), in ms. Keep an eye
# on it: it splits a slow request into "the model is slow" and "the request waited".
#
# A service must answer bad input with a clear 4xx and keep serving. Try a few:

# %%
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
# Open the Flask page (URL below; in Docker it is port 80 of your node), upload a photo and check
# you get a class and a probability. The cell does the same upload programmatically.

# %%
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
# One request at a time: each request's latency is its own work plus the HTTP round trip. Nothing
# ever waits for another request, so this is the service's best-case latency.
#
# **Predict.** From the `Server-Timing` of your request in 4.2, what median latency (ms) do you
# expect for 100 such requests in a row? Write the number and why.

# %%
claims.predict("4.4 PyTorch sequential median (ms)", None, why="")

# %% [markdown]
# **Exercise 4.4: send one request, time it, collect what came back.** This is the core of any
# load generator. Write the body of `send_one`: note the time (`time.perf_counter()`, seconds),
# send the request with the session (`session.post(url, json=payload, timeout=60)`: a session
# keeps the connection open between requests, as a browser does), note the time again, and
# return the four things its docstring names. The `Server-Timing` header is
# `resp.headers.get("Server-Timing")`.


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
with requests.Session() as session:
    record = exercises.function(
        send_one,
        "4.4",
        "send one request, time it, collect its status and Server-Timing",
        args=(session, f"{FASTAPI}/predict", payload),
        check=exercises.timed_request,  # its latency, against the server's own Server-Timing
    )
record

# %% [markdown]
# **Measure.** `loadgen.run` (in `servelab/loadgen.py`) calls your `send_one` from one sender, or
# from several at once, and keeps one row per request: its latency and the three parts of its
# `Server-Timing`. Each summary row also shows two laws that hold for any run: **U = X·S**
# (`lock_busy_U`: throughput × mean `infer`, how many model locks were busy on average) and
# **N = X·R** (`in_flight_N`: throughput × mean latency, how many requests were in flight on
# average: Little's law). 4.6 uses them.

# %%
runs = {}


def measure(label: str, n: int, concurrency: int) -> pd.DataFrame:
    """n requests from `concurrency` senders, each sent by your send_one; saves them and
    returns their summary row."""
    runs[label] = loadgen.run(
        f"{FASTAPI}/predict", payload, n=n, concurrency=concurrency, label=label, send=send_one
    )
    runs[label].to_csv(OUT / f"requests_{label}.csv", index=False)
    return pd.DataFrame([loadgen.summarize(runs[label])]).round(2)


measure("pytorch_sequential", N_SEQUENTIAL, 1)

# %%
claims.compare_prediction(
    "4.4 PyTorch sequential median (ms)", loadgen.median_ms(runs["pytorch_sequential"])
)

# %% [markdown]
# ## 4.5 Switch to ONNX Runtime
# The ONNX service has the same API and the same HTTP code; only the runtime differs: ONNX Runtime
# runs an optimised graph exported from the same PyTorch model.
#
# **Predict.** How many times faster (median) will ONNX Runtime serve a sequential request?

# %%
claims.predict("4.5 ONNX speed-up, sequential (x)", None, why="")

# %% [markdown]
# In Docker, run the command the next cell prints on the host, in the repository's `docker/`
# folder; the cell waits until the service answers with ONNX Runtime. In local mode the cell
# restarts the service itself.

# %%
labenv.use_fastapi_backend("onnx")
measure("onnx_sequential", N_SEQUENTIAL, 1)

# %% [markdown]
# **What do you see, and why?** Same model, same HTTP layer, same photo; only the runtime
# changed. Compare the two rows: the median latency, then the `infer` and the `decode` columns.
# Which part of a request's time did the runtime change, which did it not, and why is the
# end-to-end speed-up smaller than the runtime's own?
#
# **Your answer:** *(double-click this cell and write it here)*

# %% [markdown]
# The lab's verdict on your numbers (open it after you have written your answer):

# %% jupyter={"source_hidden": true}
speedup = loadgen.median_ms(runs["pytorch_sequential"]) / loadgen.median_ms(runs["onnx_sequential"])
claims.compare_prediction("4.5 ONNX speed-up, sequential (x)", speedup)
claims.at_least(
    "ONNX Runtime serves a sequential request faster than PyTorch eager (median speed-up)",
    speedup,
    1.0,
)

# %% [markdown]
# ## 4.6 Sixteen concurrent senders
# Now 16 clients send requests as fast as they get answers (a *closed loop*: a new request leaves
# as soon as one comes back). The service runs **one copy of the model in one Python process**,
# and the lab's code (`servelab/serving/inference_api.py`) puts a lock around it, so the model
# computes one request at a time; the others wait, and the time between a request's decoding and
# its turn at the model is the `queue` part of `Server-Timing`. Without the lock, 16 threads
# would still share one process's cores and Python interpreter: the lock makes the waiting
# visible instead of hiding it inside the model's time.
#
# **Predict.** One request's model time is *t* (the `infer` median of 4.5). With 16 requests
# always in flight and one at a time served, about how long does each one take (ms)?

# %%
claims.predict("4.6 ONNX median at 16 in flight (ms)", None, why="")

# %%
measure(f"onnx_concurrent_{CONCURRENCY}", N_CONCURRENT, CONCURRENCY)

# %%
claims.compare_prediction(
    "4.6 ONNX median at 16 in flight (ms)",
    loadgen.median_ms(runs[f"onnx_concurrent_{CONCURRENCY}"]),
)

# %% [markdown]
# **The queueing model's line.** `servelab/queueing.py` predicts this run from the sequential one.
# It sees the service as one station, the model behind its lock, with service time *S* = the mean
# `infer` of 4.5, and assumes two things: *S* stays the same under load, and everything else a
# request spends (decoding, JSON, HTTP) is a pure delay that every request gets at once, without
# waiting for anything. With *N* in flight, mean-value analysis then gives a latency of about
# *N* × *S* once the lock is always busy:

# %%
seq = loadgen.summarize(runs["onnx_sequential"])
outside = seq["mean_ms"] - seq["infer_mean_ms"]  # a pure delay, in the model
model = queueing.closed_loop(CONCURRENCY, seq["infer_mean_ms"], outside)
loaded = loadgen.summarize(runs[f"onnx_concurrent_{CONCURRENCY}"])
print(f"model:    {model['latency_ms']:6.1f} ms mean, {model['throughput_per_s']:5.0f} requests/s")
print(f"measured: {loaded['mean_ms']:6.1f} ms mean, {loaded['throughput_rps']:5.0f} requests/s")

# %% [markdown]
# **The laws beside the numbers.** Two laws hold for any run, whatever a model assumes. The
# utilisation law, **U = X·S**: throughput × mean service time = the share of time the lock was
# busy. Little's law, **N = X·R**: throughput × mean latency = the requests in flight on average;
# applied to the lock's queue alone (R = the mean `queue` time), it counts the requests waiting
# for the lock. Here is the arithmetic once, by hand; every summary row carries U and N.

# %%
X = loaded["throughput_rps"]  # requests per second
S = loaded["infer_mean_ms"] / 1000  # seconds holding the lock
R = loaded["mean_ms"] / 1000  # seconds from send to answer
W = runs[f"onnx_concurrent_{CONCURRENCY}"]["server_queue_ms"].mean() / 1000  # waiting for it
print(f"U = X·S = {X:.0f}/s × {S * 1000:.2f} ms = {X * S:.2f}  (share of time the lock was busy)")
print(f"N = X·R = {X:.0f}/s × {R * 1000:.1f} ms = {X * R:.1f}  (in flight; {CONCURRENCY} senders)")
print(f"X·W     = {X:.0f}/s × {W * 1000:.1f} ms = {X * W:.1f}  (waiting for the lock, on average)")

# %% [markdown]
# **What do you see, and why?** Compare the model's line with the measurement. Then read the
# laws: how busy was the lock, and how many requests were waiting for it at the same time? A
# request that is ready to run takes a free lock at once; what must the waiting requests have
# been waiting for, if the lock was free part of that time? Which of the model's two assumptions
# does this run break? (Look at `infer` too: sequential against loaded.)
#
# **Your answer:** *(double-click this cell and write it here)*

# %% [markdown]
# The lab's reading of the same numbers (open it after your answer):

# %% jupyter={"source_hidden": true}
print(
    queueing.model_miss(
        model["latency_ms"],
        loaded["mean_ms"],
        loaded["lock_busy_U"],
        seq["infer_mean_ms"],
        loaded["infer_mean_ms"],
    )
)

# %% [markdown]
# And the same with PyTorch, to compare both runtimes under load:

# %%
labenv.use_fastapi_backend("pt")
measure(f"pytorch_concurrent_{CONCURRENCY}", N_CONCURRENT, CONCURRENCY)

# %% [markdown]
# **What do you see, and why?** For each runtime, set the 16-sender row beside the sequential
# one: how many times did the median latency grow, and how many times the model's own time
# (`infer`)? Where did the rest of the time go (`queue`, `decode`)? Why can the throughput not
# keep rising with more senders here?
#
# **Your answer:** *(double-click this cell and write it here)*

# %% [markdown]
# The lab's verdict (open it after your answer):

# %% jupyter={"source_hidden": true}
for runtime in ("onnx", "pytorch"):
    sequential, loaded = runs[f"{runtime}_sequential"], runs[f"{runtime}_concurrent_{CONCURRENCY}"]
    latency_growth = loadgen.median_ms(loaded) / loadgen.median_ms(sequential)
    model_growth = loadgen.median_ms(loaded, "server_infer_ms") / loadgen.median_ms(
        sequential, "server_infer_ms"
    )
    claims.at_least(
        f"{runtime}: latency grows with {CONCURRENCY} senders (median at least 3x sequential)",
        latency_growth,
        3,
    )
    claims.at_least(
        f"{runtime}: the growth is queuing, not the model (latency grew at least 3x more than "
        "the model's own time)",
        latency_growth / model_growth,
        3,
    )

# %% [markdown]
# ## 4.7 Two worker processes
# uvicorn can run the app in several **worker processes**, each with its own copy of the model
# (and its own share of the cores: one worker's PyTorch or ONNX Runtime gets cores ÷ workers
# threads). Two workers serve two requests at once.
#
# **Predict.** With two workers on this machine, will the throughput at 16 senders rise, stay, or
# fall compared with one worker (ONNX)? Why, given how many cores the machine has?

# %%
claims.predict("4.7 two workers vs one, ONNX throughput (rise/stay/fall)", None, why="")

# %%
labenv.use_fastapi_backend("onnx", workers=2)
measure(f"onnx_concurrent_{CONCURRENCY}_2_workers", N_CONCURRENT, CONCURRENCY)

# %% [markdown]
# **What do you see, and why?** Compare this row with the one-worker run at the same load: the
# throughput, the median, and the `infer` column. Did a second copy of the model help, and what
# on this machine decides how much? (How many cores does it have, and who else uses them?)
#
# **Your answer:** *(double-click this cell and write it here)*

# %% [markdown]
# The lab's verdict (open it after your answer):

# %% jupyter={"source_hidden": true}
one = loadgen.summarize(runs[f"onnx_concurrent_{CONCURRENCY}"])["throughput_rps"]
two = loadgen.summarize(runs[f"onnx_concurrent_{CONCURRENCY}_2_workers"])["throughput_rps"]
claims.compare_prediction("4.7 two workers vs one, ONNX throughput (rise/stay/fall)", two / one)
claims.at_least(
    "two workers keep at least 80% of one worker's throughput (they share the cores, "
    "they do not fight over them)",
    claims.Measured.exact(two / one),
    0.8,
)
labenv.use_fastapi_backend("pt")

# %% [markdown]
# ## 4.8 Exercise: latency against the number in flight (optional: homework when time is short)
# Measure the PyTorch service at a few concurrencies (change `LEVELS`), put the queueing
# model's prediction beside each, and plot both. Where does the measurement part from the model,
# and why? (Hint: what does the model assume about the time a request spends outside the queue?)

# %%
LEVELS = [1, 4, CONCURRENCY]
base = loadgen.summarize(runs["pytorch_sequential"])
sweep = []
for n in LEVELS:
    row = loadgen.summarize(
        loadgen.run(
            f"{FASTAPI}/predict", payload, n=max(20, 6 * n), concurrency=n, label=f"exercise_c{n}"
        )
    )
    predicted = queueing.closed_loop(
        n, base["infer_median_ms"], base["median_ms"] - base["infer_median_ms"]
    )
    sweep.append(
        {
            "concurrency": n,
            "measured_median_ms": row["median_ms"],
            "model_ms": predicted["latency_ms"],
        }
    )
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
summary = pd.DataFrame([loadgen.summarize(df) for name, df in runs.items()])
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
# **Hand in** `summary.csv`, the two plots and your predictions table (`predictions.csv` in the
# results folder), with one sentence per run explaining its latency. Then answer:
#
# 1. Which part of `Server-Timing` changed between PyTorch and ONNX, and which did not?
# 2. With one model instance taking *t* ms per request and 16 senders, what latency did the
#    queueing model predict, what did you measure, and what explains the difference?
# 3. A colleague proposes buying a GPU twice as fast to fix the concurrent p99. Using the
#    breakdown plot, what would you answer, and what would you try first?
# 4. Why did a second worker help (or not) on this machine?
