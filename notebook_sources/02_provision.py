# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 2. Provision the node
#
# **Run this notebook in the Chameleon Jupyter environment**, once the lease from notebook 1 is
# ACTIVE. It
#
# 1. finds your active lease and starts a bare-metal server on it with the `CC-Ubuntu24.04-CUDA`
#    image,
# 2. gives the server the public (floating) IP reserved with the lease and waits until SSH
#    answers,
# 3. on the node: clones this lab at the version your class uses and runs
#    `docker/setup_host.sh` (it waits for the node's first-boot setup to finish, then installs
#    Docker Engine, puts your user in the docker group, installs the NVIDIA container toolkit
#    with its cgroup-driver fix and nvtop, and checks that a container sees the GPUs), builds
#    the model files and writes the stacks' settings,
# 4. prints the ssh command.
#
# Every cell can be run again: an existing server of the same name is reused (or replaced, if
# it failed), a second IP is never attached, the clone is brought to the class's version rather
# than cloned twice, and the setup script skips whatever is already done. If the kernel
# restarts, run the notebook from the top.

# %%
import importlib.metadata
import os

import lab_settings as lab
from packaging.version import Version

PYTHON_CHI = importlib.metadata.version("python-chi")
if Version(PYTHON_CHI) < Version("1.0"):
    raise RuntimeError(f"python-chi {PYTHON_CHI} is too old for this lab. Run `%pip install "
                       "python-chi==1.2.10` in a new cell, then Kernel > Restart and run this notebook again.")

import chi
from chi import context, lease, server

context.version = "1.0"  # without it, python-chi 1.0-1.1 answer with plain dicts (no .show(), .status)

USERNAME = os.getenv("USER", "student")
SITE = lab.SITE
SERVER_NAME = f"node-serve-system-{USERNAME}"
IMAGE = lab.IMAGE
REPO_URL = lab.REPO_URL  # the class's repository and version: lab_settings.py
REPO_REF = lab.REPO_REF
REPO_DIR = "serve-system-lab"  # folder in the node's home directory
print(f"python-chi {PYTHON_CHI}; server {SERVER_NAME} at {SITE}")
print(f"the node gets {REPO_URL or '(REPO_URL not set)'} at {REPO_REF or '(REPO_REF not set)'}")

# %% [markdown]
# ## 1. Project, site and lease

# %%
if lab.PROJECT:
    context.use_project(lab.PROJECT)
else:
    context.choose_project()
context.use_site(SITE)

# %% [markdown]
# Your active lease for this lab (made in notebook 1, or in Horizon with a name starting with
# `serve_system_`). Old, ended leases are skipped.

# %%
me = chi.session().get_user_id()
mine = [x for x in lease.list_leases() if x.user_id == me and x.name.startswith(lab.LEASE_PREFIX)]
active = [x for x in mine if x.status == "ACTIVE"]
if not active:
    found = ", ".join(f"{x.name} {x.status}" for x in mine) or "none"
    raise RuntimeError(f"No ACTIVE lease of yours for this lab (yours: {found}). A PENDING one "
                       "starts at its start time: run this cell again then. Otherwise make one in notebook 1.")
my_lease = max(active, key=lambda x: x.end_date)  # the one that lasts longest
my_lease.show(type="text")
reservation_id = my_lease.node_reservations[0]["id"]

# %% [markdown]
# ## 2. The server
# Bare-metal servers sometimes fail to start (status ERROR). The next cell clears such a server
# away, so that the one after it makes a fresh one; with no failed server it does nothing.

# %%
import time

if server.get_server_id(SERVER_NAME) is not None:
    old = server.get_server(SERVER_NAME)
    if old.status == "ERROR":
        old.delete(delete_ips=False)  # the lease's IP stays reserved for the next server
        print(f"deleting {SERVER_NAME}, which is in ERROR ...")
        for _ in range(60):  # a bare-metal delete takes a minute or two
            time.sleep(5)
            if server.get_server_id(SERVER_NAME) is None:
                break
        print("deleted")
    else:
        print(f"{SERVER_NAME} exists ({old.status}): it will be reused")
else:
    print(f"no server named {SERVER_NAME} yet")

# %% [markdown]
# Start the server, or find the one you already have. A bare-metal server takes
# **10 to 20 minutes** to boot. The cell waits; do not interrupt it. If it does get interrupted,
# run it again: it finds the server by name.

# %%
node = server.Server(SERVER_NAME, reservation_id=reservation_id, image_name=IMAGE)
node.submit(idempotent=True, wait_for_active=True, show="text")
if node.status == "ERROR":
    fault = getattr(chi.nova().servers.get(node.id), "fault", {}).get("message", "no reason given")
    raise RuntimeError(f"{SERVER_NAME} failed to start (ERROR: {fault}). It happens on bare metal now and "
                       "then: run the cell above (it deletes the failed server), then this cell again.")
print(SERVER_NAME, "status:", node.status)

# %% [markdown]
# A public IP: the one reserved with your lease, attached only if the server has none yet.
# (A lease made without one gets a free IP from the project's pool.)

# %%
FLOATING_IP = node.get_floating_ip()
if FLOATING_IP is None:
    reserved = my_lease.get_reserved_floating_ips()
    if reserved:
        node.associate_floating_ip(reserved[0])
    else:
        node.associate_floating_ip()
    FLOATING_IP = node.get_floating_ip()
print("floating IP:", FLOATING_IP)

# %% [markdown]
# Wait until the node accepts SSH connections, then show it.

# %%
node.check_connectivity(timeout=900)
node.show(type="text")

# %% [markdown]
# ## 3. Set up the node
# These cells run commands on the node over SSH (as user `cc`, who has sudo). Their output
# appears below each cell; a command that fails stops the cell with an error.
#
# Clone the lab at the version your class uses (`REPO_REF`), or bring an existing clone to it:

# %%
import shlex

if not (REPO_URL and REPO_REF):
    raise RuntimeError("REPO_URL or REPO_REF is not set: ask your instructor, or set them in lab_settings.py")
node.execute(
    f"if [ -d {REPO_DIR}/.git ]; then git -C {REPO_DIR} fetch --quiet --tags --force origin; "
    f"else git clone --quiet {shlex.quote(REPO_URL)} {REPO_DIR}; fi && "
    f"git -C {REPO_DIR} checkout --quiet --detach {shlex.quote(REPO_REF)} && "
    f"git -C {REPO_DIR} log -1 --format='lab version: %h %d %s'"
)

# %% [markdown]
# Run the host setup script. On a freshly booted node it first waits for the first-boot setup
# (cloud-init, automatic updates) to let go of the package manager. Then it prints each step as
# `[already done]` or the command it runs, and ends with a container running `nvidia-smi`: you
# should see both GPUs there.

# %%
node.execute(f"bash {REPO_DIR}/docker/setup_host.sh")

# %% [markdown]
# Build the model artifacts the containers serve (`artifacts/food11.pth`, `model.onnx`, test
# images): the same command as local mode. It installs the lab's Python environment on the node
# first (a few minutes the first time; later runs see everything up to date and return at once).
# Only the last lines are shown; `pipefail` makes a failed build fail this cell, not just the
# `tail` after it.

# %%
from invoke.exceptions import UnexpectedExit

try:
    node.execute(f"cd {REPO_DIR} && bash -o pipefail -c 'make artifacts 2>&1 | tail -n 15'")
except UnexpectedExit as err:
    raise RuntimeError(f"`make artifacts` failed on the node (exit code {err.result.exited}; its last lines "
                       "are above). Fix what they say, then run this cell again.") from None

# %% [markdown]
# Settings for the Docker stacks: `docker/init_env.sh` writes `docker/.env` with a random Jupyter
# token and your user id on the node (it keeps a `.env` that already exists), and makes the
# folders the containers write to.

# %%
node.execute(f"cd {REPO_DIR} && bash docker/init_env.sh")

# %% [markdown]
# Docker group membership applies to new logins, so check it through a fresh SSH session:

# %%
node.execute("docker info --format 'docker {{.ServerVersion}}, runtimes: {{json .Runtimes}}'")

# %% [markdown]
# ## 4. How to reach the node
#
# Copy the ssh command into a terminal on your computer. The private key is the one whose
# public half you registered at the site (in Chameleon's Jupyter it is the file printed below).
# The lab's Jupyter token stays on the node (notebook 3 shows how to print its address): this
# notebook is saved with its outputs, and the token is as good as a password.

# %%
key = context.get("keypair_private_key") or "~/.ssh/id_rsa_chameleon"
print("ssh command (from your computer; use the path of your own private key there):")
print(f"    ssh -i {key} cc@{FLOATING_IP}")
print()
print("Next: notebook 3, in that ssh session:")
print(f"    cd ~/{REPO_DIR}/docker && docker compose -f docker-compose-fastapi.yaml up -d --build --wait")
print(f"The lab's Jupyter will be at http://{FLOATING_IP}:8888/lab?token=<JUPYTER_TOKEN in docker/.env>")
print("If port 8888 is not reachable from your network, use an SSH tunnel:")
print(f"    ssh -i {key} -L 8888:127.0.0.1:8888 cc@{FLOATING_IP}   then http://127.0.0.1:8888/lab?token=...")

# %% [markdown]
# ## When you are done
# Copy `results/` off the node first (see notebook 0). Then free the node: set `DELETE_SERVER`
# to True and run the cell. It deletes the server; the floating IP reserved with the lease goes
# back when the lease ends (or when you delete the lease: last cell of notebook 1).

# %%
DELETE_SERVER = False
if DELETE_SERVER:
    doomed = [s for s in server.list_servers() if s.name == SERVER_NAME]
    for s in doomed:
        s.delete(delete_ips=False)
        print(f"server {SERVER_NAME} deleted")
    if not doomed:
        print(f"no server named {SERVER_NAME}: nothing to delete")
