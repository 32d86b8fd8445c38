"""The rest of a class of 40 in project CHI-231138, mid-session, around the student under test.

    19 classmates: an ACTIVE lease made by notebook 1 (one host, one reserved floating IP), a
                   server ACTIVE with that IP attached
     1 classmate:  the same, but the server is still booting and its reserved IP is unbound:
                   the first unbound IP of the project, the one a careless "first free IP"
                   would take
     1 classmate:  a lease made a moment ago, still STARTING (Blazar setting up its node)
     1 classmate:  `student2`, whose user name contains the student's: a Horizon lease without
                   a reserved IP that ends in 3.5 h (after a lease made now), a server holding
                   the IP notebook 2 took from the pool for it (described "public IP of
                   node-serve-system-student2 for lease ...")
     8 classmates: PENDING leases for the afternoon shift (in 4 hours)
     9 classmates: ended (TERMINATED) leases; two of them left the pool IP notebook 2 took for
                   their server in the project, unattached (their lease ended before their
                   clean-up cell ran): `stud`, whose user name is contained in the student's, and
                   `student-2`, whose first server's name (node-serve-system-student-2) is what
                   a second node named "<the student's server>-2" would be called
That leaves 2 of the site's 24 gpu_p100 hosts free for the next 3 hours (at CHI@UC, where the
class reserves gpu_rtx_6000, 2 of its 24).
"""

from __future__ import annotations

import datetime as dt

from .common import BLAZAR_OUT, user_id_of

# user names around the student's
NAMES = {"horizon": "student2", "stranded": "stud", "stranded_near": "student-2"}


def lease_name(user: str, lease: dict) -> str:
    start = dt.datetime.strptime(lease["start_date"], BLAZAR_OUT)
    return f"serve_system_{user}_{start:%Y%m%d-%H%M}"


def pool_ip_marker(server_name: str, lease_id: str) -> str:
    """The description notebook 2 gives an IP it takes from the pool (chi_ips._marker)."""
    return f"public IP of {server_name} for lease {lease_id}, allocated by notebook 2"


# the node type each site's class reserves (CHI@UC has no gpu_p100)
CLASS_NODE_TYPE = {"CHI@TACC": "gpu_p100", "CHI@UC": "gpu_rtx_6000"}


def populate(fake) -> dict:
    """Fill the fake (the class's site) with the class; returns {name: what they have}."""
    node_type = CLASS_NODE_TYPE[fake.site.name]
    roles = (
        ["booting"]
        + ["running"] * 19
        + ["starting", "horizon"]
        + ["afternoon"] * 8
        + ["done"] * 7
        + ["stranded", "stranded_near"]
    )
    people = [NAMES.get(role, f"classmate{n:02d}") for n, role in enumerate(roles, start=1)]
    made = {}
    for name, role in zip(people, roles):
        uid = user_id_of(name)
        if role in ("done", "stranded", "stranded_near"):
            lease = fake.add_lease("x", uid, -30, node_type=node_type, status="TERMINATED")
        elif role == "afternoon":
            lease = fake.add_lease("x", uid, 4, node_type=node_type, fip=True)
        elif role == "starting":
            lease = fake.add_lease("x", uid, 0, node_type=node_type, fip=True, starting=10**6)
        elif role == "horizon":  # a longer lease: it ends after a lease made now
            lease = fake.add_lease("x", uid, -1, hours=4.5, node_type=node_type)
        else:
            lease = fake.add_lease("x", uid, -1, node_type=node_type, fip=True)
        lease["name"] = lease_name(name, lease)
        made[name] = {"role": role, "user_id": uid, "lease": lease["id"]}
        if role in ("booting", "running", "horizon"):
            made[name].update(_server(fake, name, uid, lease, booting=role == "booting"))
        if role in ("stranded", "stranded_near"):
            marker = pool_ip_marker(f"node-serve-system-{name}", lease["id"])
            fip = fake._new_fip(
                fake.pool.pop(0), project_id=lease["project_id"], description=marker
            )
            made[name].update(ip=fip["floating_ip_address"], ip_id=fip["id"])
    return made


def _server(fake, name, uid, lease, booting):
    host_res = next(r["id"] for r in lease["reservations"] if r["resource_type"] == "physical:host")
    server = fake.add_server(
        uid,
        f"node-serve-system-{name}",
        host_res,
        key_name=f"{name}-jupyter",
        final="BUILD" if booting else "ACTIVE",
        metadata={"serve_system_lease": lease["id"]},
    )
    server["status"] = server["final"]
    port = next(p for p in fake.ports.values() if p["device_id"] == server["id"])
    fip_res = [r["id"] for r in lease["reservations"] if r["resource_type"] == "virtual:floatingip"]
    if fip_res:
        fip = next(f for f in fake.fips.values() if f"reservation:{fip_res[0]}" in f["tags"])
    else:  # Horizon lease without a reserved IP: one notebook 2 took from the pool
        marker = pool_ip_marker(server["name"], lease["id"])
        fip = fake._new_fip(fake.pool.pop(0), project_id=lease["project_id"], description=marker)
    if not booting:
        fake._bind(fip, port["id"])
    return {"server": server["id"], "ip": fip["floating_ip_address"], "ip_id": fip["id"]}
