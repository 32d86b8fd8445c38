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
# 1. finds your lease and starts a bare-metal server on it with the `CC-Ubuntu24.04-CUDA` image,
# 2. gives the server a public (floating) IP and waits until SSH answers,
# 3. on the node: clones this repository and runs `docker/setup_host.sh` (Docker Engine, your
#    user in the docker group, the NVIDIA container toolkit with its cgroup-driver fix, nvtop,
#    and a check that a container sees the GPUs),
# 4. prints the ssh command and how to open the lab's Jupyter.
#
# Every cell can be run again: an existing server of the same name is reused, a second IP is
# never attached, the repository is updated rather than cloned twice, and the setup script skips
# whatever is already done. If the kernel restarts, run the notebook from the top.

# %%
import os
import shlex

from chi import context, lease, server

USERNAME = os.getenv("USER", "student")
SITE = os.getenv("LAB_SITE", "CHI@TACC")
LEASE_NAME = f"serve_system_{USERNAME}"           # as in notebook 1
SERVER_NAME = f"node-serve-system-{USERNAME}"
IMAGE = "CC-Ubuntu24.04-CUDA"
# Set by the instructor when publishing the lab (e.g. in the Trovi artifact's environment);
# otherwise paste the clone URL of the lab's repository here.
REPO_URL = os.getenv("LAB_REPO_URL", "")
REPO_DIR = "serve-system-lab"                      # folder in the node's home directory
print(f"server {SERVER_NAME} on lease {LEASE_NAME} at {SITE}")
print("repository:", REPO_URL or "NOT SET: set LAB_REPO_URL or REPO_URL before step 3")

# %% [markdown]
# ## 1. Project, site and lease

# %%
context.choose_project()
context.choose_site(default=SITE)

# %%
my_lease = lease.get_lease(LEASE_NAME)
my_lease.show(type="text")
if my_lease.status != "ACTIVE":
    raise RuntimeError(f"lease {LEASE_NAME} is {my_lease.status}, not ACTIVE: wait for its start "
                       "time (or check it in notebook 1) and run this cell again")
reservation_id = my_lease.node_reservations[0]["id"]

# %% [markdown]
# ## 2. The server
# A bare-metal server takes **10 to 20 minutes** to boot. The cell waits; do not interrupt it.
# If it does get interrupted, just run it again: it finds the server by name.

# %%
node = server.Server(SERVER_NAME, reservation_id=reservation_id, image_name=IMAGE)
node.submit(idempotent=True, show="text")
node.refresh()
print(SERVER_NAME, "status:", node.status)

# %% [markdown]
# A public IP: attach one only if the server has none yet.

# %%
if node.get_floating_ip() is None:
    node.associate_floating_ip()
    node.refresh()
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
# appears below each cell.
#
# Clone the repository, or bring an existing clone up to date:

# %%
if not REPO_URL:
    raise RuntimeError("set REPO_URL (or LAB_REPO_URL) in the first cell to the lab's git URL")
node.execute(
    f"if [ -d {REPO_DIR}/.git ]; then git -C {REPO_DIR} pull --ff-only; "
    f"else git clone {shlex.quote(REPO_URL)} {REPO_DIR}; fi"
)

# %% [markdown]
# Run the host setup script. It prints each step as `[already done]` or the command it runs,
# and ends with a container running `nvidia-smi`: you should see both GPUs there.

# %%
node.execute(f"bash {REPO_DIR}/docker/setup_host.sh")

# %% [markdown]
# Build the model artifacts the containers serve (`artifacts/food11.pth`, `model.onnx`, test
# images): the same command as local mode. It installs the lab's Python environment on the node
# first (a few minutes the first time; later runs see everything up to date and return at once).

# %%
node.execute(f"cd {REPO_DIR} && make artifacts 2>&1 | tail -n 12")

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

# %%
key = context.get("keypair_private_key") or "~/.ssh/id_rsa_chameleon"
token_line = node.execute(f"grep '^JUPYTER_TOKEN=' {REPO_DIR}/docker/.env").stdout.strip()
token = token_line.partition("=")[2]
print("ssh command (from your computer; use the path of your own private key there):")
print(f"    ssh -i {key} cc@{FLOATING_IP}")
print()
print("Next: notebook 3, in that ssh session, from the repository folder:")
print(f"    cd ~/{REPO_DIR}/docker && docker compose -f docker-compose-fastapi.yaml up -d --build --wait")
print()
print("Then the lab's Jupyter (notebooks 4 and 6) is at")
print(f"    http://{FLOATING_IP}:8888/lab?token={token}")
print("or, if port 8888 is not reachable from your network, through an SSH tunnel:")
print(f"    ssh -i {key} -L 8888:127.0.0.1:8888 cc@{FLOATING_IP}")
print(f"    then open http://127.0.0.1:8888/lab?token={token}")

# %% [markdown]
# ## When you are done
# Copy `results/` off the node first (see notebook 0). Then free the node: set `DELETE_SERVER`
# to True to delete the server and its floating IP (the lease stays until its end time, or
# delete it in notebook 1).

# %%
DELETE_SERVER = False
if DELETE_SERVER:
    node.delete(idempotent=True)
    print(f"server {SERVER_NAME} deleted")
