# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 1. Reserve a GPU node on Chameleon
#
# **Run this notebook in the Chameleon Jupyter environment** (Chameleon's website:
# Experiment > Jupyter Interface), where `python-chi` is installed and already knows who you are.
#
# Bare-metal GPU nodes are in demand, so you reserve one ahead of time as a **lease**: a node
# type, a number of nodes and a time window. This lab needs one node with GPUs for about
# three hours; the reference node type is `gpu_p100` (2x NVIDIA P100) at CHI@TACC. Your
# instructor may have chosen another one: the class's choices are in `lab_settings.py`, next to
# this notebook.
#
# There are two equivalent ways to make the lease. Use **one** of them.

# %% [markdown]
# ## Option A: the Horizon web interface
#
# 1. Open the Chameleon site that has your node type (for `gpu_p100`: CHI@TACC) from
#    Experiment > CHI@TACC, and log in.
# 2. Check the project drop-down at the top left: it must show the course's project.
# 3. Go to Reservations > Leases and click **Host Calendar**. Choose your node type in
#    "Node Type" to see when nodes are free. The calendar shows times in **UTC**.
# 4. Click **+ Create Lease**. Name it `serve_system_` followed by your Chameleon user name and
#    the start date, e.g. `serve_system_jdoe_20250310-1400`: notebook 2 looks for your leases
#    whose names start with `serve_system_`, so a lease you made last week never gets in the way.
# 5. Set the start date/time (UTC) of a free slot and a lease length of about 3 hours
#    (shorter if your instructor asks). Click Next.
# 6. On the Hosts tab: tick "Reserve hosts", minimum and maximum number of hosts 1, and under
#    "Resource properties" choose `node_type` = `gpu_p100`. If the form offers to reserve
#    floating IPs, reserve 1 (otherwise notebook 2 takes one from the project's pool). Click
#    Next, leave Networks empty, and click Create.
# 7. The lease appears as PENDING and turns ACTIVE at its start time.
#
# Then go on with notebook 2 when the lease is active.

# %% [markdown]
# ## Option B: python-chi (the same lease, in code)
#
# The first cell checks the python-chi version and reads the class's settings. Change the values
# in it if you need to; everything below reads them. `START_IN_HOURS = 0` asks for the lease to
# start now (only works when a node is free now: check the Host Calendar). Every cell is safe to
# run again: if you already have a lease for this lab that is pending or active, it is used
# instead of making a second one.

# %%
import datetime
import importlib.metadata
import os

import lab_settings as lab
from packaging.version import Version

# python-chi 1.0 brought the Lease and Server objects this notebook uses; 1.2.10 is the version
# the lab is tested with.
PYTHON_CHI = importlib.metadata.version("python-chi")
if Version(PYTHON_CHI) < Version("1.0"):
    raise RuntimeError(f"python-chi {PYTHON_CHI} is too old for this lab. Run `%pip install "
                       "python-chi==1.2.10` in a new cell, then Kernel > Restart and run this notebook again.")

import chi
from chi import context, hardware, lease

context.version = "1.0"  # without it, python-chi 1.0-1.1 answer with plain dicts (no .show(), .status)

USERNAME = os.getenv("USER", "student")  # your Chameleon user name in Chameleon's Jupyter
SITE = lab.SITE
NODE_TYPE = lab.NODE_TYPE
NODE_COUNT = 1
DURATION_HOURS = lab.LEASE_HOURS
START_IN_HOURS = 0  # 0 = now; e.g. 20 = twenty hours from now
print(f"python-chi {PYTHON_CHI}; a lease of {NODE_COUNT} x {NODE_TYPE} at {SITE} for {DURATION_HOURS} h")

# %% [markdown]
# Choose the project and the site. If the course's project is set in `lab_settings.py` it is
# used; otherwise a drop-down appears, and its first project is used until you pick another.

# %%
if lab.PROJECT:
    context.use_project(lab.PROJECT)
else:
    context.choose_project()
context.use_site(SITE)

# %% [markdown]
# Your leases for this lab: those you made (your user id) whose names start with
# `serve_system_`. One that is PENDING or ACTIVE is used; ended ones are left alone.

# %%
me = chi.session().get_user_id()


def my_lab_leases():
    return [x for x in lease.list_leases() if x.user_id == me and x.name.startswith(lab.LEASE_PREFIX)]


mine = my_lab_leases()
live = [x for x in mine if x.status in ("PENDING", "STARTING", "ACTIVE")]
print(f"{len(mine)} lease(s) of yours for this lab;", ", ".join(f"{x.name} {x.status}" for x in live) or "none live")

# %% [markdown]
# Create the lease, unless you have one. It reserves the node and one public (floating) IP of
# your own, so you never race other students for one. Start and end are in UTC; the name holds
# the start time, so it never repeats.

# %%
from chi.exception import ResourceError

if live:
    my_lease = live[0]
    print(f"using your lease {my_lease.name} ({my_lease.status}); no new lease made")
else:
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None, second=0, microsecond=0)
    start = now + datetime.timedelta(hours=START_IN_HOURS)
    name = f"{lab.LEASE_PREFIX}{USERNAME}_{start:%Y%m%d-%H%M}"
    if START_IN_HOURS > 0:
        my_lease = lease.Lease(name, start_date=start, end_date=start + datetime.timedelta(hours=DURATION_HOURS))
    else:
        my_lease = lease.Lease(name, duration=datetime.timedelta(hours=DURATION_HOURS))
    my_lease.add_node_reservation(amount=NODE_COUNT, node_type=NODE_TYPE)
    my_lease.add_fip_reservation(amount=1)
    try:
        my_lease.submit(wait_for_active=False, show="text")
    except ResourceError as err:
        my_lease = None
        print(f"Chameleon did not make the lease: {err}")

# %% [markdown]
# **If no node was free.** The cell below does nothing when the lease was made. Otherwise it
# lists what you can do instead: the GPU node types free right now at this site, and when the
# next `NODE_TYPE` node is free for the whole lease. Then change `SITE`, `NODE_TYPE` or
# `START_IN_HOURS` in the first cell and run the notebook again. Another GPU type works for the
# whole lab; with one GPU instead of two, notebook 6's steps that spread instances over both GPUs
# put them all on the one, and you compare against one GPU's numbers.

# %%
if my_lease is None:
    free_now = sorted({n.type for n in hardware.get_nodes(gpu=True, filter_reserved=True)})
    print(f"GPU node types free now at {SITE}:", ", ".join(free_now) or "none")
    slots = [n.next_free_timeslot(minimum_hours=DURATION_HOURS)[0] for n in hardware.get_nodes(node_type=NODE_TYPE)]
    if slots:
        print(f"next {NODE_TYPE} free for {DURATION_HOURS} h from (UTC): {min(slots):%Y-%m-%d %H:%M}")
    print("Other sites have other GPU types: see Chameleon's Hardware Catalog.")
    raise RuntimeError("No lease: set START_IN_HOURS, NODE_TYPE or SITE in the first cell "
                       "from the options above, and run the notebook again.")

# %% [markdown]
# Check it. `PENDING` means it is accepted and waits for its start time; `ACTIVE` means the node
# is yours now (continue with notebook 2); `ERROR` usually means no node of that type was free
# for the whole window: delete the failed lease (below), pick another slot in the Host
# Calendar, and run the notebook again.

# %%
my_lease.show(type="text")
print("status:", my_lease.status)

# %% [markdown]
# ## When you are done
# Leases end by themselves. If you finish early, or a lease went to ERROR, delete it so others
# can use the node: first delete the server (the last cell of notebook 2), then set
# `DELETE_LEASE = True` here and run the cell. It deletes your leases for this lab that have not
# ended.

# %%
DELETE_LEASE = False
if DELETE_LEASE:
    for old in my_lab_leases():
        if old.status not in ("TERMINATED", "DELETED"):
            old.delete()
            print(f"lease {old.name} deleted")
