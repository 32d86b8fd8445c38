# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 9. Beyond one node: the same model on a Ray Serve cluster (optional)
#
# Notebooks 3 to 8 squeezed one machine: instances, batching, transports. When one node is not
# enough, a serving system puts **replicas** of the model on several nodes behind a **router**,
# and a **controller** adds replicas when the queue grows. Ray Serve has all three built in, on a
# Ray cluster: here, a head node and a second node, each a process with one core of its own (on
# Chameleon, two leased machines; at the end of this notebook).
#
# | step | what you do | what it shows |
# |---|---|---|
# | 9.1 | one replica: by hand, then its capacity at 1 or 2 at once | what the router costs |
# | 9.2 | 1, 2 and 4 replicas over two nodes at 150 % of one's capacity | what replicas buy |
# | 9.3 | autoscaling through a load step | how fast the controller reacts |
# | 9.4 | a replica crashes in the middle of a run | what a client sees |
# | 9.5 | Triton's instances at the same load | Ray's path against Triton's |
#
# As in notebooks 4 to 8: exercises checked as you write them, predictions before runs, your
# answer before the lab's verdict, a decision judged on your rows, and the two laws on every row:
# **U = X·S** (`busy_U`: how busy each replica was) and **N = X·R** (`in_flight_N`).
#
# The load is an **open loop**, as perf_analyzer's `--request-rate-range` in 6.6: requests leave
# at their moments (Poisson arrivals) whether or not earlier ones came back
# (`open_loop.run`, `servelab/loadgen/open_loop.py`); a run where more than 5 % left late says so.
#
# ## Setup
# In local mode the next cell starts the lab's Ray cluster (`python -m labstack.launcher ray`, the
# same as `make up RAY=1`; `make down` stops it; on 127.0.0.1 only, and closed to anyone without
# its token, which the cell hands to Ray from `.lab/`); on Chameleon, notebook 2's optional
# section 5 starts one over two nodes, and this notebook uses it when `LAB_RAY_HEAD` is set (last
# section).


# %% [markdown]
# This notebook needs the node throughout: it has the measure pass only (notebook 0 explains the
# passes); its first cell says so in another.

# %%
from servelab import passes

PASS = passes.start("09_ray_serve_cluster", passes=("measure",))

# %%
import numpy as np
import pandas as pd
import requests

from servelab import claims, exercises, labenv, loadgen, plots, ray_serving, services
from servelab.exercises import judgement
from servelab.loadgen import open_loop
from servelab.paths import RESULTS
from servelab.ray_serving import FoodClassifier
from servelab.verdicts import ray_serve as verdicts

# %%
labenv.load()
print(services.use_ray_cluster())
URL = ray_serving.connect()  # ray.init(address=RAY_ADDRESS), then serve.start(...)
RATE_SECONDS = labenv.param("RAY_RATE_SECONDS", 10)  # each fixed-rate run
STEP = labenv.param_list("RAY_STEP_SECONDS", "10,40,30")  # before, during and after the step
OUT = RESULTS / "ray"
OUT.mkdir(parents=True, exist_ok=True)
runs = {}  # label -> its requests, one row each: every run, for the summary at the end


# %%
def keep(run: pd.DataFrame) -> pd.DataFrame:
    """The run (loadgen's or open_loop's), kept in `runs` for the summary; returned to be handed
    on (a cell run again replaces its run)."""
    runs[run.attrs["label"]] = run
    return run


def row(run: pd.DataFrame, servers: int, service_ms: float | None = None) -> dict:
    """The run's summary with the laws per server (ray_serving.row), named by its label."""
    return ray_serving.row(run, run.attrs["label"], servers, service_ms=service_ms)


# %%
ray_serving.nodes()

# %% [markdown]
# Two nodes, each with one CPU as Ray counts them. The deployment, what runs in each replica, is
# a class with Ray Serve's decorator: each replica is a Ray actor holding one ONNX Runtime
# session with one thread, fed one image (3×224×224 float32 values, the bytes Triton's
# `food_classifier_onnx` takes in notebook 6) per HTTP request:

# %%
import inspect

from servelab.serving import ray_app

print(inspect.getsource(ray_app.FoodClassifier.func_or_class))

# %% [markdown]
# `num_cpus: 0.5` lets two replicas share a node's CPU. The rest is Ray's: its HTTP **proxy** (on
# the head node) takes each request, its **router** sends it to a replica with room, and its
# **controller** starts the replicas, checks their health and replaces the ones that die.
#
# ## 9.1 One replica, and how many requests it takes at once
# `deployment.options(...)` sets how the deployment is served; `ray_serving.deploy` hands it to
# `serve.run` and shows where the replicas landed (Ray's state API). One replica taking one
# request at a time (`max_ongoing_requests=1`, as a Triton instance runs one execution at a
# time), a request by hand and a bad one:

# %%
ray_serving.deploy(FoodClassifier.options(num_replicas=1, max_ongoing_requests=1))

# %%
BODY = ray_serving.image_body()  # 602,112 bytes
resp = requests.post(URL, data=BODY, timeout=60)
print(resp.status_code, resp.json(), "| Server-Timing:", resp.headers.get("Server-Timing"))
bad = requests.post(URL, data=b"not an image", timeout=60)
print(bad.status_code, bad.json())

# %% [markdown]
# One request at a time first (the path's cost without a queue), then the replica's
# **capacity**: what it serves with 4 requests in flight (a closed loop, as `--concurrency-range`
# in 6.1–6.4), with `max_ongoing_requests` 1 and then 2. With 1, the other three wait at Ray's
# router, which sends the next one when it learns that the replica has room: a waiting request
# asks again after
# 25 ms, then every 50 ms (Ray's default grows to 0.5 s; the lab's deployment sets
# `request_router_config={"max_backoff_s": 0.05}` in `servelab/serving/ray_app.py`, which says
# why). With 2, one waits inside the replica, ready when the model is free, where no other
# replica can take it. Ray's default is 5.


# %%
def capacity(ongoing: int) -> pd.DataFrame:
    """One replica taking `ongoing` requests at once, 4 requests in flight: the run."""
    ray_serving.deploy(FoodClassifier.options(num_replicas=1, max_ongoing_requests=ongoing))
    label = f"9.1 capacity, {ongoing} at once"
    return keep(loadgen.run(URL, BODY, n=80, concurrency=4, label=label))


sequential = keep(loadgen.run(URL, BODY, n=20, concurrency=1, label="9.1 sequential"))
at_once = {n: capacity(n) for n in (1, 2)}  # requests a replica takes at once -> the run
table_91 = pd.DataFrame([row(run, 1) for run in (sequential, *at_once.values())]).set_index("run")
table_91.round(2)

# %% [markdown]
# **Decision 9.1: `max_ongoing_requests` for each replica, 1 or 2?** The smaller that serves at
# least 90 % of the better throughput of your two capacity rows: a request queued inside a
# replica cannot go to another replica that frees up first.

# %%
ongoing = (
    ### BEGIN SOLUTION
    1 if loadgen.throughput(at_once[1]).value >= 0.9 * loadgen.throughput(at_once[2]).value else 2
    ### END SOLUTION
)

# %%
ongoing = judgement.fewest_near_best(
    ongoing,
    "9.1",
    "the max_ongoing_requests of each replica",
    {n: loadgen.throughput(run) for n, run in at_once.items()},
)
CAPACITY = loadgen.summarize(at_once[ongoing])["throughput_rps"]
RATE = round(1.5 * CAPACITY, 1)  # 150 % of one replica
SEQUENTIAL_MS = loadgen.summarize(sequential)["median_ms"]
BUDGET_MS = 10 * SEQUENTIAL_MS  # the p95 a user would accept: ten requests' worth
print(f"one replica: {CAPACITY:.1f}/s; 9.2's rate: {RATE}/s; p95 budget {BUDGET_MS:.0f} ms")

# %% [markdown]
# **What do you see, and why?** One at a time, what did a request take against the model's own
# time (`service_ms`)? With 4 in flight and 1 at once, how busy was the replica (`busy_U`) while
# requests waited (`in_flight_N`), and what were they waiting for? What did 2 at once change?

# %%
answer_91 = """
### BEGIN SOLUTION
(solved edition: the expected answer is in docs/answer_key.md, 9.1)
### END SOLUTION
"""

# %% jupyter={"source_hidden": true}
with judgement.verdict_after(answer_91, "9.1"):
    verdicts.one_replica("9.1", at_once[1], at_once[2])

# %% [markdown]
# ## 9.2 Replicas over two nodes
# **Exercise 9.2: two replicas.** Write the options for **2** replicas, each taking the number of
# requests at once you decided in 9.1 (`ongoing`): `num_replicas` and `max_ongoing_requests`, as
# `FoodClassifier.options(name=value, ...)`.

# %%
deployment = (
    ### BEGIN SOLUTION
    FoodClassifier.options(num_replicas=2, max_ongoing_requests=ongoing)
    ### END SOLUTION
)

# %%
deployment = exercises.deployment_options(
    deployment,
    "9.2",
    f"two replicas, {ongoing} request(s) at once each",
    FoodClassifier,
    needs={"num_replicas": 2, "max_ongoing_requests": ongoing},
)
ray_serving.deploy(deployment)

# %% [markdown]
# Ray spreads replicas over the nodes: one on each. The lab runs your deployment at `RATE`
# (150 % of one replica), then the same with 1 and with 4 replicas (`deployment.options
# (num_replicas=...)`: two per node).
#
# **Predict.** How many requests per second will 2 replicas serve at that rate, and 4?

# %%
predicted_two = claims.predict("9.2 served by 2 replicas at 150% of one (requests/s)", None, why="")
predicted_four = claims.predict("9.2 served by 4 replicas / by 2 (x)", None, why="")


# %%
def at_rate(replicas: int) -> pd.DataFrame:
    """Your deployment with `replicas` replicas, offered RATE requests/s for RATE_SECONDS: the
    run."""
    placed = ray_serving.deploy(deployment.options(num_replicas=replicas))
    label = f"9.2 {replicas} replicas"
    run = keep(open_loop.run(URL, BODY, rate=RATE, seconds=RATE_SECONDS, label=label))
    print(f"{label}: replicas on nodes {placed['node'].value_counts().to_dict()}")
    return run


by_replicas = {n: at_rate(n) for n in (2, 1, 4)}  # replicas -> the run at RATE
table_92 = pd.DataFrame([row(run, n) for n, run in by_replicas.items()]).set_index("run")
table_92.round(2)

# %% [markdown]
# **Decision 9.2: how many replicas would you run at this rate: 1, 2 or 4?** The fewest that
# serve at least 90 % of the best throughput of your three rows: a replica costs a core's share
# and memory on every node.

# %%
replicas = (
    ### BEGIN SOLUTION
    min(
        n
        for n, run in by_replicas.items()
        if loadgen.throughput(run).value
        >= 0.9 * max(loadgen.throughput(other).value for other in by_replicas.values())
    )
    ### END SOLUTION
)

# %%
replicas = judgement.fewest_near_best(
    replicas,
    "9.2",
    "the replicas to run",
    {n: loadgen.throughput(by_replicas[n]) for n in (1, 2, 4)},
)

# %% [markdown]
# **What do you see, and why?** Served against offered for each row; how busy was each replica
# (`busy_U`), and how many requests were in the system (`in_flight_N`)? With one replica, where
# did the requests wait, and what happened to p95 over the run? What did the 4 replicas share
# that 2 did not have to?

# %%
answer_92 = """
### BEGIN SOLUTION
(solved edition: the expected answer is in docs/answer_key.md, 9.2)
### END SOLUTION
"""

# %% jupyter={"source_hidden": true}
with judgement.verdict_after(answer_92, "9.2"):
    one, two, four = (by_replicas[n] for n in (1, 2, 4))
    verdicts.replicas("9.2", one, two, four, predicted_two, predicted_four)

# %% [markdown]
# ## 9.3 Autoscaling through a load step
# With an `autoscaling_config` Ray's controller sets the number of replicas itself: it averages
# the requests in the system per replica (waiting at the router or running) and adds replicas
# when that is above `target_ongoing_requests`, removes them when it is below, between
# `min_replicas` and `max_replicas`. It waits `upscale_delay_s` before adding and
# `downscale_delay_s` before removing, so a short burst does not make it flap.
#
# **Exercise 9.3: autoscale.** Write the options of a deployment that autoscales between **1**
# and **2** replicas (one per node), aims at **1** request per replica, adds after **2** s and
# removes after **6** s, each replica taking `ongoing` requests at once (9.1). The
# `autoscaling_config` is a dict: `{"min_replicas": ..., ...}`. (The lab adds how fast Ray looks:
# `look_back_period_s` 2 s instead of 30, as a lab's step lasts seconds.)

# %%
autoscaled = (
    ### BEGIN SOLUTION
    FoodClassifier.options(
        max_ongoing_requests=ongoing,
        autoscaling_config={
            "min_replicas": 1,
            "max_replicas": 2,
            "target_ongoing_requests": 1,
            "upscale_delay_s": 2,
            "downscale_delay_s": 6,
        },
    )
    ### END SOLUTION
)

# %%
autoscaled = exercises.deployment_options(
    autoscaled,
    "9.3",
    "autoscale between 1 and 2 replicas",
    FoodClassifier,
    needs={
        "max_ongoing_requests": ongoing,
        "autoscaling_config.min_replicas": 1,
        "autoscaling_config.max_replicas": 2,
        "autoscaling_config.target_ongoing_requests": 1,
        "autoscaling_config.upscale_delay_s": 2,
        "autoscaling_config.downscale_delay_s": 6,
    },
)
ray_serving.deploy(autoscaled)

# %% [markdown]
# The step: 30 % of one replica's capacity, then 150 % (`RATE`), then 30 % again, for the
# seconds of `STEP`. The lab samples `serve.status()` meanwhile (the replicas running and
# starting) and cuts the requests into one-second windows: offered, served, in the system, p95.
#
# **Predict.** After the step up, how many seconds until p95 is back under the budget and stays
# there?

# %%
predicted_recovery = claims.predict("9.3 recovery after the step up (s)", None, why="")

# %%
LOW = round(0.3 * CAPACITY, 1)
phases = [(STEP[0], LOW), (STEP[1], RATE), (STEP[2], LOW)]
with ray_serving.Replicas() as watch:
    stepped = keep(open_loop.run(URL, BODY, phases=phases, label="9.3 step"))
    watch.wait_for(running=1)  # until the autoscaler is back to one replica (at most 90 s)
windows = open_loop.over_time(stepped)
replicas_seen = watch.over_time(stepped.attrs["t0"])

# %% [markdown]
# Over time: the replicas, the requests in the system and the p95 of each second's requests;
# the recovery is the time from the step up until p95 stays under the budget (`None`: never
# while requests were sent).

# %%
UP, DOWN = STEP[0], STEP[0] + STEP[1]
recovery = ray_serving.recovery_s(windows, UP, float(windows["t_s"].max()), BUDGET_MS)
marks = {"step up": UP, "step down": DOWN}
title = f"Autoscaling, 1-2 replicas: {LOW}/s, {RATE}/s, {LOW}/s"
figure = plots.load_step(windows, replicas_seen, marks, BUDGET_MS, title)
figure.savefig(OUT / "autoscaling_step.png", dpi=110)
print("p95 back under the budget after the step up (s):", recovery)

# %% [markdown]
# **What do you see, and why?** When did the second replica start running after the step up,
# and what did the requests in the system and p95 do meanwhile? Why does the queue keep growing
# for a while even once the controller has decided? When was the replica removed after the step
# down? Which of the settings you wrote would you change to recover sooner, and what would it
# cost?

# %%
answer_93 = """
### BEGIN SOLUTION
(solved edition: the expected answer is in docs/answer_key.md, 9.3)
### END SOLUTION
"""

# %% jupyter={"source_hidden": true}
with judgement.verdict_after(answer_93, "9.3"):
    verdicts.autoscaling("9.3", replicas_seen, STEP, recovery, BUDGET_MS, predicted_recovery)

# %% [markdown]
# ## 9.4 A replica crashes mid-run
# Back to two fixed replicas (your 9.2 deployment), with 8 requests always in flight, so that
# each replica holds what it takes at once. Four seconds in, the lab kills one replica with
# `ray.kill` (as a crashed process or a lost node would). Ray's controller sees the actor die and
# starts another; the requests inside the dead one fail. What matters to a client: each gets an
# answer, an HTTP error with a message for the failed ones, and none hangs (Ray's proxy answers
# 408 after `request_timeout_s`, 30 s here).

# %%
import threading

ray_serving.deploy(deployment)
killed = {}
timer = threading.Timer(4.0, lambda: killed.update(ray_serving.kill_replica()))
timer.start()
n_crash = int((4 + RATE_SECONDS) * CAPACITY)  # RATE_SECONDS of requests after the kill
crash = keep(loadgen.run(URL, BODY, n=n_crash, concurrency=8, label="9.4 crash"))
timer.join()
replaced = ray_serving.wait_replaced(killed, count=2)  # s from the kill; None: not in 120 s
failed = crash[crash["status"] != 200]
print(f"killed replica {killed['replica']} on node {killed['node']}")
print(f"{len(failed)} of {len(crash)} requests failed: {failed['status'].value_counts().to_dict()}")
print(f"slowest answer: {crash['latency_ms'].max():.0f} ms; replaced after {replaced} s")
failed.reindex(columns=["t_start", "latency_ms", "status", "detail"]).head()

# %% [markdown]
# **What do you see, and why?** How many requests failed, with which status, and how long did the
# slowest take? How long until two replicas ran again, and who carried the load meanwhile?

# %%
answer_94 = """
### BEGIN SOLUTION
(solved edition: the expected answer is in docs/answer_key.md, 9.4)
### END SOLUTION
"""

# %% jupyter={"source_hidden": true}
with judgement.verdict_after(answer_94, "9.4"):
    verdicts.crash("9.4", crash, replaced)

# %% [markdown]
# ## 9.5 Triton's instances at the same load: what the router costs
# Notebook 6 served the same ONNX model from Triton, with 2 instances on one node. The same
# open loop, the same bytes (Triton's binary tensor format, made by `tritonclient`) and the same
# rate, to Triton: the difference is Ray's proxy, its router and the hop from one process to
# another (Triton schedules inside one C++ process). Triton's own statistics give its service
# time *S*. Without a Triton in this mode (`make up` starts one), this step says so.
#
# **Predict.** At one request at a time, how many ms does Ray's path add to Triton's?

# %%
predicted_extra = claims.predict("9.5 Ray's median - Triton's, one at a time (ms)", None, why="")

# %%
import tritonclient.http as httpclient

from servelab.triton import instances, triton_config, triton_stats

try:
    TRITON = labenv.url("TRITON_SERVER_URL")
    triton_up = requests.get(f"{TRITON}/v2/health/ready", timeout=5).ok
except (RuntimeError, requests.RequestException):
    triton_up = False
print("Triton:", TRITON if triton_up else "not reachable in this mode")

# %% [markdown]
# The same image as Triton's request body: an `InferInput` filled from the same bytes, as in
# notebook 6, and Triton's binary tensor format (`generate_request_body`); Triton's model with
# 2 instances.

# %%
if triton_up:
    tensor = httpclient.InferInput("input", list(ray_serving.IMAGE_SHAPE), "FP32")
    tensor.set_data_from_numpy(np.frombuffer(BODY, np.float32).reshape(ray_serving.IMAGE_SHAPE))
    TRITON_BODY, json_size = httpclient.InferenceServerClient.generate_request_body([tensor])
    TRITON_HEADERS = {"Inference-Header-Content-Length": str(json_size)}
    INFER = f"{TRITON}/v2/models/food_classifier_onnx/infer"
    N_GPUS = triton_stats.gpu_count(TRITON)
    triton_config.edit("food_classifier_onnx", instances.instance_group(2, N_GPUS))


# %%
def triton_at(label: str, rate: float | None) -> tuple[pd.DataFrame, dict]:
    """Triton with 2 instances: one request at a time (rate None) or the open loop at `rate`;
    the run, and its row with the service time from Triton's statistics of the run."""
    before = triton_stats.model_stats("food_classifier_onnx", TRITON)
    if rate is None:
        run = loadgen.run(INFER, TRITON_BODY, n=20, label=label, headers=TRITON_HEADERS)
    else:
        run = open_loop.run(
            INFER, TRITON_BODY, rate=rate, seconds=RATE_SECONDS, headers=TRITON_HEADERS, label=label
        )
    delta = triton_stats.stats_delta(
        before, triton_stats.model_stats("food_classifier_onnx", TRITON)
    )
    return keep(run), row(run, 2, service_ms=delta["execution_ms_avg"])


# %%
table_95 = ray_one = triton_one = triton_rated = None  # None: no Triton in this mode
if triton_up:
    ray_serving.deploy(deployment)
    ray_one = keep(loadgen.run(URL, BODY, n=20, label="9.5 ray sequential"))
    triton_one, one_row = triton_at("9.5 triton sequential", None)
    triton_rated, rated_row = triton_at(f"9.5 triton {RATE}/s", RATE)
    table_95 = pd.DataFrame(
        [row(ray_one, 2), one_row, row(by_replicas[2], 2), rated_row]
    ).set_index("run")
table_95

# %% [markdown]
# **What do you see, and why?** One at a time: how many ms did Ray add, and where in its path
# do they go? At `RATE`: served, p95 and `busy_U` of each; which one's replicas (instances) were
# idle while requests waited, and what were the requests waiting for?

# %%
answer_95 = """
### BEGIN SOLUTION
(solved edition: the expected answer is in docs/answer_key.md, 9.5)
### END SOLUTION
"""

# %% jupyter={"source_hidden": true}
with judgement.verdict_after(answer_95, "9.5"):
    verdicts.against_triton(
        "9.5", ray_one, triton_one, by_replicas[2], triton_rated, RATE, predicted_extra
    )

# %% [markdown]
# ## 9.6 Three ways to serve it on a GPU (optional; runs where Triton has a GPU)
# A user who must serve this model on a GPU chooses between the lab's three paths. Here they
# meet on the same GPU, with the same load and the same photo: **Triton** with notebook 7's best
# configuration (`food_classifier_tuned`: compiled fp16 with CUDA graphs, 8 instances, dynamic
# batching; your notebook 7's, where you ran it on this node, else the H100 reference's),
# Triton's ONNX Runtime model of 9.5 beside it (the runtime the two others run), **Ray Serve**
# with four replicas of your deployment sharing the GPU (`ray_actor_options={"num_gpus": 0.25}`:
# Ray shows each replica the GPU, and its ONNX Runtime session opens there) and the **FastAPI**
# service with ONNX Runtime (4 worker processes). Each is sent the photo as its own clients send
# it: the JPEG file to FastAPI (it decodes), the decoded pixels to Triton, the normalised tensor
# to Ray (`servelab/three_way.py` says why that is fair, and its tables show what differs).
#
# For each: **the highest rate whose p95 stays under 50 ms** (open-loop rates, each 1.5 times
# the last, until one does not hold; the figure lies between the last that held and the next)
# and **the latency at one fixed rate** (rounds interleaved, so a drifting machine falls on all),
# each with its interval; and where one request's time goes: the model, the server's own work
# around it, and what is outside the server's clock (HTTP, serialisation, the hops between
# processes). The longest wait is Triton compiling its model: 74 to 134 s on the H100 (the
# lab's runs). Without a GPU the cell prints what the lab's own run on 2 CPU cores measured
# (there the four share two cores with the load generator, so it shows each path's cost, not a
# GPU's choice).
# `LAB_RAY_THREE_WAY=on` runs it on a CPU anyway (small rates), `off` skips it.
#
# **Think first** (not checked): which of the three will hold the objective at the highest rate
# on a GPU, and what does each of the others spend its time on instead?

# %%
from IPython.display import display

from servelab import three_way
from servelab.loadgen import spread
from servelab.paths import test_photo
from servelab.triton import model_repository

WAY = labenv.param_word("RAY_THREE_WAY", "auto")  # auto: where Triton has a GPU
run_96 = triton_up and (WAY == "on" or (WAY == "auto" and N_GPUS > 0))
compared = None
if not run_96:
    print(three_way.cpu_page())

# %%
if run_96:  # Triton with notebook 7's best configuration; FastAPI with ONNX Runtime
    SETTING = three_way.SETTINGS["gpu" if N_GPUS else "cpu"]
    own = RESULTS / "hardware" / "served_over_limit.json"  # your notebook 7's, if on this node
    best, where = three_way.best_config(own, gpu=N_GPUS > 0)
    print(f"Triton: notebook 7's best configuration from {where}")
    model_repository.add_model(three_way.TRITON_MODEL, kind="gpu" if N_GPUS else "cpu")
    triton_config.edit(three_way.TRITON_MODEL, best, timeout=900, verbose=False)
    services.use_fastapi_backend("onnx", workers=4 if N_GPUS else 1)

# %%
if run_96:  # Ray Serve: your deployment, its replicas sharing the GPU; then the comparison
    on_gpu = {"num_cpus": 0.5, "num_gpus": 0.25} if N_GPUS else {"num_cpus": 0.5}
    ray_serving.deploy(
        deployment.options(num_replicas=4 if N_GPUS else 2, ray_actor_options=on_gpu)
    )
    urls = {"triton": TRITON, "triton_onnx": TRITON, "ray": URL}
    urls["fastapi"] = labenv.url("FASTAPI_SERVER_URL")
    ways_96 = three_way.ways(test_photo(), urls)
    for way in ways_96.values():
        print(f"{three_way.NAMES[way.name]} receives {way.receives}")
    with spread.Senders(SETTING.senders) as senders:
        compared = three_way.run_all(ways_96, SETTING, senders)

# %%
if compared is not None:
    display(compared["at_objective"])
    display(compared["pooled"].round(1))
    display(compared["sequential"].round(2))

# %% [markdown]
# **What do you see, and why?** Which path held the objective at the highest rate, and what
# stopped each of the others: the model, the work around it, or a queue? One request at a time,
# how much of each path's latency is outside the model? Would batching in Ray's deployment
# (`@serve.batch`) change its row, and what would it cost?
#
# **Your answer:** *(double-click this cell and write it here)*

# %% [markdown]
# ## What you measured

# %%
summary = pd.DataFrame([loadgen.summarize(df) for df in runs.values()])
summary.to_csv(OUT / "summary.csv", index=False)
windows.to_csv(OUT / "autoscaling_windows.csv", index=False)
replicas_seen.to_csv(OUT / "autoscaling_replicas.csv", index=False)
claims.save(OUT)
summary.round(2)

# %% [markdown]
# **Hand in** `summary.csv`, `autoscaling_step.png`, your predictions and answers, and answer:
#
# 1. Your decision of 9.2 on two nodes of 8 cores each: would it change, and what would you
#    measure first?
# 2. 9.3: a colleague wants `upscale_delay_s: 0`. What does it buy, and what does it risk?
#
# ## Chameleon: a second leased node joins the cluster
# On Chameleon, lease **two** nodes (notebook 1: `NODE_COUNT = 2`, which reserves two hosts and
# a floating IP for each) and run notebook 2 as usual: its optional section 5 makes the second
# server on the same lease, sets it up as the first (the repository cloned in the same folder,
# the model files built: every replica reads `artifacts/model.onnx` on its own node), gives both
# nodes Ray Serve at the lab's pinned version (`make ray-node`), starts Ray's head on the first
# node and joins the second to it over their **private** IPs, and prints the head's address.
#
# **Why the cluster asks for a token.** The nodes' private IPs are on `sharednet1`, the site's
# network, which every project at the site shares: "private" means "not on the internet", not
# "only your nodes". A Ray cluster that anyone on that network can reach lets them submit a job,
# that is, run their code on your node as you. Ray's own token authentication closes it: notebook
# 2 makes a random token once on the first node (`.lab/ray_token` in the clone, mode 0600,
# git-ignored), copies it to the second node over its own SSH connection (never printed, never
# on a command line), and starts both nodes with `RAY_AUTH_MODE=token` and
# `RAY_AUTH_TOKEN_PATH` naming that file; every Ray port then refuses a connection without the
# token (local mode's cluster uses the same, tested in the lab's tests). The dashboard listens on
# the head's loopback only (`--dashboard-host=127.0.0.1`: nothing but the node itself needs it);
# Ray's client port (10001) and the nodes' own ports listen on the private IPs, each asking for
# the token. Any `ray` command you type on a node needs the same two variables, e.g.
# `RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=$HOME/serve-system-lab/.lab/ray_token
# serve-system-lab/.venv-ray/bin/ray status`.
#
# The lab's Jupyter container has no Ray: run this notebook in local mode on the first node (an
# SSH session there: `make up`, as README's third way; the Docker stacks can stay down), with
# the head's address notebook 2 printed: `LAB_RAY_HEAD=<first node's private IP>:6379 make up`,
# or `os.environ["LAB_RAY_HEAD"] = "..."` in a cell before the setup cell. The setup cell then
# uses that cluster instead of starting the lab's, with the clone's token; `ray status` on either
# node lists both nodes.
# Each node offers what Ray finds there (its cores and GPUs; `ray start --num-cpus N --num-gpus N`
# would set less). `make ray-node` installs ONNX Runtime's CPU build, so the replicas run on the
# nodes' cores, as in local mode. For replicas on the GPUs (not run by this lab's tests), put
# `onnxruntime-gpu` in each node's `.venv-ray` and give each replica its share of a GPU: Ray
# then shows it that GPU, and the deployment opens its session there (two replicas per GPU):
#
# ```python
# FoodClassifier.options(num_replicas=4, max_ongoing_requests=4,
#                        ray_actor_options={"num_cpus": 1, "num_gpus": 0.5})
# ```
#
# `ray stop` on each node ends it (with the two variables above); in local mode `make down`
# stops the lab's two nodes, and only those.
#
# ## What Kubernetes would add (not run here)
# The lab's machines cannot run Kubernetes, so this is a pointer, not a measurement. The same
# roles exist there with other names: **KServe** (or Triton's Helm chart) runs the model
# server as pods, a Service load-balances across them, and **node pools** say which machines
# (GPU types) the pods land on. The Horizontal Pod Autoscaler scales the pods on a metric; for
# Triton, on its queue time (`nv_inference_queue_duration_us` from its Prometheus endpoint of
# notebook 8, through the Prometheus adapter), where Ray Serve scales on requests per replica.
# The cluster autoscaler then adds *nodes* when pods do not fit, as Ray's autoscaler does on a
# cloud (not on a lease). Pointers: KServe's documentation (kserve.github.io), NVIDIA's
# "Triton on Kubernetes" deployment examples (the server repository's `deploy/` folder), the
# Kubernetes HPA walkthrough, and KubeRay for Ray Serve itself on Kubernetes.

# %% [markdown]
# ## Tear down
# Triton's model back to one instance; the Ray app deleted (the cluster itself stays until
# `make down`); after 9.6, notebook 7's model unloaded and FastAPI back to PyTorch.

# %%
from ray import serve

serve.delete(ray_serving.APP)
if triton_up:
    one = "instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 0 ] } ]"  # notebook 6's at its end
    triton_config.edit("food_classifier_onnx", one, verbose=False)
if run_96:  # 9.6's: notebook 7's model unloaded, FastAPI back to the stack's default
    unload = f"{TRITON}/v2/repository/models/{three_way.TRITON_MODEL}/unload"
    requests.post(unload, headers=labenv.admin_headers(), timeout=120)
    services.use_fastapi_backend("pt", workers=1)

# %% [markdown]
# ## Where your results are

# %%
passes.finish()
