# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 3. Bring up the FastAPI stack
#
# **Which pass?** The first cell says: *prepare* (before the lease: read, write each line, check
# it), *measure* (on the node: run it) or *review* (after the lease, from the results bundle);
# notebook 0 explains the three. A cell that needs the node starts with `%%runs_in measure`.

# %%
from servelab import passes

PASS = passes.start("03_fastapi_setup")  # LAB_PASS: prepare, measure (the default) or review

# %% [markdown]
#
# The app so far was one Flask page that ran the model itself. Now the model moves behind its
# own **inference service**, so the web app and the model can be scaled, updated and measured
# separately. The stack has three parts:
#
# | service | what it does | port on the node (Docker) |
# |---|---|---|
# | `flask` | the upload page; sends the image to the inference service | 80 |
# | `fastapi_server` | `POST /predict` with a base64 image; PyTorch first, ONNX later | 8000, on the node only |
# | `jupyter` | where you run notebook 4; reaches the others **by service name** (`http://fastapi_server:8000`) | 8888 |
#
# The inference service has no password, so it listens on the node's 127.0.0.1 only; Flask and
# Jupyter (which asks for its token) are on the node's public address. This part runs on the
# **host** (the node's shell, over SSH).
#
# ## A. Chameleon node or any CUDA host (Docker)
#
# In the repository folder on the node (notebook 2 did the first two lines for you on Chameleon;
# both are safe to run again):
#
# ```bash
# cd ~/serve-system-lab
# make artifacts               # builds the model files the services load (artifacts/)
# bash docker/init_env.sh      # docker/.env: a random Jupyter token, your user id
# cd docker
# bash build_images.sh wait fastapi   # the images notebook 2 started building (if it did)
# docker compose -f docker-compose-fastapi.yaml up -d --build --wait
# docker compose -f docker-compose-fastapi.yaml ps
# ```
#
# `--wait` returns once every container is healthy, the inference service once its model is
# loaded (if never, `... logs fastapi_server` says why). Without an NVIDIA GPU add `-f
# docker-compose-cpu.yaml` after the stack's file, in every command.
#
# **Jupyter URL.** The token is the `JUPYTER_TOKEN` in `docker/.env`. Open
# `http://<floating IP>:8888/lab?token=<token>`; print it with
#
# ```bash
# echo "http://$(curl -s ifconfig.me):8888/lab?token=$(grep ^JUPYTER_TOKEN= .env | cut -d= -f2)"
# ```
#
# In that Jupyter, open `work/notebooks/04_fastapi_benchmarks.ipynb`. Notebook 4 prints each
# command that switches the service (to ONNX Runtime, to two workers) when it is time.
#
# ## B. Local mode (no Docker, no GPU)
#
# In the repository folder:
#
# ```bash
# make up        # FastAPI (PyTorch), Flask, Triton and JupyterLab as local processes
# make status    # health of each, its URL and log file
# ```
#
# `make up` prints the JupyterLab URL with its token; notebook 4 switches the service itself.
#
# ## Check: can this Jupyter reach the services?
# Run the next cell from the lab's Jupyter (either way). It only reads URLs from the environment.

# %%
import requests

from servelab import exercises, labenv

env = labenv.load()
FASTAPI = labenv.url("FASTAPI_SERVER_URL")  # where this Jupyter reaches the inference service
exercises.given(FASTAPI=FASTAPI)  # the checks read your lines with it

# %%
# %%runs_in measure
print("mode:", env.get("LAB_MODE"))
for name, path in (("FASTAPI_SERVER_URL", "/health"), ("FLASK_SERVER_URL", "/healthz")):
    base = labenv.url(name)
    try:
        resp = requests.get(base + path, timeout=5)
        print(f"{name:20s} {base:32s} -> HTTP {resp.status_code} {resp.text[:120]}")
    except requests.RequestException as exc:
        print(f"{name:20s} {base:32s} -> not reachable ({type(exc).__name__}): is the stack up?")

# %% [markdown]
# Expected: both answer HTTP 200, and `/health` says `"status": "ready"`, the runtime
# (`pytorch`), the device (`cuda:0` on a GPU node, `cpu` otherwise) and whether the weights are
# trained. If the FastAPI service answers 503, the model is still loading: wait and re-run.
#
# ## Exercise 3.1: the same question, from a shell
# From a shell the tool is `curl`: `curl -s URL` prints the answer's body (`-s`: no progress
# bar); piped into `python -m json.tool` the JSON comes out one field per line. Write the line that
# asks the FastAPI service's `/health` at the address in `FASTAPI`, as an f-string
# (`f"... {FASTAPI}/..."`). The next cell checks it and runs it.

# %%
health_line = (
    ### BEGIN SOLUTION
    f"curl -s {FASTAPI}/health | python -m json.tool"
    ### END SOLUTION
)

# %%
exercises.curl_line(health_line, "3.1")

# %%
# %%runs_in measure
# !{health_line}

# %% [markdown]
# Find the runtime and the device in the answer.
#
# ## The code behind a request
# Each `POST /predict` runs this handler (`servelab/serving/inference_api.py`, shared by the
# PyTorch and ONNX services): decode the photo, take the model's lock, infer; the three times go
# back in the `Server-Timing` header, which notebook 4 reads. Then Flask's upload page
# (`flask_app/app.py`): check the file, decode it with the same code, ask the model server.

# %%
from pathlib import Path

for path, start, end in (
    ("servelab/serving/inference_api.py", "    def predict(req", "    # The body limit"),
    ("flask_app/app.py", '@app.post("/predict")', "\n\n\n"),
):
    source = (Path("..") / path).read_text()
    code = source[source.index(start) :]
    print(f"--- {path}\n{code[: code.index(end)]}\n")

# %% [markdown]
# **Question.** The Flask container calls `http://fastapi_server:8000`, but your browser cannot
# use that name. Why not, and which address does your browser use instead?
#
# **Your answer:** *(double-click this cell and write it here)*
#
# ## Where your results are
# The last cell says where this pass kept what you wrote and measured, and how to download it.

# %%
passes.finish()
