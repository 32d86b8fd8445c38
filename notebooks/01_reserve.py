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
# three hours; the reference node type is `gpu_p100` (2x NVIDIA P100).
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
# 4. Click **+ Create Lease**. Name it `serve_system_` followed by your Chameleon user name
#    (the same name the code below builds, so notebook 2 finds it).
# 5. Set the start date/time (UTC) of a free slot and a lease length of about 3 hours
#    (shorter if your instructor asks). Click Next.
# 6. On the Hosts tab: tick "Reserve hosts", minimum and maximum number of hosts 1, and under
#    "Resource properties" choose `node_type` = `gpu_p100`. Click Next, leave Networks empty,
#    and click Create.
# 7. The lease appears as PENDING and turns ACTIVE at its start time.
#
# Then go on with notebook 2 when the lease is active.

# %% [markdown]
# ## Option B: python-chi (the same lease, in code)
#
# Change the values in the next cell if you need to; everything below reads them.
# `START_IN_HOURS = 0` asks for the lease to start now (only works when a node is free now:
# check the Host Calendar). Every cell is safe to run again: submitting with `idempotent=True`
# reuses a lease of the same name instead of creating a second one.

# %%
import datetime
import os

from chi import context, lease

USERNAME = os.getenv("USER", "student")      # your Chameleon user name in Chameleon's Jupyter
NODE_TYPE = os.getenv("LAB_NODE_TYPE", "gpu_p100")
NODE_COUNT = 1
DURATION_HOURS = 3
START_IN_HOURS = 0                           # 0 = now; e.g. 20 = twenty hours from now
SITE = os.getenv("LAB_SITE", "CHI@TACC")     # the site that has NODE_TYPE
LEASE_NAME = f"serve_system_{USERNAME}"
print(f"lease {LEASE_NAME}: {NODE_COUNT} x {NODE_TYPE} at {SITE} for {DURATION_HOURS} h")

# %% [markdown]
# Pick the project and the site (drop-down menus; the site defaults to `SITE`).

# %%
context.choose_project()
context.choose_site(default=SITE)

# %% [markdown]
# Create the lease, or find the one you already made. The start and end are computed in UTC.

# %%
start = None
if START_IN_HOURS > 0:
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    start = (now + datetime.timedelta(hours=START_IN_HOURS)).replace(second=0, microsecond=0)
    end = start + datetime.timedelta(hours=DURATION_HOURS)
    my_lease = lease.Lease(LEASE_NAME, start_date=start, end_date=end)
else:
    my_lease = lease.Lease(LEASE_NAME, duration=datetime.timedelta(hours=DURATION_HOURS))
my_lease.add_node_reservation(amount=NODE_COUNT, node_type=NODE_TYPE)
my_lease.submit(idempotent=True, wait_for_active=False, show="text")

# %% [markdown]
# Check it. `PENDING` means it is accepted and waits for its start time; `ACTIVE` means the node
# is yours now (continue with notebook 2); `ERROR` usually means no node of that type was free
# for the whole window: pick another slot in the Host Calendar, delete the failed lease (below)
# and submit again.

# %%
my_lease = lease.get_lease(LEASE_NAME)
my_lease.show(type="text")
print("status:", my_lease.status)

# %% [markdown]
# ## When you are done
# Leases end by themselves. If you finish early, or a lease went to ERROR, delete it so others
# can use the node: set `DELETE_LEASE = True` and run the cell.

# %%
DELETE_LEASE = False
if DELETE_LEASE:
    lease.get_lease(LEASE_NAME).delete()
    print(f"lease {LEASE_NAME} deleted")
