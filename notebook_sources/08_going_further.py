# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 8. Going further: a server-side pipeline, a search, the server watched live (optional)
#
# Notebooks 5 to 7 pulled the levers of one Triton model. Three things a serving engineer reaches
# for next, and that this notebook has you measure:
#
# | step | what you do | what to look for |
# |---|---|---|
# | 8.1 | write an **ensemble**'s step mapping: `preprocess` → ONNX | clients send the file |
# | 8.2 | one load, three paths: ensemble, Python model, client-side decoding | cost and gain |
# | 8.3 | each step's queue and compute, from Triton's statistics | which stage requests wait for |
# | 8.4 | a second instance of the pre-processing step only | does the bottleneck move? |
# | 8.5 | watch Triton's metrics **while** the load rises | the queue climbing as it happens |
# | 8.6 | **Model Analyzer** searches instances × max batch under a p99 budget | search vs you |
#
# In notebook 6 (6.5) the pre-processing moved into the Flask app, so that the fast ONNX model could
# take a ready tensor. Production deployments usually keep it on the server instead: an
# **ensemble** is a model with no code of its own that passes tensors from one model to the next
# inside Triton, so clients send raw bytes and each stage keeps its own queue, instances, batching
# and statistics. NVIDIA's conceptual guide (parts 5 and 6) builds one for text models; here it is
# the photo.
#
# **Predict, then measure**, as before; numbers come with the interval of perf_analyzer's windows,
# and claims are judged on intervals (holds, does not hold, or inconclusive when noise could
# decide). On a shared or small machine the same run can land far from the last one: read each
# verdict with the interval beside it.
#
# ## Setup


# %% [markdown]
# This notebook needs the node throughout: it has the measure pass only (notebook 0 explains the
# passes); its first cell says so in another.

# %%
from servelab import passes

PASS = passes.start("08_going_further", passes=("measure",))

# %%
import os
import shlex
import subprocess
import sys

import numpy as np
import pandas as pd
import tritonclient.http as httpclient

from servelab import claims, ensemble, exercises, food11, labenv, model_analyzer, perf
from servelab.exercises import judgement
from servelab.paths import RESULTS, TEST_IMAGES
from servelab.triton import config_text, live_metrics, triton_config, triton_stats
from servelab.verdicts import ensemble as verdicts

# %%
env = labenv.load()
TRITON, GRPC, METRICS = labenv.triton_urls()
HOST = TRITON.split("://")[-1]  # perf_analyzer and tritonclient take host:port
LOCAL = env["LAB_MODE"] == "local"
ON_GPU = triton_stats.gpu_count(TRITON, METRICS) > 0
client = httpclient.InferenceServerClient(HOST)
OUT = RESULTS / "going_further"
CONCURRENCY = labenv.param("GF_CONCURRENCY", 16 if ON_GPU else 4)  # requests in flight, 8.2-8.4
BUDGET_MS = 100  # notebook 7's question: p99 under 100 ms
JPEGS = sorted(TEST_IMAGES.glob("*.jpg"))
runs = {}  # name -> run: every run, for the summary at the end (a cell run again replaces it)
print(
    f"Triton {client.get_server_metadata()['version']} at {HOST}; "
    f"{'a GPU' if ON_GPU else 'no GPU'}; {CONCURRENCY} requests in flight in 8.2-8.4"
)


# %%
def measure(line: str, name: str, verbose: bool = True):
    """ensemble.measure(line, name): the run, which the next steps are handed, kept in `runs`
    for the summary."""
    run = ensemble.measure(line, name, out=OUT, verbose=verbose)
    runs[name] = run
    return run


# %% [markdown]
# ## 8.1 The ensemble: the step mapping you write
# Two new models go into the repository. `preprocess` is a Python-backend model: its `model.py`
# takes the image **file** (a BYTES tensor, the JPEG as it is) and calls the lab's own
# `food11.tensor_from_bytes`, the pre-processing every service of the lab runs, to make the
# normalised 3×224×224 tensor. `food_classifier_ensemble` has `platform: "ensemble"`, no code, an
# empty version folder, and one input and one output of its own. What it lacks is the part you
# write: which model runs first, and which tensor goes where.

# %%
folders = ensemble.place(
    mode="local" if LOCAL else "docker", kind="gpu" if ON_GPU else "cpu", steps=False
)
for name in ("preprocess", "food_classifier_onnx", ensemble.ENSEMBLE):
    config = config_text.parse_config(triton_config.config_path(name).read_text())
    tensors = lambda group: ", ".join(f"{t.name} {list(t.dims)}" for t in group)  # noqa: E731
    print(f"{name:26s} inputs: {tensors(config.input):22s} outputs: {tensors(config.output)}")

# %% [markdown]
# ## Exercise 8.1: the ensemble's step mapping
# An ensemble's `config.pbtxt` lists its steps in `ensemble_scheduling { step [ ... ] }`. Each step
# names a model (`model_name`, and `model_version: -1` for the latest) and two maps:
#
# - `input_map { key: "<the step model's input>" value: "<an ensemble tensor>" }`
# - `output_map { key: "<the step model's output>" value: "<an ensemble tensor>" }`
#
# The **key** is always a name from the step's own `config.pbtxt` (printed above). The **value** is
# a name in the ensemble: its input `IMAGE_BYTES`, its output `LOGITS`, or a name you invent for a
# tensor that one step writes and the next reads (call it `preprocessed`). Triton runs a step as
# soon as all its inputs exist, so the names, not the order, make the pipeline.
#
# Write the block for the two steps, `preprocess` then `food_classifier_onnx`, as text in
# `config.pbtxt` syntax. The next cell checks it against both models' configs before Triton sees
# it, then `triton_config.edit` adds it to the ensemble's file and asks Triton to load the
# ensemble (which loads its steps).

# %%
mapping = (
    ### BEGIN SOLUTION
    """
ensemble_scheduling {
  step [
    {
      model_name: "preprocess"
      model_version: -1
      input_map { key: "IMAGE_BYTES" value: "IMAGE_BYTES" }
      output_map { key: "IMAGE_TENSOR" value: "preprocessed" }
    },
    {
      model_name: "food_classifier_onnx"
      model_version: -1
      input_map { key: "input" value: "preprocessed" }
      output_map { key: "output" value: "LOGITS" }
    }
  ]
}
"""
    ### END SOLUTION
)

# %%
mapping = exercises.config_fragment(mapping, "8.1")  # a config.pbtxt block
mapping = exercises.step_mapping(mapping, "8.1")  # and each tensor goes where it exists
loaded = triton_config.edit(ensemble.ENSEMBLE, mapping)
if not loaded.ok:
    raise RuntimeError(f"{loaded}: read Triton's reason above, correct the mapping, run both cells")

# %% [markdown]
# Now one request, written with `tritonclient` as in notebook 5. The input is a BYTES tensor whose
# one element is the file's bytes, exactly as they are on disk: no base64, no decoding on this side.

# %%
photo = JPEGS[0]
data = np.array([[photo.read_bytes()]], dtype=object)  # shape [1, 1]: one image, one element
request = httpclient.InferInput("IMAGE_BYTES", list(data.shape), "BYTES")
request.set_data_from_numpy(data)
logits = client.infer(ensemble.ENSEMBLE, [request]).as_numpy("LOGITS")
print(f"{photo.name} ({photo.stat().st_size:,} bytes sent) -> {food11.top_class(logits[0])}")

# %% [markdown]
# The same pre-processing ran, only on the other side of the wire, so the ensemble must give the
# class that client-side pre-processing + `food_classifier_onnx` gives, on every test image:

# %% jupyter={"source_hidden": true}
images = sorted(TEST_IMAGES.iterdir())
served = [c for c, _ in ensemble.classify(images)]
direct = [food11.top_class(row)[0] for row in ensemble.direct_logits(images)]
claims.fact(
    "8.1: the ensemble gives the class of client-side pre-processing + the ONNX model",
    served == direct,
    {"images": len(images), "ensemble": served, "direct": direct},
)

# %% [markdown]
# ## 8.2 Three ways to get a class, at the same load
# The same photos reach a class three ways; perf_analyzer sends each what it takes:
#
# | path | model perf_analyzer calls | what a request carries | the JPEG is decoded |
# |---|---|---|---|
# | ensemble | `food_classifier_ensemble` | the JPEG file | on the server, in `preprocess` |
# | python | `food_classifier` (6.1) | the JPEG as base64 text | on the server, beside PyTorch |
# | client_onnx | `food_classifier_onnx` (6.4) | the 3×224×224 float tensor | on the client |
#
# One difference to keep in mind: perf_analyzer replays tensors it was given, made once here, so
# the client_onnx rows do **not** include the client's decoding. A real client (the Flask app of
# 6.5) pays it, on its own CPU.
#
# The input files for perf_analyzer (`--input-data`), one per path, cycle through the test JPEGs:

# %%
files = ensemble.write_perf_inputs(JPEGS, OUT)
inputs = {path: os.path.relpath(file) for path, file in files.items()}  # as you would type them
tensor_bytes = 3 * 224 * 224 * 4
sizes = [p.stat().st_size for p in JPEGS]
print(inputs)
print(
    f"a request carries {np.mean(sizes):,.0f} bytes of JPEG (ensemble) or {tensor_bytes:,} bytes "
    "of floats (client_onnx)"
)

# %% jupyter={"source_hidden": true}
claims.at_most(
    "8.2: the ensemble's request carries less than a quarter of the client path's bytes",
    np.mean(sizes) / tensor_bytes,
    0.25,
    {"mean JPEG": np.mean(sizes), "tensor": tensor_bytes},
)

# %% [markdown]
# **Predict.** At the same number of requests in flight, how much does the ensemble serve compared
# with (a) the Python model that decodes and runs PyTorch, (b) the client path?

# %%
predicted_vs_python = claims.predict(
    "8.2 ensemble / Python-backend model throughput (x)", None, why=""
)
predicted_vs_client = claims.predict("8.2 ensemble / client-side ONNX throughput (x)", None, why="")

# %% [markdown]
# The ensemble first, with `ensemble.measure`: it is `perf.run_line` (the line as you type it)
# plus Triton's statistics of every model the request passes through, read before and after.
# A few requests first warm each model up (its first requests pay one-off costs).

# %%
for path, (model, _) in ensemble.PATHS.items():
    perf.run_line(
        f"perf_analyzer -m {model} -u {HOST} --input-data {inputs[path]} "
        "--concurrency-range 1 --request-count 20",
        f"8.2 warm-up {path}",
        out=OUT,
        verbose=False,
    )
line = (
    f"perf_analyzer -m food_classifier_ensemble -u {HOST} --input-data {inputs['ensemble']} "
    f"--concurrency-range {CONCURRENCY}"
)
ensemble_closed = measure(line, "8.2 ensemble closed")

# %% [markdown]
# The other two paths, the same line with their model and input file (so the rows are parsed for
# you). A path too slow for perf_analyzer's measurement windows (the PyTorch model on a busy CPU
# can leave a window without a single answer) is measured for a fixed 40 requests instead, and
# its output says so.


# %%
def closed_loop(path: str):
    """The path's model (ensemble.PATHS) and input file, CONCURRENCY requests in flight."""
    model = ensemble.PATHS[path][0]
    line = (
        f"perf_analyzer -m {model} -u {HOST} --input-data {inputs[path]} "
        f"--concurrency-range {CONCURRENCY}"
    )
    run = measure(line, f"8.2 {path} closed", verbose=False)
    print(f"{path}: {run.throughput} infer/s")
    return run


python_closed = closed_loop("python")
client_closed = closed_loop("client_onnx")

# %% [markdown]
# A closed loop lets each path set its own pace. Users do not wait for each other: at a fixed
# **offered rate** (open loop, as in 6.6) the question is whether a path keeps up, and at what p95.
# The rate: half of what the ensemble served above, so the ensemble has room and the others are
# tested at the same load. `--async` sends each request on schedule whether or not the last one
# was answered. A path whose closed-loop throughput is below the rate cannot keep up: its queue
# grows for as long as the run lasts, so it gets a fixed number of requests (`--request-count`),
# and its p95 says how long that queue grew in that time.

# %%
RATE = max(1, round(0.5 * ensemble_closed.throughput.value))
REQUESTS = max(20, 2 * RATE)


def at_rate(path: str, closed):
    """The path offered RATE requests/s; a fixed count where its closed loop (`closed`) served
    less than that."""
    model = ensemble.PATHS[path][0]
    line = (
        f"perf_analyzer -m {model} -u {HOST} --input-data {inputs[path]} --async "
        f"--request-rate-range {RATE}"
    )
    if closed.throughput.hi < RATE:
        line += f" --request-count {REQUESTS}"
    return measure(line, f"8.2 {path} {RATE}/s", verbose=False)


# %%
ensemble_offered = at_rate("ensemble", ensemble_closed)
at_rate("python", python_closed)  # in the table below
at_rate("client_onnx", client_closed)
columns = ["throughput_infer_s", "p95_ms", "p99_ms", "delayed_pct"]
pd.DataFrame({run.name: {c: run.row[c] for c in columns} for run in runs.values()}).T.round(1)

# %% [markdown]
# **What do you see, and why?** Which path served most in the closed loop, and which kept the
# offered rate? What does the ensemble pay for that the client path does not, and what does the
# client path pay that does not show here? Write your answer between the quotes.

# %%
answer_82 = """
### BEGIN SOLUTION
(solved edition: the expected answer is in docs/answer_key.md, 8.2)
### END SOLUTION
"""

# %% jupyter={"source_hidden": true}
with judgement.verdict_after(answer_82, "8.2"):
    verdicts.three_paths(
        "8.2",
        ensemble_closed,
        python_closed,
        client_closed,
        offered=ensemble_offered,
        rate=RATE,
        over_python=predicted_vs_python,
        over_client=predicted_vs_client,
    )

# %% [markdown]
# ## 8.3 Where each request waits, stage by stage
# perf_analyzer reports an ensemble as one model; Triton also keeps statistics for every step, and
# `ensemble.measure` read them around the run. For the ensemble's own row Triton adds its steps'
# times up, so it is not a stage: the step rows say where the time went.

# %%
ensemble_closed.steps

# %% [markdown]
# Each step is an ordinary model with its own queue: a request that leaves `preprocess` joins the
# queue of `food_classifier_onnx`. The step whose queue is longer is the one requests wait for,
# the bottleneck of the pipeline at this load.

# %%
steps = ensemble_closed.steps.set_index("model")
slow = steps.loc[list(ensemble.STEPS), "queue_ms"].idxmax()
print(
    f"longer queue: {slow} ({steps.loc[slow, 'queue_ms']:.1f} ms per request; "
    f"the other step {steps.drop(index=[slow, ensemble.ENSEMBLE])['queue_ms'].iloc[0]:.1f} ms)"
)

# %% jupyter={"source_hidden": true}
done = steps["requests"]
claims.fact(
    "8.3: every request went through both steps (the same request count at each)",
    done.nunique() == 1,
    done.to_dict(),
)
claims.between(
    "8.3: the ensemble's compute is the sum of its steps' (Triton adds them up)",
    steps.loc[ensemble.ENSEMBLE, "compute_infer_ms"]
    / steps.loc[list(ensemble.STEPS), "compute_infer_ms"].sum(),
    0.9,
    1.1,
)

# %% [markdown]
# ## 8.4 More instances of the pre-processing step, and nothing else
# Decoding is CPU work, so `preprocess` asks for CPU instances even where the classifier runs on
# a GPU; each instance is its own process. Give it two, as in 6.3 but for one step only. The
# classifier's config stays as it is.
#
# **Predict.** With two decoders, how much more will the ensemble serve at the same load? Look at
# which step held the longer queue in 8.3 first.

# %%
predicted_decoders = claims.predict("8.4 throughput, 2 preprocess instances / 1 (x)", None, why="")

# %%
triton_config.edit("preprocess", "instance_group [ { count: 2, kind: KIND_CPU } ]")
two_preprocess = measure(ensemble_closed.line, "8.4 ensemble, 2 preprocess")  # 8.2's line
pd.concat(
    {
        "1 preprocess": ensemble_closed.steps.set_index("model"),
        "2 preprocess": two_preprocess.steps.set_index("model"),
    }
)

# %% [markdown]
# **What do you see, and why?** Whose queue got shorter, whose did not, and what happened to
# throughput? Where is the bottleneck now? On this hardware, would a third decoder help?
# Write your answer between the quotes.

# %%
answer_84 = """
### BEGIN SOLUTION
(solved edition: the expected answer is in docs/answer_key.md, 8.4)
### END SOLUTION
"""

# %% jupyter={"source_hidden": true}
with judgement.verdict_after(answer_84, "8.4"):
    verdicts.a_second_decoder("8.4", ensemble_closed, two_preprocess, slow, predicted_decoders)
triton_config.edit("preprocess", "instance_group [ { count: 1, kind: KIND_CPU } ]", verbose=False)

# %% [markdown]
# ## 8.5 The server while it works
# Every number so far was read **after** a run. Triton also publishes its counters and gauges at
# its metrics endpoint (`/metrics`, Prometheus text) while it runs: requests, inferences, the
# microseconds spent queued and computing, per model; utilisation per GPU (or the whole CPU in
# local mode's Triton, which reports no GPU). `live_metrics.Watch` reads it twice a second, parses
# it with `prometheus_client`'s own parser, and redraws one figure while perf_analyzer runs: a
# load that rises in three steps (1, then more, then most requests in flight).
#
# Watch the longer queue of 8.3 while the load steps up.

# %%
step = max(1, CONCURRENCY - 1)
line = (
    f"perf_analyzer -m food_classifier_ensemble -u {HOST} --input-data {inputs['ensemble']} "
    f"--concurrency-range 1:{1 + 2 * step}:{step}"
)
watch = live_metrics.Watch(METRICS, models=list(ensemble.STEPS))
ramp = watch.during(
    lambda: perf.run_line(line, "8.5 ramp", out=OUT, verbose=False), save=OUT / "live_8.5"
)
runs[ramp.name] = ramp
watch.table().round(1).tail()

# %% [markdown]
# **What do you see, and why?** How does the queue of each step move when the load steps up, and
# what does utilisation do meanwhile? When would you rather see this live than read it afterwards?
# Write your answer between the quotes.

# %%
answer_85 = """
### BEGIN SOLUTION
(solved edition: the expected answer is in docs/answer_key.md, 8.5)
### END SOLUTION
"""

# %% jupyter={"source_hidden": true}
with judgement.verdict_after(answer_85, "8.5"):
    busy = watch.table()
    busy = busy[busy[f"{slow}:infer_per_s"] > 0].dropna(subset=[f"{slow}:queue_ms"])
    claims.at_least("8.5: the view sampled the run (intervals with requests)", len(busy), 6)
    third = max(1, len(busy) // 3)
    first = claims.Measured.from_samples(busy[f"{slow}:queue_ms"].iloc[:third] + 0.1)
    last = claims.Measured.from_samples(busy[f"{slow}:queue_ms"].iloc[-third:] + 0.1)
    claims.at_least(
        f"8.5: {slow}'s queue climbs with the load (median of the last third of the "
        "intervals vs the first, each + 0.1 ms so that an empty queue can divide)",
        last / first,
        2.0,
    )

# %% [markdown]
# The same endpoint can feed a dashboard (Prometheus and Grafana) that keeps the history of a
# whole class session; the instructors' guide says how to point one at the stack's Triton.
#
# ## 8.6 A search instead of hand tuning: Model Analyzer
# Notebook 7 asked which configuration you would deploy if p99 had to stay under 100 ms, and left
# you to sweep by hand. Triton's **Model Analyzer** does that sweep for you: it writes one
# `config.pbtxt` per combination of the fields you give it, has Triton load each, measures each
# with perf_analyzer at the loads you give, and reports the best configuration per objective and
# the Pareto front (the configurations no other beats on both throughput and p99).
#
# The search here is small enough for a lesson: the ONNX classifier, `instance_group` count ×
# `max_batch_size` (dynamic batching on, 100 µs), at two concurrencies, plus the configuration
# as it is. Model Analyzer needs a Triton to load the configurations into:
#
# - **local mode**: it starts `tritonserver` itself, once per configuration, on a repository of
#   its own (your running Triton is not touched);
# - **Docker**: this Jupyter has no `tritonserver`, so it runs in *remote* mode: your running
#   Triton loads each configuration through the repository API, and the model goes back to its own
#   `config.pbtxt` at the end.
#
# **Predict.** Will the search's best configuration under the budget serve more than notebook 7's
# hand-tuned best under it, as a share of the limit (served/limit)?

# %%
predicted_search = claims.predict(
    "8.6 Model Analyzer's best / notebook 7's best, served/limit (x)", None, why=""
)

# %% [markdown]
# The search is a command (it starts servers or reloads models), printed and then run. Its
# settings are in the first cell below; `LAB_GF_MA_...` variables change them before the lab starts.

# %%
MA_INSTANCES = labenv.param_list("GF_MA_INSTANCES", "1,2")
MA_MAX_BATCH = labenv.param_list("GF_MA_MAX_BATCH", "8,64" if ON_GPU else "1,8")
MA_CONCURRENCY = labenv.param_list("GF_MA_CONCURRENCY", "4,64" if ON_GPU else "1,4")
MA_WINDOW_MS = labenv.param("GF_MA_WINDOW_MS", 1500)
MA_DIR = os.path.relpath(OUT / "model_analyzer")

# %%
words = lambda values: " ".join(map(str, values))  # noqa: E731
search = (
    f"python -m labstack.model_analyzer --model food_classifier_onnx "
    f"--instances {words(MA_INSTANCES)} --max-batch-sizes {words(MA_MAX_BATCH)} "
    f"--concurrency {words(MA_CONCURRENCY)} --budget-ms {BUDGET_MS} "
    f"--window-ms {MA_WINDOW_MS} --kind {'KIND_GPU' if ON_GPU else 'KIND_CPU'} "
    f"--launch {'local' if LOCAL else 'remote'} "
    f"--workdir {MA_DIR}"
)
print("$", search, flush=True)
done = subprocess.run([sys.executable, *shlex.split(search)[1:]], capture_output=True, text=True)
print(done.stdout[-4000:], done.stderr[-3000:] if done.returncode else "")
done.check_returncode()

# %% [markdown]
# Its results, read back (`servelab/model_analyzer.py`): every measurement, then the best per
# objective under the budget, chosen from the measured p99 itself.

# %%
report = model_analyzer.load(OUT / "model_analyzer")
print(
    f"{len(report.table)} measurements in {report.search['seconds']:.0f} s "
    f"({report.search['launch']} launch mode); its own summary: {report.summary_report}"
)
report.table[model_analyzer.SHOWN].sort_values(["variant", "concurrency"]).round(1)

# %% [markdown]
# Beside it, notebook 7's hand-tuned result: its best run whose p99 stayed under the same budget,
# and its **served/limit**, the share of the raw model's throughput on this device that the served
# model delivered. Notebook 7 tuned a different model path (`food_classifier_tuned`: PyTorch,
# uint8 pixels, gRPC, shared memory) with the same three fields; the limit is the same weights'
# best on this device with any of the lab's runtimes, so served/limit is the ruler both share.

# %%
hand = model_analyzer.hand_tuned(RESULTS / "hardware", BUDGET_MS)
model_analyzer.say_what_is_missing(hand, report.table, BUDGET_MS)
comparison = model_analyzer.comparison(report.table, BUDGET_MS, hand)
comparison.round(3)

# %%
point = hand and hand["run"] and {"label": f"notebook 7: {hand['run']}", **hand}
ax = model_analyzer.plot(report.table, BUDGET_MS, hand_tuned=point or None)
ax.set_title("Model Analyzer's search: throughput vs p99")
ax.figure.tight_layout()
ax.figure.savefig(OUT / "model_analyzer_vs_hand_tuned.png", dpi=110)

# %% [markdown]
# **What do you see, and why?** Where does the search beat the hand-tuned configuration, and where
# not? What did it not search that notebook 7 changed (think of 7.3 to 7.5)? What would you add to
# its search space, and what would that cost in minutes? Write your answer between the quotes.

# %%
answer_86 = """
### BEGIN SOLUTION
(solved edition: the expected answer is in docs/answer_key.md, 8.6)
### END SOLUTION
"""

# %% jupyter={"source_hidden": true}
with judgement.verdict_after(answer_86, "8.6"):
    model_analyzer.search_against_hand("8.6", report, BUDGET_MS, hand, predicted_search)

# %% [markdown]
# ## What you measured

# %%
table = pd.DataFrame([{"run": run.name, **run.row} for run in runs.values()])
table.to_csv(OUT / "summary.csv", index=False)
comparison.to_csv(OUT / "model_analyzer_vs_hand_tuned.csv", index=False)
claims.save(OUT)
stage = [
    c for c in table if c.startswith(ensemble.STEPS) and c.endswith(("_queue_ms", "_compute_ms"))
]
table[["run", "throughput_infer_s", "p95_ms", "delayed_pct", *stage]].round(1)

# %% jupyter={"source_hidden": true}
parts = pd.DataFrame([{"run": run.name, **run.row} for run in (ensemble_closed, two_preprocess)])
ax = parts.set_index("run")[stage].plot.barh(stacked=True, figsize=(8, 3))
ax.set_xlabel("ms per request (Triton's statistics)")
ax.set_title(f"Where an ensemble request spends its time, {CONCURRENCY} in flight")
ax.legend(fontsize=7)
ax.figure.tight_layout()
ax.figure.savefig(OUT / "stages.png", dpi=110)

# %% [markdown]
# **Hand in** the table, `stages.png`, `live_8.5.png`, `model_analyzer_vs_hand_tuned.png` and your
# predictions (`predictions.csv`), and answer:
#
# 1. 8.1: why are the keys of `input_map` and `output_map` fixed by the step's model, and the
#    values yours to choose?
# 2. 8.2: which path would you deploy for a mobile app on a slow network, and which for a batch job
#    inside the data centre? Use the bytes per request and the measured throughput.
# 3. 8.3–8.4: which step limited the pipeline on your hardware, and how did you tell? What would
#    move the bottleneck the other way?
# 4. 8.5: what did the live view show that the table after the run could not?
# 5. 8.6: where did the search beat your hand tuning, and where not? What would you let it search
#    next time?
#
# ## Tear down
# Unload the ensemble and its pre-processing step; notebook 6's two models stay as they were.

# %%
for model in (ensemble.ENSEMBLE, "preprocess"):
    client.unload_model(model, headers=labenv.admin_headers())
print({m: client.is_model_ready(m) for m in (ensemble.ENSEMBLE, *ensemble.STEPS)})

# %% [markdown]
# ## Where your results are

# %%
passes.finish()
