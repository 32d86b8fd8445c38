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
# Notebook 4 ended with requests waiting in line for one copy of the model. Triton gives you the
# levers to shorten that line; here you pull them one at a time and measure each with
# **perf_analyzer**, Triton's load generator:
#
# | step | what you change | what to look for |
# |---|---|---|
# | 6.1 | nothing: the Python-backend model at 1, 8, 16 requests in flight | where the time goes |
# | 6.2 | one request carries 16 images | what a batch costs against one image |
# | 6.3 | 2, then 4 instances of the model on every GPU | what more copies buy, and where it ends |
# | 6.4 | the ONNX model, 1 then 2 instances per GPU | a faster runtime; the GPU's share |
# | 6.5 | Flask calls the ONNX model | pre- and post-processing move into the web app |
# | 6.6 | requests at a fixed rate, evenly or at random; dynamic batching | bursts, and batches |
#
# **You write the lines that are the lesson.** Each perf_analyzer line whose flag is what a step
# studies, each `config.pbtxt` change, one `curl` and one client call is an exercise: a cell with
# a blank, `...`, and before it a paragraph that says what to write and which flags or fields do
# it. The cell after it checks your answer in a second, before anything long runs, and says in
# one sentence what is missing, or which flag would change what the step measures. Once a line
# is right, the lab runs it exactly as you wrote it (`perf.run_line`, in `servelab/perf.py`): you
# see the command, perf_analyzer's own output, then one row the lab reads back from it and from
# Triton's statistics. A config change goes through `triton_config.edit`, which checks your text
# against Triton's own schema, shows the diff, writes it into the model repository and asks
# Triton to load the model again: nothing is rebuilt, the server keeps running. One change you
# make yourself, in an editor, on the file.
#
# **Predict, measure, explain**, as in notebook 4: a prediction cell before each experiment; after
# it, **What do you see, and why?** with an answer cell for you; then the lab's verdict on the same
# numbers, folded (open it once you have written yours). A verdict is *holds*, *does not hold* or
# *inconclusive* (the measurement's interval straddles the line: noise could decide it), or *not
# checked here* when this hardware cannot show it, with the reason.
#
# **Two laws beside every number.** Whatever a model of the server assumes, every run obeys two
# laws, and each row the lab prints carries both. The *utilisation law*, **U = X·S**: executions
# per second × the time of one execution = how busy each instance was (`busy_U`, 1.0 = never
# idle). *Little's law*, **N = X·R**: requests per second × mean latency = requests in flight on
# average (`in_flight_N`); with R = the time in Triton's queue it counts those waiting
# (`waiting_N`). A **queueing model** (`servelab/queueing.py`) then predicts each step from the
# step before; where its line misses the measurement by more than 30 %, the lab says which of the
# model's assumptions the run broke. The laws never miss: they are how you find out why the model
# did.
#
# **Your hardware decides the numbers.** The class's node has 2 GPUs (P100), and the instance steps
# put copies of the model on each of them. On a 1-GPU host they use the one; on a machine without
# a GPU every instance is a CPU instance, and claims only a GPU can show are *not checked here*.
# The lab's measured reference is a 1-GPU H100 node, whose numbers are in the answer key.
#
# **The core path fits your lease.** Its 18 measurements take about 7 minutes on a GPU node at
# the class's 5-second windows (estimated from the H100 reference's runs); the rest of the time is
# yours, to read, predict and answer. A few runs are **going further** (a light rate, the
# closed-loop batching curves, about 3 minutes more): they are skipped unless you set
# `GOING_FURTHER = 1` in the setup cell (or `LAB_GOING_FURTHER=1` in Jupyter's environment).
#
# ## Setup

# %%
import os

import numpy as np
import pandas as pd
import tritonclient.http as httpclient

from servelab import claims, exercises, labenv, perf, plots, queueing, triton_config, triton_stats
from servelab.paths import PERF_INPUT_JSON, RESULTS, model_repository_dir

labenv.load()
TRITON, GRPC, METRICS = labenv.triton_urls()
HOST = TRITON.split("://")[-1]  # perf_analyzer and tritonclient take host:port
PERF_INPUT = os.path.relpath(PERF_INPUT_JSON)  # a real JPEG, for the model that decodes it
REPOSITORY = model_repository_dir()
client = httpclient.InferenceServerClient(HOST)

# %% [markdown]
# How many GPUs the server sees decides where the instance steps put their copies; the class's
# node prints 2. The settings of this notebook follow.

# %%
N_GPUS = triton_stats.gpu_count(TRITON, METRICS)
GPUS = "[ " + ", ".join(str(i) for i in range(N_GPUS)) + " ]"  # "[ 0, 1 ]" on the class's node
GOING_FURTHER = labenv.param("GOING_FURTHER", 0)  # 1: also run the optional runs
ONE_INSTANCE = "instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 0 ] } ]"  # notebook 5's
OUT = RESULTS / "triton"
runs = {}  # name -> perf_analyzer run, for the summary at the end
print(f"Triton {client.get_server_metadata()['version']} at {HOST}; GPUs seen: {N_GPUS} {GPUS}")

# %% [markdown]
# Two runs, 6.3's and 6.6's, are also drawn live from Triton's metrics while they run (queue and
# compute time, inferences per second, utilisation). That view is `servelab/live_metrics.py`,
# arriving with another part of the lab: where it is not installed yet, the run goes without it
# and says so.

# %%
try:  # LIVE METRICS (issue 26): servelab/live_metrics.py; until it lands, runs go without it
    from servelab.live_metrics import Watch
except ImportError:
    Watch = None


def watched(line, name, model):
    """perf.run_line(line, name), with Triton's metrics drawn live while it runs."""
    if Watch is None:
        print("(live view not installed here: servelab/live_metrics.py; running without it)")
        return perf.run_line(line, name, out=OUT)
    live = Watch(METRICS, models=[model])
    tag = "".join(c if c.isalnum() else "_" for c in name)
    return live.during(lambda: perf.run_line(line, name, out=OUT), save=OUT / f"live_{tag}")


# %% [markdown]
# Both models start as notebook 5 left them: one instance, no dynamic batching.

# %%
for model in ("food_classifier", "food_classifier_onnx"):
    config = client.get_model_config(model)
    print(f"{model:22s} backend={config['backend']:12s} instances={config['instance_group']}")

# %% [markdown]
# ## Watch the hardware while you measure
# A table after a run says how busy a device was on average; watching it while the load runs
# shows how that average comes about. Open a terminal **on the node** (an SSH session, as in
# notebook 2; the Jupyter container has no GPU of its own) and leave one of these running through
# 6.1, 6.3 and 6.4:
#
# - `nvtop`: one bar per GPU (utilisation and memory) and the processes using each, live;
# - `nvidia-smi dmon -s u`: one line per GPU per second, `sm` being the share of time a kernel ran.
#
# In local mode without a GPU, watch the cores instead: `top`, then press `1` for one line per
# core (JupyterLab's *File → New → Terminal* runs on the same machine). Notice which device is busy
# during each run, and whether it is busy all the time or in bursts. The lab also samples Triton's
# own utilisation gauge during every run (twice a second) and plots it over time after 6.1 and 6.3.
#
# ## 6.1 One instance of the Python-backend model: 1, 8, 16 requests in flight
# The first line, written for you, with each flag:
#
# - `-m food_classifier`: the model to load; `-u {HOST}`: Triton's HTTP address (host:port);
# - `--concurrency-range 1`: keep 1 request in flight. This is a *closed loop*: a new request
#   leaves only when one comes back, like users who each wait for their answer;
# - `--input-data {PERF_INPUT}`: a real photo (a JSON file holding a JPEG), since random bytes are
#   no image.
#
# perf_analyzer measures in windows (the lab sets 5 s) until three in a row agree; the row is their
# mean.

# %%
line = f"perf_analyzer -m food_classifier -u {HOST} --concurrency-range 1 --input-data {PERF_INPUT}"
runs["6.1 c1"] = perf.run_line(line, "6.1 c1", out=OUT)

# %% [markdown]
# Read the output: `Client` is what perf_analyzer saw, `Server` what Triton measured inside: the
# *queue* (waiting for a free instance) and the *compute* (input, the model's `execute`, output).
# The last line is the lab's: the two laws for this run. Here they are once by hand, from the
# row's numbers (every later row carries them, computed the same way in `servelab/queueing.py`):

# %%
c1 = runs["6.1 c1"].row
X = c1["throughput_infer_s"]  # requests per second (one image each)
S = c1["execution_ms"]  # ms per execution of the model (Triton's statistics)
R = c1["avg_latency_ms"]  # ms from sending a request to its answer (perf_analyzer)
print(f"U = X·S = {X:.1f}/s × {S:.2f} ms = {X * S / 1000:.2f}  (share of time the instance ran)")
print(f"N = X·R = {X:.1f}/s × {R:.2f} ms = {X * R / 1000:.2f}  (requests in flight: 1 by design)")

# %% [markdown]
# With one request at a time, the instance can be idle only while an answer travels back to
# perf_analyzer and the next request travels in: `1 − U` is the share of that trip. How large was
# it here? Keep U in mind for what follows.
#
# **Predict.** With one instance, 16 requests in flight and the execution time you just read, how
# long will a request spend in Triton's queue (ms)? The queueing model's answer follows (mean-value
# analysis of one station with that service time, and the rest of a request's time as a delay).

# %%
claims.predict("6.1 queue at c16 (ms)", None, why="")

# %%
SERVICE_MS = c1["execution_ms"]
OVERHEAD_MS = c1["avg_latency_ms"] - SERVICE_MS  # everything a request spends outside the instance
pd.DataFrame([queueing.closed_loop(n, SERVICE_MS, OVERHEAD_MS) for n in (1, 8, 16)]).round(1)

# %% [markdown]
# **Exercise 6.1a: 8 requests in flight.** Write the perf_analyzer line that measures the same
# model with **8** requests in flight: the line above, with the one flag that sets the load
# changed. Write it as a Python f-string, so `{HOST}` and `{PERF_INPUT}` are filled in.

# %%
line_c8 = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier -u {HOST} --concurrency-range 8 --input-data {PERF_INPUT}"
    ### END SOLUTION
)

# %%
NEEDS_61 = {"-m": "food_classifier", "-u": HOST, "--input-data": PERF_INPUT}
line_c8 = exercises.perf_line(
    line_c8,
    "6.1",
    "the step measures 8 requests in flight",
    needs={**NEEDS_61, "--concurrency-range": "8"},
)
runs["6.1 c8"] = perf.run_line(line_c8, "6.1 c8", out=OUT)

# %% [markdown]
# **Exercise 6.1b: 16 in flight.** The same, with 16 requests in flight.

# %%
line = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier -u {HOST} --concurrency-range 16 --input-data {PERF_INPUT}"
    ### END SOLUTION
)

# %%
line = exercises.perf_line(
    line,
    "6.1",
    "the step measures 16 requests in flight",
    needs={**NEEDS_61, "--concurrency-range": "16"},
)
runs["6.1 c16"] = perf.run_line(line, "6.1 c16", out=OUT)

# %% [markdown]
# **Exercise 6.1c: Triton's own count, with `curl`.** Triton keeps statistics per model *version*
# too: `GET /v2/models/<name>/versions/<version>/stats`. Write the `curl` line that asks for those
# of version 1 of `food_classifier`, at the address in `TRITON`, and prints them one field per
# line (pipe it through `python -m json.tool`, as in 5.3). In what it prints, find
# `inference_stats.queue` (`count` requests, `ns` nanoseconds waited in all) and `batch_stats`.

# %%
stats_line = (
    ### BEGIN SOLUTION
    f"curl -s {TRITON}/v2/models/food_classifier/versions/1/stats | python -m json.tool"
    ### END SOLUTION
)

# %%
exercises.curl_line(
    stats_line,
    "6.1",
    "ask for version 1 of food_classifier's statistics",
    f"{TRITON}/v2/models/food_classifier/versions/1/stats",
)
# !{stats_line} | head -n 40

# %% [markdown]
# The three runs side by side, each with its laws, and the queueing model's mean latency beside
# the measured one (`measured_over_model` = 1 where they agree); then each run's utilisation over
# time, as Triton's gauge reported it (each GPU on its own, or all cores together where the server
# has no GPU).

# %%
table_61 = perf.against_model(
    perf.table(runs, ["6.1 c1", "6.1 c8", "6.1 c16"]),
    [queueing.closed_loop(n, SERVICE_MS, OVERHEAD_MS)["latency_ms"] for n in (1, 8, 16)],
)
plots.utilisation_over_time(
    {n: runs[n].utilisation for n in table_61.index}, "6.1: utilisation during each run"
)
table_61

# %% [markdown]
# **What do you see, and why?** Compare the three rows: how did throughput change from 1 to 16 in
# flight, and how did the queue time grow? From the laws: how busy was the instance at each
# load, and how many requests were waiting on average? Did the model's line hold, and if it missed,
# by how much? Then the device: on a GPU, how busy was it (your terminal, and the utilisation
# columns), while the instance was busy nearly all the time? What must the instance have been
# doing that is not GPU work? (Notebook 5 showed `model.py`.)
#
# **Your answer:** *(double-click this cell and write it here)*

# %% [markdown]
# The lab's verdict and its reading of the model's line (open it after your answer):

# %% jupyter={"source_hidden": true}
perf.model_readings(table_61, SERVICE_MS)
q8, q16 = runs["6.1 c8"].measured("server_queue_ms"), runs["6.1 c16"].measured("server_queue_ms")
claims.compare_prediction("6.1 queue at c16 (ms)", q16)
claims.between(
    "6.1: queue delay grows about linearly with what is in flight (queue c16 / c8)",
    q16 / q8,
    1.4,
    3.2,
)
triton_stats.claim_each_gpu(
    claims.at_most, "6.1: one instance leaves every GPU underused", runs["6.1 c16"], N_GPUS, 70
)

# %% [markdown]
# ## 6.2 Client-side batches: one request carrying 16 images
# perf_analyzer's `-b N` makes every request a batch of N photos (the model's config allows up to
# `max_batch_size: 16`). `model.py` decodes and resizes each of the N photos, one after another on
# the CPU, then runs **one** forward pass over all of them (notebook 5 showed the line). So a batch
# has two parts that scale differently: the decoding, paid once per image, and the forward pass,
# which on a GPU costs much less than N separate ones.
#
# **Predict.** How many times the execution time of one image will a batch of 16 take? Less than
# 16 means a batch costs less than its images one by one, and the same instance serves more
# images per second.

# %%
claims.predict("6.2 compute of 16 images / compute of 1 (x)", None, why="")

# %% [markdown]
# **Exercise 6.2: a batch of 16.** Write the line: the model, the address and the photo as in 6.1,
# **one** request in flight, and `-b 16`.

# %%
line = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier -u {HOST} --concurrency-range 1 -b 16 "
    f"--input-data {PERF_INPUT}"
    ### END SOLUTION
)

# %%
line = exercises.perf_line(
    line,
    "6.2",
    "the step sends batches of 16 images, one at a time",
    needs={**NEEDS_61, "-b": "16", "--concurrency-range": "1"},
)
runs["6.2 b16"] = perf.run_line(line, "6.2 b16", out=OUT)
perf.table(runs, ["6.1 c1", "6.2 b16"])

# %% [markdown]
# **What do you see, and why?** `throughput_infer_s` counts images. Set the two rows side by side:
# how many times longer did one execution take for 16 images, and how many more images per second
# did the instance serve? Which part of the execution grew with the batch, and which would have
# barely grown on this device? Was the instance busy (`busy_U`) in both runs?
#
# **Your answer:** *(double-click this cell and write it here)*

# %% [markdown]
# The lab's verdict (open it after your answer):

# %% jupyter={"source_hidden": true}
ratio = runs["6.2 b16"].measured("execution_ms") / runs["6.1 c1"].measured("execution_ms")
claims.compare_prediction("6.2 compute of 16 images / compute of 1 (x)", ratio)
claims.at_most(
    "6.2: a batch of 16 costs less than 16 images one by one (execution time, x)", ratio, 16
)

# %% [markdown]
# ## 6.3 More instances of the Python-backend model
# An `instance_group` says how many copies of the model Triton runs, and where. On a GPU:
#
# ```
# instance_group [ { count: 2, kind: KIND_GPU, gpus: [ 0, 1 ] } ]
# ```
#
# puts `count` copies **on each GPU listed** in `gpus`: on the class's 2-GPU node, 2 on GPU 0 and
# 2 on GPU 1, four in all. (Leave `gpus` out and Triton uses every GPU it sees; listing them says
# what you mean.) Each copy of a Python-backend model is its own process, a *stub*, with its own
# interpreter, so two copies decode and compute at the same time. Without a GPU the file says
# `kind: KIND_CPU` and has no `gpus`: `count` alone decides.
#
# **Exercise 6.3a: the edit, in an editor.** Open the model's `config.pbtxt` in JupyterLab (*File →
# Open from Path*, the path the next cell prints) or in `nano` on the node. In its `instance_group`
# set `count: 2` and list every GPU of your server in `gpus` (the cell prints the list), save, and
# run the cell after it: it shows your diff and checks it with Triton's schema.

# %%
path = REPOSITORY / "food_classifier" / "config.pbtxt"
before = path.read_text()
print(f"open {path}\nset count: 2" + (f" and gpus: {GPUS}" if N_GPUS else " (no GPU here)"))
### BEGIN HIDDEN TESTS
path.write_text(triton_config.replace_fields(before, triton_config.instance_group(2, N_GPUS)))
### END HIDDEN TESTS

# %%
print(
    exercises.file_edit(
        path,
        before,
        "6.3",
        "set the instance_group count to 2 on every GPU",
        needs=exercises.on_every_gpu(2, N_GPUS),
    )
)
print(triton_config.unload_model("food_classifier"))  # the new instances start from scratch

# %% [markdown]
# The file is changed; the server still runs the old config (the lab has just unloaded it, so
# every instance will start afresh with the new one). **Exercise 6.3b: load it, with the client
# library.** `client.load_model(model_name, headers=...)` asks Triton's repository API to load a
# model from the repository folder; that API wants the node's secret,
# `headers=labenv.admin_headers()`. Write the call for `food_classifier`.

# %%
loaded = (
    ### BEGIN SOLUTION
    client.load_model("food_classifier", headers=labenv.admin_headers())
    ### END SOLUTION
)

# %%
exercises.result(
    loaded,
    "6.3",
    "load food_classifier again",
    check=lambda _: client.is_model_ready("food_classifier"),
    hint="after load_model the model must be READY (client.is_model_ready)",
)
served = client.get_model_config("food_classifier")
print("Triton serves:", served["instance_group"])
print("instances per device:", triton_config.placement(served, N_GPUS))

# %% [markdown]
# **Count the processes.** On the node, run `nvidia-smi`: its last table, *Processes*, lists each
# process that holds a GPU. Find the `triton_python_backend_stub` lines: how many on each GPU, and
# does that match the placement the cell printed? (`nvtop` shows the same list.) In local mode this
# machine's process list is Triton's, and the next cell reads it; in Docker it says to look on the
# node.

# %%
stubs = triton_stats.python_stubs("food_classifier", REPOSITORY)
pd.DataFrame(stubs) if stubs is not None else "not visible from here: read nvidia-smi on the node"

# %% [markdown]
# Each instance also gets its share of the CPU for its own arithmetic: the `cpu_threads` parameter
# at the end of the config says `auto`, the machine's cores divided by the instances. Without that
# budget every instance would start a thread per core and, on a small machine, they would fight
# over the cores and serve *less* than one.
#
# **Predict.** At 8 requests in flight (your 6.1 line), what throughput will 2 instances per GPU
# serve against one instance (`6.1 c8`), as a factor? Think of what each instance needs to run.

# %%
claims.predict("6.3 throughput, 2 instances / 1 instance at c8 (x)", None, why="")

# %% [markdown]
# Your line of 6.1a, run again, with Triton's metrics drawn live while it runs:

# %%
runs["6.3 2 inst c8"] = watched(line_c8, "6.3 2 inst c8", "food_classifier")

# %% [markdown]
# **Exercise 6.3c: four per GPU.** Now a fragment instead of the editor: write the
# `instance_group` for **4** instances on every GPU of your server, as text in `config.pbtxt`
# syntax (the block shown above, changed). `GPUS` holds your server's list; in an f-string, write
# each literal brace twice (`{{`). The lab applies it with `triton_config.edit` and runs your 6.1a
# line again.

# %%
text = (
    ### BEGIN SOLUTION
    f"instance_group [ {{ count: 4, kind: KIND_GPU, gpus: {GPUS} }} ]"
    ### END SOLUTION
)

# %%
text = exercises.config_fragment(
    text, "6.3", "four instances on every GPU", needs=exercises.on_every_gpu(4, N_GPUS)
)
triton_config.edit("food_classifier", text)
runs["6.3 4 inst c8"] = watched(line_c8, "6.3 4 inst c8", "food_classifier")

# %%
names_63 = ["6.1 c8", "6.3 2 inst c8", "6.3 4 inst c8"]
plots.utilisation_over_time(
    {n: runs[n].utilisation for n in names_63},
    "6.3: utilisation with 1, 2 and 4 instances per device",
)
perf.table(runs, names_63)

# %% [markdown]
# **What do you see, and why?** How many times one instance's throughput did 2 and 4 instances
# per GPU serve, and what happened to the queue time? Read `busy_U` (each instance's share of busy
# time) and `instances`: were the instances the bottleneck, or something they share? Which device
# did your terminal show busy, and did every GPU take part? How many stub processes did
# `nvidia-smi` list, and where? What would you add next, and what would it need?
#
# **Your answer:** *(double-click this cell and write it here)*

# %% [markdown]
# The lab's verdict (open it after your answer):

# %% jupyter={"source_hidden": true}
t1, t2, t4 = (runs[name].throughput for name in names_63)
claims.compare_prediction("6.3 throughput, 2 instances / 1 instance at c8 (x)", t2 / t1)
claims.at_least(
    "6.3: two instances per device serve at least 80% of one's throughput", t2 / t1, 0.8
)
if N_GPUS:
    claims.at_least("6.3: on a GPU node, two instances per GPU serve more than one", t2 / t1, 1.0)
    triton_stats.claim_each_gpu(
        claims.at_least,
        "6.3: with 4 instances on it, every GPU works",
        runs["6.3 4 inst c8"],
        N_GPUS,
        10,
    )
else:
    claims.at_most(
        f"6.3: four instances on {os.cpu_count()} cores add little over the better of one and two",
        t4 / max(t1, t2, key=lambda m: m.value),
        1.15,
    )
reloaded = triton_config.edit("food_classifier", ONE_INSTANCE, verbose=False)

# %% [markdown]
# ## 6.4 The ONNX model
# `food_classifier_onnx` takes the already pre-processed tensor (`input`, FP32 [3, 224, 224]) and
# returns the 11 logits (`output`). On NVIDIA's Triton image it runs on Triton's onnxruntime
# backend: no Python in the request path. (Local mode's Triton has no such backend: there a small
# Python-backend model runs the same `model.onnx` with ONNX Runtime, under the same name.) Where the
# server ran it, on a GPU or on the CPU, the server says at the end of this step.
#
# perf_analyzer fills a tensor input with random numbers; it needs only its shape, without the
# batch dimension: `--shape input:3,224,224` (name, colon, dimensions).
#
# **Predict.** How many times the Python-backend model's throughput at 1 in flight (6.1 c1)?

# %%
claims.predict("6.4 ONNX / Python-backend throughput at c1 (x)", None, why="")

# %% [markdown]
# **Exercise 6.4a: one request in flight, a tensor input.** Write the line for
# `food_classifier_onnx`, 1 in flight, with `--shape` (no `--input-data`: the input is numbers).

# %%
line = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier_onnx -u {HOST} --concurrency-range 1 --shape input:3,224,224"
    ### END SOLUTION
)

# %%
NEEDS_64 = {"-m": "food_classifier_onnx", "-u": HOST, "--shape": "input:3,224,224"}
line = exercises.perf_line(
    line,
    "6.4",
    "the step measures the ONNX model, 1 in flight",
    needs={**NEEDS_64, "--concurrency-range": "1"},
)
runs["6.4 onnx c1"] = perf.run_line(line, "6.4 onnx c1", out=OUT)

# %% [markdown]
# **Exercise 6.4b: two instances on every GPU.** Write the `instance_group` fragment for 2
# instances of the ONNX model on every GPU of your server (as in 6.3c).

# %%
text = (
    ### BEGIN SOLUTION
    f"instance_group [ {{ count: 2, kind: KIND_GPU, gpus: {GPUS} }} ]"
    ### END SOLUTION
)

# %%
text = exercises.config_fragment(
    text, "6.4", "two ONNX instances on every GPU", needs=exercises.on_every_gpu(2, N_GPUS)
)
reloaded = triton_config.edit("food_classifier_onnx", text)

# %% [markdown]
# New instances answer their first requests slowly (memory to allocate, kernels to pick), and a
# measurement that starts cold mixes that in. **Exercise 6.4c: a bounded warm-up.** Write a line
# that sends exactly **100** requests at 8 in flight and stops: `--request-count 100` replaces the
# measurement windows with a fixed number of requests. The lab runs it and keeps nothing.

# %%
line = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier_onnx -u {HOST} --concurrency-range 8 "
    "--shape input:3,224,224 --request-count 100"
    ### END SOLUTION
)

# %%
line = exercises.perf_line(
    line,
    "6.4",
    "the warm-up sends 100 requests, 8 in flight",
    needs={**NEEDS_64, "--concurrency-range": "8", "--request-count": "100"},
)
warm_up = perf.run_line(line, "6.4 warm-up", out=OUT, verbose=False)

# %% [markdown]
# Then the lab measures 8 in flight on the warm instances. Its own runs of the ONNX model, this
# one and the rest of 6.6's rates, go through a small helper that writes the line you know with
# the load it is given, and keeps the run:


# %%
def onnx_run(load: str, name: str, verbose=False):
    """The lab's own runs of the ONNX model: `load` is perf_analyzer's flags for the load."""
    line = f"perf_analyzer -m food_classifier_onnx -u {HOST} --shape input:3,224,224 {load}"
    runs[name] = perf.run_line(line, name, out=OUT, verbose=verbose)
    return runs[name]


c8 = onnx_run("--concurrency-range 8", "6.4 onnx 2 inst c8", verbose=True)

# %% [markdown]
# The cell measured 8 in flight. **Exercise 6.4d: 16 in flight**, on the same two instances per
# GPU.

# %%
line = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier_onnx -u {HOST} --concurrency-range 16 "
    "--shape input:3,224,224"
    ### END SOLUTION
)

# %%
line = exercises.perf_line(
    line, "6.4", "the step measures 16 in flight", needs={**NEEDS_64, "--concurrency-range": "16"}
)
runs["6.4 onnx 2 inst c16"] = perf.run_line(line, "6.4 onnx 2 inst c16", out=OUT)

# %% [markdown]
# The three runs with their laws and the model's line: one station of the execution time measured
# at 1 in flight, with as many servers as there are instances.

# %%
onnx = runs["6.4 onnx c1"].row
ONNX_MS, ONNX_OUTSIDE_MS = onnx["execution_ms"], onnx["avg_latency_ms"] - onnx["execution_ms"]
names_64 = ["6.4 onnx c1", "6.4 onnx 2 inst c8", "6.4 onnx 2 inst c16"]
table_64 = perf.table(runs, names_64)
table_64 = perf.against_model(
    table_64,
    [
        queueing.closed_loop(n, ONNX_MS, ONNX_OUTSIDE_MS, servers=k)["latency_ms"]
        for n, k in zip((1, 8, 16), table_64["instances"])
    ],
)
table_64

# %% [markdown]
# **What do you see, and why?** Against the Python-backend model at 1 in flight, how many times
# the throughput, and why (what does this model not do per request)? With two instances per GPU:
# how busy was each instance (`busy_U`), and how many requests waited at 8 and at 16 in flight
# (`waiting_N`)? Did the execution time stay what it was at 1 in flight? Where the model's line
# misses, which of its assumptions does the row show broken? Which device did your terminal show
# busy?
#
# **Your answer:** *(double-click this cell and write it here)*

# %% [markdown]
# The lab's verdict (open it after your answer): where the server ran the model, as the server
# says (its metrics, or the instance kind of Triton's own onnxruntime backend), and the rest.

# %% jupyter={"source_hidden": true}
perf.model_readings(table_64, ONNX_MS)
speedup = runs["6.4 onnx c1"].throughput / runs["6.1 c1"].throughput
claims.compare_prediction("6.4 ONNX / Python-backend throughput at c1 (x)", speedup)
claims.at_least(
    "6.4: the ONNX model serves faster than the Python-backend model at c1", speedup, 1.0
)
claims.at_least(
    "6.4: with 2 instances per device, requests still queue at 16 in flight (queue c16 / c8)",
    runs["6.4 onnx 2 inst c16"].measured("server_queue_ms")
    / runs["6.4 onnx 2 inst c8"].measured("server_queue_ms"),
    1.0,
)
provider = triton_stats.onnx_provider("food_classifier_onnx", TRITON, METRICS)
print(f"the server ran food_classifier_onnx with {provider}")
if provider == "CUDAExecutionProvider" or not N_GPUS:
    triton_stats.claim_each_gpu(
        claims.at_least,
        "6.4: every GPU is busy more than half the time",
        runs["6.4 onnx 2 inst c16"],
        N_GPUS,
        50,
    )
else:
    claims.not_checkable(
        "6.4: every GPU is busy more than half the time",
        f"the server ran the ONNX model with {provider}, not on a GPU",
    )

# %% [markdown]
# ## 6.5 The Flask UI with the ONNX model
# The ONNX model expects a tensor, not a photo, so the web app must now do the pre-processing
# (decode, resize, normalise) and the post-processing (softmax, class name) itself, with the same
# shared module (`servelab/food11.py`) the services use, and call Triton through `tritonclient`
# (`flask_app/backends.py`). Switch Flask to that model; in Docker, run the printed command on the
# host.

# %%
import re

import requests

from servelab import food11
from servelab.paths import TEST_IMAGES

labenv.use_flask_triton_model("food_classifier_onnx")
photo = sorted(TEST_IMAGES.glob("*.jpg"))[0]
with open(photo, "rb") as f:
    page = requests.post(
        f"{labenv.url('FLASK_SERVER_URL')}/predict", files={"file": (photo.name, f)}, timeout=60
    )
flask_label = (re.search(r'class="label">([^<]+)<', page.text) or [None, None])[1]
print(f"Flask page (ONNX model, pre/post-processing in Flask): {flask_label}, {page.status_code}")

# %% [markdown]
# The Python-backend model, asked directly through the client library (your `classify` of 5.2,
# written out again here), should name the same class:

# %%
image = httpclient.InferInput("INPUT_IMAGE", [1, 1], "BYTES")
image.set_data_from_numpy(np.array([[food11.encode_file(photo).encode()]], dtype=np.object_))
direct = client.infer("food_classifier", [image]).as_numpy("FOOD_LABEL")[0][0].decode()
claims.fact(
    "6.5: Flask with the ONNX model shows the same class as the Python-backend model",
    page.status_code == 200 and flask_label == direct,
    {"flask_onnx": flask_label, "python_backend": direct},
)

# %% [markdown]
# ## 6.6 Bursty load, and dynamic batching
# Real users do not wait for each other's answers: they arrive when they arrive. perf_analyzer
# can send requests at a fixed **rate**, an *open loop*:
#
# - `--request-rate-range R` sends R requests per second on schedule, whether or not earlier ones
#   came back;
# - `--async` lets a few threads keep any number of requests in flight, so the schedule holds
#   (perf_analyzer counts the requests it sent late; the lab flags a run where more than 5 % left
#   late: that run was not the load it claims);
# - `--request-distribution constant` spaces them evenly; `poisson` sends them at random moments
#   with the same mean rate, as independent users do.
#
# **Served against offered.** In a rate run the load is what you *offer*; the throughput column is
# what was *served*: answers that came back within a measurement window, per second. The two can
# differ with nothing sent late. When the instance cannot keep up, requests still leave on time
# and the queue grows for as long as the run lasts: served stays at what the instance can do, and
# the latency is then the run's length, not the server's. And with random arrivals the number
# that arrives in one window is itself random (about ±√n for n expected): short windows at a low
# rate read a few percent off either way. Read a rate run's throughput against its offered rate,
# and its latency against its utilisation.
#
# 6.6 uses **one** instance of the ONNX model, so a single queue decides everything. **Exercise
# 6.6a: back to one instance.** Write the `instance_group` for **one** instance on GPU 0.

# %%
text = (
    ### BEGIN SOLUTION
    "instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 0 ] } ]"
    ### END SOLUTION
)

# %%
text = exercises.config_fragment(
    text,
    "6.6",
    "one instance on the first GPU",
    needs=exercises.on_first_gpu(1, N_GPUS),
)
reloaded = triton_config.edit("food_classifier_onnx", text)

# %% [markdown]
# The rates are set from what this one instance can serve, so they mean the same on every
# machine. Its **capacity** is measured, not assumed: kept busy by 4 requests in flight (closed
# loop) it never waits for work, so its throughput is the most it serves, and 1000 / capacity is
# its time per request when busy.

# %%
CAPACITY = onnx_run("--concurrency-range 4", "6.6 capacity c4").throughput.value
BUSY_MS = 1000 / CAPACITY  # time per request of an instance that never waits for work
RATES = [int(f * CAPACITY) for f in (0.6, 1.0, 1.4)]  # offered loads: 60 %, 100 %, 140 %
RATE = RATES[0]
print(
    f"one instance: {CAPACITY:.0f} requests/s ({BUSY_MS:.2f} ms each when busy, {ONNX_MS:.2f} "
    f"ms one at a time); the rates of 6.6: {RATES}"
)

# %% [markdown]
# **Predict.** At the first rate (60 % of capacity), evenly spaced or Poisson: which queues more,
# and how many times more? For Poisson arrivals and a constant service time, the model's mean wait
# at 60 % load is 0.75 service times; evenly spaced requests, each done before the next comes,
# wait for nothing.

# %%
claims.predict("6.6 queue, Poisson / constant at 60% load (x)", None, why="")

# %% [markdown]
# **Exercise 6.6b: evenly spaced.** Write the line that offers `RATE` requests per second to
# `food_classifier_onnx`, evenly spaced, asynchronously (the `--shape` as in 6.4).

# %%
line = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier_onnx -u {HOST} --shape input:3,224,224 --async "
    f"--request-rate-range {RATE} --request-distribution constant"
    ### END SOLUTION
)

# %%
NEEDS_66 = {**NEEDS_64, "--async": None, "--request-rate-range": RATE}
line = exercises.perf_line(
    line,
    "6.6",
    f"the step offers {RATE} requests/s, evenly spaced",
    needs={**NEEDS_66, "--request-distribution": "constant"},
)
runs[f"6.6 constant {RATE}/s"] = perf.run_line(line, f"6.6 constant {RATE}/s", out=OUT)

# %% [markdown]
# **Exercise 6.6c: at random moments.** The same rate, Poisson arrivals.

# %%
line_poisson = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier_onnx -u {HOST} --shape input:3,224,224 --async "
    f"--request-rate-range {RATE} --request-distribution poisson"
    ### END SOLUTION
)

# %%
line_poisson = exercises.perf_line(
    line_poisson,
    "6.6",
    f"the step offers {RATE} requests/s at random moments",
    needs={**NEEDS_66, "--request-distribution": "poisson"},
)
runs[f"6.6 poisson {RATE}/s"] = perf.run_line(line_poisson, f"6.6 poisson {RATE}/s", out=OUT)

# %% [markdown]
# Both runs with their laws, and the model's mean latency: the service time `BUSY_MS`, plus the
# time a request spent outside the instance at 1 in flight in 6.4, plus the wait (M/D/1 for
# Poisson arrivals and a constant service time; none for evenly spaced arrivals):

# %%
names = [f"6.6 constant {RATE}/s", f"6.6 poisson {RATE}/s"]
table_66 = perf.against_model(
    perf.table(runs, names),
    [
        queueing.open_loop(RATE, BUSY_MS, ONNX_OUTSIDE_MS, poisson=p)["latency_ms"]
        for p in (False, True)
    ],
)
table_66

# %% [markdown]
# **What do you see, and why?** Which run queued more, and how many times more? How busy was the
# instance (`busy_U`), and how many requests were waiting on average (`waiting_N`)? Did the
# evenly spaced requests wait, and how does their wait compare with the model's for Poisson
# arrivals? Look at p99 against the median (`p50_ms`): what does a long tail do to requests that
# arrive on schedule behind it? Was the served rate the offered one?
#
# **Your answer:** *(double-click this cell and write it here)*

# %% [markdown]
# The lab's verdict (open it after your answer):

# %% jupyter={"source_hidden": true}
perf.model_readings(table_66, BUSY_MS, open_loop=True)
poisson, constant = (runs[name] for name in reversed(names))
queues = poisson.measured("server_queue_ms") / constant.measured("server_queue_ms")
claims.compare_prediction("6.6 queue, Poisson / constant at 60% load (x)", queues)
claims.at_least(
    "6.6: Poisson arrivals queue more than evenly spaced ones at the same mean rate", queues, 1.0
)
claims.at_most(
    "6.6: both runs were the open-loop load they claim (% of requests sent late)",
    max(poisson.row["delayed_pct"], constant.row["delayed_pct"]),
    perf.DELAYED_LIMIT_PCT,
)

# %% [markdown]
# Now **dynamic batching**: when requests wait, Triton hands them to the model together, up to
# `max_batch_size`. In `config.pbtxt` it is one top-level block, `dynamic_batching { ... }`, and
# two of its fields matter here: `preferred_batch_size`, the batch sizes Triton aims for (a list,
# written `[ 4, 6, 8 ]`), and `max_queue_delay_microseconds`, how long a request may be held for
# company when no preferred size is ready. Inside a block each field is `name: value`, on a line
# of its own or separated by spaces.
#
# A batch size is also a tensor *shape*, and a GPU runtime may prepare its kernels per shape.
# ONNX Runtime's CUDA provider rebuilds its convolution plans whenever the batch size changes: on
# the lab's H100, one session fed mixed sizes took 1.2 s a batch, the same sizes grouped 2.8 ms.
# So on a GPU this model keeps one session per batch size (1, 2, 4, 8, 16 and each preferred
# size) and pads a batch up to the nearest: mixed sizes then cost 1.04x grouped. A few sizes
# prepared in advance is also why `preferred_batch_size` and TensorRT's optimisation profiles
# exist.
#
# **Exercise 6.6d: turn it on.** Write the block with preferred sizes 4, 6 and 8, and a delay of at
# most 100 µs.

# %%
batching = (
    ### BEGIN SOLUTION
    """
dynamic_batching {
  preferred_batch_size: [ 4, 6, 8 ]
  max_queue_delay_microseconds: 100
}
"""
    ### END SOLUTION
)

# %%
batching = exercises.config_fragment(
    batching,
    "6.6",
    "dynamic batching, preferred 4, 6, 8, at most 100 µs",
    needs={
        "dynamic_batching.preferred_batch_size": [4, 6, 8],
        "dynamic_batching.max_queue_delay_microseconds": 100,
    },
)
reloaded = triton_config.edit("food_classifier_onnx", batching)

# %% [markdown]
# Your Poisson line again, now with batching on, drawn live; then how many executions ran with each
# batch size during it, from Triton's statistics (read before and after the run):

# %%
before = triton_stats.model_stats("food_classifier_onnx", TRITON)
runs[f"6.6 batching poisson {RATE}/s"] = watched(
    line_poisson, f"6.6 batching poisson {RATE}/s", "food_classifier_onnx"
)
after = triton_stats.model_stats("food_classifier_onnx", TRITON)
triton_stats.batch_table(triton_stats.stats_delta(before, after))

# %% [markdown]
# To predict what batching does at higher rates, the queueing model needs the cost of a batch.
# **Exercise 6.6e: a batch of 8.** Write the line for one request of 8 tensors at a time
# (`-b 8`, 1 in flight). The model then draws a line through two points, one image (`BUSY_MS`) and
# eight, for the service time of a batch of *b*: `fixed + per image × b`.

# %%
line = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier_onnx -u {HOST} --concurrency-range 1 -b 8 "
    "--shape input:3,224,224"
    ### END SOLUTION
)

# %%
line = exercises.perf_line(
    line,
    "6.6",
    "the step sends batches of 8, one at a time",
    needs={**NEEDS_64, "-b": "8", "--concurrency-range": "1"},
)
runs["6.6 b8"] = perf.run_line(line, "6.6 b8", out=OUT, verbose=False)
B8_MS = runs["6.6 b8"].row["execution_ms"]
# both measured one request at a time; under load each takes BUSY_MS / ONNX_MS times as long
SERVICE = queueing.ServiceTime.from_two_batches(1, BUSY_MS, 8, B8_MS * BUSY_MS / ONNX_MS)
print(
    f"a batch of 8 costs {B8_MS / ONNX_MS:.1f}x one image; service time of a batch of b: "
    f"{SERVICE.fixed_ms:.2f} + {SERVICE.per_item_ms:.2f} x b ms; capacity with batches of 8: "
    f"{queueing.saturation_rate(SERVICE, max_batch=8):.0f}/s (without batching {CAPACITY:.0f}/s)"
)

# %% [markdown]
# Whether batching lifts capacity depends on that one number, a batch's cost against its images
# one by one, not on the kind of device: a batch of 8 that costs 8 times one image serves no more
# images per second, one that costs 4 times serves twice as many.
#
# **Predict.** At the highest rate (140 % of capacity without batching), what mean latency (ms)
# do you expect with dynamic batching? And without it?

# %%
claims.predict("6.6 mean latency at 140% of capacity, with batching (ms)", None, why="")

# %% [markdown]
# **Exercise 6.6f: the highest rate.** Write the Poisson line at `RATES[-1]` requests per second
# (batching is on). The lab then runs the other rates, turns batching off and runs them again, so
# the sweep's rows are parsed for you; your Poisson run at 60 % without batching is the sweep's
# first row without batching.

# %%
line = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier_onnx -u {HOST} --shape input:3,224,224 --async "
    f"--request-rate-range {RATES[-1]} --request-distribution poisson"
    ### END SOLUTION
)

# %%
line = exercises.perf_line(
    line,
    "6.6",
    f"the step offers {RATES[-1]} requests/s, Poisson",
    needs={**NEEDS_66, "--request-rate-range": RATES[-1], "--request-distribution": "poisson"},
)
runs[f"6.6 batching poisson {RATES[-1]}/s"] = watched(
    line, f"6.6 batching poisson {RATES[-1]}/s", "food_classifier_onnx"
)

# %%
POISSON = "--async --request-distribution poisson --request-rate-range"  # then the rate
onnx_run(f"{POISSON} {RATES[1]}", f"6.6 batching poisson {RATES[1]}/s")
triton_config.edit("food_classifier_onnx", remove=("dynamic_batching",), verbose=False)
for rate in RATES[1:]:
    onnx_run(f"{POISSON} {rate}", f"6.6 no batching poisson {rate}/s")

# %% [markdown]
# The sweep, each row with its laws and the queueing model's mean latency: M/D/1 without batching,
# and with batching the model of `servelab/queueing.py` (an instance that is never idle runs what
# arrived during its last batch; the model's line ends where it saturates):

# %%
NO_BATCHING = {
    RATE: f"6.6 poisson {RATE}/s",
    **{r: f"6.6 no batching poisson {r}/s" for r in RATES[1:]},
}
BATCHING = {r: f"6.6 batching poisson {r}/s" for r in RATES}
sweep = pd.concat(
    [
        perf.table(runs, list(BATCHING.values())).assign(config="dynamic batching"),
        perf.table(runs, list(NO_BATCHING.values())).assign(config="no batching"),
    ]
)
sweep["rate"] = sweep["request_rate"]
sweep = perf.against_model(
    sweep,
    [
        queueing.open_loop_batching(r, SERVICE, 8, 0.1, ONNX_OUTSIDE_MS)["latency_ms"]
        if c == "dynamic batching"
        else queueing.open_loop(r, BUSY_MS, ONNX_OUTSIDE_MS)["latency_ms"]
        for r, c in zip(sweep.rate, sweep.config)
    ],
)
plots.measured_vs_model(
    sweep,
    "rate",
    "avg_latency_ms",
    "config",
    "model_ms",
    "One instance, Poisson arrivals: mean latency vs offered rate",
    "offered rate (requests/s)",
    "mean latency (ms)",
    logy=True,
).savefig(OUT / "latency_vs_rate.png", dpi=110)
sweep

# %% [markdown]
# **What do you see, and why?** Start with the highest rate: without batching, what was served
# against what was offered, and what happened to the latency? With batching, how large were the
# batches (`avg_batch_size`), what was served, and how busy was the instance? Then the lowest rate:
# did batching change anything there, and could it? Finally the model: where does its line sit
# against the measured one, at each rate, and which of its assumptions do the rows show broken
# (compare `execution_ms` with the model's service time of a batch of that size, and p99 with the
# median)?
#
# **Your answer:** *(double-click this cell and write it here)*

# %% [markdown]
# The lab's verdict, and its reading of each row against the model (open it after your answer):

# %% jupyter={"source_hidden": true}
perf.model_readings(
    sweep,
    [
        SERVICE(b) if c == "dynamic batching" else BUSY_MS
        for b, c in zip(sweep.avg_batch_size, sweep.config)
    ],
    open_loop=True,
)
with_b, without = runs[BATCHING[RATES[-1]]], runs[NO_BATCHING[RATES[-1]]]
claims.at_least(
    "6.6: with dynamic batching the model ran batches of more than one request (top rate)",
    with_b.row["avg_batch_size"],
    1.05,
)
claims.at_most(
    "6.6: every rate run was the open-loop load it claims (% of requests sent late)",
    float(sweep["delayed_pct"].max()),
    perf.DELAYED_LIMIT_PCT,
)
claims.compare_prediction(
    "6.6 mean latency at 140% of capacity, with batching (ms)", with_b.measured("avg_latency_ms")
)
claims.at_most(
    "6.6: at 60% load requests rarely wait, so batches stay small (mean batch)",
    runs[BATCHING[RATE]].row["avg_batch_size"],
    1.5,
)
# %% jupyter={"source_hidden": true}
gain = queueing.saturation_rate(SERVICE, max_batch=8) / CAPACITY  # what batches of 8 can lift
claims.given(
    {  # the lesson's premises, each read from this run
        f"{os.cpu_count()} cores: perf_analyzer and the batches share the model's cores": (
            provider == "CUDAExecutionProvider" or (os.cpu_count() or 1) >= 8
        ),
        f"a batch of 8 costs {B8_MS / ONNX_MS:.1f}x one image: "
        f"batching lifts capacity {gain:.1f}x": gain >= 1.6,
        "without batching the instance kept up: this run did not overload it": (
            without.row["throughput_infer_s"] < 0.9 * RATES[-1]
            or without.row["avg_latency_ms"] > 5 * BUSY_MS
        ),
    },
    claims.at_least,
    "6.6: at 140% of capacity, batching keeps mean latency far below none",
    without.measured("avg_latency_ms") / with_b.measured("avg_latency_ms"),
    2,
)

# %% [markdown]
# ## Going further (optional)
# Skipped unless `GOING_FURTHER = 1` (setup cell) or `LAB_GOING_FURTHER=1`; about 3 minutes of
# runs on a GPU node. Two more views of the same instance: a light rate (40 % of capacity) with
# and without batching, to see where batching has nothing to batch; and the closed loop,
# throughput against 1, 4 and 16 requests in flight, batching on and off, each with the model's
# prediction (mean-value analysis) beside it.

# %%
if GOING_FURTHER:
    light = int(0.4 * CAPACITY)
    onnx_run(f"{POISSON} {light}", f"6.6 no batching poisson {light}/s")
    triton_config.edit("food_classifier_onnx", batching, verbose=False)  # your block of 6.6d
    onnx_run(f"{POISSON} {light}", f"6.6 batching poisson {light}/s")
    print(perf.table(runs, [f"6.6 {b}batching poisson {light}/s" for b in ("no ", "")]))

# %%
closed = []
for on in (True, False) if GOING_FURTHER else ():
    triton_config.edit(
        "food_classifier_onnx",
        batching if on else "",
        remove=() if on else ("dynamic_batching",),
        verbose=False,
    )
    for n in (1, 4, 16):
        run = onnx_run(f"--concurrency-range {n}", f"6.6 {'' if on else 'no '}batching c{n}")
        model = (
            queueing.closed_loop_batching(n, SERVICE, 16, ONNX_OUTSIDE_MS)
            if on
            else queueing.closed_loop(n, ONNX_MS, ONNX_OUTSIDE_MS)
        )
        closed.append(
            {
                "config": f"{'' if on else 'no '}batching",
                "concurrency": n,
                "throughput_infer_s": run.row["throughput_infer_s"],
                "model_throughput": model["throughput_per_s"],
            }
        )
if closed:
    plots.measured_vs_model(
        pd.DataFrame(closed),
        "concurrency",
        "throughput_infer_s",
        "config",
        "model_throughput",
        "ONNX model, one instance: closed loop",
        "requests in flight",
        "inferences / s",
    ).savefig(OUT / "throughput_vs_concurrency.png", dpi=110)

# %% [markdown]
# ## Exercise: your own client (optional: homework when time is short)
# perf_analyzer is one client; write another. With `tritonclient.http.aio` (the asyncio flavour of
# the same library), keep *N* requests in flight for a few seconds and count the answers, then
# compare with perf_analyzer's throughput on the same configuration: the ONNX model is back to one
# instance without batching, as in `6.4 onnx c1`, so start with `N = 1`. Change `N`; explain any
# difference (who does the work of sending, and with how many threads?).

# %%
import asyncio
import time

import tritonclient.http.aio as aioclient


async def keep_in_flight(n: int, seconds: float) -> float:
    """Inferences per second with n requests always in flight, for `seconds`."""
    aio = aioclient.InferenceServerClient(HOST)
    tensor = aioclient.InferInput("input", [1, 3, 224, 224], "FP32")
    tensor.set_data_from_numpy(np.random.rand(1, 3, 224, 224).astype(np.float32))
    done, stop = 0, time.perf_counter() + seconds

    async def sender():
        nonlocal done
        while time.perf_counter() < stop:
            await aio.infer("food_classifier_onnx", [tensor])
            done += 1

    await asyncio.gather(*(sender() for _ in range(n)))
    await aio.close()
    return done / seconds


# %%
N = 1
mine = await keep_in_flight(N, 3.0)  # noqa: F704 - a notebook cell may await
theirs = runs["6.4 onnx c1"].row["throughput_infer_s"]
print(f"my client, {N} in flight: {mine:.0f}/s; perf_analyzer, 1 in flight: {theirs:.0f}/s")

# %% [markdown]
# ## What you measured
# Each step changed one thing and kept the rest of the perf_analyzer line as it was. 6.1 found
# where one instance's time goes; 6.2 what a batch costs against its images; 6.3 what more copies
# buy while there is hardware to run them; 6.4 what a runtime without Python per request buys,
# and what two of them cost each other; 6.6 what random arrivals cost, and what batching gives
# back at the rates where requests wait anyway. In every step the utilisation law said whether
# the instances were the bottleneck (`busy_U` near 1) or idle part of the time, Little's law how
# many requests were waiting, and so how much of the latency was the queue; and where the
# queueing model missed, the rows said which of its simplifications the run broke: an execution
# time that grows when instances share cores, one that varies (a long tail), or work per request
# that the model does not count.
#
# The table holds every run of this notebook with its laws; the plots split each run's latency
# into queue, compute and the rest, count the batch sizes Triton ran in 6.6, and show each
# device's utilisation over time during the instance steps.

# %%
rows = pd.DataFrame([{"run": n, "step": n.split()[0], **r.row} for n, r in runs.items()])
rows.drop(columns="step").to_csv(OUT / "summary.csv", index=False)
plots.latency_split_stacked(rows, "Average latency: queue / compute / network").savefig(
    OUT / "latency_split.png", dpi=110
)
plots.batch_size_histogram(
    {n: r.row["batch_executions"] for n, r in runs.items() if "6.6 batching" in n},
    "Step 6.6: batch sizes the model ran with",
).savefig(OUT / "batch_sizes.png", dpi=110)
watched_runs = ["6.1 c16", *names_63[1:], names_64[2]]
plots.utilisation_over_time(
    {n: runs[n].utilisation for n in watched_runs}, "Utilisation over time"
).savefig(OUT / "utilisation.png", dpi=110)
claims.save(OUT)
perf.table(runs)

# %% [markdown]
# **Hand in** the table (`summary.csv`), the plots (`latency_vs_rate.png`, `latency_split.png`,
# `utilisation.png`, and `throughput_vs_concurrency.png` if you went further), your predictions
# (`predictions.csv`) and your answers above, and answer:
#
# 1. 6.1: what queue time did you predict at 16 in flight, what did the queueing model say, and
#    what did you measure? What did the utilisation law say about the instance, and what did your
#    terminal say about the GPU?
# 2. 6.3: which resource ran out first as you added instances, and which numbers (laws,
#    utilisation columns, `nvidia-smi`) show it?
# 3. 6.4: the ONNX model receives 224×224×3 floats (600 kB) per image instead of a JPEG of a few
#    tens of kB. When would that trade-off stop paying off?
# 4. 6.6: at the rate where the evenly spaced run queued least, give two reasons from your rows
#    why it still queued at all. What does `max_queue_delay_microseconds` trade, and why does it
#    hardly matter at the highest rate?
# 5. 6.6: a colleague reads "served 269/s at an offered 433/s, 0 % sent late" as "perf_analyzer
#    could not send fast enough". What would you answer?
# 6. Exercise: how did your client compare with perf_analyzer, and why?
#
# ## Tear down
# Both models back to one instance without dynamic batching (so the lab can be run again), and
# the Flask UI back on the first model:

# %%
reloaded = triton_config.edit(
    "food_classifier_onnx", ONE_INSTANCE, remove=("dynamic_batching",), verbose=False
)
labenv.use_flask_triton_model("food_classifier")

# %% [markdown]
# Then, on the host: `docker compose -f docker-compose-triton.yaml down` (Docker, with your CPU
# override file if you use one) or `make down` (local mode).
