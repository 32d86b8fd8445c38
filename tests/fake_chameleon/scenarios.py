"""The class's real situations, each a few steps of a student running notebooks 1 and 2.

Every scenario runs in a project where 39 classmates already have leases, servers and floating
IPs (classroom.py); `student` is the user under test. SCENARIOS maps a name to (the World's
keyword arguments, the steps).
"""

from __future__ import annotations

import datetime as dt
import os

from fake_chameleon.common import BRANCH, MINUTE, advance, now, sim_now, user_id_of

DELETE_SERVER = {"DELETE_SERVER = False": "DELETE_SERVER = True"}
DELETE_LEASE = {"DELETE_LEASE = False": "DELETE_LEASE = True"}
DELETE_LATER = {**DELETE_LEASE, "DELETE_LATER_LEASES = False": "DELETE_LATER_LEASES = True"}
NO_FIP = {"RESERVE_FLOATING_IP = True": "RESERVE_FLOATING_IP = False"}
LATER = {"START_IN_HOURS = 0": "START_IN_HOURS = 20"}
KEEP_BUNDLES = {"BRING_BACK_BUNDLES = True": "BRING_BACK_BUNDLES = False"}
SETUP = "check_node_type_and_image"  # the cell that ends the set-up cells of both notebooks
LEASES = "def my_lab_leases"  # notebook 1: the cell after which its clean-up cell can run
CLONE = "lab version: %h"  # notebook 2: the cell that clones the lab on the node
LEASE_CELL = "wait_for_start"  # notebook 2: the cell that picks the lease and waits for it
REPLACE = "why = chi_servers.why_replace"  # notebook 2: the cell that clears a failed server
BOOT = "chi_servers.wait_for_boot(node,"  # notebook 2: the cell that boots the server
SSH = "chi_servers.wait_for_ssh(node)"  # notebook 2: the cell that waits for SSH
BUNDLE = "results/bundles/03_fastapi_setup/summary.csv"  # a bundle the measure pass writes
PREPARED = {  # what notebook 3's prepare pass kept in Chameleon's Jupyter (servelab.passes.record)
    "predictions": {"4.1 ms": {"prediction": "4.1 ms", "value": 12, "made": "2026-11-26T20:00"}},
    "edits": {"6.3a": {"step": "6.3a", "before": "count: 1\n", "after": "count: 2\n"}},
}


# what the instructor fills in (harness.INSTRUCTOR): the class at CHI@TACC
AT_TACC = {"REPO_URL": "{repo}", "REPO_REF": "v1", "PROJECT": "CHI-231138"}


class NoStop(Exception):
    """A step expected a notebook to stop with an error and it did not: the scenario ends there
    (its record says what happened; the tests then fail on it)."""


def stopped_at(record) -> int:
    if record["error"] is None:
        raise NoStop(record["label"])
    return record["error"]["n"]


def student_lease(world, start_in_hours, hours=3, fip=True, name_suffix="", starting=0):
    """A lease the student made earlier (notebook 1, or Horizon when fip=False); starting: how
    many more simulated seconds Blazar keeps it STARTING."""
    f = world.fake
    lease = f.add_lease(
        "x", f.user_id, start_in_hours=start_in_hours, hours=hours, fip=fip, starting=starting
    )
    start = now() + dt.timedelta(hours=start_in_hours)
    lease["name"] = f"serve_system_student_{start:%Y%m%d-%H%M}{name_suffix}"
    return lease


def class_day(world):
    """A student's lab from start to end, every notebook run twice, then the clean-up cells, on
    a good day's durations (a lease STARTING for 3 minutes, an 11-minute boot, sshd 2 minutes
    after ACTIVE). Before it: the student's ended leases from earlier tries (one named without a
    date, as this lab once did), 39 classmates' leases, servers and IPs in the project, and
    notebook 3 prepared in Chameleon's Jupyter (the prepare pass). Between the two rounds the
    measure pass runs notebook 3 on the node (changing it there) while the student writes more
    in it here, and writes its bundle; the clean-up brings the bundle back."""
    f = world.fake
    f.add_lease("serve_system_student", f.user_id, -50, status="TERMINATED")
    f.add_lease("serve_system_student_20250101-1200", f.user_id, -40, status="TERMINATED")
    world.prepare("03_fastapi_setup", "My prediction: the ONNX service answers first.")
    world.prepared_json("03_fastapi_setup", PREPARED)
    world.notes["prepared"] = world.notebook_ids()
    for round_ in ("first", "again"):
        with world.session("01_reserve") as s:
            s.run(label=round_)
        with world.session("02_provision") as s:
            s.run(label=round_)
        if round_ == "first":
            world.notes["carried"] = world.node_notebook_ids()
            nb = world.node.home / "serve-system-lab/notebooks/03_fastapi_setup.ipynb"
            nb.write_text(nb.read_text().replace('"cells": [', '"cells": [\n', 1))
            world.notes["measured"] = world.node_notebook_ids()
            world.prepare("03_fastapi_setup", "And a second thought, written here.")
            world.notes["prepared again"] = world.notebook_ids()
            world.on_node(f"serve-system-lab/{BUNDLE}", "rate,p95_ms\n100,41.5\n")
    world.fake.server_delete_s = 10**6  # Nova still deleting at "again" ...
    with world.session("02_provision", DELETE_SERVER) as s:
        s.run(s.upto(SETUP) + [s.index_of("DELETE_SERVER")], label="delete server")
        s.run([s.index_of("DELETE_SERVER")], label="delete server again")  # still being deleted
        with world.fake.lock:  # ... and done before "none left"
            world.fake.finish_deletes()
        s.run([s.index_of("DELETE_SERVER")], label="delete server, none left")
    with world.session("01_reserve", DELETE_LEASE) as s:
        s.run(s.upto(LEASES) + [s.index_of("DELETE_LEASE")], label="delete lease")


def pending_lease(world):
    """A lease for tomorrow (START_IN_HOURS = 20). First another project holds every gpu_p100
    from +19 h to +26 h: refused, and the advice is the first start from the one asked for on
    (never an earlier slot); then refused again, but the other project gives one host back just
    after the refusal: run again; then made, found again; notebook 2 says when it starts instead
    of making a server."""
    f = world.fake
    p100 = [h["id"] for h in f.hosts if h["node_type"] == "gpu_p100"]
    for host in p100:
        f.book(host, 19, 26)
    freed = f.allocations[p100[-1]][-1]

    def gives_back():
        f.allocations[p100[-1]].remove(freed)
        f.after_refusal = lambda: None

    with world.session("01_reserve", LATER) as s:
        s.run(label="tomorrow taken")
        f.after_refusal = gives_back
        s.run(label="tomorrow freed just after")
        world.notes["freed host"] = p100[-1]
        s.run(label="future start")
    with world.session("01_reserve") as s:
        s.run(label="again")
    with world.session("02_provision") as s:
        s.run(label="pending")


def two_active(world):
    """Two ACTIVE leases of the student's, where the one that ends last started first: a Horizon
    lease without a reserved IP (started 2 h ago, ends in 2.5 h) and notebook 1's with a reserved
    IP (started 30 minutes ago, ends in 1 h). Both notebooks use the first; notebook 2 takes a
    pool IP for it."""
    student_lease(world, -2, hours=4.5, fip=False)
    student_lease(world, -0.5, hours=1.5, name_suffix="b")
    with world.session("01_reserve") as s:
        s.run(label="two active")
    with world.session("02_provision") as s:
        s.run(label="two active")


def my_server(world) -> dict:
    """The student's server (the newest of that name) in the fake's state."""
    f = world.fake
    return [x for x in f.servers.values() if x["user_id"] == f.user_id][-1]


def server_on_earlier_lease(world):
    """The issue's case: the server was made on lease A (reserved IP, ends in 1 h); a later lease
    B appears (reserved IP, ends in 2.9 h). Notebook 2 again stays on A and says how to move to
    B. A server without the record of its lease, beside two active leases: the cell says it
    cannot tell. Then the student moves: DELETE_SERVER, and notebook 2 makes a server on B. Then
    B is deleted in Horizon and Blazar fails to delete its server (it logs and goes on): notebook
    2 replaces that server with one on A."""
    student_lease(world, -2)
    with world.session("02_provision") as s:
        s.run(label="on A")
    b = student_lease(world, -0.1, name_suffix="b")
    world.notes["B"] = b
    with world.session("02_provision") as s:
        s.run(label="B appears")
    server = my_server(world)
    record, server["metadata"] = server["metadata"], {}
    with world.session("02_provision") as s:
        s.run(s.upto("lease_note"), label="no record")
    server["metadata"] = record
    world.fake.server_delete_s = 10**6  # still under way when notebook 2 runs again ...
    with world.session("02_provision", DELETE_SERVER) as s:
        s.run(s.upto(SETUP) + [s.index_of("DELETE_SERVER")], label="move: delete server")
    with world.session("02_provision") as s:
        first = s.run(s.upto(LEASE_CELL), label="move: on B")
        with world.fake.lock:  # ... and done 6 minutes later: within the cell's 10-minute wait
            world.fake.server_delete_s = 90.0
            world.fake.deleting[server["id"]] = sim_now() + 6 * MINUTE
        s.extend(first, range(s.index_of(LEASE_CELL) + 1, len(s.code)))
    f, left = world.fake, my_server(world)["id"]
    f.end_lease(b["id"])
    f.deleting.pop(left, None)  # Blazar's delete of the server failed: it stays, without its port
    del f.leases[b["id"]]
    with world.session("02_provision") as s:
        s.run(label="B gone, its server left")


def starting_lease(world):
    """The student's lease was made a moment ago and Blazar is still starting it (a classmate's
    lease stays STARTING all along): notebook 1 uses it; Blazar takes 25 more minutes from
    notebook 2's lease cell on: notebook 2 waits its 15 minutes and says to run the cell again;
    run again, it waits the rest and makes the server."""
    lease = student_lease(world, 0, starting=10**6)
    with world.session("01_reserve") as s:
        s.run(label="starting")
    with world.session("02_provision") as s:
        record = s.run(range(s.index_of(LEASE_CELL)), label="starting")
        with world.fake.lock:
            lease["_until"] = sim_now() + 25 * MINUTE
        s.extend(record, range(s.index_of(LEASE_CELL), len(s.code)))
    with world.session("02_provision") as s:
        s.run(label="started")


def several_pending(world):
    """Two PENDING leases of the student's (tomorrow's, made first, and the afternoon's, which
    starts first), then an ACTIVE one beside them; then the clean-up cell of notebook 1 deletes
    the ACTIVE one and keeps the two for later, and with DELETE_LATER_LEASES deletes them."""
    world.notes["tomorrow"] = student_lease(world, 20)
    world.notes["afternoon"] = student_lease(world, 4)
    with world.session("01_reserve") as s:
        s.run(label="two pending")
    with world.session("02_provision") as s:
        s.run(label="two pending")
    world.notes["now"] = student_lease(world, -0.5)
    with world.session("02_provision") as s:
        s.run(label="active beside pending")
    with world.session("01_reserve", DELETE_LEASE) as s:
        s.run(s.upto(LEASES) + [s.index_of("DELETE_LEASE")], label="delete lease")
    with world.session("01_reserve", DELETE_LATER) as s:
        s.run(s.upto(LEASES) + [s.index_of("DELETE_LEASE")], label="delete later leases")


def error_after_ip(world):
    """The server gets the reserved IP and the node is set up; then it fails (ERROR) with the IP
    still attached. Notebook 2 again deletes it, leaving the IP alone, makes a new server on the
    same lease and attaches the same reserved IP to it."""
    student_lease(world, -0.2)
    with world.session("02_provision") as s:
        s.run(label="first")
    world.fake.break_server(my_server(world)["id"])
    with world.session("02_provision") as s:
        s.run(label="again")


def pool_ip_taken(world):
    """A lease without a reserved IP: notebook 2 takes a pool IP; the server fails with it
    attached; notebook 2 again deletes the server (the IP stays) and, while the new one boots, a
    classmate who took "the first free IP" attaches that IP to their server: the new server gets
    a fresh one. The clean-up cell gives the fresh one back and names the classmate's."""
    f = world.fake
    student_lease(world, -0.2, fip=False)
    with world.session("02_provision") as s:
        s.run(label="first")
    f.break_server(my_server(world)["id"])
    taken = next(x for x in f.fips.values() if "node-serve-system-student " in x["description"])
    careless = world.classmates["classmate01"]  # booting, no IP yet
    port = next(p["id"] for p in f.ports.values() if p["device_id"] == careless["server"])
    with world.session("02_provision") as s:
        s.run(s.upto("node.submit"), label="again: new server")
        with f.lock:
            f._bind(taken, port)
        s.run(range(s.index_of("node.submit") + 1, len(s.code)), label="again: the rest")
    with world.session("02_provision", DELETE_SERVER) as s:
        s.run(s.upto(SETUP) + [s.index_of("DELETE_SERVER")], label="delete server")


def lease_end(world):
    """Pool IPs whose lease is over. A Horizon lease A without a reserved IP, notebook 2 takes a
    pool IP, and the student deletes the lease (notebook 1) without deleting the server first.
    Lease B, the same, ends by itself (Blazar deletes its server; the pool IP stays, unattached):
    notebook 2, run again, gives it back and says there is no lease. Lease C, the same, ends too:
    the next day notebook 1 gives its IP back and makes a new lease. Classmates' pool IPs (one left
    by `stud`, whose user name is in the student's, after its lease ended) are left alone."""
    f = world.fake
    world.notes["A"] = student_lease(world, -0.2, fip=False)["id"]
    with world.session("02_provision") as s:
        s.run(label="on A")
    with world.session("01_reserve", DELETE_LEASE) as s:
        s.run(s.upto(LEASES) + [s.index_of("DELETE_LEASE")], label="delete lease A")
    for name in ("B", "C"):
        lease = student_lease(world, -0.1, fip=False, name_suffix=name)
        with world.session("02_provision") as s:
            s.run(label=f"on {name}")
        f.end_lease(lease["id"])
        world.notes[name] = lease["id"]
        pause(world, 5)  # the student comes back a few minutes later
        if name == "B":
            with world.session("02_provision") as s:
                s.run(label="after B ended")
    pause(world, 12 * 60)
    with world.session("01_reserve") as s:
        s.run(label="next day")


def repo_refs(world):
    """REPO_REF as a branch other than the repository's default; then the instructor pushes a
    fix to it and the clone cell runs again; then REPO_REF as a commit id."""
    student_lease(world, -0.2)
    world.settings(REPO_REF=BRANCH)
    with world.session("02_provision") as s:
        s.run(s.upto(CLONE), label="branch")
    world.note_clone("branch")
    world.push_to_branch()
    with world.session("02_provision") as s:
        s.run(s.upto(CLONE), label="branch moved on")
    world.note_clone("branch moved on")
    world.settings(REPO_REF=world.tags["main"])
    with world.session("02_provision") as s:
        s.run(s.upto(CLONE), label="commit")
    world.note_clone("commit")


def maintenance(world):
    """No gpu_p100 free now but two that Blazar will not book: one in maintenance (not
    reservable), one kept for another project (authorized_projects); the V100s in maintenance.
    Then every gpu_p100 in maintenance. Then a race: the one bookable free gpu_p100 is held by a
    classmate whose lease is deleted just after Blazar refused the student's; then again."""
    f = world.fake
    p100 = [h for h in f.hosts if h["node_type"] == "gpu_p100"]
    repair, kept = [h for h in p100 if not f.allocations[h["id"]]]
    repair["reservable"], kept["authorized_projects"] = False, "p-0001"
    world.notes.update(repair=repair["id"], kept=kept["id"])
    for host in f.hosts:
        if host["node_type"] == "gpu_v100":
            host["reservable"] = False
    with world.session("01_reserve") as s:
        s.run(label="maintenance")
    for host in p100:
        host["reservable"] = False
    with world.session("01_reserve") as s:
        s.run(label="every node in maintenance")
    for host in p100:
        host["reservable"] = host is not repair
    del kept["authorized_projects"]
    rival = f.add_lease("x", user_id_of("classmate40"), start_in_hours=-0.1)

    def rival_gives_up():
        f._end_lease(rival)
        del f.leases[rival["id"]]
        f.after_refusal = lambda: None

    f.after_refusal = rival_gives_up
    with world.session("01_reserve") as s:
        s.run(label="race")
    with world.session("01_reserve") as s:
        s.run(label="race, again")


def classmate_ip_unbound(world):
    """A Horizon lease without a reserved IP, while a classmate's reserved IP sits unbound in the
    project (their server is booting): notebook 2 takes a fresh IP from the pool, twice over
    finds it again, and its clean-up gives it back."""
    student_lease(world, -0.2, fip=False)
    with world.session("02_provision") as s:
        s.run(label="first")
    with world.session("02_provision") as s:
        s.run(s.upto("FLOATING_IP = node.get_floating_ip()"), label="again")
    with world.session("02_provision", DELETE_SERVER) as s:
        s.run(s.upto(SETUP) + [s.index_of("DELETE_SERVER")], label="delete server")


def reserved_ip_taken(world):
    """The IP reserved with the student's lease is attached to a classmate's server (one who
    took "the first free IP"): notebook 2 names that server and leaves the IP alone; once the
    classmate detaches it, the same cell attaches it."""
    f = world.fake
    lease = student_lease(world, -0.2)
    rid = next(r["id"] for r in lease["reservations"] if r["resource_type"] == "virtual:floatingip")
    mine = next(x for x in f.fips.values() if f"reservation:{rid}" in x["tags"])
    thief = world.classmates["classmate01"]
    port = next(p["id"] for p in f.ports.values() if p["device_id"] == thief["server"])
    with f.lock:
        f._bind(mine, port)
    with world.session("02_provision") as s:
        failed = stopped_at(s.run(label="taken"))
        with f.lock:
            f._bind(mine, None)  # the classmate detaches it
        s.run(range(failed, s.index_of(SSH) + 1), label="given back")


def refusals(world):
    """Blazar says no: the project's allocation is used up; then the site's reservable floating
    IPs are all booked (a node is free); then a lease without one, and notebook 2 first finds the
    project's floating-IP quota reached, then the site's pool empty, then an address given back."""
    f = world.fake
    f.su_left = 1.0
    with world.session("01_reserve") as s:
        s.run(label="quota")
    f.su_left = None
    for address in f.reservable_fips:  # booked by other projects for the next two days
        f.fip_bookings.append(
            {
                "address": address,
                "reservation_id": "other",
                "start": now(),
                "end": now() + dt.timedelta(hours=48),
            }
        )
    with world.session("01_reserve") as s:
        s.run(label="no floating IP")
    with world.session(
        "01_reserve", {"RESERVE_FLOATING_IP = True": "RESERVE_FLOATING_IP = False"}
    ) as s:
        s.run(label="without floating IP")
    f.fip_quota = len(f.fips)
    with world.session("02_provision") as s:
        failed = stopped_at(s.run(label="quota reached"))
        f.fip_quota = None
        f.pool.clear()
        s.run([failed], label="pool empty")
        f.pool.append("127.20.1.77")  # a classmate gave one back
        s.run(range(failed, len(s.code)), label="pool has one")


def bad_day(world):
    """No gpu_p100 free for 3 h now (the class holds 22, another project the last 2), V100s free
    for 1 h only, an AMD type free; then a node is free; then the server fails to boot once; then
    `make artifacts` fails."""
    f = world.fake
    free = [h["id"] for h in f.hosts if h["node_type"] == "gpu_p100" and not f.allocations[h["id"]]]
    for host in free:
        f.book(host, -1, 2)
        f.book(host, 6, 8)
    f.book_all("gpu_v100", 1, 10)
    with world.session("01_reserve") as s:
        s.run(label="no node free")
    f.allocations[free[0]].clear()
    with world.session("01_reserve") as s:
        s.run(label="a node is free")
    f.servers_fail = 1
    world.node.keep_in_state("make_rc", "2")
    with world.session("02_provision") as s:
        failed = stopped_at(s.run(label="server in ERROR"))
        failed = stopped_at(s.run(range(failed - 1, len(s.code)), label="cell above, then again"))
        world.node.keep_in_state("make_rc", "0")
        s.run(range(failed, len(s.code)), label="make fixed, cell again")


def bad_host(world):
    """The lease's one node fails every deploy: a retry, then the advice to make a new lease.
    Then the failed server's delete never finishes (the cell's 5 s waits shortened to 0)."""
    f = world.fake
    lease = student_lease(world, -0.2)
    f.bad_hosts.add(f.host_of(lease["reservations"][0]["id"])["id"])
    with world.session("02_provision") as s:
        failed = stopped_at(s.run(label="first failure"))
        s.run([failed - 1, failed], label="second failure")
    f.server_delete_s = 10**6
    with world.session("02_provision") as s:
        s.run(s.upto("old = server.get_server"), label="delete never ends")


def trovi_settings(world):
    """The artifact as committed (nothing filled in), then one wrong setting after another, then
    all right: each stops before any lease, naming what to set where."""
    with world.session("01_reserve") as s:
        s.run(label="as committed")
    with world.session("02_provision") as s:
        s.run(label="as committed")
    steps = [
        (
            "tag not pushed",
            {"REPO_URL": str(world.lab_repo), "REPO_REF": "v2", "PROJECT": "CHI-231138"},
        ),
        ("not my project", {"REPO_REF": "v1", "PROJECT": "CHI-999999"}),
        (
            "no such node type or image",
            {"PROJECT": "CHI-231138", "NODE_TYPE": "gpu_h100", "IMAGE": "CC-Ubuntu99"},
        ),
        (
            "no such site",
            {"NODE_TYPE": "gpu_p100", "IMAGE": "CC-Ubuntu24.04-CUDA", "SITE": "CHI@Mars"},
        ),
        ("all set", {"SITE": "CHI@TACC"}),
    ]
    for label, values in steps:
        world.settings(**values)
        with world.session("01_reserve") as s:
            s.run(label=label)


def oldest_python_chi(world):
    """python-chi 1.1.0, installed for real: both notebooks, a server in ERROR on the way (its
    recovery deletes with delete_ips=False, which 1.0.x lacks), and the clean-up cells."""
    world.fake.servers_fail = 1
    with world.session("01_reserve") as s:
        s.run(label="first")
    with world.session("02_provision") as s:
        failed = stopped_at(s.run(label="server in ERROR"))
        s.run(range(failed - 1, len(s.code)), label="cell above, then the rest")
    with world.session("02_provision", DELETE_SERVER) as s:
        s.run(s.upto(SETUP) + [s.index_of("DELETE_SERVER")], label="delete server")
    with world.session("01_reserve", DELETE_LEASE) as s:
        s.run(s.upto(LEASES) + [s.index_of("DELETE_LEASE")], label="delete lease")


def two_nodes(world):
    """Notebook 9 on two machines: NODE_COUNT = 2 in notebook 1 (a lease of the class's last two
    free gpu_p100 hosts and two reserved IPs), notebook 2 top to bottom with its optional section
    (the second server, its IP, both nodes set up, Ray's head and the join, notebook 3 as
    prepared here carried to the node); then the instructor fixes v1 and moves the tag (git tag
    -f v1, pushed), and notebook 2 runs again (nothing made twice; both clones at the new v1,
    the student's notebook kept with the fix merged in); notebook 1 asking for 3 nodes beside
    the lease of 2; then the clean-up cell of notebook 2 (both servers)."""
    world.prepare("03_fastapi_setup", "My prediction: the ONNX service answers first.")
    with world.session("01_reserve", nodes(2)) as s:
        s.run(label="two nodes")
    with world.session("02_provision") as s:
        s.run(label="two nodes")
    world.notes["v1 moved"] = world.retag()
    with world.session("02_provision") as s:
        s.run(label="again")
    on_node = (world.node.home / "serve-system-lab/notebooks/03_fastapi_setup.ipynb").read_text()
    world.notes["on the node"] = {
        "the fix": "FastAPI (fixed)" in on_node,
        "the student's lines": "My prediction: the ONNX service answers first." in on_node,
    }
    with world.session("01_reserve", nodes(3)) as s:
        s.run(s.upto(LEASES), label="three asked")
    with world.session("02_provision", DELETE_SERVER) as s:
        s.run(s.upto(SETUP) + [s.index_of("DELETE_SERVER")], label="delete servers")


def nodes(count: int) -> dict:
    """Notebook 1's NODE_COUNT set to count, as the student edits its values cell."""
    return {"lab.NODE_TYPE, 1": f"lab.NODE_TYPE, {count}"}


# ------------------------------------------------------------------ the site as unkind as it is


def pause(world, minutes: float) -> None:
    """The student steps away: the site's clock moves on (leases being deleted or ending go)."""
    advance(minutes * MINUTE)


def edited(session, edits: dict, cells, label: str) -> dict:
    """The student sets values in a cell (DELETE_LEASE = True ...), runs cells, and sets them
    back, in the same kernel."""
    record = session.edit(edits).run(cells, label=label)
    session.edit({new: old for old, new in edits.items()})
    return record


def holdings(world) -> dict:
    """What the student holds now: leases by status, servers by name, public IPs by server."""
    f = world.fake
    with f.lock:
        f._advance_leases()
        servers = {s["id"]: s for s in f.servers.values() if s["user_id"] == f.user_id}
        for s in servers.values():
            f._advance_server(s)
        ports = {p["id"]: p["device_id"] for p in f.ports.values()}
        return {
            "leases": sorted(x["status"] for x in f.leases.values() if x["user_id"] == f.user_id),
            "servers": sorted(
                (s["name"], s["status"] + (" deleting" if s["id"] in f.deleting else ""))
                for s in servers.values()
            ),
            "ips": sorted(
                (x["floating_ip_address"], servers[ports[x["port_id"]]]["name"])
                for x in f.fips.values()
                if x["port_id"] in ports and ports[x["port_id"]] in servers
            ),
            "pool_ips": sorted(
                x["floating_ip_address"]
                for x in f.fips.values()
                if "serve-system-student for lease" in x["description"]
            ),
        }


def slow_site(world):
    """A slow day: every long wait of notebook 2 runs out once, then is met when the cell runs
    again. Blazar keeps the new lease STARTING 25 minutes from the lease cell on (notebook 2
    waits 15); the server boots in 40 minutes (it waits 30); sshd answers 25 minutes after the
    SSH cell starts (it waits 15). What the student holds is noted at each stop."""
    f = world.fake
    f.boots = [40 * MINUTE]
    with world.session("01_reserve") as s:
        s.run(label="reserve")
    (lease,) = [x for x in f.leases.values() if x["user_id"] == f.user_id]
    with world.session("02_provision") as s:
        lease_cell, boot, ssh = s.index_of(LEASE_CELL), s.index_of(BOOT), s.index_of(SSH)
        record = s.run(range(lease_cell), label="lease starting")
        with f.lock:
            lease.update(status="STARTING", _until=sim_now() + 25 * MINUTE)
        s.extend(record, [lease_cell])
        world.notes["lease starting"] = holdings(world)
        s.run([lease_cell], label="lease started")
        s.run(range(lease_cell + 1, boot + 1), label="booting")
        world.notes["booting"] = holdings(world)
        s.run([boot], label="booted")
        record = s.run(range(boot + 1, ssh), label="no ssh")
        with f.lock:
            server = next(x for x in f.servers.values() if x["user_id"] == f.user_id)
            server["active_at"] = sim_now() + 25 * MINUTE - f.sshd_s
        s.extend(record, [ssh])
        world.notes["no ssh"] = holdings(world)
        s.run([ssh], label="ssh")
        s.run(range(ssh + 1, len(s.code)), label="the rest")


def lease_states(world):
    """Blazar's lease states beyond PENDING and ACTIVE, one after the other, in one notebook 1 and
    one notebook 2 (a student's two open notebooks): python-chi loses Blazar's answer after the
    lease was made (notebook 1 finds the lease and goes on; then it is deleted); Blazar stores a
    lease, leaves it in ERROR and answers 500 (notebook 1 finds it in ERROR and says to delete
    it; deleted, it stays DELETING, and notebook 2 says so); a lease that fails its start 5
    minutes into notebook 2's wait (it waits, then sees ERROR); a lease ending (TERMINATING)."""
    f = world.fake
    f.lost_answers = 1
    with world.session("01_reserve") as one, world.session("02_provision") as two:
        one.run(label="answer lost")
        edited(one, DELETE_LEASE, one.upto(LEASES) + [one.index_of("DELETE_LEASE")], "delete it")
        pause(world, 2)  # Blazar's delete takes a minute
        with f.lock:
            f.lease_delete_s, f.errors_after_create = 10**6, 1
        one.run(label="error after create")
        cells = one.upto(LEASES) + [one.index_of("DELETE_LEASE")]
        edited(one, DELETE_LEASE, cells, "delete the failed one")
        two.run(two.upto(LEASE_CELL), label="deleting")
        world.notes["deleting"] = holdings(world)
        f.fail_starts, f.lease_start_s = 1, 10**6
        one.run(label="start fails")
        (failing,) = [x for x in f.leases.values() if x["user_id"] == f.user_id and x.get("_fails")]
        record = two.run(range(two.index_of(LEASE_CELL)), label="failed start")
        with f.lock:
            failing["_until"] = sim_now() + 5 * MINUTE
        two.extend(record, [two.index_of(LEASE_CELL)])
        world.notes["failed start"] = holdings(world)
        edited(one, DELETE_LEASE, cells, "delete the failed start")
        ending = student_lease(world, -2.9)
        world.notes["ending"] = ending["id"]
        with f.lock:
            for x in f.leases.values():  # the deleted ones are gone now
                if x["status"] == "DELETING":
                    x["_until"] = sim_now()
            f.lease_end_s = 10**6
            f.end_lease(ending["id"])
        two.run(two.upto(LEASE_CELL), label="terminating")


def lease_error(world):
    """A lease without a reserved IP (Horizon): notebook 2 makes the server and takes a pool IP;
    the measure pass writes its bundle where LAB_BUNDLE points on the node. The lease is
    extended in Horizon (UPDATING for 4 minutes from the lease cell on): notebook 2 waits and
    goes on. Then the lease goes to ERROR (a failed update) with the server running and the IP
    attached: notebook 2 says what to do, notebook 1 keeps the IP; the clean-up of notebook 2
    brings the bundle back and gives the IP back, notebook 1's deletes the lease. One kernel for
    each notebook, as a student keeps them open."""
    f = world.fake
    lease = student_lease(world, -0.2, fip=False)
    world.node.extra_env["LAB_BUNDLE"] = "/home/cc/measured/bundles"
    with world.session("02_provision") as two, world.session("01_reserve") as one:
        two.run(two.upto(SSH), label="first")
        world.on_node("measured/bundles/04_fastapi_benchmarks/rows.csv", "rate,p50_ms\n50,12.0\n")
        record = two.run(range(two.index_of(LEASE_CELL)), label="updating")
        with f.lock:
            f.update_lease(lease["id"], 4 * MINUTE)
        two.extend(record, range(two.index_of(LEASE_CELL), two.index_of(SSH) + 1))
        with f.lock:
            f.error_lease(lease["id"])
        two.run(label="lease in ERROR")
        world.notes["lease in ERROR"] = holdings(world)
        one.run(one.upto(LEASES), label="notebook 1 beside it")
        world.notes["beside it"] = holdings(world)
        cells = two.upto(SETUP) + [two.index_of("DELETE_SERVER")]
        edited(two, DELETE_SERVER, cells, "delete server")
        edited(one, DELETE_LEASE, [one.index_of("DELETE_LEASE")], "delete lease")
    world.notes["after"] = holdings(world)


def two_nodes_without_ips(world):
    """NODE_COUNT = 2 with RESERVE_FLOATING_IP = False: two hosts and no reserved IP, beside a
    classmate (user `student-2`) whose pool IP sits unattached in the project, described for
    the server node-serve-system-student-2 (a name a second node called "<first>-2" would have
    had). The second server fails its first boot. Both nodes take pool IPs, and notebook 9's
    cluster starts. Then notebook 1's DELETE_LEASE (the bundle comes back first), and notebook 2
    the next day: both pool IPs back in the pool, the classmate's left alone."""
    f = world.fake
    with world.session("01_reserve", {**nodes(2), **NO_FIP}) as one:
        one.run(label="two nodes, no IPs")
        with world.session("02_provision") as two:
            second_boot = two.index_of("chi_servers.wait_for_boot(node2")
            record = two.run(range(second_boot), label="two nodes")
            f.servers_fail = 1
            failed = stopped_at(two.extend(record, range(second_boot, len(two.code))))
            two.run(range(failed - 1, len(two.code)), label="second node again")
            world.notes["running"] = holdings(world)
            world.on_node(f"serve-system-lab/{BUNDLE}", "rate,p95_ms\n100,41.5\n")
            edited(one, DELETE_LEASE, [one.index_of("DELETE_LEASE")], "delete lease")
            world.notes["deleted"] = holdings(world)
            with f.lock:
                f.finish_deletes()
            pause(world, 12 * 60)
            two.run(two.upto(LEASE_CELL), label="next day")
            world.notes["next day"] = holdings(world)


def two_live_pool_ips(world):
    """Two live leases of the student's without reserved IPs. Lease B (notebook 1 with
    RESERVE_FLOATING_IP = False, ends in 1.5 h): notebook 2 makes the server and takes a pool
    IP; the student deletes that server in Horizon (its IP stays, unattached, for B). Lease A,
    made in Horizon, ends in 4 h: notebook 2 makes the server there and takes back that same IP
    for A instead of a second one. Then notebook 1 deletes both leases: the IP goes back."""
    f = world.fake
    b = student_lease(world, -0.5, hours=2, fip=False, name_suffix="b")
    world.notes["B"] = b["id"]
    with world.session("02_provision") as two:
        two.run(two.upto(SSH), label="on B")
        with f.lock:
            mine = next(x["id"] for x in f.servers.values() if x["user_id"] == f.user_id)
            f._delete_server(mine)
            f.finish_deletes()
        world.notes["server deleted in Horizon"] = holdings(world)
        world.notes["A"] = student_lease(world, -0.1, hours=4.1, fip=False)["id"]
        two.run(two.upto(SSH), label="on A")
        world.notes["on A"] = holdings(world)
    with world.session("01_reserve", DELETE_LEASE) as s:
        s.run(s.upto(LEASES) + [s.index_of("DELETE_LEASE")], label="delete leases")
    world.notes["after"] = holdings(world)


def node_count_pending(world):
    """NODE_COUNT = 2 beside a PENDING lease of one node: the advice names both settings the
    delete needs (DELETE_LEASE alone keeps a PENDING lease); followed to the letter (both set in
    the last cell, which is run), the lease goes and the next run makes a lease of two."""
    world.notes["pending"] = student_lease(world, 4)
    with world.session("01_reserve", nodes(2)) as s:
        s.run(label="two asked")
        edited(s, DELETE_LATER, [s.index_of("DELETE_LEASE")], "as advised")
        s.run(label="again")


def refusal_words(world):
    """python-chi's parser of Blazar's refusals matching (as it would, fixed on either side):
    python-chi logs its own sentence ("there were not enough unreserved hosts ..."); the advice
    is the same: no gpu_p100 free for 3 h from now; again in words neither knows (another Blazar
    release's), read by the calendar; then no reservable IP left."""
    f = world.fake
    f.book_all("gpu_p100", -1, 2)
    with world.session("01_reserve") as s:
        s.run(label="no node free")
        f.no_hosts_words = "Reservation could not be satisfied: the hosts asked for are taken"
        s.run(label="words not known")  # another Blazar release's words: the calendar decides
        for booked in f.allocations.values():  # the other project's bookings end
            booked[:] = [a for a in booked if a["lease_id"] in f.leases]
        for address in f.reservable_fips:  # and other projects take every reservable IP
            f.fip_bookings.append(
                {"address": address, "reservation_id": "other", "start": now(),
                 "end": now() + dt.timedelta(hours=48)}
            )  # fmt: skip
        s.run(label="no floating IP")


# ------------------------------------------------------------------ the site's last unkindnesses

NOVA_ITEM = r"/tacc/nova/v2\.1/servers/(?!detail)[^/]+"  # one server, as a wait reads it
NOVA_LIST = r"/tacc/nova/v2\.1/servers/detail"


def flaky_site(world):
    """A day the site's APIs fail for moments: Blazar answers 503, resets a connection and
    answers 502 while notebook 2 waits for the lease to start; Nova answers 503, 500, a reset
    and 504 during the boot, and 503 and a reset when the SSH wait asks for the server's IP.
    Every wait is met. Then the server fails, and while the cell above waits for its delete Nova
    answers 503 for good: after 5 minutes the wait stops with one sentence; the site back, the
    cells run again find the server gone and make a new one. Before all that, the student's
    earlier tries left leases of the names notebook 1 gives this minute, being deleted (Blazar
    keeps a name until its lease is gone, and refuses it meanwhile)."""
    f = world.fake
    taken = [
        f"serve_system_student_{now() + dt.timedelta(minutes=m):%Y%m%d-%H%M}" for m in range(3)
    ]
    for name in taken:  # this minute's and the next two's: the test runs within them
        old = student_lease(world, -0.1, fip=False)
        with f.lock:
            f._end_lease(old)
            old.update(name=name, status="DELETING", _until=sim_now() + 10**6)
    world.notes["taken names"] = taken
    with world.session("01_reserve") as s:
        s.run(label="reserve")
    (made,) = [x for x in f.leases.values() if x["user_id"] == f.user_id and x["name"] not in taken]
    world.notes["lease"] = made["id"]
    with world.session("02_provision") as s:
        lease_cell, boot, ssh = s.index_of(LEASE_CELL), s.index_of(BOOT), s.index_of(SSH)
        record = s.run(range(lease_cell), label="lease starting")
        world.notes["lease faults"] = f.faults(
            "GET", rf"/tacc/blazar/v1/leases/{made['id']}", [503, "reset", 502], waiting=True
        )
        s.extend(record, [lease_cell])
        record = s.run(range(lease_cell + 1, boot), label="booting")
        world.notes["boot faults"] = f.faults(
            "GET", NOVA_ITEM, [503, 500, "reset", 504], waiting=True
        )
        s.extend(record, [boot])
        record = s.run(range(boot + 1, ssh), label="ssh")
        world.notes["ssh faults"] = f.faults("GET", NOVA_LIST, [503, "reset"])
        s.extend(record, [ssh])
        with f.lock:
            f.break_server(my_server(world)["id"])
        world.notes["delete faults"] = f.faults("GET", NOVA_LIST, [503] * 100, waiting=True)
        s.run([s.index_of(REPLACE)], label="delete, Nova down")
        world.notes["down"] = holdings(world)
        world.notes["delete faults"]["replies"].clear()  # the site is back: the delete is done
        s.run([s.index_of(REPLACE), boot], label="site back")


def second_node(world):
    """Notebook 9's second node on a slow day: NODE_COUNT = 2 with two reserved IPs, and a
    classmate who took "the first free IP" holds the lease's second one when section 5 attaches
    it; Nova first refuses the second server (the project's quota, then raised); it boots in 40
    minutes (the wait gives up at 30, then is met), its sshd
    answers 25 minutes after ACTIVE (the 15-minute wait gives up, then is met) once the
    classmate has let the IP go. Later the second server fails and its delete does not finish:
    the cell says so. The ssh command of section 4 is read for its key."""
    f = world.fake
    with world.session("01_reserve", nodes(2)) as s:
        s.run(label="two nodes")
    (lease,) = [x for x in f.leases.values() if x["user_id"] == f.user_id]
    with world.session("02_provision") as s:
        boot2 = s.index_of("chi_servers.wait_for_boot(node2")
        ip2 = s.index_of("SECOND_IP = node2.get_floating_ip()")
        s.run(range(boot2), label="first node")
        f.boots = [40 * MINUTE]
        with f.lock:  # the classmate takes the lease's other reserved IP meanwhile
            rid = next(
                r["id"] for r in lease["reservations"] if r["resource_type"] == "virtual:floatingip"
            )
            first = my_server(world)
            held = {p["id"] for p in f.ports.values() if p["device_id"] == first["id"]}
            other = next(
                x for x in f.fips.values()
                if f"reservation:{rid}" in x["tags"] and x["port_id"] not in held
            )  # fmt: skip
            careless = world.classmates["classmate01"]
            port = next(p["id"] for p in f.ports.values() if p["device_id"] == careless["server"])
            f._bind(other, port)
        world.notes.update(
            {"second IP": other["floating_ip_address"], "private key": str(world.private_key)}
        )
        f.server_quota = len(f.servers)  # the class's servers fill the project's quota
        s.run([boot2], label="second refused")
        f.server_quota = None  # the instructor raised it
        s.run([boot2], label="second boot")
        s.run([boot2], label="second boot again")
        f.sshd_s = 25 * MINUTE
        s.run([ip2], label="second IP taken")
        with f.lock:
            f._bind(other, None)  # the classmate lets it go
        s.run([ip2], label="second IP back")
        s.run([ip2], label="second ssh again")
        f.sshd_s = 4 * MINUTE
        s.run(range(ip2 + 1, len(s.code)), label="the rest")
        f.server_delete_s = 10**6
        with f.lock:
            second = [x for x in f.servers.values() if x["name"] == "node2-serve-system-student"]
            f.break_server(second[-1]["id"])
        s.run([s.index_of("old2 = server.get_server(SECOND_NAME)")], label="second delete stuck")


def lease_trouble(world):
    """The lease under the server goes from under it. Lease A ends (3 h are up) between the
    lease cell and the server cell: Nova takes the server and fails it ("No valid host"), and
    the cell says why (not the node). Lease B: the project holds as many servers as its quota
    allows: refused with a sentence; a classmate deletes one, still counted while Nova deletes
    it; the instructor raises the quota: made. Then B's node fails and Blazar puts another in
    its place (degraded): notebook 2 says so and makes a server on the new node. Then that one
    fails and Blazar finds no other: notebook 2 stops, saying so."""
    f = world.fake
    a = student_lease(world, -2.9)
    world.notes["A"] = a["id"]
    with world.session("02_provision") as s:
        s.run(s.upto(LEASE_CELL), label="on A")
        pause(world, 8)
        with f.lock:
            f.end_lease(a["id"])  # the student comes back after A ended
        s.run([s.index_of(REPLACE), s.index_of(BOOT)], label="A is over")
    b = student_lease(world, -0.1, name_suffix="b")
    world.notes["B"] = b["id"]
    with world.session("02_provision") as s:
        record = s.run(s.upto(REPLACE), label="quota")
        with f.lock:
            f.server_quota = len(f.servers)
        s.extend(record, [s.index_of(BOOT)])
        with f.lock:
            theirs = world.classmates["classmate05"]["server"]
            f._delete_server(theirs)
        s.run([s.index_of(BOOT)], label="one being deleted")
        with f.lock:
            f.server_quota += 1  # the instructor raised it
        s.run([s.index_of(BOOT)], label="quota raised")
    with f.lock:
        f.server_quota = None
        failed, spare = f.degrade(b["id"], replaced=True)
    world.notes["replaced"] = {"failed": failed["id"], "spare": spare["id"]}
    with world.session("02_provision") as s:
        s.run(s.upto(BOOT), label="degraded, replaced")
    with f.lock:
        f.degrade(b["id"], replaced=False)
    with world.session("02_provision") as s:
        s.run(s.upto(LEASE_CELL), label="degraded, missing")


def two_nodes_pool_ips(world):
    """NODE_COUNT = 2 without reserved IPs, three times: both nodes take pool IPs of their own,
    then (1) notebook 2's clean-up cell deletes the servers and gives both IPs back; (2) the
    lease ends by itself (Blazar deletes the servers, the pool IPs stay) and notebook 2, run
    again, gives both back; (3) a new lease ends the same way and notebook 1, the next day,
    gives both back before it makes a lease."""
    f = world.fake

    def both_nodes(s, label):  # the servers and their IPs, not the nodes' set-up
        second = range(s.index_of("TWO_NODES ="), s.index_of("node2.execute(clone)"))
        return s.run(s.upto(SSH) + list(second), label=label)

    with world.session("01_reserve", {**nodes(2), **NO_FIP}) as s:
        s.run(label="lease 1")
    with world.session("02_provision", {**DELETE_SERVER, **KEEP_BUNDLES}) as s:
        both_nodes(s, "nodes on lease 1")
        world.notes["on lease 1"] = holdings(world)
        s.run([s.index_of("DELETE_SERVER = True")], label="clean-up")
        world.notes["cleaned up"] = holdings(world)
        with f.lock:
            f.finish_deletes()
        both_nodes(s, "nodes again")
    (one,) = [x for x in f.leases.values() if x["user_id"] == f.user_id]
    with f.lock:
        f.end_lease(one["id"])
    world.notes["lease 1 over"] = holdings(world)
    pause(world, 5)
    with world.session("02_provision") as s:
        s.run(s.upto(LEASE_CELL), label="after lease 1")
    with world.session("01_reserve", {**nodes(2), **NO_FIP}) as s:
        s.run(label="lease 2")
    (two,) = [x for x in f.leases.values() if x["user_id"] == f.user_id and x["id"] != one["id"]]
    with world.session("02_provision") as s:
        both_nodes(s, "nodes on lease 2")
    with f.lock:
        f.end_lease(two["id"])
    world.notes["lease 2 over"] = holdings(world)
    pause(world, 12 * 60)
    with world.session("01_reserve", {**nodes(2), **NO_FIP}) as s:
        s.run(s.upto(LEASES), label="next day")
    world.notes["next day"] = holdings(world)


def second_site(world):
    """The class at CHI@UC (the instructor set SITE = "CHI@UC"), where the node types, network
    ids, image ids and addresses are not CHI@TACC's; the student made a lease at CHI@TACC in
    Horizon earlier, which the notebooks at CHI@UC neither see nor touch. First NODE_TYPE is
    still gpu_p100, a type CHI@UC has not: notebook 1 stops before any lease, naming the GPU
    types CHI@UC has. Then NODE_TYPE = gpu_rtx_6000: notebook 2 says there is no lease at CHI@UC
    (the one at CHI@TACC does not count), and both notebooks run top to bottom there."""
    tacc = world.cloud.at("CHI@TACC")
    earlier = tacc.add_lease("x", tacc.user_id, -1, fip=True)
    earlier["name"] = "serve_system_student_horizon"
    world.notes["TACC lease"] = earlier["id"]
    with world.session("01_reserve") as s:
        s.run(label="gpu_p100 at UC")
    world.settings(NODE_TYPE="gpu_rtx_6000")
    with world.session("02_provision") as s:
        s.run(label="no lease at UC")
    with world.session("01_reserve") as s:
        s.run(label="reserve")
    with world.session("02_provision") as s:
        s.run(label="provision")
    world.notes["held"] = holdings(world)


def old_python_chi(world):
    for name in ("01_reserve", "02_provision"):
        with world.session(name) as s:
            s.run(label="python-chi 1.0.9")


def journey(world):
    """Issue 50's journey, the part that crosses Chameleon (tests/test_journey_across_the_passes.py
    sets it up and reads it): Chameleon's Jupyter holds the class edition with notebook 6 prepared
    in it (JOURNEY_PREPARED: the folder, its results/bundles/ with prepared.json); notebooks 1 and 2
    run, and notebook 2 carries the prepared notebooks and prepared.json to the node's clone; the
    measure pass runs there (JOURNEY_MEASURE: a command, given the clone and where to write the
    executed notebook) until the lease ends in the middle of notebook 6; notebook 2's clean-up
    brings the bundles back; the review pass runs in Chameleon's Jupyter from where they landed,
    with no setting (JOURNEY_PYTHON: the review environment's python). JOURNEY_OUT gets the
    executed notebooks, the logs and the Jupyter side's results/."""
    import json
    import shutil
    import subprocess
    from pathlib import Path

    import review_venv as venvs

    out = Path(os.environ["JOURNEY_OUT"])
    kept_settings = (world.notebooks / "lab_settings.py").read_text()  # the instructor's
    shutil.copytree(
        os.environ["JOURNEY_PREPARED"], world.work, dirs_exist_ok=True, ignore=lambda d, n: [".git"]
    )
    (world.notebooks / "lab_settings.py").write_text(kept_settings)
    with world.session("01_reserve") as s:
        s.run(label="reserve")
    with world.session("02_provision") as s:
        s.run(label="provision")
    clone = world.node.home / "serve-system-lab"
    measure = [*json.loads(os.environ["JOURNEY_MEASURE"]), str(clone), str(out / "measured.ipynb")]
    done = subprocess.run(measure, capture_output=True, text=True, timeout=1500)
    (out / "measure.log").write_text(done.stdout + done.stderr)
    world.notes["measure exit"] = done.returncode
    with world.session("02_provision", DELETE_SERVER) as s:
        s.run(s.upto(SETUP) + [s.index_of("DELETE_SERVER")], label="delete server")
    env = {"LAB_PASS": "review", "LAB_STRICT_CLAIMS": ""}  # the stand-in node's facts: as measured
    code, _, log = venvs.run(
        Path(os.environ["JOURNEY_PYTHON"]),
        "06_triton_benchmarks",
        out,
        env,
        notebook=world.notebooks / "06_triton_benchmarks.ipynb",
        root=world.work,
    )
    (out / "review.log").write_text(log)
    world.notes["review exit"] = code
    shutil.copytree(world.work / "results", out / "jupyter_results", dirs_exist_ok=True)


SCENARIOS = {
    "class_day": (dict, class_day),
    "pending_lease": (dict, pending_lease),
    "two_active": (dict, two_active),
    "server_on_earlier_lease": (dict, server_on_earlier_lease),
    "starting_lease": (dict, starting_lease),
    "several_pending": (dict, several_pending),
    "error_after_ip": (dict, error_after_ip),
    "pool_ip_taken": (dict, pool_ip_taken),
    "lease_end": (dict, lease_end),
    "repo_refs": (dict, repo_refs),
    "maintenance": (dict, maintenance),
    "classmate_ip_unbound": (dict, classmate_ip_unbound),
    "reserved_ip_taken": (dict, reserved_ip_taken),
    "refusals": (dict, refusals),
    "bad_day": (dict, bad_day),
    "bad_host": (dict, bad_host),
    "two_nodes": (dict, two_nodes),
    "slow_site": (dict, slow_site),
    "lease_states": (dict, lease_states),
    "lease_error": (dict, lease_error),
    "two_nodes_without_ips": (dict, two_nodes_without_ips),
    "two_live_pool_ips": (dict, two_live_pool_ips),
    "node_count_pending": (dict, node_count_pending),
    "refusal_words": (lambda: {"parser_matches": True}, refusal_words),
    "trovi_settings": (lambda: {"settings": {}}, trovi_settings),
    # FAKE_CHAMELEON_PYTHON_CHI: a folder with python-chi 1.1.0 installed (pip --target)
    "oldest_python_chi": (
        lambda: {
            "python_chi_dir": os.environ["FAKE_CHAMELEON_PYTHON_CHI"],
            "old_context_version": False,
        },
        oldest_python_chi,
    ),
    "old_python_chi": (lambda: {"python_chi_dist": "1.0.9"}, old_python_chi),
    "flaky_site": (dict, flaky_site),
    "second_node": (dict, second_node),
    "lease_trouble": (dict, lease_trouble),
    "two_nodes_pool_ips": (dict, two_nodes_pool_ips),
    "second_site": (
        lambda: {"class_site": "CHI@UC", "settings": {**AT_TACC, "SITE": "CHI@UC"}},
        second_site,
    ),
    # JOURNEY_*: what tests/test_journey_across_the_passes.py prepared (see journey)
    "journey": (lambda: {"classmates": False}, journey),
}
