# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 0. How to use this lab
#
# This lab follows one food-photo classifier (11 classes, MobileNetV2) from a Flask page that
# calls a model, to a separate inference service (FastAPI, then Triton Inference Server), and
# measures, step by step, where a request's time goes: framework overhead, the runtime
# (PyTorch vs ONNX Runtime), and above all **queuing** under concurrent and bursty load.
#
# The notebooks, in order:
#
# | # | notebook | where it runs |
# |---|----------|---------------|
# | 0 | how to use this lab (this one) | anywhere |
# | 1 | reserve a GPU node | Chameleon Jupyter |
# | 2 | provision the node (server, IP, Docker, NVIDIA toolkit) | Chameleon Jupyter |
# | 3 | bring up the FastAPI stack | a shell on the node |
# | 4 | FastAPI benchmarks | the lab's Jupyter (in a container on the node) |
# | 5 | bring up the Triton stack | a shell on the node |
# | 6 | Triton benchmarks, then tear down | the lab's Jupyter |

# %% [markdown]
# ## Three ways to run it
#
# **1. Chameleon (the classroom setup).** A bare-metal node with two GPUs (reference:
# 2x NVIDIA P100, node type `gpu_p100`), image `CC-Ubuntu24.04-CUDA`.
# You need: a Chameleon account in the course's project, an SSH key pair registered at the
# site, and a lease (notebook 1). Notebook 2 creates the server, installs Docker and the NVIDIA
# container toolkit with `docker/setup_host.sh`, and prints your ssh command.
#
# **2. Any CUDA host with Docker.** Your own Ubuntu machine or a cloud VM with an NVIDIA GPU
# and driver, and Python 3.11 or newer (Ubuntu 24.04 has 3.12; 22.04's 3.10 is too old for the
# lab's Python environment). Clone the repository and run `bash docker/setup_host.sh` (use
# `--dry-run` first to see every command it would run; it is written for Ubuntu 22.04/24.04 and
# is safe to run again), then `make artifacts` (the model files) and `bash docker/init_env.sh`
# (`docker/.env` with the Jupyter token), and continue with notebook 3.
# `docs/ways_to_run.md` lists the steps. Without an NVIDIA GPU the script says so, and the same
# stacks run on CPU with the override files `docker/docker-compose-cpu.yaml` and
# `docker/docker-compose-triton-cpu.yaml`.
#
# **3. Local mode: no Docker, no GPU.** Any Linux machine with Python 3.11. The same services
# (FastAPI, Flask, a real Triton server, JupyterLab) run as ordinary processes, on the GPU if
# there is one and on the CPU otherwise:
#
# ```
# make up     # start the stack; prints the URLs (JupyterLab included, opened in notebooks/)
# make status # what runs, healthy or not
# make down   # stop everything
# ```
#
# The benchmark notebooks (4 and 6) are the same in every setup: they only read the service
# URLs from environment variables (`FASTAPI_SERVER_URL`, `FLASK_SERVER_URL`, `TRITON_SERVER_URL`).
# Absolute numbers differ between a P100 and a laptop CPU; the effects you are asked to explain
# (queuing growing with concurrency, batching, Poisson vs constant arrivals) show in all of them.

# %% [markdown]
# ## One notebook, three passes: before, during and after the lease
#
# A GPU lease is for measuring; reading, predicting and writing need no GPU. So you go through
# notebooks 3 to 6 three times, and one setting, `LAB_PASS`, says which time it is. Each notebook's
# first cell prints it; a cell that needs the node says so on its first line (`%%runs_in
# measure`), and in another pass it prints one line instead of running.
#
# * **`prepare`**, before the lease, in Chameleon's Jupyter or on a computer of your own (below):
#   read everything, make every prediction (each is kept with the time you made it), write every
#   exercise line and make every config file edit (each is checked as you write it, offline).
# * **`measure`**, in the lease, in the lab's Jupyter on the node: run what you wrote, in order;
#   every run, Triton's statistics, your lines and predictions go into the notebook's **results
#   bundle**.
# * **`review`**, after the lease, where you prepared: answer the "What do you see, and why?"
#   questions, make the decisions, read the verdicts, hand in: all from the bundle, with no node.
#
# `measure` is the default: run alone (a self-paced reader on their own machine, `make lab`), a
# notebook does all three in one go. To choose a pass in a JupyterLab that is already running
# (Chameleon's), run `%env LAB_PASS=prepare` (or `review`) in a cell before the notebook's first
# cell.
#
# **Where to prepare and review.** In *Chameleon's Jupyter*, open a terminal in the lab's folder
# (the one Trovi unpacked) and run `pip install -r requirements/review.txt` once: the libraries
# the notebooks import without a node (it keeps Chameleon's own JupyterLab). On *a computer of
# your own* (Linux or macOS, Python 3.11 or newer; on Debian or Ubuntu also
# `sudo apt install python3-venv git`), these commands get you from nothing to the prepare pass:
# the class's repository (your instructor's link, `REPO_URL` in `notebooks/lab_settings.py`), a
# virtual environment with those libraries and JupyterLab (its versions pinned by the lab), and
# JupyterLab opened on the notebooks in the prepare pass:
#
# ```bash
# git clone REPO_URL serve-system-lab && cd serve-system-lab
# python3 -m venv .venv-review
# .venv-review/bin/pip install -r requirements/review.txt jupyterlab
# LAB_PASS=prepare .venv-review/bin/jupyter lab notebooks/
# ```
#
# Then open `03_fastapi_setup.ipynb`: its first cell prints `LAB_PASS=prepare`. After the lease,
# start it with `LAB_PASS=review` instead.
#
# **What to read in the code** of notebooks 3 to 6, in the prepare pass: the cells you write in,
# the Setup cells (where each name you use comes from), each `def`, and the cells marked
# `# Worth reading`. The other cells call the lab's helpers in `servelab/` to run, tabulate or
# plot: run them and read what they print.
#
# **How long each pass takes**, notebooks 2 to 6, for a median student (`docs/timing_plan.md`
# counts every step: reading, each line you write, each question, each step in a browser, SSH or
# an editor, each wait, each run):
#
# | pass | when | how long |
# |---|---|---|
# | prepare | before the lease, as homework | <!-- timing:prepare -->184 min<!-- /timing --> |
# | measure | in the lease (180 minutes) | <!-- timing:measure -->118 min<!-- /timing --> |
# | review | after the lease, as homework | <!-- timing:review -->74 min<!-- /timing --> |
#
# The measure pass counts a freshly installed node, where the images download and build in the
# lease (in the background, from notebook 2 on, while you work); on a node image your instructor
# prepared, it takes
# <!-- timing:measure_image -->111 min<!-- /timing -->. Prepare and review are long because that is
# where the thinking is: every line you write, every prediction, every answer. The lease keeps
# only what needs the node.
#
# The **results bundle** is one folder per notebook, `results/bundles/<notebook>/` (plain CSV
# and JSON files you can open without the lab; `LAB_BUNDLE` names another place). Notebook 2's
# last cell brings every bundle back from the node to `results/bundles/` beside your notebooks,
# where the review pass reads them, with no setting. The review pass refuses, in one sentence, a
# bundle of another notebook or of another version of the lab, and changes nothing; a bundle the
# lease's end cut short is reviewed for every step it holds, and the review names the steps it
# lacks.
#
# ## Time budget for a ~3-hour Chameleon lease
#
# A lease ends on time, with or without you: plan for it. The measure pass of notebooks 2 to 6
# takes about <!-- timing:measure -->118 min<!-- /timing --> of its 180 minutes
# (`docs/timing_plan.md` has them notebook by notebook). In the lease:
#
# * finish the prepare pass before it starts: every prediction made and every line written and
#   checked (notebook 2 carries your prepared notebooks to the node);
# * start notebook 2 right when the lease begins, and read it while the server boots (10–20 min:
#   wait, do not restart it);
# * run notebooks 3 to 6 in the measure pass, in order; the steps on the node (the SSH tunnel, the
#   Flask page, nvtop, each command a cell prints for the node's terminal) happen here. Each
#   config file edit you made and checked in the prepare pass is made for you in the node's own
#   file, as the fields you changed (the node's file holds more than your copy did): the cell
#   shows the diff it made, and the next checks it again. Only where the block you changed is
#   gone does it print your edit to make by hand. A decision left with `...` says "decide in the
#   review pass" and the run goes on;
# * bring the results bundles back before the lease ends: the last cell of notebook 2 does it,
#   to where the review pass reads them, then deletes the server (everything on the node is
#   erased when the lease ends; if the lease ends first, what a bundle holds is still reviewed).
#
# The "What do you see, and why?" answers, the decisions and the hand-in questions are for the
# review pass, after the lease, from your bundle.
#
# The parts marked *optional* (going further, the open exercises at the end) are for after the
# lease or a second one, as notebook 7 is.
#
# When you are done, free the node for others: the last cell of notebook 2 deletes your server,
# then the last cell of notebook 1 deletes your lease.

# %% [markdown]
# ## What you hand in
#
# Not screenshots. The benchmark notebooks write everything they measure under `results/`
# (in the repository folder on the node, or on your machine in local mode), and the measure
# pass keeps each notebook's runs in `results/bundles/`, from which the review pass writes the
# same tables and plots again:
#
# * the measurement tables (one row per run: the exact command, latency median/p95/p99,
#   throughput, and for Triton the queue/compute split and GPU utilisation read from the
#   server's metrics), as CSV/Markdown files;
# * the plots (throughput vs concurrency, latency split per configuration) as PNG files;
# * your answers to the question at the end of each step, written in the notebooks themselves.
#
# Hand in the `results/` folder and the executed notebooks 3 to 6 (after the review pass, those
# of the review). To copy them from a Chameleon node to your computer (replace the address with
# your node's floating IP):
#
# ```
# scp -r cc@A.B.C.D:serve-system-lab/results ./results
# scp -r cc@A.B.C.D:serve-system-lab/notebooks ./notebooks
# ```

# %% [markdown]
# ## Which setup am I in?
# The cell below only looks around (it changes nothing) and tells you which way fits this machine.

# %%
import os
import shutil
import subprocess


def gpu_names() -> list[str]:
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line for line in out.splitlines() if line.startswith("GPU ")]


# %%
in_chameleon_jupyter = "OS_AUTH_URL" in os.environ or os.path.isdir("/work/.chameleon")
has_docker = shutil.which("docker") is not None
print("NVIDIA GPUs:", gpu_names() or "none")
print("docker CLI :", "yes" if has_docker else "no")
print("LAB_MODE   :", os.environ.get("LAB_MODE", "(not set)"))
if in_chameleon_jupyter:
    print(
        "-> This looks like the Chameleon Jupyter environment: continue with notebook 1 (reserve)."
    )
elif os.environ.get("LAB_MODE"):
    print("-> You are inside the lab's Jupyter: go on with the benchmark notebooks (4, 6).")
elif has_docker:
    print("-> Docker is here: run `bash docker/setup_host.sh`, then notebook 3.")
else:
    print("-> No Docker: use local mode (`make up` in the repository folder).")
