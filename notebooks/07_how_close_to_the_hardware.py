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
# Notebook 6 ended with a model that batches requests and keeps bursts in check. This notebook asks
# a harder question: **how much of what the hardware can do with this model does the served model
# deliver?** First you measure the limit: the model alone, batch already on the device, no server.
# Then you close the gap between that and a server answering one-image requests, one change at a
# time, measuring each with perf_analyzer:
#
# | step | what changes | why it could help |
# |---|---|---|
# | 1 | nothing: measure the raw model | the ceiling every served number is compared with |
# | 2 | the start: notebook 6's best setup on a PyTorch model | the gap to close |
# | 3 | raw uint8 pixels instead of normalised floats | 4x fewer bytes per request; the GPU normalises |
# | 4 | gRPC instead of HTTP/REST | a binary protocol with persistent streams |
# | 5 | shared memory | the request carries a reference, not the image |
# | 6 | fp16 + CUDA graphs in the model (GPU) | the model's own time per batch shrinks |
# | 7 | instances x max batch size x queue delay | enough work in flight to keep the device busy |
#
# Every client here sends **one image per request** (batch-1 clients), as real users do; any
# batching is Triton's. The model, `food_classifier_tuned`, is a Python-backend PyTorch model whose
# `model.py` reads its input format, precision and CUDA-graph switch from `config.pbtxt`, so every
# step is a config change and a reload, never a rebuild.
#
# **Hardware decides.** The goal the lab's authors set for a GPU is 60% of the raw batched
# throughput. On a CPU (local mode without a GPU) the same steps run, the GPU-only steps are
# skipped, and claims only a GPU can show are marked *not checked here*.

# %%
import json
import subprocess
import sys

import numpy as np
import pandas as pd
from PIL import Image

from servelab import claims, food11, labenv, model_repository, perf, plots, triton_config, triton_http, triton_stats
from servelab.paths import RESULTS, TEST_IMAGES

env = labenv.load()
TRITON, GRPC, METRICS = labenv.triton_urls()
LOCAL = env["LAB_MODE"] == "local"
OUT = RESULTS / "hardware"
OUT.mkdir(parents=True, exist_ok=True)
MODEL = "food_classifier_tuned"

N_GPUS = triton_stats.gpu_count(TRITON, METRICS)
ON_GPU = N_GPUS > 0
KIND = "gpu" if ON_GPU else "cpu"

# Measurement settings (make lab and the tests shrink these).
INTERVAL_MS = labenv.param("PERF_INTERVAL_MS", 5000)
STABILITY = labenv.param("PERF_STABILITY", 20)
CLIENTS = labenv.param("HW_CLIENTS", 128 if ON_GPU else 16)           # batch-1 requests in flight, steps 2-6
MAX_CLIENTS = labenv.param("HW_MAX_CLIENTS", 1024 if ON_GPU else 32)   # the most the sweep keeps in flight
SWEEP_INSTANCES = labenv.param_list("HW_INSTANCES", "2,4,8" if ON_GPU else "1,2")
SWEEP_MAX_BATCH = labenv.param_list("HW_MAX_BATCH", "64,256" if ON_GPU else "8,16")
SWEEP_DELAYS_US = labenv.param_list("HW_DELAYS_US", "500" if ON_GPU else "2000")
RAW_BATCHES = labenv.param_list("HW_RAW_BATCHES", "1,16,64,128,256" if ON_GPU else "1,8,16")
RAW_SECONDS = labenv.param("HW_RAW_SECONDS", 2)
print(f"Triton at {TRITON} (gRPC {GRPC}); {N_GPUS} GPU(s) -> instances are KIND_{KIND.upper()}")
print(f"{INTERVAL_MS=} {STABILITY=} {CLIENTS=} {MAX_CLIENTS=} {SWEEP_INSTANCES=} {SWEEP_MAX_BATCH=} {SWEEP_DELAYS_US=}")

# %% [markdown]
# The model is not loaded at Triton's start: copy it into the model repository and ask Triton to
# load it (the same repository API the config changes use).

# %%
folder = model_repository.add_model(MODEL, triton_config.default_repository(), mode="local" if LOCAL else "docker",
                                    kind=KIND)
ok, seconds, error = triton_config.load_model(MODEL, TRITON)
if not ok:
    raise RuntimeError(f"Triton could not load {MODEL}: {error}")
print(f"{MODEL} loaded in {seconds:.1f} s from {folder}\n")
print((folder / "config.pbtxt").read_text())

# %% [markdown]
# ## 1. The limit: the model alone
# `servelab.serving.raw_limit` runs the same PyTorch model on a batch that is already on the device, back to
# back for a few seconds per batch size: no decoding, no copy, no server. On a GPU it measures two
# paths: plain PyTorch (fp32, one kernel launch at a time) and the fastest path this lab has
# (fp16 in the tensor-core layout, the forward pass replayed as a CUDA graph). The best number is
# **the limit**.
#
# In local mode this notebook runs it directly. With Docker it must run where the GPU is, in the
# Triton container: the cell prints the command for the host and waits for its output file.

# %%
LIMIT_JSON = OUT / "raw_limit.json"
LIMIT_JSON.unlink(missing_ok=True)
device = "cuda:0" if ON_GPU else "cpu"
args = ["--device", device, "--batches", ",".join(map(str, RAW_BATCHES)), "--seconds", str(RAW_SECONDS)]
if LOCAL:
    print("$ python -m servelab.serving.raw_limit " + " ".join(args) + f" --json {LIMIT_JSON}")
    subprocess.run([sys.executable, "-m", "servelab.serving.raw_limit", *args, "--json", str(LIMIT_JSON)], check=True)
else:
    labenv.ask_host(
        f"docker compose {labenv.compose_files()} exec -T "
        f"-e FOOD11_MODEL_PATH=/models/{MODEL}/1/food11.pth triton_server "
        "python3 -m servelab.serving.raw_limit " + " ".join(args) + f" --json - > {labenv.host_path(LIMIT_JSON)}"
    )
    labenv.wait_for_file(LIMIT_JSON, lambda text: text.rstrip().endswith("}"), timeout=1800)
raw = json.loads(LIMIT_JSON.read_text())
raw_table = pd.DataFrame(raw["rows"])
raw_table.to_csv(OUT / "raw_limit.csv", index=False)
LIMIT, EAGER_LIMIT = raw["limit"], raw["eager_limit"]
print(raw_table.pivot(index="batch", columns="path", values="images_per_s").to_string())
print(
    f"\nlimit: {LIMIT['images_per_s']:.0f} images/s ({LIMIT['path']}, batch {LIMIT['batch']}) on {raw['device_name']}"
)

# %% [markdown]
# **What to notice.** On a GPU one image at a time uses a sliver of the chip: throughput grows
# many times over with the batch size, until the arithmetic units are full. So the server's job is
# to turn many one-image requests into large batches without adding much of its own time.
#
# *Question:* at which batch size does the curve flatten on your GPU, and what does that say about
# the `max_batch_size` worth configuring?

# %%
by_batch = raw_table[raw_table["path"] == EAGER_LIMIT["path"]].set_index("batch")["images_per_s"]
if ON_GPU:
    claims.check(
        "1: batching multiplies the raw throughput (largest batch >= 5x batch 1, eager fp32)",
        by_batch.iloc[-1] >= 5 * by_batch.iloc[0],
        {
            "batch1_img_s": by_batch.iloc[0],
            "largest_batch_img_s": by_batch.iloc[-1],
            "ratio": by_batch.iloc[-1] / by_batch.iloc[0],
        },
    )
else:
    claims.not_checkable(
        "1: batching multiplies the raw throughput",
        f"on this CPU batch {by_batch.index[-1]} gives {by_batch.iloc[-1] / by_batch.iloc[0]:.1f}x "
        "batch 1: a CPU's cores are busy already at small batches",
    )

# %% [markdown]
# One function measures every step: batch-1 clients kept `clients` requests in flight
# (`--concurrency-range`, with `--async` so a few client threads can hold hundreds of requests),
# over HTTP or gRPC, with or without shared memory. Each row also gets the served/limit ratio.

# %%
rows, batch_runs = [], {}


def measure(
    step: str, config: str, protocol: str = "http", shared_memory: str | None = None, clients: int = CLIENTS
) -> dict:
    tag = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in f"{step}_{config}")
    result = perf.measure(
        MODEL,
        url=TRITON,
        grpc_url=GRPC,
        metrics_url=METRICS,
        protocol=protocol,
        concurrency=clients,
        async_mode=True,
        shared_memory=shared_memory,
        measurement_interval_ms=INTERVAL_MS,
        stability_percentage=STABILITY,
        max_trials=8,
        accept_unsettled=True,
        csv_path=OUT / f"perf_{tag}.csv",
        timeout=180 + 10 * INTERVAL_MS / 1000,
    )
    row = {
        "step": step,
        "config": config,
        "run": f"{step}: {config}",
        "protocol": protocol,
        "shared_memory": shared_memory or "none",
        "command": result.shell,
        **result.row,
    }
    row["served_over_limit"] = row["throughput_infer_s"] / LIMIT["images_per_s"]
    rows.append(row)
    batch_runs[row["run"]] = result.stats["batch_executions"]
    shown = [
        "throughput_infer_s",
        "served_over_limit",
        "p50_ms",
        "p99_ms",
        "server_queue_ms",
        "server_compute_input_ms",
        "server_compute_infer_ms",
        "avg_batch_size",
        "util_mean_pct",
    ]
    print(pd.DataFrame([row])[["run"] + shown].round(3).to_string(index=False))
    return row


def reconfigure(**change) -> None:
    result = triton_config.update_model(MODEL, url=TRITON, **change)
    if not result.ok:
        raise RuntimeError(str(result))


def transfer_ms(row: dict) -> float:
    """Time a request spends getting to and from the server (client send + network + client receive)."""
    return row["client_send_ms"] + row["network_server_send_recv_ms"] + row["client_recv_ms"]


# %% [markdown]
# ## 2. The start: notebook 6's best setup
# One instance, dynamic batching (preferred batch sizes 4/6/8, at most 100 µs of waiting),
# `max_batch_size: 16`, normalised FP32 tensors over HTTP: the interface of the ONNX model of
# notebook 6, on a PyTorch model here. The instance runs where notebook 6's did.

# %%
start = measure("2", "fp32 tensors, HTTP, 1 inst, max batch 16")
print(f"\nserved/limit at the start: {start['served_over_limit']:.3f}")

# %% [markdown]
# **What to notice.** Compare the throughput with the limit of step 1. Look at where a request's
# time goes: the server's queue, its compute (input, infer, output) and the transfer.
#
# *Question:* each request carries 224 × 224 × 3 floats. How many bytes is that, and how many
# gigabytes per second would the limit's rate need?

# %%
if ON_GPU:
    claims.check(
        "2: the start serves well under half of the limit",
        start["served_over_limit"] < 0.5,
        {
            "served_infer_s": start["throughput_infer_s"],
            "limit_img_s": LIMIT["images_per_s"],
            "served/limit": start["served_over_limit"],
        },
    )
else:
    claims.not_checkable(
        "2: the start serves well under half of the limit",
        f"on a CPU the model's own arithmetic is most of a request's time (served/limit "
        f"{start['served_over_limit']:.2f} here, both measured on the same cores)",
    )

# %% [markdown]
# ## 3. Raw pixels instead of normalised floats
# A float32 tensor is 602,112 bytes per image; the same image as the uint8 pixels it was decoded to is
# 150,528 bytes. Change the model's input to `TYPE_UINT8 [224, 224, 3]`: `model.py` then normalises
# on its device (one multiply-add per pixel, free next to the convolutions). The diff:

# %%
reconfigure(input_type="TYPE_UINT8", input_dims=[224, 224, 3])

# %% [markdown]
# Same answers? Send a test photo's pixels and compare with `food_classifier` (notebook 6's
# Python-backend model, which decodes and normalises the JPEG itself):


# %%
def pixels_of(path) -> np.ndarray:
    """A photo as the uint8 [224, 224, 3] pixels the model now takes (decoded and resized, not normalised)."""
    photo = food11.load_image(path.read_bytes()).resize((food11.INPUT_SIZE, food11.INPUT_SIZE), Image.BILINEAR)
    return np.asarray(photo, dtype=np.uint8)


image_path = sorted(TEST_IMAGES.glob("*.jpg"))[0]
pixels = pixels_of(image_path)[None]
tuned_logits = triton_http.infer(TRITON, MODEL, {"input": pixels}, ["output"])["output"][0]
reference = triton_http.infer(
    TRITON, "food_classifier", {"INPUT_IMAGE": [food11.encode_file(image_path)]}, ["FOOD_LABEL", "PROBABILITY"]
)
print(f"{MODEL} (uint8 pixels): {food11.top_class(tuned_logits)}")
print(f"food_classifier (JPEG):  {reference['FOOD_LABEL'][0].decode()}, {float(reference['PROBABILITY'][0][0]):.3f}")
claims.check(
    "3: the uint8 model gives the same class as food_classifier on a test photo",
    food11.top_class(tuned_logits)[0] == reference["FOOD_LABEL"][0].decode(),
    {"tuned": food11.top_class(tuned_logits)[0], "food_classifier": reference["FOOD_LABEL"][0].decode()},
)

# %%
pixels_http = measure("3", "uint8 pixels, HTTP, 1 inst, max batch 16")

# %% [markdown]
# **What to notice.** A quarter of the bytes: less time sending, receiving and copying per request.
#
# *Question:* the JPEG of this photo is smaller still. What would the server have to do with it,
# and on which processor?

# %%
claims.check(
    "3: uint8 pixels take less transfer time per request than float32 tensors",
    transfer_ms(pixels_http) < transfer_ms(start),
    {"fp32_transfer_ms": transfer_ms(start), "uint8_transfer_ms": transfer_ms(pixels_http)},
)
if ON_GPU:
    claims.check(
        "3: uint8 pixels raise throughput",
        pixels_http["throughput_infer_s"] > start["throughput_infer_s"],
        {"fp32_infer_s": start["throughput_infer_s"], "uint8_infer_s": pixels_http["throughput_infer_s"]},
    )

# %% [markdown]
# ## 4. gRPC instead of HTTP/REST
# The same model and load, through Triton's gRPC endpoint (port 8001): requests are protobuf
# messages on long-lived HTTP/2 streams.

# %%
pixels_grpc = measure("4", "uint8 pixels, gRPC, 1 inst, max batch 16", protocol="grpc")

# %% [markdown]
# **What to notice.** Compare the transfer and throughput columns with step 3. The difference
# between the two protocols is per-request work in the client and the server's front end; whether
# it shows depends on how much else each request costs.
#
# *Question:* which of the two would you give a browser, and which a service calling Triton
# thousands of times a second?

# %% [markdown]
# ## 5. Shared memory: the request carries a reference, not the image
# perf_analyzer writes the input once into a system shared-memory region, registers it with Triton,
# and every request names that region instead of carrying the pixels. This only works when client
# and server share the host's memory (the same machine; in Docker, containers that share IPC).

# %%
pixels_shm = measure(
    "5", "uint8 pixels, gRPC + shared memory, 1 inst, max batch 16", protocol="grpc", shared_memory="system"
)

# %% [markdown]
# **What to notice.** The client no longer puts 150 KB of pixels into every request, and the
# server reads them from the region instead of a socket. Over loopback those bytes cost tens of
# microseconds, so the gain is small next to everything else a request costs; it grows with the
# input size. Under load the transfer columns also hold time spent waiting for a free CPU core, so
# the clean comparison is with one client: a few short runs of each, alternating, and the medians.
#
# *Question:* this removes a copy between client and server. Which copies are still left between
# the shared-memory region and the GPU?


# %%
def one_client_send_ms(shared_memory: str | None) -> float:
    """Client send time (ms) of a short one-client gRPC run: nothing else competes for the CPU."""
    return perf.measure(
        MODEL,
        url=TRITON,
        grpc_url=GRPC,
        metrics_url=METRICS,
        protocol="grpc",
        concurrency=1,
        shared_memory=shared_memory,
        request_count=30,
        verbose=False,
        timeout=120,
        csv_path=OUT / f"perf_5_one_client_{shared_memory or 'no_shm'}.csv",
    ).row["client_send_ms"]


one_client = {"grpc_send_ms": [], "grpc_shm_send_ms": []}
for _ in range(3):  # alternate, so a slow moment of the machine hits both
    one_client["grpc_send_ms"].append(one_client_send_ms(None))
    one_client["grpc_shm_send_ms"].append(one_client_send_ms("system"))
one_client = {name: float(np.median(values)) for name, values in one_client.items()}
claims.check(
    "5: with shared memory the client sends a reference, not the pixels: its send time per request falls (one client)",
    one_client["grpc_shm_send_ms"] < one_client["grpc_send_ms"],
    one_client,
)
if ON_GPU:
    claims.check(
        "5: under load, a request spends less time in transfer with shared memory than without",
        transfer_ms(pixels_shm) < transfer_ms(pixels_grpc),
        {"grpc_transfer_ms": transfer_ms(pixels_grpc), "grpc_shm_transfer_ms": transfer_ms(pixels_shm)},
    )
else:
    claims.not_checkable(
        "5: under load, a request spends less time in transfer with shared memory than without",
        f"on a CPU the model's arithmetic takes the cores the transfer also needs, so the loaded "
        f"transfer times are mostly waiting for a core (here {transfer_ms(pixels_grpc):.2f} ms "
        f"without, {transfer_ms(pixels_shm):.2f} ms with shared memory)",
    )
best_transport = max(
    [(pixels_grpc, "grpc", None), (pixels_shm, "grpc", "system"), (pixels_http, "http", None)],
    key=lambda t: t[0]["throughput_infer_s"],
)
PROTOCOL, SHM = best_transport[1], best_transport[2]
print(f"best transport so far: {PROTOCOL}{' + shared memory' if SHM else ''} (used from here on)")

# %% [markdown]
# ## 6. Faster model execution: fp16 and CUDA graphs (GPU only)
# Two switches in `config.pbtxt`, read by `model.py` at load time:
# - `precision: fp16`: half-precision weights and activations in the channels_last layout that
#   the GPU's tensor cores read fastest;
# - `cuda_graphs: on`: for each batch size bucket (1, 2, 4, 8, 16), the ~150 kernel
#   launches of one forward pass are recorded once and replayed as one; a batch is padded up to its
#   bucket.
#
# fp16 changes the arithmetic, so first check it does not change the answers on the test photos.

# %%
fp16_steps = []
if ON_GPU:
    photos = [pixels_of(p) for p in sorted(TEST_IMAGES.iterdir())]
    fp32_logits = triton_http.infer(TRITON, MODEL, {"input": np.stack(photos)}, ["output"])["output"]
    reconfigure(parameters={"precision": "fp16"})
    fp16_logits = triton_http.infer(TRITON, MODEL, {"input": np.stack(photos)}, ["output"])["output"]
    spread = float(fp32_logits.max() - fp32_logits.min())
    max_diff = float(np.abs(fp16_logits - fp32_logits).max())
    same = int((fp16_logits.argmax(1) == fp32_logits.argmax(1)).sum())
    claims.check(
        "6: fp16 gives the same classes as fp32 on the test photos (logits within 5% of their spread)",
        same == len(photos) and max_diff <= 0.05 * spread,
        {"max_abs_diff": max_diff, "logit_spread": spread, "same_classes": f"{same}/{len(photos)}"},
    )
    fp16_steps.append(measure("6", "+ fp16 channels_last", protocol=PROTOCOL, shared_memory=SHM))
    reconfigure(parameters={"cuda_graphs": "on"})
    fp16_steps.append(measure("6", "+ CUDA graphs", protocol=PROTOCOL, shared_memory=SHM))
else:
    print("No GPU: fp16 and CUDA graphs are GPU features; skipped.")

# %% [markdown]
# **What to notice.** The model's compute time per batch (server compute infer) drops; whether
# throughput follows depends on whether the model was the bottleneck at this setting.
#
# *Question:* why do CUDA graphs matter most for small batches?

# %%
if ON_GPU:
    before, after = best_transport[0], fp16_steps[-1]
    claims.check(
        "6: fp16 + CUDA graphs cut the model's compute time per execution",
        after["server_compute_infer_ms"] < before["server_compute_infer_ms"],
        {
            "fp32_compute_infer_ms": before["server_compute_infer_ms"],
            "fp16_graphs_compute_infer_ms": after["server_compute_infer_ms"],
        },
    )
else:
    claims.not_checkable("6: fp16 + CUDA graphs cut the model's compute time", "no GPU")

# %% [markdown]
# ## 7. Enough work in flight: instances × max batch size × queue delay
# The server can only build large batches if many requests wait, and only keep the device busy if
# a batch is ready when the last one finishes. Three settings decide that:
# - `instance_group count`: model copies, each its own Python process, working at the same time;
# - `max_batch_size`: the largest batch the batcher may form (no preferred sizes now: it takes
#   all that are waiting, up to this);
# - `max_queue_delay_microseconds`: how long the batcher may hold a request to fill a batch.
#
# The clients in flight grow with the setting (2 × instances × max batch, within the limits set at
# the top), so each configuration gets enough requests to fill its batches.

# %%
sweep = []
for instances in SWEEP_INSTANCES:
    for max_batch in SWEEP_MAX_BATCH:
        for delay in SWEEP_DELAYS_US:
            reconfigure(
                instances=instances, max_batch_size=max_batch, preferred_batch_sizes=[], max_queue_delay_us=delay
            )
            clients = int(min(MAX_CLIENTS, max(CLIENTS, 2 * instances * max_batch)))
            row = measure(
                "7",
                f"{instances} inst, max batch {max_batch}, delay {delay} us, c{clients}",
                protocol=PROTOCOL,
                shared_memory=SHM,
                clients=clients,
            )
            sweep.append({**row, "instances": instances, "max_batch": max_batch, "delay_us": delay, "clients": clients})
sweep_table = pd.DataFrame(sweep)
print(
    sweep_table.pivot_table(index=["instances"], columns=["max_batch", "delay_us"], values="throughput_infer_s")
    .round(0)
    .to_string()
)

# %% [markdown]
# **What to notice.** Compare the rows rather than expect a rule: more instances help while CPU
# cores and device time are free, and a larger `max_batch_size` helps only if the batcher fills it
# *and* the per-request work around the model does not grow with it. On the H100 reference run
# (docs/results/h100), 2 → 4 → 8 instances raised throughput at max batch 64, while max batch 256
# served the same or less at every instance count, with higher latency. The average batch size
# column shows whether the batcher really formed the batches the configuration allows.
#
# *Question:* pick the configuration you would deploy if p99 latency had to stay under 100 ms.

# %%
best = max(rows, key=lambda r: r["throughput_infer_s"])
claims.check(
    "7: the best configuration serves more than the start",
    best["throughput_infer_s"] > start["throughput_infer_s"],
    {"start_infer_s": start["throughput_infer_s"], "best_infer_s": best["throughput_infer_s"], "best": best["run"]},
)

# %% [markdown]
# ## Where it lands, and what limits it

# %%
table = pd.DataFrame(rows)
table.to_csv(OUT / "summary.csv", index=False)
columns = [
    "run",
    "throughput_infer_s",
    "served_over_limit",
    "p50_ms",
    "p99_ms",
    "server_queue_ms",
    "server_compute_input_ms",
    "server_compute_infer_ms",
    "server_compute_output_ms",
    "avg_batch_size",
    "util_mean_pct",
]
print(table[columns].round(3).to_string(index=False))
ratio, eager_ratio = (
    best["throughput_infer_s"] / LIMIT["images_per_s"],
    best["throughput_infer_s"] / EAGER_LIMIT["images_per_s"],
)
print(
    f"\nserved/limit = {best['throughput_infer_s']:.0f} / {LIMIT['images_per_s']:.0f} = {ratio:.3f}   "
    f"(limit: {LIMIT['path']}, batch {LIMIT['batch']}; best served: {best['run']})"
)
served, eager = best["throughput_infer_s"], EAGER_LIMIT["images_per_s"]
print(f"served/eager-fp32 limit = {served:.0f} / {eager:.0f} = {eager_ratio:.3f}")
(OUT / "served_over_limit.json").write_text(
    json.dumps(
        {
            "served_infer_s": best["throughput_infer_s"],
            "best": best["run"],
            "command": best["command"],
            "limit": LIMIT,
            "eager_limit": EAGER_LIMIT,
            "served_over_limit": ratio,
            "served_over_eager_limit": eager_ratio,
            "device": raw["device_name"],
        },
        indent=2,
    )
    + "\n"
)

# %% [markdown]
# Where does a request's time go in the best run, and how does the model's execution time compare
# with the raw model at the same batch size? If the server's compute time per execution is much
# larger than the raw time for that batch, the work around the model (stacking the requests,
# copies, the Python backend's messages to and from its process, building one response per request)
# is what limits it; if the queue is long and the device is busy, the device is.

# %%
avg_batch = max(1.0, float(best["avg_batch_size"]))
raw_path = raw_table[raw_table["path"] == LIMIT["path"]].sort_values("batch")
raw_rate = float(np.interp(avg_batch, raw_path["batch"], raw_path["images_per_s"]))
raw_ms = 1000 * avg_batch / raw_rate
print(
    f"best run: average batch {avg_batch:.1f}; server compute per execution: input "
    f"{best['server_compute_input_ms']:.2f} ms + infer {best['server_compute_infer_ms']:.2f} ms + output "
    f"{best['server_compute_output_ms']:.2f} ms; the raw model ({LIMIT['path']}) takes {raw_ms:.2f} ms for "
    f"a batch of {avg_batch:.0f}"
)
print(
    f"utilisation during the best run: {best.get('util_source')} mean "
    f"{best['util_mean_pct'] if best['util_mean_pct'] is not None else float('nan'):.0f}%"
)
if ON_GPU:
    claims.check(
        "goal: the best configuration reaches at least 60% of the raw batched throughput",
        ratio >= 0.6,
        {
            "served_infer_s": best["throughput_infer_s"],
            "limit_img_s": LIMIT["images_per_s"],
            "served/limit": ratio,
            "served/eager_limit": eager_ratio,
        },
    )
else:
    claims.not_checkable(
        "goal: at least 60% of the raw batched throughput", f"set for a GPU; on this CPU served/limit = {ratio:.2f}"
    )

# %%
plots.steps_vs_limit(table, LIMIT, EAGER_LIMIT, "Served throughput, step by step, against the raw model").savefig(
    OUT / "steps_vs_limit.png", dpi=110
)
plots.latency_split_stacked(table, "Average latency: queue / compute / network").savefig(
    OUT / "latency_split.png", dpi=110
)
if len(sweep_table):
    plots.sweep_throughput(sweep_table, "Step 7: throughput by instances, max batch size and delay").savefig(
        OUT / "sweep.png", dpi=110
    )
claims.save(OUT / "claims.csv")
print("saved:", sorted(p.name for p in OUT.iterdir() if p.suffix in (".png", ".json")))

# %% [markdown]
# ## Tear down
# Unload the tuned model (its instances hold device memory), leaving notebook 6's two models as
# they were.

# %%
print(f"{MODEL}: {triton_config.unload_model(MODEL, TRITON)}")
