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
# 1. finds your active lease (waiting while Blazar starts it) and starts a bare-metal server on
#    it with the `CC-Ubuntu24.04-CUDA` image,
# 2. gives the server the public (floating) IP reserved with the lease (or, for a lease without
#    one, a fresh IP from the site's pool) and waits until SSH answers,
# 3. on the node: clones this lab at the version your class uses, carries the notebooks you
#    prepared here to it, and runs `docker/setup_host.sh` (it waits for the node's first-boot
#    setup to finish, then installs Docker Engine, puts your user in the docker group, installs
#    the NVIDIA container toolkit with its cgroup-driver fix and nvtop, and checks that a
#    container sees the GPUs), writes the stacks' settings, starts building the stacks' images in
#    the background (they are ready when notebooks 3 to 5 need them), and builds the model files,
# 4. prints the ssh command.
#
# Chameleon takes its time: a lease is STARTING for a few minutes, a bare-metal server boots in
# 10 to 20 minutes, and SSH answers a few minutes after that. Each of these waits has a limit
# (`chi_waits.py`); when one runs out, the cell says in one sentence what happened, what you
# still hold and what to do, and running it again waits again for the same lease or server.
# The site's services also fail for a moment now and then (an answer 503, a connection reset):
# a wait says so in one line and asks again; only a fault that lasts 5 minutes stops it.
#
# Every cell can be run again: an existing server of the same name is reused, with the lease it
# was made on (or replaced, if it failed), a second IP is never attached, the clone is brought to
# the class's version rather than cloned twice, and the setup script skips whatever is already
# done. If the kernel restarts, run the notebook from the top.

# %%
import importlib.metadata
import os
from pathlib import Path

import lab_settings as lab
from packaging.version import Version

# 1.1.0 is the oldest python-chi these notebooks run with (tested); the lab is tested with 1.2.10.
PYTHON_CHI = importlib.metadata.version("python-chi")
if Version(PYTHON_CHI) < Version("1.1.0"):
    raise RuntimeError(
        f"python-chi {PYTHON_CHI} is older than 1.1.0, which this lab needs: run "
        "`%pip install python-chi==1.2.10` in a new cell, then Kernel > Restart and "
        "run this notebook again."
    )
lab.check()  # stops here, naming each setting to fix in lab_settings.py, before anything exists

# %% [markdown]
# The values every cell below reads.

# %%
USERNAME = os.getenv("USER", "student")
SITE, IMAGE = lab.SITE, lab.IMAGE
SERVER_NAME = f"{lab.SERVER_PREFIX}{USERNAME}"
SECOND_NAME = f"{lab.SECOND_SERVER_PREFIX}{USERNAME}"  # notebook 9's second node (section 5)
REPO_URL, REPO_REF = lab.REPO_URL, lab.REPO_REF  # the class's repository and version
REPO_DIR = lab.REPO_DIR  # the clone, in the node's home directory
print(f"python-chi {PYTHON_CHI}; server {SERVER_NAME} at {SITE}")
print(f"the node gets {REPO_URL} at {REPO_REF}")

# %% [markdown]
# ## 1. Project, site and lease

# %%
import chi
import chi_files
import chi_helpers
import chi_ips
import chi_servers
from chi import context, lease, server

context.version = "1.0"  # without it, python-chi 1.1 answers with plain dicts (no .show(), .status)
chi_helpers.check_site(SITE)
context.use_site(SITE)
chi_helpers.check_project(lab.PROJECT)
context.use_project(lab.PROJECT)
chi_helpers.check_node_type_and_image(SITE, lab.NODE_TYPE, IMAGE)

# %% [markdown]
# Your lease for this lab (made in notebook 1, or in Horizon with a name starting with
# `serve_system_`). With a server already, it is the lease the server runs on (recorded on the
# server as metadata `serve_system_lease`; a server cannot move to another lease); otherwise, as
# notebook 1 chooses: the ACTIVE one that ends last. Classmates' leases and your ended ones are
# skipped. A lease Blazar is still starting (STARTING, a few minutes) or changing (UPDATING, e.g.
# extended in Horizon) is waited for, **up to 15 minutes: if that runs out, run this cell again
# in 5 minutes**; a PENDING one makes the cell say when to come back, and one in ERROR (a failed
# start or change) what to do. A lease Blazar marks degraded (one of its nodes failed) is said:
# healed with another node, the cells below go on there; missing its node, the cell stops. A
# pool IP this notebook took for a lease that is over is given back first.

# %%
me = chi.session().get_user_id()
mine = [x for x in lease.list_leases() if x.user_id == me and x.name.startswith(lab.LEASE_PREFIX)]
live = [x for x in mine if x.status in chi_helpers.LIVE]
holding = [x.id for x in mine if x.status in chi_helpers.HOLDS_IPS]  # ERROR too: it may hold one
chi_ips.give_back_ips((SERVER_NAME, SECOND_NAME), live=holding)
my_lease = chi_helpers.lease_for(chi_servers.find_server(SERVER_NAME), live, mine)
my_lease = chi_helpers.wait_for_start(my_lease, mine)
print(chi_helpers.lease_note(my_lease, live, SERVER_NAME))
my_lease.show(type="text")
reservation_id = my_lease.node_reservations[0]["id"]

# %% [markdown]
# ## 2. The server
# Bare-metal servers sometimes fail, at boot or later (status ERROR). The next cell deletes such
# a server, or one left from a lease that is over, so that the cell after it makes a fresh one;
# otherwise it does nothing. `delete_ips=False` keeps the server's IP for the next server:
# python-chi's default would delete it too (1.2.10 sends that to a path Neutron does not have).
# A bare-metal delete takes minutes: the cell waits until Nova no longer lists the server, **up
# to 10 minutes; if that runs out, run the cell again in 5 minutes**.

# %%
old = server.get_server(SERVER_NAME) if server.get_server_id(SERVER_NAME) else None
why = chi_servers.why_replace(old, my_lease)
if why is None:
    print(f"{SERVER_NAME} exists ({old.status}): it will be reused" if old else "no server yet")
else:
    old.delete(delete_ips=False)  # a reserved IP stays with the lease for the next server
    print(f"deleting {SERVER_NAME}, {why} ...")
    chi_servers.wait_until_gone(SERVER_NAME)

# %% [markdown]
# Start the server, or find the one you already have. A bare-metal server takes
# **10 to 20 minutes** to boot. The cell waits, **up to 30 minutes; if that runs out, run the
# cell again: it waits again for the same server**, found by name (so does an interrupted cell).
# A server that fails is worth one more try; a second failure on the same lease means its node
# is faulty, and the message says to make a new lease (a lease of one node always boots on that
# one node). Nova takes a server even for a lease that has ended meanwhile, and fails it a
# minute later: the message then says it is the lease, not the node. A project whose servers
# reach its quota gets a sentence saying who can raise it.

# %%
node = server.Server(SERVER_NAME, reservation_id=reservation_id, image_name=IMAGE)
lease_record = {chi_servers.LEASE_KEY: my_lease.id}
with chi_servers.nova_refusal(SERVER_NAME):  # the project's server quota: said in a sentence
    node.submit(idempotent=True, wait_for_active=False, show=None, metadata=lease_record)
chi_servers.wait_for_boot(node, my_lease.id)

# %% [markdown]
# A public IP, attached only if the server has none yet: the one reserved with your lease. It
# is never taken from anyone else: if a classmate's server holds it, the cell stops and names
# that server. A lease made without one (e.g. in Horizon, with the Networks tab left empty) gets
# the pool IP this notebook took for your server before, if its server went and left it
# unattached, else a fresh IP from the site's pool; never any other unattached IP of the
# project, which may be a classmate's reserved IP whose server is still booting. Its description
# names your server and lease, so that it is given back when the lease is over.

# %%
FLOATING_IP = node.get_floating_ip()
if FLOATING_IP is None:
    reserved = my_lease.get_reserved_floating_ips()
    if reserved:
        chi_ips.stop_if_taken(reserved[0], SERVER_NAME)
        node.associate_floating_ip(reserved[0])
    else:
        node.associate_floating_ip(chi_ips.own_public_ip(SERVER_NAME, my_lease.id))
    FLOATING_IP = node.get_floating_ip()
print("floating IP:", FLOATING_IP)

# %% [markdown]
# Wait until the node takes an SSH login with your key (its sshd starts, and cloud-init installs
# your key, a few minutes after the server is ACTIVE), **up to 15 minutes; if that runs out, run
# the cell again to wait longer**, and the message says what to do if it never answers. Then
# show the server.

# %%
chi_servers.wait_for_ssh(node)
node.show(type="text")

# %% [markdown]
# ## 3. Set up the node
# These cells run commands on the node over SSH (as user `cc`, who has sudo). Their output
# appears below each cell; a command that fails stops the cell with an error.
#
# Clone the lab at the version your class uses (`REPO_REF`: a tag, a commit, or a branch as the
# repository has it now, `origin/<branch>`), or bring an existing clone to it: the tags are
# fetched with `--force`, so a tag your instructor moved (after a fix) is followed. Your changes
# on the node (notebooks, edited configs) are put aside with `git stash` while the version
# changes and put back after; if they clash with the new version, they stay in the stash and
# the cell says so (`git stash show -p` shows them).

# %%
import shlex

git_as_lab = "git -c user.name=lab -c user.email=lab@localhost"  # git stash makes commits
clone = (
    f"if [ -d {REPO_DIR}/.git ]; then git -C {REPO_DIR} fetch --quiet --tags --force origin; "
    f"else git clone --quiet {shlex.quote(REPO_URL)} {REPO_DIR}; fi && cd {REPO_DIR} && "
    f"ref={shlex.quote(REPO_REF)} && if git show-ref --quiet --verify refs/remotes/origin/$ref; "
    "then ref=origin/$ref; fi && kept= && if ! git diff --quiet HEAD; then "
    f'{git_as_lab} stash push --quiet -m "yours, before $ref" && kept=1; fi && '
    'git checkout --quiet --detach "$ref" && if [ -n "$kept" ]; then '
    f"{git_as_lab} stash pop --quiet || {{ git reset --quiet --hard && echo 'your changes on "
    "the node clash with this version: they are kept in git stash (git stash show -p)'; }; fi "
    "&& git log -1 --format='lab version: %h %d %s'"
)
node.execute(clone)

# %% [markdown]
# Your notebooks, as you prepared them here (the prepare pass: notebook 0), go to the node's
# clone (`notebooks/`), where the measure pass runs them: every notebook of this folder but 1
# and 2, over this notebook's SSH connection. A notebook the node has as the class's version, or
# as it was last carried, is replaced by yours; one you changed on the node since (the measure
# pass) is kept, never overwritten, and if yours changed here too, yours is put beside it as
# `NAME.from_jupyter.ipynb`. Each notebook gets one line saying which.

# %%
chi_files.carry_notebooks(node, Path.cwd(), REPO_DIR)

# %% [markdown]
# Run the host setup script. On a freshly booted node it first waits for the first-boot setup
# (cloud-init, automatic updates) to let go of the package manager, and every `apt-get` it runs
# waits for the package manager too (automatic updates stay on in Chameleon's images). Then it
# prints each step as `[already done]` or the command it runs, and ends with a container running
# `nvidia-smi`: you should see both GPUs there.

# %%
node.execute(f"bash {REPO_DIR}/docker/setup_host.sh")

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
# From here on the node builds the images of both stacks in the background while you go on, so
# that their downloads (NVIDIA's Triton image is the lab's largest) are done when notebooks 3, 4
# and 5 need them: `docker/build_images.sh start` returns at once, each of those notebooks waits
# for its part before it starts a stack, and the build's log is `.lab/build_images.log` in the
# clone.

# %%
node.execute(f"cd {REPO_DIR} && bash docker/build_images.sh start")

# %% [markdown]
# While the images build, build the model artifacts the containers serve (`artifacts/food11.pth`,
# `model.onnx`, test images) with `make artifacts-only`: a small Python environment with just what
# the build needs (a CPU-only PyTorch from PyTorch's own package index: the files are the same,
# the download a tenth), not the lab's whole local-mode environment. It runs beside the image
# build (pip in its own folder, Docker in its own: they share only the node's network), and after
# the host setup, which installs the `make` and `python3-venv` it needs. A few minutes the first
# time; later runs (or a node booted from a prepared image) see everything up to date and return
# at once. Only the last lines are shown; `pipefail` makes a failed build fail this cell, not just
# the `tail`.

# %%
from invoke.exceptions import UnexpectedExit

try:
    build = "make artifacts-only TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu"
    node.execute(f"cd {REPO_DIR} && bash -o pipefail -c '{build} 2>&1 | tail -n 15'")
except UnexpectedExit as err:
    raise RuntimeError(
        f"`make artifacts-only` failed on the node (exit code {err.result.exited}; its last lines "
        "are above). Fix what they say, then run this cell again."
    ) from None

# %% [markdown]
# ## 4. How to reach the node
#
# Copy the ssh command into a terminal on your computer. The private key is the one whose
# public half you registered at the site (in Chameleon's Jupyter it is the file printed below).
# The lab's Jupyter token stays on the node (notebook 3 shows how to print its address): this
# notebook is saved with its outputs, and the token is as good as a password.

# %%
key = context.get("keypair_private_key") or "~/.ssh/id_rsa_chameleon"
print(f"""ssh command (from your computer; use the path of your own private key there):
    ssh -i {key} cc@{FLOATING_IP}

Next: notebook 3, in that ssh session:
    cd ~/{REPO_DIR}/docker && bash build_images.sh wait fastapi
    docker compose -f docker-compose-fastapi.yaml up -d --build --wait
The lab's Jupyter will be at http://{FLOATING_IP}:8888/lab?token=<JUPYTER_TOKEN in docker/.env>
If port 8888 is not reachable from your network, use an SSH tunnel:
    ssh -i {key} -L 8888:127.0.0.1:8888 cc@{FLOATING_IP}   then http://127.0.0.1:8888/lab?token=...""")

# %% [markdown]
# ## 5. The second node for notebook 9 (optional)
# Only for notebook 9 on two machines, with a lease of two nodes (`NODE_COUNT = 2` in notebook
# 1); with one node, the next cell says so and the others do nothing. The second server,
# `SECOND_NAME` (`node2-serve-system-` and your user name), goes on the same reservation (its
# second host) with the same lease record, and is handled as the first: this cell deletes it if
# it failed (saying why), waiting until it is gone (up to 10 minutes; if that runs out, run the
# cell again in 5 minutes), and the next one starts it (up to 30 minutes; if that runs out, run
# it again).

# %%
TWO_NODES = chi_helpers.host_count(my_lease) >= 2
if not TWO_NODES:
    print("Your lease holds one node: nothing to do here (notebook 9 on two nodes only).")
else:
    old2 = server.get_server(SECOND_NAME) if server.get_server_id(SECOND_NAME) else None
    why2 = chi_servers.why_replace(old2, my_lease)
    if why2 is not None:
        old2.delete(delete_ips=False)  # a reserved IP stays with the lease
        print(f"deleting {SECOND_NAME}, {why2} ...")
        chi_servers.wait_until_gone(SECOND_NAME)

# %%
if TWO_NODES:
    node2 = server.Server(SECOND_NAME, reservation_id=reservation_id, image_name=IMAGE)
    with chi_servers.nova_refusal(SECOND_NAME):
        node2.submit(idempotent=True, wait_for_active=False, show=None, metadata=lease_record)
    chi_servers.wait_for_boot(node2, my_lease.id)

# %% [markdown]
# Its public IP: the lease's other reserved IP, attached as in section 2 (never a classmate's),
# or, for a lease without reserved IPs, a pool IP of its own; then the wait for SSH (up to 15
# minutes; if that runs out, run the cell again to wait longer).

# %%
if TWO_NODES:
    SECOND_IP = node2.get_floating_ip()
    if SECOND_IP is None:
        others = [ip for ip in my_lease.get_reserved_floating_ips() if ip != FLOATING_IP]
        if others:
            chi_ips.stop_if_taken(others[0], SECOND_NAME)
        ip = others[0] if others else chi_ips.own_public_ip(SECOND_NAME, my_lease.id)
        node2.associate_floating_ip(ip)
        SECOND_IP = node2.get_floating_ip()
    chi_servers.wait_for_ssh(node2)

# %% [markdown]
# Both nodes get `.venv-ray`, a Python environment with Ray Serve at the lab's pinned version and
# the model files (`make ray-node`); the second node first gets the clone and the host setup of
# section 3:

# %%
if TWO_NODES:
    node2.execute(clone)
    node2.execute(f"bash {REPO_DIR}/docker/setup_host.sh")
    make = build.replace("artifacts-only", "ray-node")  # with the same CPU-only torch
    for each in (node, node2):
        each.execute(f"cd {REPO_DIR} && bash -o pipefail -c '{make} 2>&1 | tail -n 5'")

# %% [markdown]
# The Ray cluster: a **head** on the first node, and the second node joining it, over their
# **private** IPs (Nova's fixed addresses on `sharednet1`). That network is the site's, shared by
# every project there: "private" does not mean "only your nodes", and a Ray cluster anyone can
# reach runs anyone's code. So the cluster uses **Ray's token authentication**: every `ray`
# command (and notebook 9's client) runs with `RAY_AUTH_MODE=token` and `RAY_AUTH_TOKEN_PATH`
# naming the clone's `.lab/ray_token`. The next cell makes that token once on the first node
# (mode 0600; `.lab/` is git-ignored) and copies it to the second over this notebook's SSH
# connection: it is never printed and never on a command line. The dashboard listens on the
# head's loopback only (`127.0.0.1`: only the node itself uses it); Ray's client port (10001)
# and its nodes' ports are on the private IPs, where each asks for the token. Ray's own files
# (its sockets and logs) go into a folder only you can open, `~/.lab_ray`. A node where Ray runs
# already is left as it is (`ray status` answers there).

# %%
if TWO_NODES:
    chi_files.share_ray_token(node, node2, REPO_DIR)
    HEAD_IP, SECOND_PRIVATE_IP = (chi_servers.fixed_ip(x.id) for x in (node, node2))
    ray = f"{chi_files.RAY_AUTH.format(clone=REPO_DIR)} {REPO_DIR}/.venv-ray/bin/ray"
    head = f"--head --port=6379 --node-ip-address={HEAD_IP} --dashboard-host=127.0.0.1"
    joins = f"--address={HEAD_IP}:6379 --node-ip-address={SECOND_PRIVATE_IP}"
    for host, args in ((node, head), (node2, joins)):  # Ray's folders: the node user's alone
        host.execute(f"{ray} status >/dev/null 2>&1 || {chi_files.ray_start(ray, args)}")
    node.execute(f"{ray} status")
    print(f"notebook 9: LAB_RAY_HEAD={HEAD_IP}:6379 (second node: ssh cc@{SECOND_IP})")

# %% [markdown]
# ## When you are done
# Free the node: set `DELETE_SERVER` to True and run the cell. First it brings your result bundles
# back from the first node (the measure pass writes one folder per notebook in `results/bundles/` of
# the clone, or where `LAB_BUNDLE` points on the node) to `results/bundles/` beside this folder,
# where the review pass reads them with no setting; a node that does not answer stops the cell
# before anything is deleted (`BRING_BACK_BUNDLES = False` deletes without them). Then it deletes
# your server and the second one of section 5 (found by name in one look at the project's list,
# without building an object for each of the class's servers; by id, which leaves their IPs alone;
# Nova takes a few minutes to finish) and gives back a public IP this notebook took from the site's
# pool, unless a classmate's server holds it (then it names that server); an IP reserved with the
# lease goes back when the lease ends (or when you delete the lease: last cell of notebook 1). Copy
# anything else you want from the node (`results/`) before.

# %%
DELETE_SERVER = False
BRING_BACK_BUNDLES = True  # False: delete without bringing the bundles back
if DELETE_SERVER:
    doomed = chi_servers.lab_servers((SERVER_NAME, SECOND_NAME))  # one look at the list
    if BRING_BACK_BUNDLES:
        chi_files.bring_back_before_delete(SERVER_NAME, REPO_DIR, chi_files.bundles_here(), doomed)
    for s in doomed:
        server.delete_server(s.id)  # by id; it leaves floating IPs alone
        print(f"server {s.name} deleted (Nova finishes in a few minutes)")
    if not doomed:
        print(f"no server named {SERVER_NAME}: nothing to delete")
    chi_ips.give_back_ips((SERVER_NAME, SECOND_NAME))  # pool IPs this notebook took for them
