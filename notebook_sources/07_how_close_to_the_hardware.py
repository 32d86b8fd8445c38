# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 7. How close to the hardware? (optional)
#
# Notebook 6 ended with a model that batches requests and absorbs bursts. This notebook asks a
# harder question: **how much of what the hardware can do with this model does the served model
# deliver?** First you measure the limit: the model alone, the batch already in memory, no server.
# Then you close the gap between that and a server answering one-image requests, one change at a
# time:
#
# | step | what changes | why it could help |
# |---|---|---|
# | 7.1 | nothing: measure the raw model | the ceiling every served number is compared with |
# | 7.2 | the start: notebook 6's best setup on a PyTorch model | the gap to close |
# | 7.3 | raw uint8 pixels instead of normalised floats | 4x fewer bytes per request; the model normalises |
# | 7.4 | gRPC instead of HTTP/REST | a binary protocol instead of JSON headers and text |
# | 7.5 | shared memory | the request carries a reference, not the image |
# | 7.6 | fp16 + CUDA graphs in the model (GPU only) | the model's own time per batch shrinks |
# | 7.7 | instances × max batch size × queue delay | enough work in flight to keep the device busy |
#
# Every client here sends **one image per request**, as real users do: any batching is Triton's.
# The model, `food_classifier_tuned`, is a Python-backend PyTorch model whose `model.py` reads its
# input format, precision and CUDA-graph switch from `config.pbtxt` (the work itself is in
# `servelab/serving/tuned_runtime.py`), so every step is a config change and a reload.
#
# **Hardware decides.** The goal the lab's authors set for a GPU is 60% of the raw batched
# throughput. Without a GPU the same steps run, the GPU-only ones are skipped, and claims only a
# GPU can show are marked *not checked here*.
#
# ## Setup

# %%
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import tritonclient.http as httpclient
from PIL import Image

from servelab import (
    claims,
    food11,
    labenv,
    model_repository,
    perf,
    plots,
    triton_config,
    triton_stats,
)
from servelab.paths import RESULTS, TEST_IMAGES

env = labenv.load()
TRITON, GRPC, METRICS = labenv.triton_urls()
HOST, GRPC_HOST = TRITON.split("://")[-1], GRPC.split("://")[-1]
LOCAL = env["LAB_MODE"] == "local"
OUT = RESULTS / "hardware"
MODEL = "food_classifier_tuned"
client = httpclient.InferenceServerClient(HOST)
ON_GPU = triton_stats.gpu_count(TRITON, METRICS) > 0

# %% [markdown]
# How big each step's runs are: one default for a GPU, a smaller one for a CPU. To change one, set
# its `LAB_HW_...` variable (for example `LAB_HW_INSTANCES=2,4`) before starting the lab.

# %%
CLIENTS = labenv.param("HW_CLIENTS", 128 if ON_GPU else 16)           # one-image requests in flight, 7.2-7.6
MAX_CLIENTS = labenv.param("HW_MAX_CLIENTS", 1024 if ON_GPU else 32)   # the most the sweep keeps in flight
SWEEP_INSTANCES = labenv.param_list("HW_INSTANCES", "2,4,8" if ON_GPU else "1,2")
SWEEP_MAX_BATCH = labenv.param_list("HW_MAX_BATCH", "64,256" if ON_GPU else "8,16")
SWEEP_DELAYS_US = labenv.param_list("HW_DELAYS_US", "500" if ON_GPU else "2000")
RAW_BATCHES = labenv.param_list("HW_RAW_BATCHES", "1,16,64,128,256" if ON_GPU else "1,8,16")
RAW_SECONDS = labenv.param("HW_RAW_SECONDS", 2)
REPEATS = labenv.param("HW_REPEATS", 3 if ON_GPU else 2)                # runs of the best configuration, 7.8
runs = {}
print(f"Triton at {HOST} (gRPC {GRPC_HOST}); {'a GPU' if ON_GPU else 'no GPU'}; {CLIENTS} clients in flight")

# %% [markdown]
# The model is not loaded at Triton's start: copy it into the model repository and ask Triton to
# load it (the repository API, with the node's secret).

# %%
folder = model_repository.add_model(MODEL, mode="local" if LOCAL else "docker",
                                    kind="gpu" if ON_GPU else "cpu")
client.load_model(MODEL, headers=labenv.admin_headers())
print(f"{MODEL} ready: {client.is_model_ready(MODEL)}\n")
print((folder / "config.pbtxt").read_text())

# %% [markdown]
# ## 7.1 The limit: the model alone
# `servelab/serving/raw_limit.py` runs the same model on a batch that is already in memory, back to
# back for a few seconds per batch size: no decoding, no copy, no server. It tries every runtime the
# lab has on this device: plain PyTorch (fp32), on a GPU the fastest PyTorch path (fp16, the forward
# pass replayed as a CUDA graph), and ONNX Runtime on the same model's ONNX export. **The limit** is
# the best of them: the most images per second this device does with this model. On a CPU that is
# ONNX Runtime with every core, so served/limit cannot exceed 1 when the served path runs PyTorch.
#
# In local mode the lab's services are paused while it measures, so it has the cores to itself. With
# Docker it must run where the device is, in the Triton container: the cell prints the command for
# the host and waits for its output file.

# %%
LIMIT_JSON = OUT / "raw_limit.json"
LIMIT_JSON.unlink(missing_ok=True)
LIMIT_JSON.parent.mkdir(parents=True, exist_ok=True)
args = ["--device", "cuda:0" if ON_GPU else "cpu", "--batches", ",".join(map(str, RAW_BATCHES)),
        "--seconds", str(RAW_SECONDS)]
if LOCAL:
    from labstack import launcher
    with launcher.paused("the raw model gets the cores to itself"):
        subprocess.run([sys.executable, "-m", "servelab.serving.raw_limit", *args, "--json", str(LIMIT_JSON)],
                       check=True)
else:
    labenv.ask_host(f"docker compose {labenv.compose_files()} exec -T "
                    f"-e FOOD11_MODEL_PATH=/models/{MODEL}/1/food11.pth "
                    "-e FOOD11_ONNX_PATH=/models/food_classifier_onnx/1/model.onnx triton_server "
                    "python3 -m servelab.serving.raw_limit " + " ".join(args)
                    + f" --json - > {labenv.host_path(LIMIT_JSON)}")
    labenv.wait_for_file(LIMIT_JSON, lambda text: text.rstrip().endswith("}"), timeout=1800)

# %%
raw = json.loads(LIMIT_JSON.read_text())
raw_table = pd.DataFrame(raw["rows"])
raw_table.to_csv(OUT / "raw_limit.csv", index=False)
LIMIT, EAGER_LIMIT = raw["limit"], raw["eager_limit"]
print(f"the limit on {raw['device_name']}: {LIMIT['images_per_s']:.0f} images/s ({LIMIT['path']}, batch "
      f"{LIMIT['batch']}): the best of every runtime and batch size above, no server, nothing else running")
raw_table.pivot(index="batch", columns="path", values="images_per_s")

# %% [markdown]
# **What to notice.** On a GPU one image at a time uses a sliver of the chip: throughput grows
# many times over with the batch size, until the arithmetic units are full. So the server's job is
# to turn many one-image requests into large batches without adding much of its own time. On a CPU
# the cores are busy already at small batches, and the runtime matters more than the batch.

# %% jupyter={"source_hidden": true}
by_batch = raw_table[raw_table["path"] == EAGER_LIMIT["path"]].set_index("batch")["images_per_s"]
gain = by_batch.iloc[-1] / by_batch.iloc[0]
if ON_GPU:
    claims.at_least("7.1: batching multiplies the raw throughput (largest batch / batch 1, eager fp32)", gain, 5)
else:
    claims.not_checkable("7.1: batching multiplies the raw throughput",
                         f"on this CPU batch {by_batch.index[-1]} gives {gain:.1f}x batch 1: the cores are busy "
                         "already at small batches")

# %% [markdown]
# ## 7.2 The start: notebook 6's best setup
# One instance, dynamic batching (preferred batch sizes 4/6/8, at most 100 µs of waiting),
# `max_batch_size: 16`, normalised FP32 tensors over HTTP. `--async` lets a few client threads hold
# `CLIENTS` requests in flight; `--shape` fills them with random numbers.
#
# **Predict.** What fraction of the limit will this serve?

# %%
claims.predict("7.2 served / limit at the start", None, why="")

# %%
line = f"perf_analyzer -m {MODEL} -u {HOST} --concurrency-range {CLIENTS} --async --shape input:3,224,224"
runs["7.2 start"] = perf.run_line(line, "7.2 start", out=OUT)

# %% [markdown]
# **What to notice.** Compare the throughput with the limit, and look at where a request's time goes:
# the server's queue, its compute (input, infer, output) and the transfer. Each request carries
# 224 × 224 × 3 floats: how many bytes is that, and how many gigabytes per second would the limit's
# rate need?

# %% jupyter={"source_hidden": true}
claims.compare_prediction("7.2 served / limit at the start", runs["7.2 start"].throughput / LIMIT["images_per_s"])
claims.at_most("7.2: served / limit is at most 1 (the limit is the best the device does with this model)",
               runs["7.2 start"].throughput / LIMIT["images_per_s"], 1.0)
if ON_GPU:
    claims.at_most("7.2: the start serves well under half of the limit",
                   runs["7.2 start"].throughput / LIMIT["images_per_s"], 0.5)

# %% [markdown]
# ## 7.3 Raw pixels instead of normalised floats
# A float32 tensor is 602,112 bytes per image; the same image as the uint8 pixels it was decoded
# to is 150,528 bytes. Change the model's input to `TYPE_UINT8 [224, 224, 3]`: `model.py` then
# normalises on its device (one multiply-add per pixel, nothing next to the convolutions).

# %%
triton_config.edit(MODEL, """
input [ { name: "input" data_type: TYPE_UINT8 dims: [ 224, 224, 3 ] } ]
""")

# %% [markdown]
# Same answers? Send a test photo's pixels through the client library and compare with
# `food_classifier` (notebook 6's Python-backend model, which decodes the JPEG itself):

# %%
photo = sorted(TEST_IMAGES.glob("*.jpg"))[0]
pixels = np.asarray(food11.load_image(photo.read_bytes()).resize((224, 224), Image.BILINEAR), dtype=np.uint8)
tensor = httpclient.InferInput("input", [1, 224, 224, 3], "UINT8")
tensor.set_data_from_numpy(pixels[None])
tuned = food11.top_class(client.infer(MODEL, [tensor]).as_numpy("output")[0])[0]
image = httpclient.InferInput("INPUT_IMAGE", [1, 1], "BYTES")
image.set_data_from_numpy(np.array([[food11.encode_file(photo).encode()]], dtype=np.object_))
reference = client.infer("food_classifier", [image]).as_numpy("FOOD_LABEL")[0][0].decode()
claims.fact("7.3: the uint8 model gives the same class as food_classifier on a test photo", tuned == reference,
            {"tuned": tuned, "food_classifier": reference})

# %%
line = f"perf_analyzer -m {MODEL} -u {HOST} --concurrency-range {CLIENTS} --async --shape input:224,224,3"
runs["7.3 uint8 HTTP"] = perf.run_line(line, "7.3 uint8 HTTP", out=OUT)

# %% [markdown]
# **What to notice.** A quarter of the bytes: less to send, receive and copy per request. The
# JPEG of this photo is smaller still: what would the server have to do with it, and on which
# processor? (On a small CPU machine the transfer is not what limits, and the difference may not
# show: the claim below says so when the measurement cannot decide it.)

# %% jupyter={"source_hidden": true}
uint8_gain = runs["7.3 uint8 HTTP"].throughput / runs["7.2 start"].throughput
if ON_GPU:
    claims.at_least("7.3: uint8 pixels serve at least as many images per second as float32 tensors", uint8_gain, 1.0)
else:  # measured on 2 cores: 0.79 to 1.12 from run to run
    claims.not_checkable("7.3: uint8 pixels serve at least as many images per second as float32 tensors",
                         f"measured uint8 / float32 = {uint8_gain}; on a CPU the server normalises the pixels on the "
                         "cores the client also needs, and the bytes saved cross loopback in microseconds")

# %% [markdown]
# ## 7.4 gRPC instead of HTTP/REST
# The same model and load, through Triton's gRPC endpoint (port 8001): each request is a protobuf
# message in one unary call over an HTTP/2 connection that stays open, instead of an HTTP/1.1
# request with a JSON header. Change `-i` and the address:

# %%
line = f"perf_analyzer -m {MODEL} -u {GRPC_HOST} -i grpc --concurrency-range {CLIENTS} --async --shape input:224,224,3"
runs["7.4 uint8 gRPC"] = perf.run_line(line, "7.4 uint8 gRPC", out=OUT)

# %% [markdown]
# **What to notice.** Compare the transfer and throughput columns with 7.3. The difference between
# the two protocols is per-request work in the client and the server's front end; whether it shows
# depends on how much else each request costs. Which of the two would you give a browser, and which
# a service calling Triton thousands of times a second?
#
# ## 7.5 Shared memory: the request carries a reference, not the image
# A client can write the input once into a system shared-memory region, register the region with
# Triton, and then send requests that name the region instead of carrying the pixels. This only
# works when client and server share the host's memory (the same machine; in Docker, containers
# that share IPC). First by hand, with `tritonclient`'s shared-memory utilities and the photo of
# 7.3:

# %%
import warnings

import tritonclient.grpc as grpcclient

with warnings.catch_warnings():  # tritonclient 2.51 finds its C library through setuptools' old pkg_resources
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
    import tritonclient.utils.shared_memory as shm

grpc_client = grpcclient.InferenceServerClient(GRPC_HOST)
nbytes = pixels.nbytes                     # 224 x 224 x 3 uint8 = 150,528 bytes
if "lab_photo" in {r["name"] for r in grpc_client.get_system_shared_memory_status(as_json=True).get("regions", {})
                   .values()}:
    grpc_client.unregister_system_shared_memory("lab_photo")   # left over from an earlier run of these cells
region = shm.create_shared_memory_region("lab_photo", "/lab_photo", nbytes)
shm.set_shared_memory_region(region, [pixels[None]])             # write the pixels once
grpc_client.register_system_shared_memory("lab_photo", "/lab_photo", nbytes)

# %% [markdown]
# Now a request that carries no pixels, only the region's name and size. Then the region is
# unregistered and freed: shared memory outlives a process that forgets it.

# %%
try:
    tensor = grpcclient.InferInput("input", [1, 224, 224, 3], "UINT8")
    tensor.set_shared_memory("lab_photo", nbytes)                    # the request names the region
    by_reference = food11.top_class(grpc_client.infer(MODEL, [tensor]).as_numpy("output")[0])[0]
finally:
    grpc_client.unregister_system_shared_memory("lab_photo")
    shm.destroy_shared_memory_region(region)
print(f"through shared memory: {by_reference}; with the pixels in the request (7.3): {tuned}")
claims.fact("7.5: a request naming a shared-memory region gets the class of one carrying the pixels",
            by_reference == tuned, {"shared_memory": by_reference, "in_the_request": tuned})

# %% [markdown]
# perf_analyzer does the same for every request with `--shared-memory system`:

# %%
line += " --shared-memory system"
runs["7.5 uint8 gRPC + shm"] = perf.run_line(line, "7.5 uint8 gRPC + shm", out=OUT)

# %% [markdown]
# **What to notice.** The client no longer puts 150 KB of pixels into every request, and the server
# reads them from the region instead of a socket. Over loopback those bytes cost tens of
# microseconds, so the gain is small next to everything else a request costs. Under load the
# transfer columns also hold time spent waiting for a free CPU core, so the clean comparison is
# with one client: three short runs of each, alternating so a slow moment of the machine hits both.

# %% jupyter={"source_hidden": true}
one = (f"perf_analyzer -m {MODEL} -u {GRPC_HOST} -i grpc --concurrency-range 1 --shape input:224,224,3 "
       "--request-count 30")
send = {"without": [], "with": []}
for i in range(3):
    for kind, extra in (("without", ""), ("with", " --shared-memory system")):
        send[kind].append(perf.run_line(one + extra, f"7.5 one client {kind} {i}", out=OUT, verbose=False)
                          .row["client_send_ms"])
claims.at_least("7.5: with shared memory the client's send time per request falls (one client, 3 runs each)",
                claims.Measured.from_windows(send["without"]) / claims.Measured.from_windows(send["with"]), 1.0)

# %%
best_transport = max(("7.3 uint8 HTTP", "7.4 uint8 gRPC", "7.5 uint8 gRPC + shm"),
                     key=lambda name: runs[name].throughput.value)
TRANSPORT = {"7.3 uint8 HTTP": f"-u {HOST}", "7.4 uint8 gRPC": f"-u {GRPC_HOST} -i grpc",
             "7.5 uint8 gRPC + shm": f"-u {GRPC_HOST} -i grpc --shared-memory system"}[best_transport]
print(f"best transport so far: {best_transport}; from here on: perf_analyzer ... {TRANSPORT}")

# %% [markdown]
# ## 7.6 Faster model execution: fp16 and CUDA graphs (GPU only)
# Two switches in `config.pbtxt`, read by `model.py` at load time:
# - `precision: fp16`: half-precision weights and activations in the channels_last layout. GPUs with
#   tensor cores (Volta, 2017, and newer: V100, T4, A100, H100) run fp16 convolutions there, much
#   faster; the P100 has no tensor cores, but fp16 still halves the bytes moved;
# - `cuda_graphs: on`: for each batch size bucket (1, 2, 4, ... up to the max), the ~150 kernel
#   launches of one forward pass are recorded once and replayed as one; a batch is padded up to its
#   bucket.
# fp16 changes the arithmetic, so first check it does not change the answers on the test photos.

# %%
if ON_GPU:
    photos = np.stack([np.asarray(food11.load_image(p.read_bytes()).resize((224, 224)), np.uint8)
                       for p in sorted(TEST_IMAGES.iterdir())])
    batch = httpclient.InferInput("input", list(photos.shape), "UINT8")
    batch.set_data_from_numpy(photos)
    fp32 = client.infer(MODEL, [batch]).as_numpy("output")
    triton_config.edit(MODEL, 'parameters { key: "precision" value { string_value: "fp16" } }')
    fp16 = client.infer(MODEL, [batch]).as_numpy("output")
else:
    print("No GPU: fp16 and CUDA graphs are GPU features; skipped.")

# %% [markdown]
# How far apart are the two sets of logits, and does any photo change class?

# %%
if ON_GPU:
    spread, diff = float(fp32.max() - fp32.min()), float(np.abs(fp16 - fp32).max())
    # a class can only flip where fp32's two best logits are closer than fp16's error (untrained
    # weights have such near-ties): the claim is about the photos fp32 decides clearly
    top2 = np.sort(fp32, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 2 * diff
    agree = fp16.argmax(1) == fp32.argmax(1)
    claims.fact("7.6: fp16 keeps every class fp32 decides clearly, logits within 5% of their spread",
                bool(agree[clear].all()) and diff <= 0.05 * spread,
                {"max_abs_diff": diff, "logit_spread": spread, "photos": len(agree),
                 "decided_clearly": int(clear.sum()), "same_class": int(agree.sum())})

# %%
if ON_GPU:
    base = f"perf_analyzer -m {MODEL} {TRANSPORT} --concurrency-range {CLIENTS} --async --shape input:224,224,3"
    runs["7.6 + fp16"] = perf.run_line(base, "7.6 + fp16", out=OUT)
    triton_config.edit(MODEL, 'parameters { key: "cuda_graphs" value { string_value: "on" } }')
    runs["7.6 + CUDA graphs"] = perf.run_line(base, "7.6 + CUDA graphs", out=OUT)

# %% [markdown]
# **What to notice.** The model's compute time per execution (`server_compute_infer_ms`) drops;
# whether throughput follows depends on whether the model was the bottleneck at this setting. Why
# do CUDA graphs matter most for small batches?

# %% jupyter={"source_hidden": true}
if ON_GPU:
    claims.at_most("7.6: fp16 + CUDA graphs cut the model's compute time per execution",
                   runs["7.6 + CUDA graphs"].measured("server_compute_infer_ms")
                   / runs[best_transport].measured("server_compute_infer_ms"), 1.0)
else:
    claims.not_checkable("7.6: fp16 + CUDA graphs cut the model's compute time", "no GPU")

# %% [markdown]
# ## 7.7 Enough work in flight: instances × max batch size × queue delay
# The server can only build large batches if many requests wait, and only keep the device busy if
# a batch is ready when the last one finishes. Three settings decide that:
# - `instance_group count`: model copies, each its own Python process, working at the same time;
# - `max_batch_size`: the largest batch the batcher may form (no preferred sizes now: it takes all
#   that are waiting, up to this);
# - `max_queue_delay_microseconds`: how long the batcher may hold a request to fill a batch.
#
# The clients in flight grow with the setting (2 × instances × max batch, within the limits set
# at the top), so each configuration gets enough requests to fill its batches. Each configuration
# is the same three fields of `config.pbtxt`, written by the loop:

# %%
sweep, fragments = [], {}
for instances in SWEEP_INSTANCES:
    for max_batch in SWEEP_MAX_BATCH:
        for delay in SWEEP_DELAYS_US:
            fragment = (f"instance_group [ {{ count: {instances}, kind: KIND_GPU, gpus: [ 0 ] }} ]\n"
                        f"max_batch_size: {max_batch}\n"
                        f"dynamic_batching {{ max_queue_delay_microseconds: {delay} }}")
            triton_config.edit(MODEL, fragment, verbose=False)
            clients = int(min(MAX_CLIENTS, max(CLIENTS, 2 * instances * max_batch)))
            name = f"7.7 {instances} inst, max batch {max_batch}, delay {delay} us, c{clients}"
            line = f"perf_analyzer -m {MODEL} {TRANSPORT} --concurrency-range {clients} --async --shape input:224,224,3"
            runs[name] = perf.run_line(line, name, out=OUT, verbose=False)
            fragments[name] = fragment
            sweep.append({"instances": instances, "max_batch": max_batch, "delay_us": delay, "clients": clients,
                          **{k: runs[name].row[k] for k in ("throughput_infer_s", "p99_ms", "avg_batch_size")}})
sweep_table = pd.DataFrame(sweep)
sweep_table.round(1)

# %% [markdown]
# **What to notice.** Compare the rows rather than expect a rule: more instances help while CPU
# cores and device time are free, and a larger `max_batch_size` helps only if the batcher fills it
# *and* the per-request work around the model does not grow with it. The average batch size column
# shows whether the batcher really formed the batches the configuration allows. Which
# configuration would you deploy if p99 latency had to stay under 100 ms?

# %% jupyter={"source_hidden": true}
best = max(runs, key=lambda name: runs[name].throughput.value)
claims.at_least("7.7: the best configuration serves more than the start",
                runs[best].throughput / runs["7.2 start"].throughput, 1.0, {"best": best})

# %% [markdown]
# ## 7.8 Does it hold still? The best configuration, again
# One run is one sample of a noisy machine: the same configuration can land a few percent apart on
# the next run (other work on the host, where the batcher's timing happens to fall, the GPU's
# clocks). Before you quote a number, write the best configuration of the sweep again and measure it
# `REPEATS` times in all; the figure to quote is the median, with the lowest and highest beside it.

# %%
best_swept = max(fragments, key=lambda name: runs[name].throughput.value)
triton_config.edit(MODEL, fragments[best_swept], verbose=False)
repeats = [runs[best_swept]]
for i in range(2, REPEATS + 1):
    repeats.append(perf.run_line(runs[best_swept].row["command"], f"7.8 repeat {i}", out=OUT, verbose=False))
stability = [r.throughput.value / LIMIT["images_per_s"] for r in repeats]
print(f"{best_swept}: {', '.join(f'{r.throughput.value:.0f}' for r in repeats)} infer/s")
print(f"served/limit over {len(stability)} runs: median {np.median(stability):.3f}, min {min(stability):.3f}, "
      f"max {max(stability):.3f}")

# %% [markdown]
# ## What you measured: where it lands, and what limits it

# %%
table = pd.DataFrame([{"run": name, "step": name.split(" ")[0], **run.row}
                      for name, run in {**runs, **{f"7.8 repeat {i + 2}": r for i, r in enumerate(repeats[1:])}}.items()
                      if "one client" not in name])
table["served_over_limit"] = table["throughput_infer_s"] / LIMIT["images_per_s"]
table.to_csv(OUT / "summary.csv", index=False)
ratio = runs[best].throughput / LIMIT["images_per_s"]
(OUT / "served_over_limit.json").write_text(json.dumps({
    "served_infer_s": runs[best].row["throughput_infer_s"], "best": best, "command": runs[best].row["command"],
    "limit": LIMIT, "eager_limit": EAGER_LIMIT, "served_over_limit": ratio.value, "device": raw["device_name"],
    "repeated": best_swept, "repeated_config": fragments[best_swept],
    "repeats_served_over_limit": stability, "repeats_median": float(np.median(stability)),
    "limit_definition": "the most images/s any runtime of the lab does with this model on this device, batched, "
                        "with no server and nothing else running (servelab/serving/raw_limit.py)"}, indent=2) + "\n")
print(f"served/limit = {runs[best].row['throughput_infer_s']:.0f} / {LIMIT['images_per_s']:.0f} = {ratio} "
      f"(limit: {LIMIT['path']}, batch {LIMIT['batch']}; best served: {best})")
util = [c for c in table if c.endswith("_util_pct")]
table[["run", "throughput_infer_s", "served_over_limit", "p99_ms", "server_queue_ms", "server_compute_infer_ms",
       "avg_batch_size", *util]].round(3)

# %% [markdown]
# Where does a request's time go in the best run, and how does the model's execution time compare
# with the raw model at the same batch size? If the server's compute time per execution is much
# larger than the raw time for that batch, the work around the model (stacking the requests, copies,
# the Python backend's messages to and from its process, one response per request) is what limits
# it; if the queue is long and the device is busy, the device is.

# %%
top = runs[best].row
avg_batch = max(1.0, float(top["avg_batch_size"]))
raw_path = raw_table[raw_table["path"] == LIMIT["path"]].sort_values("batch")
raw_ms = 1000 * avg_batch / float(np.interp(avg_batch, raw_path["batch"], raw_path["images_per_s"]))
print(f"best run: average batch {avg_batch:.1f}; server compute per execution: input "
      f"{top['server_compute_input_ms']:.2f} + infer {top['server_compute_infer_ms']:.2f} + output "
      f"{top['server_compute_output_ms']:.2f} ms; the raw model ({LIMIT['path']}) takes {raw_ms:.2f} ms for a batch "
      f"of {avg_batch:.0f}; utilisation: {', '.join(f'{c[:-9]} {top[c]:.0f}%' for c in util if c in top) or 'n/a'}")

# %% jupyter={"source_hidden": true}
claims.at_most("served / limit is at most 1 for every run (the limit's definition)",
               float(table["served_over_limit"].max()), 1.0)
if ON_GPU:
    claims.at_least("goal: the best configuration reaches at least 60% of the raw batched throughput", ratio, 0.6)
else:
    claims.not_checkable("goal: at least 60% of the raw batched throughput",
                         f"set for a GPU; on this CPU served/limit = {ratio}")
plots.steps_vs_limit(table, LIMIT, EAGER_LIMIT, "Served throughput, step by step, against the raw model").savefig(
    OUT / "steps_vs_limit.png", dpi=110)
plots.latency_split_stacked(table, "Average latency: queue / compute / network").savefig(OUT / "latency_split.png",
                                                                                          dpi=110)
plots.sweep_throughput(sweep_table, "7.7: throughput by instances, max batch size and delay").savefig(
    OUT / "sweep.png", dpi=110)
claims.save(OUT)

# %% [markdown]
# **Hand in** the table, `steps_vs_limit.png` and `sweep.png`, and your predictions, and answer:
#
# 1. What limits the best configuration on your hardware: the device, the CPU work around the
#    model, or the transfer? Which numbers tell you?
# 2. Which step gained most, and would it gain as much on a P100 (no tensor cores) as on an H100?
#
# **Exercise.** Pick one setting of 7.7 and vary it further (e.g. `max_queue_delay_microseconds`
# from 100 to 5000 µs at the best instance count): predict the trend in throughput and p99 first,
# then measure, and explain where the trade-off turns.
#
# ## Tear down
# Unload the tuned model (its instances hold device memory), leaving notebook 6's two models as
# they were.

# %%
client.unload_model(MODEL, headers=labenv.admin_headers())
print(f"{MODEL} ready: {client.is_model_ready(MODEL)}")
