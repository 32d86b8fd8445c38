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
# You have a Flask page and a FastAPI inference service (PyTorch first). In this notebook you
# will
#
# 1. call `/predict` by hand (Swagger) and from Python with a base64 image,
# 2. check the Flask UI end to end,
# 3. measure 100 **sequential** requests: median, p95, p99 and throughput,
# 4. switch the service to **ONNX Runtime** and measure again,
# 5. send 1000 requests from **16 concurrent senders** and see latency grow with *queuing*
#    while the model's own time does not,
# 6. end with one table and one plot of every run.
#
# Everything runs the same way in every setup (Chameleon + Docker, any CUDA host, or local mode
# with `make up`): the cells only read service URLs from environment variables.
#
# **About the model.** Unless your instructor gave you a trained checkpoint, the lab builds an
# *untrained* MobileNetV2 (seeded random weights). Its labels are arbitrary, but it does exactly
# the same computation as a trained one, so every latency and throughput number here is real.

# %%
import base64
import json
import re

import pandas as pd
import requests

from servelab import claims, food11, labenv, loadgen, plots
from servelab.paths import RESULTS, TEST_IMAGES

env = labenv.load()
print(json.dumps(env, indent=2))

# How many requests each run sends (make lab and the tests shrink these; defaults = the lab's).
N_SEQUENTIAL = labenv.param("N_SEQUENTIAL", 100)
N_CONCURRENT = labenv.param("N_CONCURRENT", 1000)
CONCURRENCY = labenv.param("CONCURRENCY", 16)
OUT = RESULTS / "fastapi"
OUT.mkdir(parents=True, exist_ok=True)
FASTAPI = labenv.url("FASTAPI_SERVER_URL")
FLASK = labenv.url("FLASK_SERVER_URL")
print(f"{N_SEQUENTIAL=} {N_CONCURRENT=} {CONCURRENCY=}; results go to {OUT}")

# %% [markdown]
# ## 4.1 Is the service up?
# `GET /health` answers 200 only once the model is loaded. It also says which runtime serves
# (`pytorch` or `onnx`), on which device, and whether the weights are trained.

# %%
health = labenv.wait_healthy(f"{FASTAPI}/health", timeout=300)
print(health)
if health["weights"] != "trained":
    print("\nNOTE: untrained weights - the predicted labels are arbitrary; the timings are real.")

# %% [markdown]
# ## 4.2 Try it in Swagger, then from Python
# Open the interactive API docs in your browser at the URL printed below (in Docker the service
# listens on the node only: open an SSH tunnel, `ssh -L 8000:127.0.0.1:8000 cc@<floating IP>`,
# and use `http://127.0.0.1:8000/docs`), expand **POST /predict**, press *Try it out* and
# *Execute*: the example body is a tiny valid PNG. Then the same call from Python, with one of
# the lab's test images:

# %%
print(f"Swagger UI: {FASTAPI}/docs")
openapi = requests.get(f"{FASTAPI}/openapi.json", timeout=10).json()
print("endpoints:", sorted(openapi["paths"]))

image_path = sorted(TEST_IMAGES.glob("*.jpg"))[0]
payload = {"image": base64.b64encode(image_path.read_bytes()).decode("ascii")}
resp = requests.post(f"{FASTAPI}/predict", json=payload, timeout=60)
print(f"POST {FASTAPI}/predict  ({image_path.name}, {len(payload['image']):,} base64 characters)")
print("status:", resp.status_code)
print("body:", resp.json())
print("Server-Timing:", resp.headers.get("Server-Timing"))

# %% [markdown]
# The `Server-Timing` header is the service telling you how long it spent **decoding** the
# image, **waiting** for the model (queue), and running the model (**infer**), in ms. Keep an
# eye on it: it lets you split a slow request into "the model is slow" and "the request waited".
#
# What happens with bad input? A service must answer with a clear 4xx and keep serving:

# %%
for name, body in [("not base64", {"image": "%%%"}), ("not an image", {"image": base64.b64encode(b"hello").decode()}),
                   ("empty", {"image": ""}), ("missing field", {"img": "..."})]:
    r = requests.post(f"{FASTAPI}/predict", json=body, timeout=30)
    print(f"{name:14s} -> {r.status_code}: {r.json()['detail'][:110]}")
assert requests.post(f"{FASTAPI}/predict", json=payload, timeout=60).status_code == 200, "service stopped serving"

# %% [markdown]
# ## 4.3 The Flask UI, end to end
# Open the Flask page (URL below; in Docker it is port 80 of your node), upload a photo and
# check you get a class and a probability. The cell does the same upload programmatically.

# %%
print(f"Flask UI: {FLASK}/")
with open(image_path, "rb") as f:
    page = requests.post(f"{FLASK}/predict", files={"file": (image_path.name, f, "image/jpeg")}, timeout=60)
label = re.search(r'class="label">([^<]+)<', page.text)
print("status:", page.status_code, "| label shown:", label.group(1) if label else None)
assert page.status_code == 200 and label and label.group(1) in food11.CLASSES

# %% [markdown]
# ## 4.4 Sequential requests, PyTorch
# One request at a time: each request's latency is its own work plus the HTTP round trip.
# Nothing ever waits for another request, so this is the service's best-case latency.

# %%
runs = {}


def measure(label: str, n: int, concurrency: int) -> dict:
    df = loadgen.run(f"{FASTAPI}/predict", payload, n=n, concurrency=concurrency, label=label)
    df.to_csv(OUT / f"requests_{label}.csv", index=False)
    runs[label] = df
    row = loadgen.summarize(df)
    print(pd.DataFrame([row]).round(2).to_string(index=False))
    return row


table = []
table.append(measure("pytorch_sequential", N_SEQUENTIAL, 1))

# %% [markdown]
# ## 4.5 Switch to the ONNX version and repeat
# The ONNX service has the same API; only the runtime differs (ONNX Runtime runs an optimised
# graph exported from the same PyTorch model). In Docker, run the command the next cell prints
# on the host (in the node's shell, from the repository's `docker/` folder); the cell waits until
# the service answers with ONNX Runtime. In local mode the cell restarts the service itself.

# %%
labenv.use_fastapi_backend("onnx")
table.append(measure("onnx_sequential", N_SEQUENTIAL, 1))

# %% [markdown]
# **What to notice.** Same model, same HTTP layer, same image: only the runtime changed, and the
# median latency dropped. The next cell checks that claim on your numbers.
#
# *Question:* which part of the `Server-Timing` changed between the two runs, and which did not?

# %%
pt_seq, onnx_seq = table[0], table[1]
claims.check("ONNX Runtime serves a request faster than PyTorch eager (sequential median)",
             onnx_seq["median_ms"] < pt_seq["median_ms"],
             {"pytorch_median_ms": pt_seq["median_ms"], "onnx_median_ms": onnx_seq["median_ms"],
              "speed-up": pt_seq["median_ms"] / onnx_seq["median_ms"]})

# %% [markdown]
# ## 4.6 Sixteen concurrent senders
# Now 16 clients send requests as fast as they get answers, 1000 requests in all. The service
# runs **one** model instance, so a request that arrives while the model is busy waits in line.

# %%
table.append(measure(f"onnx_concurrent_{CONCURRENCY}", N_CONCURRENT, CONCURRENCY))

# %% [markdown]
# And the same with PyTorch, to compare both runtimes under load:

# %%
labenv.use_fastapi_backend("pt")
table.append(measure(f"pytorch_concurrent_{CONCURRENCY}", N_CONCURRENT, CONCURRENCY))

# %% [markdown]
# **What to notice.** Under concurrency the client-side latency is many times the sequential
# latency, yet the model's own time per request (`infer`) grew far less (on a GPU it barely
# moves): the extra time is spent *waiting* (`queue`). Throughput can only rise as far as one
# model instance can go.
#
# *Question:* with one model instance taking *t* ms per request and 16 senders, roughly what
# median latency would you predict? Compare with the table.

# %%
conc = {r["run"]: r for r in table}
for runtime, seq in (("onnx", onnx_seq), ("pytorch", pt_seq)):
    c = conc[f"{runtime}_concurrent_{CONCURRENCY}"]
    claims.check(f"{runtime}: latency grows with {CONCURRENCY} concurrent senders (median at least 3x sequential)",
                 c["median_ms"] >= 3 * seq["median_ms"],
                 {"sequential_median_ms": seq["median_ms"], "concurrent_median_ms": c["median_ms"],
                  "ratio": c["median_ms"] / seq["median_ms"]})
    latency_growth = c["median_ms"] / seq["median_ms"]
    model_growth = c["infer_median_ms"] / seq["infer_median_ms"]
    claims.check(f"{runtime}: the growth is queuing, not the model (queue > infer, and latency grew "
                 "at least 3x more than the model's own time)",
                 c["queue_median_ms"] > c["infer_median_ms"] and latency_growth >= 3 * model_growth,
                 {"queue_median_ms": c["queue_median_ms"], "infer_median_ms": c["infer_median_ms"],
                  "latency_growth": latency_growth, "model_time_growth": model_growth},
                 needs="on a small CPU machine the 16 senders share the cores with the model, so its own "
                       "time grows a little too; on a GPU it stays flat")

# %% [markdown]
# ## 4.7 All runs: table and plot

# %%
summary = pd.DataFrame(table)
summary.to_csv(OUT / "summary.csv", index=False)
print(summary.round(2).to_string(index=False))

fig = plots.latency_throughput(summary, "FastAPI: PyTorch vs ONNX, sequential vs concurrent")
fig.savefig(OUT / "fastapi_runs.png", dpi=110)
fig2 = plots.latency_breakdown(summary, "Where the median request's time goes")
fig2.savefig(OUT / "fastapi_breakdown.png", dpi=110)
claims.save(OUT / "claims.csv")
print("saved:", sorted(p.name for p in OUT.iterdir()))

# %% [markdown]
# **What to hand in:** `summary.csv` and the two plots from the results folder, with one
# sentence per run explaining its latency.
#
# *Question:* a colleague proposes buying a GPU twice as fast to fix the concurrent p99. Using
# the breakdown plot, what would you answer, and what would you try first?
