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
# | 6.2 | one request carries 16 images | what a batch costs, and what it saves |
# | 6.3 | 2, then 4 instances per GPU | what more copies buy, and what limits them |
# | 6.4 | the ONNX model | a faster runtime, and two copies of it per GPU |
# | 6.5 | Flask calls the ONNX model | pre-processing moves to the web app |
# | 6.6 | requests at a fixed rate; dynamic batching | bursts, and batches |
#
# It works as notebook 4 did. You write every perf_analyzer line, every edit of a
# `config.pbtxt` and the client calls; each is checked the moment you run the cell under it. You
# predict before each experiment, explain what you see before the lab's verdict appears, and
# make three **decisions** the lab cannot make for you: it tells you the goal, you choose from
# your own rows and say why, and a wrong choice is answered with your own numbers.
#
# The class's node has 2 GPUs and the instance steps use both; without a GPU, claims only a GPU
# can show are *not checked here*. The core path's runs take about 7 minutes on a GPU node.
#
# **Three passes** (notebook 0). *Prepare*, before the lease: read, predict, write every line and
# edit and check them (the edits go to a copy of each `config.pbtxt`). *Measure*, on the node:
# the cells marked `%%runs_in measure` (the server) and `%%runs_in measure review` (your runs) run
# too, and you make each edit again, in the node's own file. *Review*, after the lease: the cells
# marked `measure review` read your runs from the results bundle, and you decide. The first cell
# says which pass this is.

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
exercises.given(HOST=HOST, TRITON=TRITON, PERF_INPUT=PERF_INPUT)  # what your lines are read with
# tritonclient.http on the node; in prepare and review a stand-in that writes your calls down
httpclient = passes.node_import("tritonclient.http", "httpclient")
client = httpclient.InferenceServerClient(HOST)
GOING_FURTHER = labenv.param("GOING_FURTHER", 0)  # 1: also run the optional runs
ONE_INSTANCE = "instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 0 ] } ]"  # notebook 5's
OUT = RESULTS / "triton"
OUT.mkdir(parents=True, exist_ok=True)
runs = []  # every perf_analyzer run of the notebook, for the summary at the end

# %%
# %%runs_in measure review
N_GPUS = triton_stats.gpu_count(TRITON, METRICS)
exercises.given(N_GPUS=N_GPUS)
GPUS = "[ " + ", ".join(str(i) for i in range(N_GPUS)) + " ]"  # "[ 0, 1 ]" on the class's node
print(f"Triton at {HOST}; GPUs seen: {N_GPUS} {GPUS}")

# %%
# %%runs_in prepare
N_GPUS = 2  # in this pass, the class's node (two GPUs): the measure pass asks the server
exercises.given(N_GPUS=N_GPUS)

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
#
# **A queue, and the two laws that hold for any queue.** A request that reaches Triton either
# runs at once, on a free *instance* of the model, or waits in the model's queue until one is
# free. Two laws tie what you will measure together, whatever the model or the hardware, as long
# as the run is steady (as many requests finish as start):
#
# - the **utilisation law**, U = X·S: an instance that completes X executions a second, each
#   taking S seconds, is busy a share U of the time. At U = 1 it is never idle: more load cannot
#   make it serve more, only wait longer.
# - **Little's law**, N = X·R: with X requests a second each staying R seconds, N are inside on
#   average. Applied to the whole request it counts the requests in flight; applied to the queue
#   alone (R = the queue time) it counts those waiting.
#
# perf_analyzer offers a **closed loop**: `--concurrency-range N` keeps N requests in flight,
# sending the next one the moment an answer comes back. With one instance busy all the time, X
# cannot grow past 1/S, so by Little's law R = N/X grows with N: each request added to the loop
# adds one execution time S of waiting, and nothing else. That is the line you will test: at 8
# and 16 in flight, does the queue grow by about S per request, and does the throughput stay
# put? (The queueing model in `servelab/queueing.py` does the same sum more carefully: it treats
# the time a request spends outside the instance, on the network and in perf_analyzer, as a delay
# in which it cannot wait.)

# %%
# %%runs_in measure
# where notebook 5's one instance runs, checked against its config (the lab shows it after each
# change of instances: each instance's process, as it reports itself and as nvidia-smi sees it)
where = gpus.where_instances_run("6.1", "food_classifier", N_GPUS, TRITON, METRICS, REPOSITORY)

# %% [markdown]
# **Exercise 6.1a: your first perf_analyzer line.** A perf_analyzer line names what to measure
# and how to load it; write it as a Python f-string, so the notebook's variables are filled in:
# - `-m food_classifier`: the model, as Triton names it;
# - `-u {HOST}`: Triton's HTTP address, `host:port`;
# - `--concurrency-range 1`: one request in flight, a closed loop (the next is sent when its
#   answer is back);
# - `--input-data {PERF_INPUT}`: what each request carries, a JSON file holding a real photo (the
#   model decodes JPEGs; random bytes would not decode).
#
# perf_analyzer then measures in windows of 5 s until three in a row agree, and reports the last
# three.

# %%
line_c1 = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier -u {HOST} --concurrency-range 1 --input-data {PERF_INPUT}"
    ### END SOLUTION
)

# %%
line_c1 = exercises.perf_line(line_c1, "6.1a")

# %%
# %%runs_in measure review
c1 = measure(line_c1, "6.1 c1")

# %% [markdown]
# `Client` is what perf_analyzer saw; `Server` what Triton measured inside: the *queue* (waiting
# for a free instance) and the *compute* (input, the model's `execute`, output). The two laws,
# once by hand (every later row carries them):

# %%
# %%runs_in measure review
# Worth reading: the two laws, by hand
X = c1.row["throughput_infer_s"]  # requests per second (one image each)
S = c1.row["execution_ms"]  # ms per execution of the model (Triton's statistics)
R = c1.row["avg_latency_ms"]  # ms from sending a request to its answer (perf_analyzer)
print(f"U = X·S = {X:.1f}/s × {S:.2f} ms = {X * S / 1000:.2f}  (share of time the instance ran)")
print(f"N = X·R = {X:.1f}/s × {R:.2f} ms = {X * R / 1000:.2f}  (requests in flight: 1 by design)")

# %% [markdown]
# **Predict.** With one instance, 16 requests in flight and that execution time, how long will a
# request wait in Triton's queue (ms)? The model's answer is in the table after your runs.

# %%
predicted_queue = claims.predict("6.1 queue at c16 (ms)", None, why="")

# %% [markdown]
# **Exercises 6.1b and 6.1c: 8, then 16 requests in flight.** The same model and input, with 8
# requests in flight, then with 16: two lines.

# %%
line_c8 = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier -u {HOST} --concurrency-range 8 --input-data {PERF_INPUT}"
    ### END SOLUTION
)

# %%
line_c8 = exercises.perf_line(line_c8, "6.1b")

# %%
line_c16 = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier -u {HOST} --concurrency-range 16 --input-data {PERF_INPUT}"
    ### END SOLUTION
)

# %%
line_c16 = exercises.perf_line(line_c16, "6.1c")

# %%
# %%runs_in measure review
c8 = measure(line_c8, "6.1 c8")
c16 = measure(line_c16, "6.1 c16")

# %% [markdown]
# **Exercise 6.1d: Triton's own count, with `curl`.** Triton keeps statistics per model version:
# `GET /v2/models/<name>/versions/<version>/stats`. Write the `curl` line for version 1 of
# `food_classifier` at `TRITON`, piped through `python -m json.tool`. In what it prints, find
# `inference_stats.queue` (`count` requests, `ns` waited in all) and `batch_stats` (executions per
# batch size): the queue time per request in the table below is the first divided by the second.

# %%
stats_line = (
    ### BEGIN SOLUTION
    f"curl -s {TRITON}/v2/models/food_classifier/versions/1/stats | python -m json.tool"
    ### END SOLUTION
)

# %%
exercises.curl_line(stats_line, "6.1d")

# %%
# %%runs_in measure
# !{stats_line}

# %% [markdown]
# The three runs with their laws, the queueing model's latency beside each (mean-value analysis of
# one station with the c1 execution time; `measured_over_model` = 1 where they agree), and each
# run's utilisation over time.
#
# **How to read a row.** `throughput_infer_s` is what was served, images per second;
# `avg_latency_ms`, `p50_ms` and `p99_ms` are what the client waited, on average, for the median
# request and for the slowest one in a hundred; `server_queue_ms` is the part spent in Triton's
# queue and `execution_ms` the time of one execution of the model, both from Triton's own
# statistics. The laws follow from these: `busy_U` (each instance's busy share), `in_flight_N`
# (requests inside, from the client's latency) and `waiting_N` (requests in the queue, from the
# queue time). A row whose `in_flight_N` is not the line's `--concurrency-range` did not measure
# what the line asked, whatever its other numbers say.

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
# **What a batch costs, and what it saves.** Every execution pays some costs once, however many
# images it carries: Triton's hand-over to the model's process and back, the Python call, and on
# a GPU the launch of each of the network's ~150 kernels and the copies to and from its memory.
# Other costs are paid per image: decoding a JPEG, resizing it, and the arithmetic itself where
# the device is already full. A batch of b shares the first kind among b images and pays the
# second kind b times, so an execution of b images costs about `fixed + b × per image`. The more
# of an image's cost is fixed, the more a batch saves; where nearly all of it is per image (a
# decode on the CPU, a CPU whose cores are already busy), a batch of 16 costs nearly 16 times one
# image and saves nothing. The price is paid in latency: every image of the batch waits for the
# whole batch.
#
# **Predict.** How many times the execution time of one image will a batch of 16 take?

# %%
predicted_batch = claims.predict("6.2 compute of 16 images / compute of 1 (x)", None, why="")

# %% [markdown]
# **Exercise 6.2: a batch of 16.** The line of 6.1a, **one** request in flight, each a batch of
# 16 images.

# %%
line = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier -u {HOST} --concurrency-range 1 -b 16 "
    f"--input-data {PERF_INPUT}"
    ### END SOLUTION
)

# %%
line = exercises.perf_line(line, "6.2")

# %%
# %%runs_in measure review
b16 = measure(line, "6.2 b16")
step_table.table([c1, b16])

# %% [markdown]
# **What do you see, and why?** From your rows above. 6.1: what did 16 requests in flight change
# against 1, in throughput, queue time and the instance's `busy_U`? What was the instance doing
# most of its busy time, judging by the GPU's utilisation beside it (notebook 5 showed
# `model.py`)? 6.2: which part of an execution grew with the batch of 16, by its `execution_ms`
# against one image's? Write your answer between the quotes.

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
    verdicts.queue_grows_with_load("6.1", c8, c16, N_GPUS, predicted_queue)
    verdicts.a_batch_costs_less("6.2", b16, c1, predicted_batch)

# %% [markdown]
# ## 6.3 More instances of the Python-backend model
#
# **What an instance is.** An *instance* is one copy of the model that executes one batch at a
# time; Triton keeps one queue per model and hands the request at its head to whichever instance
# is free. With k instances, k executions run at once, so while each is busy all the time the
# model serves up to k times as much, and the line of 6.1 waits k times less. Each copy of a
# Python-backend model is its own process, a *stub* (`triton_python_backend_stub`), with its own
# Python interpreter, its own copy of the weights, and on a GPU its own CUDA context (a few
# hundred MB of the GPU's memory each).
#
# **Why more may not help, or hurt.** A copy only helps while what it needs is free. Every stub
# decodes its JPEGs on the CPU's cores: once the stubs together want more cores than the node
# has, they take turns and each execution gets longer (`cpu_threads: auto` in the config even
# gives each instance fewer threads as instances are added). On a GPU the instances' kernels
# take turns too; a GPU that is already busy all the time gives a new copy nothing. And copies
# only help while there are requests to give them: with 8 in flight, more than 8 instances sit
# idle. So count what each copy buys, and what it costs.
#
# An `instance_group` says how many copies and where. A group puts `count` copies **on each GPU**
# of its `gpus` list (without `gpus`: on every GPU the server sees); several groups add up. So
# both of these put one copy on each of GPUs 0 and 1 (the second, a group per GPU, is the
# original lab's form):
#
# ```
# instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 0, 1 ] } ]
# instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 0 ] },
#                  { count: 1, kind: KIND_GPU, gpus: [ 1 ] } ]
# ```
#
# Without a GPU: `kind: KIND_CPU`, no `gpus`, and `count` is the number of copies in all.
#
# **Exercise 6.3a: the edit, in an editor.** Open the model's `config.pbtxt` (*File → Open from
# Path* in JupyterLab, the path the next cell prints, or `nano` on the node), change its
# `instance_group` so that **two** copies run on every GPU (either form), change nothing else,
# save, and run the cell after it: it shows your diff and checks it. (In the prepare pass the
# file is a copy of the model's config in your results folder; in the measure pass, the node's
# own, which Triton loads: there the next cell makes the edit you made in the prepare pass
# again, so the lease runs what you wrote; without a prepare pass, you make it there.)

# %%
path, before = triton_config.to_edit("food_classifier", "6.3a")
### BEGIN HIDDEN TESTS
if not passes.replays():  # the solved edition's edit, in place of yours in the editor
    path.write_text(config_text.replace_fields(before, instances.instance_group(2, N_GPUS)))
### END HIDDEN TESTS

# %%
print(exercises.file_edit(path, before, "6.3a"))

# %% [markdown]
# **Why unload first, and wait.** Loaded again while it serves, a model whose `instance_group`
# alone changed is updated in place: Triton keeps old instances, sized for the old count.
# Unloaded, every instance starts from your config; and as Triton ends the old processes seconds
# after the unload answers, the next cell waits until its index stops saying `UNLOADING`.

# %%
# %%runs_in measure
print(triton_config.unload_model("food_classifier"))  # returns once the old instances are gone

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
exercises.result(loaded, "6.3b")

# %%
# %%runs_in measure review
placed = placed_now = instances.placement(
    triton_config.served_config("food_classifier", TRITON, when="6.3a"), N_GPUS
)
gpus.both_forms(2, N_GPUS)

# %%
# %%runs_in measure
where = gpus.where_instances_run("6.3", "food_classifier", N_GPUS, TRITON, METRICS, REPOSITORY)

# %% [markdown]
# **Exercise 6.3c: measure the new instances.** A comparison holds only when everything but the
# one change stays the same: write the line that measures them under 6.1b's load. The lab runs
# it on each configuration of 6.3, drawn live.

# %%
line_63 = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier -u {HOST} --concurrency-range 8 --input-data {PERF_INPUT}"
    ### END SOLUTION
)

# %%
line_63 = exercises.perf_line(line_63, "6.3c")

# %%
# %%runs_in measure review
two = watched(line_63, "6.3 2 inst c8", "food_classifier")

# %% [markdown]
# **Uneven on purpose.** Now the same instances **all on GPU 0**. **Predict:** at 8 in flight,
# what will they serve, as a share of what they served spread over the GPUs?

# %%
predicted_gpu0 = claims.predict(
    "6.3 all on GPU 0 / spread over the GPUs (throughput, x)", None, why=""
)

# %% [markdown]
# **Exercise 6.3d: all on GPU 0.** Write the `instance_group` that puts all the instances 6.3a
# spread over the class's two GPUs on GPU 0 alone, and none on GPU 1. The lab loads it where the
# server has two GPUs.

# %%
uneven = """
### BEGIN SOLUTION
instance_group [ { count: 4, kind: KIND_GPU, gpus: [ 0 ] } ]
### END SOLUTION
"""

# %%
uneven = exercises.config_fragment(uneven, "6.3d")

# %%
# %%runs_in measure review
if N_GPUS >= 2:
    triton_config.edit("food_classifier", uneven)
    served_uneven = triton_config.served_config("food_classifier", TRITON, when="6.3d")
    placed_now = instances.placement(served_uneven, N_GPUS)
else:
    print(f"not loaded here ({N_GPUS} GPUs): it needs two; 6.3a's instances stay")

# %% [markdown]
# **Exercise 6.3e: count them.** `nvidia-smi` on the node lists one `triton_python_backend_stub`
# per instance, each on its GPU (without a GPU: `ps -ef | grep triton_python_backend_stub`
# counts the CPU's). How many are on GPU 0 now? Write the number you counted.

# %%
# %%runs_in measure review
stubs_seen = (
    ### BEGIN SOLUTION
    placed_now.get("GPU 0", placed_now.get("CPU", 0))
    ### END SOLUTION
)

# %%
# %%runs_in measure review
stubs_seen = exercises.result(stubs_seen, "6.3e", placed_now)

# %%
# %%runs_in measure
if N_GPUS >= 2:  # where the lab sees them, beside your count
    where = gpus.where_instances_run("6.3d", "food_classifier", N_GPUS, TRITON, METRICS, REPOSITORY)

# %% [markdown]
# Your 6.3c line on them (watch nvtop), beside the same instances spread out. The last table
# applies the utilisation law to each GPU: its busy share divided by the executions per second is
# the GPU's busy time in one execution (`gpu_ms_per_execution`), and that over the whole
# execution is the GPU's share of it (`gpu_share_of_execution`).

# %%
# %%runs_in measure review
all_on_gpu0 = None  # not run without two GPUs
if N_GPUS >= 2:
    all_on_gpu0 = watched(line_63, "6.3 all on GPU 0 c8", "food_classifier")
    claims.compare_prediction(predicted_gpu0, all_on_gpu0.throughput / two.throughput)
    print(step_table.table([two, all_on_gpu0]).to_string())
    print(gpu_scaling.side_by_side([(two, placed), (all_on_gpu0, placed_now)], N_GPUS))
else:
    print(f"not run here ({N_GPUS} GPUs): it needs two")

# %% [markdown]
# **Exercise 6.3f: four per GPU, in the file.** Open the file again and set **four** copies on
# every GPU, nothing else; the cell after the check loads it (if Triton refuses, the file goes
# back as it was and the cell says why).

# %%
path, before = triton_config.to_edit("food_classifier", "6.3f")
### BEGIN HIDDEN TESTS
if not passes.replays():  # the solved edition's edit, in place of yours in the editor
    path.write_text(config_text.replace_fields(before, instances.instance_group(4, N_GPUS)))
### END HIDDEN TESTS

# %%
print(exercises.file_edit(path, before, "6.3f"))

# %%
# %%runs_in measure review
reloaded = triton_config.reload_edited("food_classifier", before, "6.3f")

# %%
# %%runs_in measure
where = gpus.where_instances_run("6.3f", "food_classifier", N_GPUS, TRITON, METRICS, REPOSITORY)

# %%
# %%runs_in measure review
four = watched(line_63, "6.3 4 inst c8", "food_classifier")
one_each = c8  # one instance per device: 6.1b's run, where the server has one device
if N_GPUS >= 2:  # one on each GPU, loaded and measured like the others
    triton_config.edit("food_classifier", instances.instance_group(1, N_GPUS), verbose=False)
    one_each = measure(line_63, "6.3 1 inst c8", verbose=False)
per_device = {1: one_each, 2: two, 4: four}  # instances per device -> its run at 8 in flight
plots.utilisation_over_time(
    {run.name: run.utilisation for run in per_device.values()},
    "6.3: utilisation with 1, 2 and 4 instances per device",
)
step_table.table(per_device.values())

# %% [markdown]
# **Decision 6.3g: how many instances per GPU would you deploy?** Your users keep 8 requests in
# flight, and the product asks that 95 % of them are answered within three times what one
# request takes alone (6.1a's p95, `OBJECTIVE_MS` below). Every copy costs memory on its GPU and
# CPU time on the node. Choose the instances per device you would deploy, from the three you
# measured, or `"none"` if you would not deploy any of them for this objective, and write your
# reason beside it: the numbers of your rows you decided on.

# %%
# %%runs_in measure review
OBJECTIVE_MS = 3 * c1.row["p95_ms"]
print(f"the objective: p95 at most {OBJECTIVE_MS:.1f} ms at 8 in flight")
deploy = (
    ### BEGIN SOLUTION
    next((n for n, run in per_device.items() if run.row["p95_ms"] <= OBJECTIVE_MS), "none")
    ### END SOLUTION
)
why_63g = """
### BEGIN SOLUTION
The fewest copies whose p95 at 8 in flight came under the objective (the table above).
### END SOLUTION
"""

# %%
# %%runs_in measure review
deploy = judgement.decide("6.3g", deploy, why_63g, per_device, OBJECTIVE_MS)

# %% [markdown]
# **Decision 6.3h: what limited four per GPU?** Look at the last row: each instance's busy share
# (`busy_U`), the queue (`waiting_N`), each GPU's utilisation and the CPU's (the `_util_pct`
# columns: the CPU's is all of the node's cores together), and what nvtop showed. Which resource
# kept this configuration from serving more: the `"instances"` themselves, a `"GPU"`, the
# `"CPU"`, or the `"load"` (too few requests in flight to keep them busy)? Your reason beside it.

# %%
# %%runs_in measure review
busy_63h = {  # each resource's busy share in the run of four per device
    "instances": four.row["busy_U"],
    "GPU": (verdicts.busiest_gpu_pct(four.row) or 0) / 100,
    "CPU": four.row.get("cpu_util_pct", 0) / 100,
}
limit = (
    ### BEGIN SOLUTION
    next((device for device in ("GPU", "CPU") if busy_63h[device] >= 0.9), None)
    or ("instances" if busy_63h["instances"] >= 0.9 else "load")
    ### END SOLUTION
)
why_63h = """
### BEGIN SOLUTION
A device busy all the time (an instance waiting for it is busy too), else the instances if each
was busy all the time, else the load (the utilisation columns and busy_U of four per GPU).
### END SOLUTION
"""

# %%
# %%runs_in measure review
limit = judgement.decide("6.3h", limit, why_63h, four)

# %%
# %%runs_in measure
reloaded = triton_config.edit("food_classifier", ONE_INSTANCE, verbose=False)

# %% [markdown]
# ## 6.4 The ONNX model
# `food_classifier_onnx` takes the pre-processed tensor (`input`, FP32 [3, 224, 224]) and returns
# the 11 logits: no JPEG to decode, no Python per request where it runs on Triton's onnxruntime
# backend, which it does on the class's node (NVIDIA's Triton image). Local mode's Triton lacks
# that backend: there a small Python-backend model runs the same `model.onnx` with ONNX Runtime,
# under the same name. perf_analyzer fills a tensor input with random numbers and needs only its
# shape, without the batch dimension: `--shape input:3,224,224`.
#
# Why it should be faster per request: the Python-backend model does, for every image and in
# Python, what the client has now done beforehand (decode the base64 text and the JPEG, resize,
# normalise), then calls PyTorch one operation at a time. ONNX Runtime runs the exported graph in
# C++, with operations fused where it can. The price is on the wire: each request now carries
# 3 × 224 × 224 floats, about 600 kB, where a JPEG is tens of kB, and the client pays for the
# decoding. Which is cheaper overall depends on where the CPU time and the bandwidth are.
#
# **Exercise 6.4a: one request in flight, a tensor input.** Write the line for
# `food_classifier_onnx`, 1 in flight, with `--shape` (no `--input-data`: the input is numbers).

# %%
line = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier_onnx -u {HOST} --concurrency-range 1 --shape input:3,224,224"
    ### END SOLUTION
)

# %%
line_onnx = exercises.perf_line(line, "6.4a")

# %%
# %%runs_in measure review
onnx_c1 = measure(line_onnx, "6.4 onnx c1")

# %% [markdown]
# **Exercise 6.4b: two copies of it on every GPU.** Edit `food_classifier_onnx`'s `config.pbtxt`
# as in 6.3a: two instances on every GPU, nothing else.

# %%
path, before = triton_config.to_edit("food_classifier_onnx", "6.4b")
### BEGIN HIDDEN TESTS
if not passes.replays():  # the solved edition's edit, in place of yours in the editor
    path.write_text(config_text.replace_fields(before, instances.instance_group(2, N_GPUS)))
### END HIDDEN TESTS

# %%
print(exercises.file_edit(path, before, "6.4b"))

# %%
# %%runs_in measure review
reloaded = triton_config.reload_edited("food_classifier_onnx", before, "6.4b")

# %%
# %%runs_in measure
where = gpus.where_instances_run("6.4", "food_classifier_onnx", N_GPUS, TRITON, METRICS, REPOSITORY)

# %% [markdown]
# **Exercises 6.4c to 6.4e: warm up, then 8 and 16 in flight.** A new instance answers its first
# requests slowly (it allocates memory, and a GPU runtime prepares its kernels), so the first
# line warms them: 8 in flight for a fixed count of 100 requests, `--request-count 100`, which
# replaces the measurement windows and is not kept. Then the two measured lines, 8 and 16 in
# flight: three lines.

# %%
warm_up = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier_onnx -u {HOST} --concurrency-range 8 --request-count 100 "
    "--shape input:3,224,224"
    ### END SOLUTION
)

# %%
warm_up = exercises.perf_line(warm_up, "6.4c")

# %%
line_onnx_c8 = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier_onnx -u {HOST} --concurrency-range 8 --shape input:3,224,224"
    ### END SOLUTION
)

# %%
line_onnx_c8 = exercises.perf_line(line_onnx_c8, "6.4d")

# %%
line_onnx_c16 = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier_onnx -u {HOST} --concurrency-range 16 "
    "--shape input:3,224,224"
    ### END SOLUTION
)

# %%
line_onnx_c16 = exercises.perf_line(line_onnx_c16, "6.4e")

# %%
# %%runs_in measure review
perf.run_line(warm_up, "6.4 warm-up", out=OUT, verbose=False)  # not kept for the summary
onnx_c8 = measure(line_onnx_c8, "6.4 onnx 2 inst c8", verbose=False)
onnx_c16 = measure(line_onnx_c16, "6.4 onnx 2 inst c16")

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
# **What do you see, and why?** From your rows above. 6.3: what did each added copy of the
# Python-backend model bring, in throughput and queue time, beside the device your terminal showed
# busy? What does a second GPU buy this model, by your run with all on GPU 0 against spread out
# (with one GPU: by that GPU's utilisation in your rows)? 6.4: why does the ONNX model serve more
# at 1 in flight, by the two models' `execution_ms`?

# %%
answer_64 = """
### BEGIN SOLUTION
(solved edition: the expected answer is in docs/answer_key.md, 6.3 and 6.4)
### END SOLUTION
"""

# %% jupyter={"source_hidden": true}
# %%runs_in measure review
with judgement.verdict_after(answer_64, "6.3 and 6.4"):
    verdicts.more_instances("6.3", c8, two, four, N_GPUS)
    verdicts.second_gpu_buys("6.3", all_on_gpu0, two, N_GPUS)
    step_table.model_readings(table_64, ONNX_MS)
    provider = triton_stats.onnx_provider("food_classifier_onnx", TRITON, METRICS)
    verdicts.onnx_serves_faster("6.4", onnx_c1, c1, onnx_c8, onnx_c16, N_GPUS, provider)

# %% [markdown]
# ## 6.5 The Flask UI with the ONNX model
# The ONNX model expects a tensor, so the web app now decodes, resizes and normalises the photo
# itself (`servelab/food11.py`, the services' shared code) and calls Triton with `tritonclient`
# (`flask_app/backends.py`). Switch Flask to that model; in Docker, run the printed command on the
# host. The lab then uploads a photo to the page and asks the Python-backend model for the same
# photo: both should name the same class.

# %%
# %%runs_in measure
services.use_flask_triton_model("food_classifier_onnx")
verdicts.flask_names_the_same_class("6.5", labenv.url("FLASK_SERVER_URL"), TRITON)

# %% [markdown]
# ## 6.6 Bursty load, and dynamic batching
#
# **Open loop.** In a closed loop a new request waits for an answer, so a slow server slows its
# own load down. Real users do not wait for each other: they arrive when they arrive. An *open
# loop* offers a fixed **rate**: `--request-rate-range R` sends R requests per second whether or
# not earlier ones came back, and `--async` lets perf_analyzer keep as many in flight as the
# schedule needs (the lab flags a run where over 5 % left late, which would make it a closed
# loop in disguise). The throughput column is then what was *served*: when the instance cannot
# keep up, requests still leave on time and the queue grows for as long as the run lasts.
#
# **Why random arrivals queue.** `--request-distribution constant` spaces the requests evenly;
# `poisson` sends them at random moments, independently of each other, as independent users
# arrive: the same mean rate, but the gaps vary, and short gaps come in bunches. With evenly
# spaced requests below the instance's capacity, each finds the instance free: nothing waits.
# With random ones, a bunch that arrives faster than the instance serves leaves a queue behind
# it, and the queue drains only at the spare rate. For one instance with a fixed service time S,
# busy a share ρ of the time, queueing theory (the M/D/1 queue) puts the mean wait at
# ρ·S / (2·(1 − ρ)): 0.75 S at ρ = 0.6, 4.5 S at 0.9, and without bound as ρ approaches 1. The
# wait grows with the load long before the instance is full, and it is the variability of the
# arrivals that makes it, not their mean.
#
# 6.6 uses **one** ONNX instance, so a single queue decides everything. The rates are set from
# its **capacity**, what it serves when it never waits for work.
#
# **Exercise 6.6a: one instance again, in the file.** Edit `food_classifier_onnx`'s
# `config.pbtxt` back to one instance, on GPU 0 (notebook 5's), nothing else.

# %%
path, before = triton_config.to_edit("food_classifier_onnx", "6.6a")
### BEGIN HIDDEN TESTS
if not passes.replays():  # the solved edition's edit, in place of yours in the editor
    one = ONE_INSTANCE if N_GPUS else instances.instance_group(1, 0)
    path.write_text(config_text.replace_fields(before, one))
### END HIDDEN TESTS

# %%
print(exercises.file_edit(path, before, "6.6a"))

# %%
# %%runs_in measure review
reloaded = triton_config.reload_edited("food_classifier_onnx", before, "6.6a")

# %%
# %%runs_in measure
where = gpus.where_instances_run("6.6", "food_classifier_onnx", N_GPUS, TRITON, METRICS, REPOSITORY)

# %% [markdown]
# **Exercise 6.6b: its capacity.** An instance never waits for work when a request is always
# ready for it, which four in flight ensure. Write 6.4a's line at 4 in flight.

# %%
line = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier_onnx -u {HOST} --concurrency-range 4 --shape input:3,224,224"
    ### END SOLUTION
)

# %%
line_capacity = exercises.perf_line(line, "6.6b")

# %%
# %%runs_in prepare
RATE, RATES = 100, [100, 166, 233]  # in this pass, stand-ins for what your capacity sets
exercises.given(RATE=RATE, RATES=RATES)

# %%
# %%runs_in measure review
CAPACITY = measure(line_capacity, "6.6 capacity c4", verbose=False).throughput.value
BUSY_MS = 1000 / CAPACITY  # time per request of an instance that never waits for work
RATES = [int(f * CAPACITY) for f in (0.6, 1.0, 1.4)]  # offered loads: 60 %, 100 %, 140 %
RATE = RATES[0]
exercises.given(RATE=RATE, RATES=RATES)
print(f"one instance: {CAPACITY:.0f} requests/s ({BUSY_MS:.2f} ms each); the rates: {RATES}")

# %% [markdown]
# **Exercises 6.6c and 6.6d: evenly spaced, then at random.** Write the line that offers `RATE`
# requests per second (60 % of the capacity) to `food_classifier_onnx`, evenly spaced,
# asynchronously (`--shape` as in 6.4a); then the same rate with Poisson arrivals.

# %%
line_constant = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier_onnx -u {HOST} --shape input:3,224,224 --async "
    f"--request-rate-range {RATE} --request-distribution constant"
    ### END SOLUTION
)

# %%
line_constant = exercises.perf_line(line_constant, "6.6c")

# %%
line_poisson = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier_onnx -u {HOST} --shape input:3,224,224 --async "
    f"--request-rate-range {RATE} --request-distribution poisson"
    ### END SOLUTION
)

# %%
line_poisson = exercises.perf_line(line_poisson, "6.6d")

# %%
# %%runs_in measure review
constant = measure(line_constant, f"6.6 constant {RATE}/s")
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
# The model column: the service time, plus the time outside the instance at 1 in flight (6.4a),
# plus the wait of an M/D/1 queue for Poisson arrivals, none for evenly spaced ones. Note which
# run queued more, and p99 against the median (`p50_ms`): you explain both at the end of 6.6.
#
# **Dynamic batching.** 6.2 showed what a batch saves when the client sends one; here each
# request carries one image, and the server forms the batches: when requests wait in the queue,
# Triton hands the model several of them together, in one execution. Under load that turns the
# queue itself into batches, and where a batch costs much less than its images one by one, the
# instance's capacity rises with the batch size. At a light load there is rarely anything to
# batch: a request may wait up to `max_queue_delay_microseconds` for company, and pays that
# wait whether company comes or not. In `config.pbtxt` it is a block, `dynamic_batching { ... }`,
# with `preferred_batch_size` (the sizes Triton aims for, a list such as `[ 2, 4 ]`) and
# `max_queue_delay_microseconds`, each written `name: value`.
#
# A batch size is also a tensor *shape*, and a GPU runtime may prepare its work per shape. ONNX
# Runtime 1.20 and later, on its CUDA provider, rebuild their convolution plans whenever a
# session's batch size changes: on the lab's H100, one session fed mixed sizes took
# <!--fig h100_6_switch_seconds-->0.9 s a batch, the same sizes grouped 2.1 ms<!--/fig-->. Local
# mode's stand-in for `food_classifier_onnx` therefore keeps one session per batch size, padding a
# batch up to the nearest: mixed sizes then cost <!--fig h100_6_switch_labs-->1.06x<!--/fig-->
# grouped (both on the lab's H100 reference run). On the class's node
# the model runs Triton's own onnxruntime backend instead, which this lab has not yet measured
# under batching on a GPU: your runs below are the measurement, and 6.6's verdicts judge them.
# Few sizes, known in advance, are also what `preferred_batch_size` and TensorRT's optimisation
# profiles are for.
#
# **Exercise 6.6e: turn it on, in the file.** Open `food_classifier_onnx`'s `config.pbtxt` in the
# editor, add the block with preferred sizes 4, 6 and 8 and a delay of at most 100 µs, change
# nothing else, save, and run the cell after it: it checks your edit, then asks Triton to load the
# model again (if Triton refuses it, the file goes back as it was).

# %%
path, before = triton_config.to_edit("food_classifier_onnx", "6.6e")
### BEGIN HIDDEN TESTS
block = "dynamic_batching { preferred_batch_size: [ 4, 6, 8 ] max_queue_delay_microseconds: 100 }"
if not passes.replays():  # the solved edition's edit, in place of yours in the editor
    path.write_text(f"{before}\n{block}\n")
### END HIDDEN TESTS

# %%
print(exercises.file_edit(path, before, "6.6e"))

# %%
# %%runs_in measure review
reloaded = triton_config.reload_edited("food_classifier_onnx", before, "6.6e")
batching = config_text.field_text(
    triton_config.file_text("food_classifier_onnx"), "dynamic_batching"
)  # your block, for the optional runs

# %% [markdown]
# **Exercise 6.6f: what a batch of 8 costs.** The model of a batch's cost is a line through two
# points, one image and eight. Write 6.4a's line with every request a batch of 8, one in flight.

# %%
line = (
    ### BEGIN SOLUTION
    f"perf_analyzer -m food_classifier_onnx -u {HOST} --concurrency-range 1 -b 8 "
    "--shape input:3,224,224"
    ### END SOLUTION
)

# %%
line_b8 = exercises.perf_line(line, "6.6f")

# %% [markdown]
# Your Poisson line again with batching on, drawn live, with the batch sizes Triton ran (its
# statistics before and after); then your batch of 8, and what the two points say of a batch:

# %%
# %%runs_in measure review
batched = {RATE: watched(line_poisson, f"6.6 batching poisson {RATE}/s", "food_classifier_onnx")}
print(triton_stats.batch_table(batched[RATE].stats))  # what Triton ran during the run
B8_MS = measure(line_b8, "6.6 b8", verbose=False).row["execution_ms"]
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
predicted_batched = claims.predict(
    "6.6 mean latency at 140% of capacity, with batching (ms)", None, why=""
)

# %% [markdown]
# **Exercise 6.6g: the line at any rate.** The sweep offers 60 %, 100 % and 140 % of the
# capacity (`RATES`), with batching and without. Write the body of `poisson_at`: your Poisson
# line of 6.6d at the rate it is given. The check calls it at every rate of the sweep.


# %%
def poisson_at(rate):
    """The perf_analyzer line that offers `rate` requests/s to food_classifier_onnx, Poisson."""
    ### BEGIN SOLUTION
    return (
        f"perf_analyzer -m food_classifier_onnx -u {HOST} --shape input:3,224,224 --async "
        f"--request-rate-range {rate} --request-distribution poisson"
    )
    ### END SOLUTION


# %%
sweep_lines = exercises.function(poisson_at, "6.6g")

# %% [markdown]
# The lab runs the other rates with batching (the top one drawn live), then takes the block out
# of the file and runs them without; the sweep, with the queueing model's mean latency (M/D/1
# without batching; with batching, an instance that runs what arrived during its last batch):

# %%
# %%runs_in measure review
top = f"6.6 batching poisson {RATES[-1]}/s"
batched[RATES[-1]] = watched(sweep_lines[RATES[-1]], top, "food_classifier_onnx")
batched[RATES[1]] = measure(sweep_lines[RATES[1]], f"6.6 batching poisson {RATES[1]}/s", False)
triton_config.edit("food_classifier_onnx", remove=("dynamic_batching",), verbose=False)
alone = {RATE: poisson}  # without batching: the Poisson run at 60 %, then the other rates
for rate in RATES[1:]:
    alone[rate] = measure(sweep_lines[rate], f"6.6 no batching poisson {rate}/s", False)

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
# **Decision 6.6h: what would you deploy for this load?** The product's users arrive at random,
# `USERS` requests per second at the busiest hour: a figure of the product, not of this machine.
# The product asks for a mean latency under ten times an instance's busy time per request
# (`OBJECTIVE_66` below). Dynamic batching costs nothing but the wait it allows; another instance
# costs a share of a GPU and its memory. Your sweep measured one instance with batching and
# without at three rates; read each at the lowest rate of the sweep that is at least `USERS`.
# Choose `"one instance"` (no batching), `"batching"` (one instance with it), or
# `"more instances"` if neither you measured would do, and write your reason beside it.

# %%
# %%runs_in measure review
USERS, OBJECTIVE_66 = 400, 10 * BUSY_MS
options_66 = {"one instance": alone, "batching": batched}  # cheapest first: {rate: run}
print(f"the objective: mean latency under {OBJECTIVE_66:.1f} ms at {USERS} requests/s")
config_66 = (
    ### BEGIN SOLUTION
    next(
        (
            name
            for name, runs in options_66.items()
            if USERS <= max(RATES)
            and runs[min(r for r in RATES if r >= USERS)].row["avg_latency_ms"] < OBJECTIVE_66
        ),
        "more instances",
    )
    ### END SOLUTION
)
why_66h = """
### BEGIN SOLUTION
The cheapest configuration whose mean latency met the objective at the lowest rate of the sweep
at or above the users' load; none measured there: more instances.
### END SOLUTION
"""

# %%
# %%runs_in measure review
config_66 = judgement.decide("6.6h", config_66, why_66h, options_66, USERS, OBJECTIVE_66)

# %% [markdown]
# **What do you see, and why?** From your rows above. At 60 % of capacity, why did the Poisson run
# queue more than the evenly spaced one, or not, by their tails (`p99_ms`)? At the highest rate,
# what did batching change in what was served against what was offered, and in the latency? How
# much could batching help at the lowest rate, by the batch sizes in your rows?

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
    verdicts.poisson_queues_more("6.6", poisson, constant)
    batch_ms = [
        SERVICE(b) if c == "dynamic batching" else BUSY_MS
        for b, c in zip(sweep.avg_batch_size, sweep.config)
    ]
    step_table.model_readings(sweep, batch_ms, open_loop=True)
    top_with, top_without = batched[RATES[-1]], alone[RATES[-1]]
    verdicts.batches_form_under_load("6.6", top_with, batched[RATE], sweep, predicted_batched)
    capacity_x = queueing.saturation_rate(SERVICE, max_batch=8) / CAPACITY  # batches of 8 lift it
    lift = {"b8_x": B8_MS / ONNX_MS, "capacity_x": capacity_x, "provider": provider}
    verdicts.batching_keeps_latency_down("6.6", top_with, top_without, RATES[-1], BUSY_MS, lift)

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
    light_runs = [measure(poisson_at(light), f"6.6 no batching poisson {light}/s", False)]
    triton_config.edit("food_classifier_onnx", batching, verbose=False)  # your block of 6.6e
    light_runs.append(measure(poisson_at(light), f"6.6 batching poisson {light}/s", False))
    print(step_table.table(light_runs))

# %%
# %%runs_in measure
closed = []
for on in (True, False) if GOING_FURTHER else ():
    config = f"{'' if on else 'no '}batching"
    fields, removed = (batching, ()) if on else ("", ("dynamic_batching",))
    triton_config.edit("food_classifier_onnx", fields, remove=removed, verbose=False)
    for n in (1, 4, 16):
        run = measure(perf.with_load(line_onnx, f"--concurrency-range {n}"), f"6.6 {config} c{n}")
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
# Every run with its laws, and the plots: latency split, 6.6's batch sizes, utilisation. Your
# decisions, with your reasons, are in `decisions.csv` beside `claims.csv`.

# %%
# %%runs_in measure review
rows = pd.DataFrame([{**run.row, "run": run.name, "step": run.name.split()[0]} for run in runs])
rows.drop(columns="step").to_csv(OUT / "summary.csv", index=False)
claims.save(OUT)  # first: a review of a bundle cut short has no 6.6 to plot
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
step_table.table(runs)

# %% [markdown]
# **Hand in** `summary.csv`, the plots, `predictions.csv`, `decisions.csv` and your answers above,
# and answer:
#
# 1. 6.4: the ONNX model receives 600 kB of floats per image instead of a JPEG of tens of kB. When
#    would that trade-off stop paying off?
# 2. 6.6: what does `max_queue_delay_microseconds` trade against what, at the highest rate of
#    your sweep?
# 3. 6.6: a colleague reads "served below the offered rate, 0 % sent late" as "perf_analyzer could
#    not send fast enough". What would you answer?
#
# ## Tear down (optional: to run the lab again on this node)
# The class's node is deleted by notebook 2's last cell, and this is not needed there. To run the
# lab again on the same node: both models back to one instance without dynamic batching, and the
# Flask UI back on the first model:

# %%
# %%runs_in measure
reloaded = triton_config.edit(
    "food_classifier_onnx", ONE_INSTANCE, remove=("dynamic_batching",), verbose=False
)
services.use_flask_triton_model("food_classifier")

# %% [markdown]
# Then, on the host: `docker compose -f docker-compose-triton.yaml down` (Docker, with your CPU
# override file if you use one) or `make down` (local mode).
#
# ## Your results bundle
# The last cell, in every pass: where your results bundle is, and how to download it.

# %%
passes.finish()
