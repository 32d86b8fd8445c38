# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 5. Bring up Triton Inference Server
#
# **Which pass?** The first cell says (notebook 0 explains the three). In *prepare* you read and
# write each exercise; cells that need the server (`%%runs_in measure`) run on the node.

# %%
from servelab import passes

PASS = passes.start("05_triton_setup")  # LAB_PASS: prepare, measure (the default) or review

# %% [markdown]
#
# In notebook 4 one FastAPI process ran one copy of the model, one request at a time, and
# requests queued behind each other. Triton is a server built for exactly this: it can run
# several **instances** of a model, combine waiting requests into **batches**, run other
# **runtimes** (ONNX Runtime, TensorRT, ...) and report where the time goes.
#
# ## The model repository
# Triton serves whatever is in its *model repository*, a plain folder:
#
# ```
# model_repository/
# ├── food_classifier/            # one folder per model; the folder name is the model name
# │   ├── config.pbtxt            # inputs, outputs, batching, instance groups
# │   └── 1/                      # version 1
# │       ├── model.py            # Python backend: decode image -> MobileNetV2 -> label
# │       ├── food11.pth          # the weights model.py loads (the whole PyTorch model)
# │       └── food11_state_dict.pth  # the same weights as a state_dict, for an older torch
# └── food_classifier_onnx/
#     ├── config.pbtxt            # backend: "onnxruntime"; input `input` FP32 [3,224,224]
#     └── 1/
#         └── model.onnx
# ```
#
# You *copy* the sources (`models_staging/`: configs and `model.py`; `artifacts/`: the weights and
# `model.onnx` that `make artifacts` built) into `model_repository/`, the folder mounted into the
# Triton container, so you can edit there and always go back (without a GPU the copy switches
# `KIND_GPU` to `KIND_CPU`).
#
# The server loads every model at start (`--model-control-mode=explicit --load-model=*`) and later
# reloads single models when asked through its **repository API**: notebook 6 changes configs that
# way, without a restart. A model that fails to load is marked `UNAVAILABLE` while the others
# keep serving. Since a load can bring new code, the repository API wants this node's secret in a
# header (`labenv.admin_headers()` gives it); inference, health and metadata need nothing.
#
# ## A. Chameleon node or any CUDA host (Docker)
# On the node, in the repository folder:
#
# ```bash
# cd ~/serve-system-lab
# .venv/bin/python -m servelab.triton.model_repository --mode docker      # models_staging + artifacts -> model_repository
# cd docker
# docker compose -f docker-compose-fastapi.yaml down                 # same container names and ports
# bash build_images.sh wait triton                                  # the images notebook 2 started building
# docker compose -f docker-compose-triton.yaml up -d --build --wait
# docker logs triton_server 2>&1 | grep -E "READY|UNAVAILABLE|Started"
# ```
#
# The log ends with the models (each `READY`) and the ports: **HTTP 8000**, **gRPC 8001**,
# **metrics 8002**, published on the node's 127.0.0.1 only (Jupyter and Flask reach them over the
# stack's network). Without an NVIDIA GPU add `-f docker-compose-triton-cpu.yaml` after the first
# `-f`. Jupyter's URL is the one of notebook 3.
#
# ## B. Local mode (no Docker, no GPU)
# `make up` did all of this with the real `tritonserver` (Triton 2.51, from the `nvidia-pytriton`
# wheel). That build has **no onnxruntime backend**, so `food_classifier_onnx` is a small
# Python-backend model running the same `model.onnx` with ONNX Runtime, same name and I/O.
#
# ## Check: is Triton ready, and what does it serve?
# From here on you talk to Triton through its client library, `tritonclient`:
# `InferenceServerClient` speaks its HTTP protocol (`tritonclient.grpc` its gRPC) and takes
# `host:port`.

# %%
from pathlib import Path

from servelab import exercises, labenv
from servelab.paths import STAGING, test_photo

# tritonclient.http on the node; in prepare and review a stand-in that writes your calls down
httpclient = passes.node_import("tritonclient.http", "httpclient")
env = labenv.load()
TRITON, _, METRICS = labenv.triton_urls()
exercises.given(TRITON=TRITON)  # the checks read your lines with it
REPOSITORY = Path(env.get("TRITON_MODEL_REPOSITORY") or "../model_repository")
client = httpclient.InferenceServerClient(TRITON.split("://")[-1])

# %%
# %%runs_in measure
print("server ready:", client.is_server_ready(), "|", client.get_server_metadata()["version"])
# the repository API wants the node's secret (it can load code); health and metadata do not
for model in client.get_model_repository_index(headers=labenv.admin_headers()):
    print(
        f"  {model['name']:22s} version {model.get('version', '-'):3s}"
        f" {model.get('state', '?'):12s} {model.get('reason', '')}"
    )

# %% [markdown]
# The repository as the server sees it, and both models' configs as the files say them (the
# Python-backend model decodes JPEGs; the ONNX model takes the tensor):

# %%
# %%runs_in measure
for path in sorted(REPOSITORY.rglob("*")):
    if "__pycache__" not in path.parts:
        depth = len(path.relative_to(REPOSITORY).parts) - 1
        print(
            "    " * depth
            + path.name
            + ("/" if path.is_dir() else f"  ({path.stat().st_size:,} bytes)")
        )
print()
for model in ("food_classifier", "food_classifier_onnx"):
    print(f"--- {model}/config.pbtxt\n" + (REPOSITORY / model / "config.pbtxt").read_text())

# %% [markdown]
# ## Exercise 5.1: the config as the server serves it
# The file is what you wrote; the server's view of it also holds the defaults Triton filled in.
# `client` (the `InferenceServerClient` of the first cell) asks for it with one method,
# `get_model_config(model_name)`: the client library's name for `GET /v2/models/<name>/config`.
# It returns the config as a Python dict. Replace the `...` with that call for `food_classifier`.

# %%
config = (
    ### BEGIN SOLUTION
    client.get_model_config("food_classifier")
    ### END SOLUTION
)

# %%
exercises.result(config, "5.1")

# %%
# %%runs_in measure
{k: config[k] for k in ("name", "backend", "max_batch_size", "instance_group")}

# %% [markdown]
# ## What runs for each request: `model.py`
# Triton calls `initialize()` once per instance (it loads the weights onto the instance's device)
# and `execute()` with a **list** of requests: one, or as many as arrived together (or, in notebook
# 6, as the batcher combined). Find the line that runs the network: every image is decoded first,
# then **one** forward pass runs on the stacked batch, so a batch pays the fixed costs (a kernel
# launch, Python, the copy to the GPU) once.

# %%
source = (STAGING / "food_classifier" / "1" / "model.py").read_text()  # copied to REPOSITORY
print(source[source.index("    def initialize") : source.index("    def finalize")])

# %% [markdown]
# ## Exercise 5.2: one request through the client library
# Before notebook 6 measures the model, send it one photo yourself. A request has four parts:
#
# 1. an input, `httpclient.InferInput(name, shape, datatype)`, named as in `config.pbtxt`
#    (`INPUT_IMAGE`), shaped as a batch of one photo (`[1, 1]`: the batch, then `dims: [ 1 ]`),
#    of type `"BYTES"` (Triton's name for `TYPE_STRING` on the wire);
# 2. its data, `.set_data_from_numpy(array)`: a numpy array of that shape and `dtype=np.object_`
#    holding the photo's file as base64 text in bytes, `food11.encode_file(photo).encode()`;
# 3. the call, `client.infer(model_name, [inputs])`;
# 4. the answer, `result.as_numpy(output_name)`: an array shaped like the input, here `[1, 1]`,
#    of bytes for `FOOD_LABEL` (`.decode()` makes text) and of numbers for `PROBABILITY`.
#
# Write the body of `classify`: it returns the class name and the probability for one photo.

# %%
import numpy as np

from servelab import food11


def classify(photo):
    """(class name, probability) that food_classifier gives one photo file (a Path)."""
    ### BEGIN SOLUTION
    image = httpclient.InferInput("INPUT_IMAGE", [1, 1], "BYTES")
    image.set_data_from_numpy(np.array([[food11.encode_file(photo).encode()]], dtype=np.object_))
    result = client.infer("food_classifier", [image])
    label = result.as_numpy("FOOD_LABEL")[0][0].decode()
    return label, float(result.as_numpy("PROBABILITY")[0][0])
    ### END SOLUTION


# %%
photo = test_photo()  # a photo of artifacts/test_images
answer = exercises.function(classify, "5.2", photo)  # checked against the server's own answer

# %%
# %%runs_in measure
label, probability = answer
print(f"{photo.name} -> {label} ({probability:.2f})")

# %% [markdown]
# ## Exercise 5.3: the statistics, with `curl`
# Triton counts what each model did: requests, executions, time in the queue and in compute,
# per batch size. They are at `GET /v2/models/<name>/stats`. Write the `curl` line (as in
# notebook 3, exercise 3.1) that asks for those of `food_classifier`, at the address in `TRITON`,
# and prints them one field per line.

# %%
stats_line = (
    ### BEGIN SOLUTION
    f"curl -s {TRITON}/v2/models/food_classifier/stats | python -m json.tool"
    ### END SOLUTION
)

# %%
exercises.curl_line(stats_line, "5.3")

# %%
# %%runs_in measure
# !{stats_line}

# %% [markdown]
# Find `inference_count` and `execution_count`: your request of 5.2 is in them (with any the
# lab's own checks sent). `batch_stats` lists the executions by batch size: so far, batches of one.
# The client library gives the same numbers as a dict, `client.get_inference_statistics(name)`:

# %%
# %%runs_in measure
served = client.get_inference_statistics("food_classifier")["model_stats"][0]
{
    "requests": served["inference_count"],
    "executions": served["execution_count"],
    "executions by batch size": {
        b["batch_size"]: b["compute_infer"]["count"] for b in served["batch_stats"]
    },
}

# %% [markdown]
# Triton's Prometheus metrics (port 8002) are the third endpoint; notebook 6 reads utilisation
# there.

# %%
# %%runs_in measure
import requests

lines = requests.get(METRICS, timeout=5).text.splitlines()
print(f"{METRICS}: {len(lines)} lines, e.g.")
print(
    "\n".join(
        line
        for line in lines
        if line.startswith(("nv_inference_count", "nv_gpu_utilization", "nv_cpu_utilization"))
    )
)

# %% [markdown]
# **Question.** `config.pbtxt` says `max_batch_size: 16` and the input has `dims: [ 1 ]`. What
# shape does a client send for one image, and for a batch of 8? Try it: a copy of `classify` that
# sends eight copies of the photo in one request, and read the eight answers.
#
# **Your answer:** *(double-click this cell and write it here)*

# %%
passes.finish()
