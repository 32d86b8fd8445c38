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
# The inference service has no password, so it is published on the node's loopback address
# (127.0.0.1) only: Flask and Jupyter reach it over the stack's own network, and from your laptop
# it is one SSH tunnel away (below). The two pages meant for your browser, Flask and Jupyter
# (which asks for its token), are published on the node's public address.
#
# This part runs on the **host** (the node's shell, over SSH), not inside the lab's Jupyter.
# Pick the section for the way you run the lab.
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
# docker compose -f docker-compose-fastapi.yaml up -d --build --wait
# docker compose -f docker-compose-fastapi.yaml ps
# ```
#
# `--wait` returns once every container reports healthy; the inference service is healthy only
# when its model is loaded (if it never gets there, `docker compose -f docker-compose-fastapi.yaml
# logs fastapi_server` says why). On a host without an NVIDIA GPU, give the CPU override after the
# stack's file, in this and every later command:
# `docker compose -f docker-compose-fastapi.yaml -f docker-compose-cpu.yaml up -d --build --wait`.
# The Triton stack of notebook 5 uses the same container names: stop one stack (`... down`)
# before you start the other.
#
# **Jupyter URL.** The token is the `JUPYTER_TOKEN` in `docker/.env`. Open
# `http://<floating IP>:8888/lab?token=<token>`; print it with
#
# ```bash
# echo "http://$(curl -s ifconfig.me):8888/lab?token=$(grep ^JUPYTER_TOKEN= .env | cut -d= -f2)"
# ```
#
# In that Jupyter, open `work/notebooks/04_fastapi_benchmarks.ipynb`. To open the inference
# service's own page (`/docs`) in your laptop's browser, connect with a tunnel,
# `ssh -L 8000:127.0.0.1:8000 cc@<floating IP>`, and open `http://127.0.0.1:8000/docs`.
#
# **Switching to ONNX later** is one setting, no file to edit. Notebook 4 prints the exact
# command when it is time, with the compose files your stack runs with, e.g.:
#
# ```bash
# FASTAPI_BACKEND=onnx docker compose -f docker-compose-fastapi.yaml up -d --build --wait fastapi_server
# ```
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
# `make up` prints the JupyterLab URL with its token, and writes every service URL to
# `.lab/urls.env`. Switching to ONNX: notebook 4 does it for you (`labenv.use_fastapi_backend`),
# or `FASTAPI_BACKEND=onnx make up`.
#
# ## Check: can this Jupyter reach the services?
# Run the next cell from the lab's Jupyter (either way). It only reads URLs from the environment.

# %%
import requests

from servelab import exercises, labenv

env = labenv.load()
FASTAPI = labenv.url("FASTAPI_SERVER_URL")  # where this Jupyter reaches the inference service
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
# The cell above asked in Python. From a shell (on the node, or in a cell starting with `!`) the
# tool is `curl`: `curl -s URL` prints the body of the answer, `-s` leaving out the progress bar.
# The body is JSON on one line; piped into Python's own JSON printer, `| python -m json.tool`, it
# comes out one field per line.
#
# Write the line that asks the FastAPI service's `/health`, at the address this Jupyter reaches
# it: the variable `FASTAPI` holds that address, and an f-string puts it in the line
# (`f"... {FASTAPI}/..."`). Replace the `...` below with your line, in quotes. The cell after it
# checks the line and, if it does what the step needs, hands it to the shell.

# %%
health_line = (
    ### BEGIN SOLUTION
    f"curl -s {FASTAPI}/health | python -m json.tool"
    ### END SOLUTION
)

# %%
exercises.curl_line(health_line, "3.1", "ask the FastAPI service's /health", f"{FASTAPI}/health")
# !{health_line}

# %% [markdown]
# Each field of the answer on its own line: find the runtime and the device in it. You will use
# the same `curl ... | python -m json.tool` on Triton in notebook 5.
#
# **Question.** The Flask container calls `http://fastapi_server:8000`, but your browser cannot
# use that name. Why not, and which address does your browser use instead?
#
# **Your answer:** *(double-click this cell and write it here)*
