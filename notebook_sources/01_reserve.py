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
# Your lease also reserves a **floating IP** per node: the public address your node will have. A
# class shares one Chameleon project, so every student's addresses sit in one list; an address
# reserved with *your* lease is the only one notebook 2 attaches to your node.
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
# 5. Set the start date/time (UTC) of a free slot and make the lease end about 3 hours later
#    (shorter if your instructor asks).
# 6. **Hosts** tab: check "Reserve Hosts", minimum and maximum number of hosts 1 (2 for
#    notebook 9 on two nodes), and choose `node_type` `=` `gpu_p100` in the drop-downs below.
# 7. **Networks** tab: check "Reserve Floating IPs" and choose one per host (**1**). (Leave
#    "Reserve Network" unchecked.) Without it, notebook 2 has to take a public IP from the
#    site's shared pool, which may have none left when the whole class provisions at once.
# 8. Click **Create**. The lease appears as PENDING and turns ACTIVE at its start time.
#
# Then go on with notebook 2 when the lease is active.

# %% [markdown]
# ## Option B: python-chi (the same lease, in code)
#
# The first cell checks the python-chi version and the class's settings (`lab_settings.py`)
# before anything is reserved: an empty or wrong setting stops it with a message that says
# what to set where. The second holds the values everything below reads.
# `START_IN_HOURS = 0` asks for the lease to start now (only works when a node is free now:
# check the Host Calendar). Every cell is safe to run again: if you already have a lease for
# this lab that is pending or active, it is used instead of making a second one.

# %%
import datetime
import importlib.metadata
import os

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
# The values every cell below reads; change them here if you need to. `NODE_COUNT = 2` only for
# notebook 9 on two machines: two nodes, each with its own floating IP.

# %%
USERNAME = os.getenv("USER", "student")  # your Chameleon user name in Chameleon's Jupyter
SERVER_NAME = f"{lab.SERVER_PREFIX}{USERNAME}"  # the server notebook 2 makes for you
SECOND_NAME = f"{lab.SECOND_SERVER_PREFIX}{USERNAME}"  # and notebook 9's second node
SITE, NODE_TYPE, NODE_COUNT = lab.SITE, lab.NODE_TYPE, 1
DURATION_HOURS = lab.LEASE_HOURS
START_IN_HOURS = 0  # 0 = now; e.g. 20 = twenty hours from now
RESERVE_FLOATING_IP = True  # False only when the site has no reservable IP left: see below
print(f"python-chi {PYTHON_CHI}; {NODE_COUNT} x {NODE_TYPE} at {SITE} for {DURATION_HOURS} h")

# %% [markdown]
# The project and the site: python-chi sends every request below to this site, on behalf of
# this project. Then the class's project, node type and image are checked against the site.

# %%
import chi
import chi_files
import chi_helpers
import chi_ips
from chi import context, lease

context.version = "1.0"  # without it, python-chi 1.1 answers with plain dicts (no .show(), .status)
chi_helpers.check_site(SITE)
context.use_site(SITE)
chi_helpers.check_project(lab.PROJECT)
context.use_project(lab.PROJECT)
chi_helpers.check_node_type_and_image(SITE, NODE_TYPE, lab.IMAGE)

# %% [markdown]
# Your leases for this lab: those you made (your user id: classmates' leases are in the same
# project) whose names start with `serve_system_`. Ended ones are left alone; of the pending or
# active ones, the active one that ends last is used (else the pending one that starts first).
# (Notebook 2 goes on with the lease your server runs on, if you have one: a server cannot move
# to another lease.) A public IP notebook 2 took from the site's pool (for either of your
# servers) for a lease that is over is given back here: unlike an IP reserved with a lease, it
# does not end with the lease. A lease with fewer nodes than `NODE_COUNT` stops the cell: a lease
# cannot grow.

# %%
me = chi.session().get_user_id()


def my_lab_leases():
    return [
        x for x in lease.list_leases() if x.user_id == me and x.name.startswith(lab.LEASE_PREFIX)
    ]


mine = my_lab_leases()
live = [x for x in mine if x.status in chi_helpers.LIVE]
my_lease = chi_helpers.pick_lease(live)
holding = [x.id for x in mine if x.status in chi_helpers.HOLDS_IPS]  # ERROR too: it may hold one
chi_ips.give_back_ips((SERVER_NAME, SECOND_NAME), live=holding)
chi_helpers.check_node_count(my_lease, NODE_COUNT)
print(f"your live leases for this lab: {chi_helpers.describe(live)}")
chi_helpers.note_failed(mine)

# %% [markdown]
# The lease you ask for, unless you have one: the nodes, and a floating IP of your own for each.
# Start and end are in UTC; the name holds the start time, and Blazar refuses a name the project
# has already (even a deleted lease's, for a while), so a second lease in the same minute gets
# `-2` at the end.

# %%
if my_lease is None:
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None, second=0, microsecond=0)
    start = now + datetime.timedelta(hours=START_IN_HOURS)
    length = datetime.timedelta(hours=DURATION_HOURS)
    name = chi_helpers.unused_name(f"{lab.LEASE_PREFIX}{USERNAME}_{start:%Y%m%d-%H%M}", mine)
    if START_IN_HOURS > 0:
        request = lease.Lease(name, start_date=start, end_date=start + length)
    else:
        request = lease.Lease(name, duration=length)  # Blazar starts it now
    request.add_node_reservation(amount=NODE_COUNT, node_type=NODE_TYPE)
    if RESERVE_FLOATING_IP:
        request.add_fip_reservation(amount=NODE_COUNT)
    print(f"asking for {name}: {NODE_COUNT} x {NODE_TYPE}, {start:%Y-%m-%d %H:%M} UTC + {length}")
else:
    print(f"using your lease {my_lease.name} ({my_lease.status}); no new lease made")

# %% [markdown]
# Send it. Blazar (Chameleon's reservation service) accepts the whole lease or refuses it;
# python-chi then only says "Unable to make lease", so the cell keeps Blazar's own reason. When
# python-chi reports a failure although Blazar did make the lease (its answer lost on the way,
# or an error after it stored the lease), the cell finds the lease by its name and goes on with
# it.

# %%
from chi.exception import ResourceError

if my_lease is None:
    with chi_helpers.blazar_refusal() as blazar_said:
        try:
            request.submit(wait_for_active=False, show=None)
            my_lease = request
        except ResourceError as failure:
            my_lease = chi_helpers.accepted_anyway(request.name, failure, blazar_said, mine)

# %% [markdown]
# **If Blazar refused the lease**, the cell below says why and the one change that helps; with
# a lease, it does nothing. No node free for your hours: it prints when the next `NODE_TYPE`
# node is free for the whole lease, and which other NVIDIA GPU types are free for the whole
# lease now (another NVIDIA type works for the whole lab; with one GPU instead of two, notebook
# 6's steps that spread instances over both GPUs put them all on the one). It counts only nodes
# Blazar will book for the class: not those in maintenance, nor those kept for other projects.
# No reservable floating IP left: reserve none, and notebook 2 takes one from the site's pool.
# The project's allocation used up: your instructor renews it.

# %%
if my_lease is None:
    why = chi_helpers.explain_refusal(
        blazar_said, lab.PROJECT, SITE, NODE_TYPE, DURATION_HOURS, asked=START_IN_HOURS
    )
    raise RuntimeError(why)

# %% [markdown]
# Check it. `PENDING` means it is accepted and waits for its start time; `STARTING`, that Blazar
# is preparing its node (a few minutes: notebook 2 waits for it, up to 15 minutes);
# `ACTIVE` means the node is yours now (continue with notebook 2); `UPDATING`, that it is being
# changed (e.g. extended in Horizon), for a minute or two. `ERROR` means Blazar accepted the
# lease but could not start or change it (for instance, its node failed a check at the start
# time): the cell stops and says to delete it (below) and run this notebook again, which makes a
# new lease, most likely on another node.

# %%
my_lease.show(type="text")
print("status:", my_lease.status)
chi_helpers.stop_if_failed(my_lease)

# %% [markdown]
# ## When you are done
# Leases end by themselves, and with a lease go its server and the IP reserved with it. A public
# IP notebook 2 took from the pool (for a lease without a reserved one) does not: notebook 2's
# last cell gives it back, and so do notebooks 1 and 2 whenever they find its lease over.
#
# If you finish early, or a lease went to ERROR, delete it so others can use the node: set
# `DELETE_LEASE = True` here and run the cell. First it brings your result bundles back from your
# server, as notebook 2's last cell does (to `results/bundles/` beside this folder, where the review
# pass reads them; a server that does not answer stops the cell before anything is deleted, and
# `BRING_BACK_BUNDLES = False` deletes without them). Then it deletes your leases for this lab that
# are running (ACTIVE, STARTING, UPDATING) or failed (ERROR), with their servers and IPs (Blazar
# takes a few minutes: DELETING), and says which; a PENDING lease, booked for a later session, stays
# unless you also set `DELETE_LATER_LEASES = True`. Copy anything else you want from the node
# (`results/`) before.

# %%
DELETE_LEASE = False
DELETE_LATER_LEASES = False  # True: a PENDING lease too, though it is for a later session
BRING_BACK_BUNDLES = True  # False: delete without bringing the bundles back
if DELETE_LEASE:
    if BRING_BACK_BUNDLES:  # from your first node, before its lease deletes it
        chi_files.bring_back_before_delete(SERVER_NAME, lab.REPO_DIR, chi_files.bundles_here())
    for old in my_lab_leases():
        status = old.status
        if status == "PENDING" and not DELETE_LATER_LEASES:
            print(f"kept {old.name} (PENDING, starts {old.start_date:%Y-%m-%d %H:%M} UTC)")
        elif status in ("PENDING", "STARTING", "ACTIVE", "UPDATING", "ERROR"):
            old.delete()
            print(f"lease {old.name} ({status}) deleted, with its servers and reserved IPs")
    kept = [x.id for x in my_lab_leases() if x.status in chi_helpers.HOLDS_IPS]
    chi_ips.give_back_ips((SERVER_NAME, SECOND_NAME), live=kept)
