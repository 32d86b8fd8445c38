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
# levers to shorten that line; you pull them one at a time and measure each with
# **perf_analyzer**, Triton's load generator:
#
# | step | what you change | what to look for |
# |---|---|---|
# | 6.1 | nothing: 1, 8, 16 requests in flight | where the time goes |
# | 6.2 | one request carries 16 images | what a batch costs |
# | 6.3 | 2, then 4 instances per GPU | what more copies buy |
# | 6.4 | the ONNX model | a faster runtime; who is the bottleneck |
# | 6.5 | Flask calls the ONNX model | pre-processing moves to the web app |
# | 6.6 | requests at a fixed rate; dynamic batching | bursts, and batches |
#
# It works as notebook 4 did: exercises, predictions, answers before verdicts, and three
# **decisions** judged against your own rows. Every row carries the two laws: **U = X·S**
# (`busy_U`: how busy each instance was, 1.0 = never idle) and **N = X·R** (`in_flight_N`; with R
# the time in Triton's queue, `waiting_N`). A queueing model (`servelab/queueing.py`) predicts
# each step; where it misses by more than 30 %, the lab says which assumption the run broke.
#
# The class's node has 2 GPUs and the instance steps use both; without a GPU, claims only a GPU
# can show are *not checked here*. The core path's 18 runs take about 7 minutes on a GPU node.
#
# **Three passes** (notebook 0). *Prepare*, before the lease: read, predict, write every line and
# check it. *Measure*, on the node: the cells marked `%%runs_in measure` (the server) and
# `%%runs_in measure review` (your runs) run too. *Review*, after the lease: those marked
# `measure review` read your runs from the results bundle. The first cell says which pass this is.

# %%
from servelab import passes

PASS = passes.start("06_triton_benchmarks")  # LAB_PASS: prepare, measure (default) or review

# %% [markdown]
# ## Setup

# %%
import os

import numpy as np
import pandas as pd

from servelab import claims, exercises, labenv, perf, plots, queueing, services
from servelab.exercises import judgement
from servelab.paths import PERF_INPUT_JSON, RESULTS, model_repository_dir
from servelab.perf import step_table
from servelab.triton import (
    config_text,
    gpu_scaling,
    gpus,
    instances,
    live_metrics,
    triton_config,
    triton_stats,
)
from servelab.verdicts import triton as verdicts

# %%
labenv.load()
TRITON, GRPC, METRICS = labenv.triton_urls()
HOST = TRITON.split("://")[-1]  # perf_analyzer and tritonclient take host:port
PERF_INPUT = os.path.relpath(PERF_INPUT_JSON)  # a real JPEG, for the model that decodes it
REPOSITORY = model_repository_dir()
# tritonclient.http on the node; in prepare and review a stand-in that writes your calls down
httpclient = passes.node_import("tritonclient.http", "httpclient")
client = httpclient.InferenceServerClient(HOST)
GOING_FURTHER = labenv.param("GOING_FURTHER", 0)  # 1: also run the optional runs
ONE_INSTANCE = "instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 0 ] } ]"  # notebook 5's
OUT = RESULTS / "triton"
runs = []  # every perf_analyzer run of the notebook, for the summary at the end

# %%
# %%runs_in measure review
N_GPUS = triton_stats.gpu_count(TRITON, METRICS)
GPUS = "[ " + ", ".join(str(i) for i in range(N_GPUS)) + " ]"  # "[ 0, 1 ]" on the class's node
print(f"Triton at {HOST}; GPUs seen: {N_GPUS} {GPUS}")

# %%
# %%runs_in prepare
N_GPUS = 2  # in this pass, the class's node (two GPUs): the measure pass asks the server

# %% [markdown]
# **Which GPU is which.** GPU 1 is `gpus: [ 1 ]` in a config, in `nvidia-smi` and in `nvtop`,
# and in every per-GPU figure here. Triton's metrics name GPUs by uuid; `nvidia-smi -L` prints
# both.

# %%
# %%runs_in measure
gpus.names_agree("setup", METRICS)
gpu_list = gpus.table(METRICS)

# %% [markdown]
# The lab keeps every run in `runs` for the summary at the end, and draws 6.3's and 6.6's runs
# live from Triton's metrics (`servelab/triton/live_metrics.py`).


# %%
def measure(line, name, verbose=True):
    """perf.run_line(line, name): the run, kept in `runs` for the summary."""
    runs.append(perf.run_line(line, name, out=OUT, verbose=verbose))
    return runs[-1]


def watched(line, name, model):
    """measure(line, name), with Triton's metrics drawn live while it runs."""
    live = live_metrics.Watch(METRICS, models=[model])
    tag = "".join(c if c.isalnum() else "_" for c in name)
    return live.during(lambda: measure(line, name), save=OUT / f"live_{tag}")


# %%
# %%runs_in measure
print(f"Triton {client.get_server_metadata()['version']}")
for model in ("food_classifier", "food_classifier_onnx"):
    config = client.get_model_config(model)
    print(f"{model:22s} backend={config['backend']:12s} instances={config['instance_group']}")

# %% [markdown]
# **Watch the hardware.** In a terminal on the node, leave `nvtop` running through 6.1 to 6.4
# (without a GPU: `top`, then `1`). Note which device is busy during each run.
#
# ## 6.1 One instance of the Python-backend model: 1, 8, 16 requests in flight

# %%
# %%runs_in measure
# where notebook 5's one instance runs, checked against its config (the lab shows it after each
# change of instances: each instance's process, as it reports itself and as nvidia-smi sees it)
where = gpus.where_instances_run("6.1", "food_classifier", N_GPUS, TRITON, METRICS, REPOSITORY)

# %% [markdown]
# The first line, written for you: `-m` the model, `-u` Triton's address, `--concurrency-range 1`
# keeps 1 request in flight (a *closed loop*), `--input-data` a real photo. perf_analyzer measures
# in 5 s windows until three in a row agree.

# %%
# %%runs_in measure review
line = f"perf_analyzer -m food_classifier -u {HOST} --concurrency-range 1 --input-data {PERF_INPUT}"
c1 = measure(line, "6.1 c1")

# %% [markdown]
# `Client` is what perf_analyzer saw; `Server` what Triton measured inside: the *queue* (waiting
# for a free instance) and the *compute* (input, the model's `execute`, output). The two laws, once
# by hand (every later row carries them):

# %%
# %%runs_in measure review
X = c1.row["throughput_infer_s"]  # requests per second (one image each)
S = c1.row["execution_ms"]  # ms per execution of the model (Triton's statistics)
R = c1.row["avg_latency_ms"]  # ms from sending a request to its answer (perf_analyzer)
print(f"U = X·S = {X:.1f}/s × {S:.2f} ms = {X * S / 1000:.2f}  (share of time the instance ran)")
print(f"N = X·R = {X:.1f}/s × {R:.2f} ms = {X * R / 1000:.2f}  (requests in flight: 1 by design)")

# %% [markdown]
# **Predict.** With one instance, 16 requests in flight and that execution time, how long will a
# request wait in Triton's queue (ms)? The model's answer is in the table after your runs.

# %%
claims.predict("6.1 queue at c16 (ms)", None, why="")

# %% [markdown]
# **Exercise 6.1a: 8 requests in flight.** Write the perf_analyzer line for the same model with
# **8** requests in flight, as a Python f-string (so `{HOST}` and `{PERF_INPUT}` are filled in).
# The lab then runs your line again at 16 in flight.

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

# %%
# %%runs_in measure review
c8 = measure(line_c8, "6.1 c8")
c16 = measure(perf.with_load(line_c8, "--concurrency-range 16"), "6.1 c16")

# %% [markdown]
# **Exercise 6.1c: Triton's own count, with `curl`.** Triton keeps statistics per model version:
# `GET /v2/models/<name>/versions/<version>/stats`. Write the `curl` line for version 1 of
# `food_classifier` at `TRITON`, piped through `python -m json.tool`. In what it prints, find
# `inference_stats.queue` (`count` requests, `ns` waited in all) and `batch_stats` (executions per
# batch size).

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

# %%
# %%runs_in measure
# !{stats_line}

# %% [markdown]
# The three runs with their laws, the queueing model's latency beside each (mean-value analysis of
# one station with the c1 execution time; `measured_over_model` = 1 where they agree), and each
# run's utilisation over time:

# %%
# %%runs_in measure review
SERVICE_MS = c1.row["execution_ms"]
OVERHEAD_MS = c1.row["avg_latency_ms"] - SERVICE_MS  # all a request spends outside the instance
table_61 = step_table.against_model(
    step_table.table([c1, c8, c16]),
    [queueing.closed_loop(n, SERVICE_MS, OVERHEAD_MS)["latency_ms"] for n in (1, 8, 16)],
)
plots.utilisation_over_time(
    {run.name: run.utilisation for run in (c1, c8, c16)}, "6.1: utilisation during each run"
)
table_61

# %% [markdown]
# ## 6.2 Client-side batches: one request carrying 16 images
# perf_analyzer's `-b N` makes every request a batch of N photos (`max_batch_size: 16` allows it).
# `model.py` decodes each photo on the CPU, one after another, then runs **one** forward pass over
# all of them.
#
# **Predict.** How many times the execution time of one image will a batch of 16 take?

# %%
claims.predict("6.2 compute of 16 images / compute of 1 (x)", None, why="")

# %% [markdown]
# **Exercise 6.2: a batch of 16.** The line of 6.1, **one** request in flight, batches of 16.

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

# %%
# %%runs_in measure review
b16 = measure(line, "6.2 b16")
step_table.table([c1, b16])

# %% [markdown]
# **What do you see, and why?** 6.1: from 1 to 16 in flight, what happened to throughput and to
# the queue time? How busy was the instance (`busy_U`), how many requests waited (`waiting_N`),
# and did the model's line hold? How busy was the GPU meanwhile, so what was the instance doing?
# (Notebook 5 showed `model.py`.) 6.2: `throughput_infer_s` counts images; how many times longer
# did an execution of 16 take, and which part of it grew with the batch? Write your answer between
# the quotes.

# %%
answer_61 = """
### BEGIN SOLUTION
(solved edition: the expected answer is in docs/answer_key.md, 6.1 and 6.2)
### END SOLUTION
"""

# %% jupyter={"source_hidden": true}
# %%runs_in measure review
with judgement.verdict_after(answer_61, "6.1 and 6.2"):
    step_table.model_readings(table_61, SERVICE_MS)
    verdicts.queue_grows_with_load(c8, c16, N_GPUS)
    verdicts.a_batch_costs_less(b16, c1)

# %% [markdown]
# ## 6.3 More instances of the Python-backend model
# An `instance_group` says how many copies of the model Triton runs, and where. A group puts
# `count` copies **on each GPU** in its `gpus` (without `gpus`: on every GPU), so both of these
# put two on each of GPUs 0 and 1 (the second, a group per GPU, is the original lab's):
#
# ```
# instance_group [ { count: 2, kind: KIND_GPU, gpus: [ 0, 1 ] } ]
# instance_group [ { count: 2, kind: KIND_GPU, gpus: [ 0 ] },
#                  { count: 2, kind: KIND_GPU, gpus: [ 1 ] } ]
# ```
#
# Each copy of a Python-backend model is its own process, a *stub*. Without a GPU:
# `kind: KIND_CPU`, no `gpus`.
#
# **Exercise 6.3a: the edit, in an editor.** Open the model's `config.pbtxt` (*File → Open from
# Path* in JupyterLab, the path the next cell prints, or `nano` on the node), set `count: 2` on
# every GPU (either form), save, and run the cell after it: it shows your diff and checks it.

# %%
# %%runs_in measure review
path = triton_config.config_path("food_classifier")
before = triton_config.file_text("food_classifier")  # the file now (review: as it was then)
print(f"open {path}\nset count: 2" + (f" and gpus: {GPUS}" if N_GPUS else " (no GPU here)"))
### BEGIN HIDDEN TESTS
if passes.measures():  # the solved edition's edit, in place of yours in the editor
    path.write_text(config_text.replace_fields(before, instances.instance_group(2, N_GPUS)))
### END HIDDEN TESTS

# %%
# %%runs_in measure review
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
# **Exercise 6.3b: load it, with the client library.** `client.load_model(name, headers=...)` asks
# Triton's repository API to load a model; that API wants the node's secret,
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

# %%
# %%runs_in measure review
served = triton_config.served_config("food_classifier", TRITON)
placed = placed_now = instances.placement(served, N_GPUS)
gpus.both_forms(2, N_GPUS)

# %%
# %%runs_in measure
where = gpus.where_instances_run("6.3", "food_classifier", N_GPUS, TRITON, METRICS, REPOSITORY)

# %% [markdown]
# Your 6.1a line, run on 2 instances per GPU, drawn live:

# %%
# %%runs_in measure review
two = watched(line_c8, "6.3 2 inst c8", "food_classifier")

# %% [markdown]
# **Uneven on purpose.** Now the same instances **all on GPU 0**. **Predict:** at 8 in flight,
# what will they serve, as a share of what they served spread over the GPUs?

# %%
claims.predict("6.3 all on GPU 0 / spread over the GPUs (throughput, x)", None, why="")

# %% [markdown]
# **Exercise 6.3c: all on GPU 0.** Write the `instance_group` that puts all of 6.3a's instances
# (four on the class's node) on GPU 0.

# %%
uneven = """
### BEGIN SOLUTION
instance_group [ { count: 4, kind: KIND_GPU, gpus: [ 0 ] } ]
### END SOLUTION
"""

# %%
# judged for the class's node, two GPUs (or all of a larger node's)
NEEDS_63C = exercises.on_first_gpu(2 * max(N_GPUS, 2), max(N_GPUS, 2))
uneven = exercises.config_fragment(
    uneven, "6.3", "all of 6.3a's instances on GPU 0, none on the other GPUs", needs=NEEDS_63C
)

# %%
# %%runs_in measure review
if N_GPUS >= 2:
    triton_config.edit("food_classifier", uneven)
    placed_now = instances.placement(triton_config.served_config("food_classifier", TRITON), N_GPUS)
else:
    print(f"not loaded here ({N_GPUS} GPUs): it needs two; 6.3a's instances stay")

# %%
# %%runs_in measure
if N_GPUS >= 2:
    where = gpus.where_instances_run("6.3c", "food_classifier", N_GPUS, TRITON, METRICS, REPOSITORY)

# %% [markdown]
# **Your observation.** `nvidia-smi` on the node lists one `triton_python_backend_stub` per
# instance, on its GPU. How many are on GPU 0 now?

# %%
# %%runs_in measure review
stubs_seen = (
    ### BEGIN SOLUTION
    placed_now.get("GPU 0", placed_now.get("CPU", 0))
    ### END SOLUTION
)

# %%
# %%runs_in measure review
on_gpu0 = placed_now.get("GPU 0", placed_now.get("CPU", 0))
stubs_seen = judgement.number_in(
    stubs_seen,
    "6.3",
    "the stubs on GPU 0",
    on_gpu0,
    on_gpu0 + 1,
    why=f"Triton placed {placed_now}: count the stub lines again.",
)

# %% [markdown]
# Your 6.1a line on them (watch nvtop), beside the same instances spread out:

# %%
# %%runs_in measure review
# the utilisation law per GPU: gpu_ms_per_execution = utilisation / executions per second, the
# GPU's busy time in one execution; gpu_share_of_execution, that time over the whole execution
all_on_gpu0 = None  # not run without two GPUs
if N_GPUS >= 2:
    all_on_gpu0 = watched(line_c8, "6.3 all on GPU 0 c8", "food_classifier")
    claims.compare_prediction(
        "6.3 all on GPU 0 / spread over the GPUs (throughput, x)",
        all_on_gpu0.throughput / two.throughput,
    )
    print(step_table.table([two, all_on_gpu0]).to_string())
    print(gpu_scaling.side_by_side([(two, placed), (all_on_gpu0, placed_now)], N_GPUS))
else:
    print(f"not run here ({N_GPUS} GPUs): it needs two")

# %% [markdown]
# Then 4 per GPU (your 6.3a block with `count: 4`):

# %%
# %%runs_in measure review
triton_config.edit("food_classifier", instances.instance_group(4, N_GPUS))
four = watched(line_c8, "6.3 4 inst c8", "food_classifier")
per_device = {1: c8, 2: two, 4: four}  # instances per device -> its run at 8 in flight
plots.utilisation_over_time(
    {run.name: run.utilisation for run in per_device.values()},
    "6.3: utilisation with 1, 2 and 4 instances per device",
)
step_table.table(per_device.values())

# %% [markdown]
# **Decision 6.3: how many instances per GPU would you deploy?** The fewest of 1, 2 and 4 that
# serve at least 90 % of the best throughput in your table: more copies cost memory and CPU for
# nothing. Write the number; the check judges it on your rows.

# %%
# %%runs_in measure review
deploy = (
    ### BEGIN SOLUTION
    next(
        n
        for n, run in per_device.items()
        if run.throughput.value >= 0.9 * max(r.throughput.value for r in per_device.values())
    )
    ### END SOLUTION
)

# %%
# %%runs_in measure review
deploy = judgement.fewest_near_best(
    deploy,
    "6.3",
    "the instances per GPU to deploy",
    {n: run.throughput for n, run in per_device.items()},
)

# %%
# %%runs_in measure
reloaded = triton_config.edit("food_classifier", ONE_INSTANCE, verbose=False)

# %% [markdown]
# ## 6.4 The ONNX model
# `food_classifier_onnx` takes the pre-processed tensor (`input`, FP32 [3, 224, 224]) and returns
# the 11 logits. On NVIDIA's Triton image it runs on the onnxruntime backend: no Python per
# request. (Local mode's Triton lacks that backend: a small Python-backend model runs the same
# `model.onnx` under the same name.) perf_analyzer fills a tensor input with random numbers and
# needs only its shape, without the batch dimension: `--shape input:3,224,224`.

# %% [markdown]
# **Exercise 6.4: one request in flight, a tensor input.** Write the line for
# `food_classifier_onnx`, 1 in flight, with `--shape` (no `--input-data`: the input is numbers).
# The lab then puts 2 instances on every GPU, warms them with 100 requests (`--request-count 100`
# replaces the windows with a fixed number of requests; new instances answer their first requests
# slowly) and runs your line at 8 and 16 in flight.

# %%
line = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier_onnx -u {HOST} --concurrency-range 1 --shape input:3,224,224"
    ### END SOLUTION
)

# %%
NEEDS_64 = {"-m": "food_classifier_onnx", "-u": HOST, "--shape": "input:3,224,224"}
line_onnx = exercises.perf_line(
    line,
    "6.4",
    "the step measures the ONNX model, 1 in flight",
    needs={**NEEDS_64, "--concurrency-range": "1"},
)


def onnx_run(load: str, name: str, verbose=False):
    """The lab's runs of the ONNX model: your 6.4 line with the load given (perf.with_load)."""
    return measure(perf.with_load(line_onnx, load), name, verbose=verbose)


# %%
# %%runs_in measure review
onnx_c1 = measure(line_onnx, "6.4 onnx c1")
reloaded = triton_config.edit("food_classifier_onnx", instances.instance_group(2, N_GPUS))

# %%
# %%runs_in measure
where = gpus.where_instances_run("6.4", "food_classifier_onnx", N_GPUS, TRITON, METRICS, REPOSITORY)

# %%
# %%runs_in measure review
warm_up = perf.with_load(line_onnx, "--concurrency-range 8 --request-count 100")
perf.run_line(warm_up, "6.4 warm-up", out=OUT, verbose=False)  # not kept for the summary
onnx_c8 = onnx_run("--concurrency-range 8", "6.4 onnx 2 inst c8")
onnx_c16 = onnx_run("--concurrency-range 16", "6.4 onnx 2 inst c16", verbose=True)

# %%
# %%runs_in measure review
ONNX_MS = onnx_c1.row["execution_ms"]
ONNX_OUTSIDE_MS = onnx_c1.row["avg_latency_ms"] - ONNX_MS
table_64 = step_table.table([onnx_c1, onnx_c8, onnx_c16])
table_64 = step_table.against_model(
    table_64,
    [
        queueing.closed_loop(n, ONNX_MS, ONNX_OUTSIDE_MS, servers=k)["latency_ms"]
        for n, k in zip((1, 8, 16), table_64["instances"])
    ],
)
table_64

# %% [markdown]
# **Decision 6.4: at 16 in flight, what limited the two instances per GPU?** `"instances"` (each
# busy nearly all the time: `busy_U` at least 0.9), `"device"` (the busiest GPU, or the CPU where
# there is none, at least 90 % busy: the utilisation columns) or `"neither"`.

# %%
# %%runs_in measure review
limit = (
    ### BEGIN SOLUTION
    "instances"
    if onnx_c16.row["busy_U"] >= 0.9
    else "device"
    if (verdicts.busiest_gpu_pct(onnx_c16.row) or 0) >= 90
    else "neither"
    ### END SOLUTION
)

# %%
# %%runs_in measure review
gpu = verdicts.busiest_gpu_pct(onnx_c16.row)
limit = judgement.bottleneck(
    limit,
    "6.4",
    busy_u=onnx_c16.row["busy_U"],
    device_pct=gpu if gpu is not None else onnx_c16.row.get("cpu_util_pct"),
    device="the busiest GPU" if gpu is not None else "the CPU",
)

# %% [markdown]
# **What do you see, and why?** 6.3: what did each added copy of the Python-backend model bring,
# and which device did your terminal show busy? All on GPU 0 against spread out: what does a
# second GPU buy this model, and why? 6.4: why does the ONNX model serve more at 1 in
# flight? With two instances per GPU, how many requests waited at 16 (`waiting_N`), and did the
# execution time stay what it was at 1 in flight? Where the model's line misses, which assumption
# broke?

# %%
answer_64 = """
### BEGIN SOLUTION
(solved edition: the expected answer is in docs/answer_key.md, 6.3 and 6.4)
### END SOLUTION
"""

# %% jupyter={"source_hidden": true}
# %%runs_in measure review
with judgement.verdict_after(answer_64, "6.3 and 6.4"):
    verdicts.more_instances(c8, two, four, N_GPUS)
    verdicts.second_gpu_buys("6.3", all_on_gpu0, two, N_GPUS)
    step_table.model_readings(table_64, ONNX_MS)
    provider = triton_stats.onnx_provider("food_classifier_onnx", TRITON, METRICS)
    verdicts.onnx_serves_faster(onnx_c1, c1, onnx_c8, onnx_c16, N_GPUS, provider)

# %% [markdown]
# ## 6.5 The Flask UI with the ONNX model
# The ONNX model expects a tensor, so the web app now decodes, resizes and normalises the photo
# itself (`servelab/food11.py`, the services' shared code) and calls Triton with `tritonclient`
# (`flask_app/backends.py`). Switch Flask to that model; in Docker, run the printed command on the
# host. The Python-backend model, asked directly, should name the same class.

# %%
# %%runs_in measure
import re

import requests

from servelab import food11
from servelab.paths import TEST_IMAGES

services.use_flask_triton_model("food_classifier_onnx")
photo = sorted(TEST_IMAGES.glob("*.jpg"))[0]
with open(photo, "rb") as f:
    page = requests.post(
        f"{labenv.url('FLASK_SERVER_URL')}/predict", files={"file": (photo.name, f)}, timeout=60
    )
flask_label = (re.search(r'class="label">([^<]+)<', page.text) or [None, None])[1]
print(f"Flask page (ONNX model, pre/post-processing in Flask): {flask_label}, {page.status_code}")

# %%
# %%runs_in measure
jpeg = food11.encode_file(photo)  # as in 5.2, here as the JSON body of Triton's HTTP API
body = {"inputs": [{"name": "INPUT_IMAGE", "shape": [1, 1], "datatype": "BYTES", "data": [jpeg]}]}
answer = requests.post(f"{TRITON}/v2/models/food_classifier/infer", json=body, timeout=60)
direct = next(o["data"][0] for o in answer.json()["outputs"] if o["name"] == "FOOD_LABEL")
claims.fact(
    "6.5: Flask with the ONNX model shows the same class as the Python-backend model",
    page.status_code == 200 and flask_label == direct,
    {"flask_onnx": flask_label, "python_backend": direct},
)

# %% [markdown]
# ## 6.6 Bursty load, and dynamic batching
# Real users do not wait for each other's answers. An *open loop* offers a fixed **rate**:
# `--request-rate-range R` sends R requests per second whether or not earlier ones came back;
# `--async` keeps any number in flight so the schedule holds (the lab flags a run where over 5 %
# left late); `--request-distribution constant` spaces them evenly, `poisson` at random moments,
# as independent users arrive.
#
# The throughput column is what was *served*: when the instance cannot keep up, requests still
# leave on time and the queue grows for as long as the run lasts.
#
# 6.6 uses **one** ONNX instance, so a single queue decides everything. The rates are set from
# its **capacity**, what it serves when it never waits for work (4 requests in flight).

# %%
# %%runs_in prepare
RATE = 100  # in this pass, a stand-in for the rate the measure pass sets from your capacity

# %%
# %%runs_in measure review
reloaded = triton_config.edit("food_classifier_onnx", ONE_INSTANCE, verbose=False)

# %%
# %%runs_in measure
where = gpus.where_instances_run("6.6", "food_classifier_onnx", N_GPUS, TRITON, METRICS, REPOSITORY)

# %%
# %%runs_in measure review
CAPACITY = onnx_run("--concurrency-range 4", "6.6 capacity c4").throughput.value
BUSY_MS = 1000 / CAPACITY  # time per request of an instance that never waits for work
RATES = [int(f * CAPACITY) for f in (0.6, 1.0, 1.4)]  # offered loads: 60 %, 100 %, 140 %
RATE = RATES[0]
print(f"one instance: {CAPACITY:.0f} requests/s ({BUSY_MS:.2f} ms each); the rates: {RATES}")

# %% [markdown]
# **Exercise 6.6a: evenly spaced.** Write the line that offers `RATE` requests per second to
# `food_classifier_onnx`, evenly spaced, asynchronously (`--shape` as in 6.4). The lab then runs
# it again with Poisson arrivals.

# %%
line = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier_onnx -u {HOST} --shape input:3,224,224 --async "
    f"--request-rate-range {RATE} --request-distribution constant"
    ### END SOLUTION
)

# %%
line = exercises.perf_line(
    line,
    "6.6",
    f"the step offers {RATE} requests/s, evenly spaced",
    needs={
        **NEEDS_64,
        "--async": None,
        "--request-rate-range": RATE,
        "--request-distribution": "constant",
    },
)

# %%
# %%runs_in measure review
constant = measure(line, f"6.6 constant {RATE}/s")

# %%
# %%runs_in measure review
line_poisson = perf.with_load(line, f"--request-rate-range {RATE} --request-distribution poisson")
poisson = measure(line_poisson, f"6.6 poisson {RATE}/s")
table_66 = step_table.against_model(
    step_table.table([constant, poisson]),
    [
        queueing.open_loop(RATE, BUSY_MS, ONNX_OUTSIDE_MS, poisson=p)["latency_ms"]
        for p in (False, True)
    ],
)
table_66

# %% [markdown]
# The model column: the service time, plus the time outside the instance at 1 in flight (6.4),
# plus the wait of an M/D/1 queue for Poisson arrivals, none for evenly spaced ones. Note which
# run queued more, and p99 against the median (`p50_ms`): you explain both at the end of 6.6.

# %% [markdown]
# Now **dynamic batching**: when requests wait, Triton hands them to the model together. In
# `config.pbtxt` it is a block, `dynamic_batching { ... }`, with `preferred_batch_size` (the sizes
# Triton aims for, a list such as `[ 4, 6, 8 ]`) and `max_queue_delay_microseconds` (how long a
# request may wait for company), each written `name: value`.
#
# A batch size is also a tensor *shape*, and a GPU runtime may prepare its kernels per shape.
# ONNX Runtime's CUDA provider rebuilds its convolution plans whenever the batch size changes: on
# the lab's H100, one session fed mixed sizes took
# <!--fig h100_6_switch_seconds-->0.9 s a batch, the same sizes grouped 2.1 ms<!--/fig-->.
# So on a GPU this model keeps one session per batch size (1, 2, 4, 8, 16 and each preferred
# size), padding a batch up to the nearest: mixed sizes then cost
# <!--fig h100_6_switch_labs-->1.06x<!--/fig--> grouped. Few sizes, prepared in advance: that is
# also what `preferred_batch_size` and TensorRT's profiles are for.
#
# **Exercise 6.6b: turn it on, in the file.** Open `food_classifier_onnx`'s `config.pbtxt` in the
# editor (the path the next cell prints), add the block with preferred sizes 4, 6 and 8 and a delay
# of at most 100 µs, save, and run the cell after it: it checks your edit, then asks Triton to load
# the model again (if Triton refuses it, the file goes back as it was).

# %%
# %%runs_in measure review
path = triton_config.config_path("food_classifier_onnx")
before = triton_config.file_text("food_classifier_onnx")  # the file now (review: as it was)
print(f"open {path}")
### BEGIN HIDDEN TESTS
block = "dynamic_batching { preferred_batch_size: [ 4, 6, 8 ] max_queue_delay_microseconds: 100 }"
if passes.measures():  # the solved edition's edit, in place of yours in the editor
    path.write_text(f"{before}\n{block}\n")
### END HIDDEN TESTS

# %%
# %%runs_in measure review
print(
    exercises.file_edit(
        path,
        before,
        "6.6",
        "add dynamic batching, preferred 4, 6, 8, at most 100 µs",
        needs={
            "dynamic_batching.preferred_batch_size": [4, 6, 8],
            "dynamic_batching.max_queue_delay_microseconds": 100,
        },
    )
)

# %%
# %%runs_in measure
ok, seconds, error = triton_config.load_model("food_classifier_onnx", TRITON)
if not ok:
    path.write_text(before)
    raise RuntimeError(f"Triton refused the edited config (the file is back as it was): {error}")
batching = config_text.field_text(path.read_text(), "dynamic_batching")  # for the optional runs
print(f"food_classifier_onnx loaded again in {seconds:.1f} s with:\n{batching}")

# %% [markdown]
# The Poisson run again, with batching on and drawn live, and the batch sizes Triton ran (its
# statistics before and after). Then a batch of 8 measured alone (`-b 8`), for the model of a
# batch's cost: `fixed + per image × b`, a line through one image and eight.

# %%
# %%runs_in measure review
batched = {RATE: watched(line_poisson, f"6.6 batching poisson {RATE}/s", "food_classifier_onnx")}
print(triton_stats.batch_table(batched[RATE].stats))  # what Triton ran during the run
B8_MS = onnx_run("--concurrency-range 1 -b 8", "6.6 b8").row["execution_ms"]
# both measured one request at a time; under load each takes BUSY_MS / ONNX_MS times as long
SERVICE = queueing.ServiceTime.from_two_batches(1, BUSY_MS, 8, B8_MS * BUSY_MS / ONNX_MS)
print(
    f"a batch of 8 costs {B8_MS / ONNX_MS:.1f}x one image; capacity with batches of 8: "
    f"{queueing.saturation_rate(SERVICE, max_batch=8):.0f}/s (without batching {CAPACITY:.0f}/s)"
)

# %% [markdown]
# **Predict.** At 140 % of capacity (`RATES[-1]`), what mean latency (ms) do you expect with
# batching?

# %%
claims.predict("6.6 mean latency at 140% of capacity, with batching (ms)", None, why="")

# %% [markdown]
# The lab runs the other rates with batching (the top one drawn live), turns batching off and
# runs them without; the sweep, with the queueing model's mean latency (M/D/1 without batching;
# with batching, an instance that runs what arrived during its last batch):

# %%
# %%runs_in measure review
POISSON = "--async --request-distribution poisson --request-rate-range"  # then the rate
top = f"6.6 batching poisson {RATES[-1]}/s"
batched[RATES[-1]] = watched(
    perf.with_load(line_poisson, f"{POISSON} {RATES[-1]}"), top, "food_classifier_onnx"
)
batched[RATES[1]] = onnx_run(f"{POISSON} {RATES[1]}", f"6.6 batching poisson {RATES[1]}/s")
triton_config.edit("food_classifier_onnx", remove=("dynamic_batching",), verbose=False)
alone = {RATE: poisson}  # without batching: the Poisson run at 60 %, then the other rates
for rate in RATES[1:]:
    alone[rate] = onnx_run(f"{POISSON} {rate}", f"6.6 no batching poisson {rate}/s")

# %%
# %%runs_in measure review
with_b = step_table.table(batched[r] for r in RATES).assign(config="dynamic batching")
without = step_table.table(alone.values()).assign(config="no batching")
sweep = pd.concat([with_b, without]).assign(rate=lambda rows: rows["request_rate"])
batched_ms = [
    queueing.open_loop_batching(r, SERVICE, 8, 0.1, ONNX_OUTSIDE_MS)["latency_ms"]
    for r in with_b.request_rate
]
alone_ms = [
    queueing.open_loop(r, BUSY_MS, ONNX_OUTSIDE_MS)["latency_ms"] for r in without.request_rate
]
sweep = step_table.against_model(sweep, batched_ms + alone_ms)
sweep

# %%
# %%runs_in measure review
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

# %% [markdown]
# **Decision 6.6: how far can one instance go without batching?** With a budget of `BUDGET_MS`
# (ten times the instance's busy time per request) for the mean latency, up to what offered rate
# (requests/s) would you run one instance without batching? Read the "no batching" rows.

# %%
# %%runs_in measure review
BUDGET_MS = 10 * BUSY_MS
print(f"budget: {BUDGET_MS:.1f} ms mean latency")
top_rate = (
    ### BEGIN SOLUTION
    max([r for r, run in alone.items() if run.row["avg_latency_ms"] < BUDGET_MS], default=0)
    ### END SOLUTION
)

# %%
# %%runs_in measure review
within = {r: run.row["avg_latency_ms"] < BUDGET_MS for r, run in alone.items()}
low = max([r for r, ok in within.items() if ok], default=0)
high = min([r for r, ok in within.items() if not ok], default=float("inf"))
top_rate = judgement.number_in(
    top_rate,
    "6.6",
    "the highest rate for one instance without batching",
    low,
    high,
    why=", ".join(
        f"at {r}/s your run measured {run.row['avg_latency_ms']:.1f} ms" for r, run in alone.items()
    )
    + f" against a budget of {BUDGET_MS:.1f} ms.",
)

# %% [markdown]
# **What do you see, and why?** First the two runs at 60 %: which queued more, how many times
# more, and what does a long tail do to requests that arrive on schedule behind it? Then the
# sweep, at the highest rate: without batching, what was served against what was offered, and
# what happened to the latency? With batching, how large were the batches,
# and how busy was the instance? At the lowest rate, could batching help? Where does the model's
# line sit against the measured one, and which of its assumptions do the rows show broken?

# %%
answer_66 = """
### BEGIN SOLUTION
(solved edition: the expected answer is in docs/answer_key.md, 6.6)
### END SOLUTION
"""

# %% jupyter={"source_hidden": true}
# %%runs_in measure review
with judgement.verdict_after(answer_66, "6.6"):
    step_table.model_readings(table_66, BUSY_MS, open_loop=True)
    verdicts.poisson_queues_more(poisson, constant)
    batch_ms = [
        SERVICE(b) if c == "dynamic batching" else BUSY_MS
        for b, c in zip(sweep.avg_batch_size, sweep.config)
    ]
    step_table.model_readings(sweep, batch_ms, open_loop=True)
    top_with, top_without = batched[RATES[-1]], alone[RATES[-1]]
    verdicts.batches_form_under_load(top_with, batched[RATE], sweep)
    capacity_x = queueing.saturation_rate(SERVICE, max_batch=8) / CAPACITY  # batches of 8 lift it
    lift = {"b8_x": B8_MS / ONNX_MS, "capacity_x": capacity_x, "provider": provider}
    verdicts.batching_keeps_latency_down(top_with, top_without, RATES[-1], BUSY_MS, lift)

# %% [markdown]
# ## Going further (optional)
# Skipped unless `GOING_FURTHER = 1` (setup cell) or `LAB_GOING_FURTHER=1`; about 3 minutes of
# runs on a GPU node. Two more views of the same instance: a light rate (40 % of capacity) with
# and without batching, to see where batching has nothing to batch; and the closed loop,
# throughput against 1, 4 and 16 requests in flight, batching on and off, each with the model's
# prediction (mean-value analysis) beside it.

# %%
# %%runs_in measure
if GOING_FURTHER:
    light = int(0.4 * CAPACITY)
    light_runs = [onnx_run(f"{POISSON} {light}", f"6.6 no batching poisson {light}/s")]
    triton_config.edit("food_classifier_onnx", batching, verbose=False)  # your block of 6.6b
    light_runs.append(onnx_run(f"{POISSON} {light}", f"6.6 batching poisson {light}/s"))
    print(step_table.table(light_runs))

# %%
# %%runs_in measure
closed = []
for on in (True, False) if GOING_FURTHER else ():
    config = f"{'' if on else 'no '}batching"
    fields, removed = (batching, ()) if on else ("", ("dynamic_batching",))
    triton_config.edit("food_classifier_onnx", fields, remove=removed, verbose=False)
    for n in (1, 4, 16):
        run = onnx_run(f"--concurrency-range {n}", f"6.6 {config} c{n}")
        model = queueing.closed_loop(n, ONNX_MS, ONNX_OUTSIDE_MS)
        if on:
            model = queueing.closed_loop_batching(n, SERVICE, 16, ONNX_OUTSIDE_MS)
        row = {"config": config, "concurrency": n, "model_throughput": model["throughput_per_s"]}
        closed.append({**row, "throughput_infer_s": run.row["throughput_infer_s"]})

# %%
# %%runs_in measure
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
# %%runs_in measure
import asyncio
import time

import tritonclient.http.aio as aioclient


async def keep_in_flight(n: int, seconds: float) -> float:
    """Inferences per second with n requests always in flight, for `seconds`."""
    aio = aioclient.InferenceServerClient(HOST)
    tensor = aioclient.InferInput("input", [1, 3, 224, 224], "FP32")
    tensor.set_data_from_numpy(np.random.rand(1, 3, 224, 224).astype(np.float32))
    stop, answers = time.perf_counter() + seconds, []

    async def sender():
        while time.perf_counter() < stop:
            answers.append(await aio.infer("food_classifier_onnx", [tensor]))

    await asyncio.gather(*(sender() for _ in range(n)))
    await aio.close()
    return len(answers) / seconds


# %%
# %%runs_in measure
N = 1
mine = await keep_in_flight(N, 3.0)  # noqa: F704 - a notebook cell may await
theirs = onnx_c1.row["throughput_infer_s"]
print(f"my client, {N} in flight: {mine:.0f}/s; perf_analyzer, 1 in flight: {theirs:.0f}/s")

# %% [markdown]
# ## What you measured
# Every run with its laws, and the plots: latency split, 6.6's batch sizes, utilisation.

# %%
# %%runs_in measure review
rows = pd.DataFrame([{**run.row, "run": run.name, "step": run.name.split()[0]} for run in runs])
rows.drop(columns="step").to_csv(OUT / "summary.csv", index=False)
plots.latency_split_stacked(rows, "Average latency: queue / compute / network").savefig(
    OUT / "latency_split.png", dpi=110
)
plots.batch_size_histogram(
    {run.name: run.row["batch_executions"] for run in batched.values()},
    "Step 6.6: batch sizes the model ran with",
).savefig(OUT / "batch_sizes.png", dpi=110)
watched_runs = [c16, two, *[run for run in [all_on_gpu0] if run], four, onnx_c16]
plots.utilisation_over_time(
    {run.name: run.utilisation for run in watched_runs}, "Utilisation over time"
).savefig(OUT / "utilisation.png", dpi=110)
claims.save(OUT)
step_table.table(runs)

# %% [markdown]
# **Hand in** `summary.csv`, the plots, `predictions.csv` and your answers above, and answer:
#
# 1. 6.4: the ONNX model receives 600 kB of floats per image instead of a JPEG of tens of kB. When
#    would that trade-off stop paying off?
# 2. 6.6: what does `max_queue_delay_microseconds` trade, and why does it hardly matter at the
#    highest rate?
# 3. 6.6: a colleague reads "served below the offered rate, 0 % sent late" as "perf_analyzer could
#    not send fast enough". What would you answer?
#
# ## Tear down
# Both models back to one instance without dynamic batching (so the lab can be run again), and
# the Flask UI back on the first model:

# %%
# %%runs_in measure
reloaded = triton_config.edit(
    "food_classifier_onnx", ONE_INSTANCE, remove=("dynamic_batching",), verbose=False
)
services.use_flask_triton_model("food_classifier")

# %% [markdown]
# Then, on the host: `docker compose -f docker-compose-triton.yaml down` (Docker, with your CPU
# override file if you use one) or `make down` (local mode). First, the last cell: where your
# results bundle is, and how to download it.

# %%
passes.finish()
