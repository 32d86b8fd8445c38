"""The class's real situations, each a few steps of a student running notebooks 1 and 2.

Every scenario runs in a project where 39 classmates already have leases, servers and floating
IPs (classroom.py); `student` is the user under test. SCENARIOS maps a name to (the World's
keyword arguments, the steps).
"""

from __future__ import annotations

import datetime as dt
import os

from fake_chameleon.common import BRANCH, now, user_id_of

DELETE_SERVER = {"DELETE_SERVER = False": "DELETE_SERVER = True"}
DELETE_LEASE = {"DELETE_LEASE = False": "DELETE_LEASE = True"}
DELETE_LATER = {**DELETE_LEASE, "DELETE_LATER_LEASES = False": "DELETE_LATER_LEASES = True"}
SETUP = "check_node_type_and_image"  # the cell that ends the set-up cells of both notebooks
LEASES = "def my_lab_leases"  # notebook 1: the cell after which its clean-up cell can run
CLONE = "lab version: %h"  # notebook 2: the cell that clones the lab on the node


class NoStop(Exception):
    """A step expected a notebook to stop with an error and it did not: the scenario ends there
    (its record says what happened; the tests then fail on it)."""


def stopped_at(record) -> int:
    if record["error"] is None:
        raise NoStop(record["label"])
    return record["error"]["n"]


def student_lease(world, start_in_hours, hours=3, fip=True, name_suffix="", starting=0):
    """A lease the student made earlier (notebook 1, or Horizon when fip=False)."""
    f = world.fake
    lease = f.add_lease(
        "x", f.user_id, start_in_hours=start_in_hours, hours=hours, fip=fip, starting=starting
    )
    start = now() + dt.timedelta(hours=start_in_hours)
    lease["name"] = f"serve_system_student_{start:%Y%m%d-%H%M}{name_suffix}"
    return lease


def class_day(world):
    """A student's lab from start to end, every notebook run twice, then the clean-up cells.
    Before it: the student's ended leases from earlier tries (one named without a date, as this
    lab once did), and 39 classmates' leases, servers and IPs in the project."""
    f = world.fake
    f.add_lease("serve_system_student", f.user_id, -50, status="TERMINATED")
    f.add_lease("serve_system_student_20250101-1200", f.user_id, -40, status="TERMINATED")
    for round_ in ("first", "again"):
        with world.session("01_reserve") as s:
            s.run(label=round_)
        with world.session("02_provision") as s:
            s.run(label=round_)
    with world.session("02_provision", DELETE_SERVER) as s:
        s.run(s.upto(SETUP) + [s.index_of("DELETE_SERVER")], label="delete server")
        s.run([s.index_of("DELETE_SERVER")], label="delete server again")  # still being deleted
        s.run([s.index_of("DELETE_SERVER")], label="delete server, none left")
    with world.session("01_reserve", DELETE_LEASE) as s:
        s.run(s.upto(LEASES) + [s.index_of("DELETE_LEASE")], label="delete lease")


def pending_lease(world):
    """A lease for tomorrow (START_IN_HOURS = 20): made once, then found again; notebook 2 says
    when it starts instead of making a server."""
    with world.session("01_reserve", {"START_IN_HOURS = 0": "START_IN_HOURS = 20"}) as s:
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
    world.fake.delete_polls = 4  # the server is still listed when notebook 2 runs again
    with world.session("02_provision", DELETE_SERVER) as s:
        s.run(s.upto(SETUP) + [s.index_of("DELETE_SERVER")], label="move: delete server")
    with world.session("02_provision") as s:
        s.run(label="move: on B")
    f, left = world.fake, my_server(world)["id"]
    f.end_lease(b["id"])
    f.deleting.pop(left, None)  # Blazar's delete of the server failed: it stays, without its port
    del f.leases[b["id"]]
    with world.session("02_provision") as s:
        s.run(label="B gone, its server left")


def starting_lease(world):
    """The student's lease was made a moment ago and Blazar is still starting it (a classmate's
    lease stays STARTING all along): notebook 1 uses it, notebook 2 says to come back in a few
    minutes; once ACTIVE, notebook 2 makes the server on it."""
    lease = student_lease(world, 0, starting=10**6)
    with world.session("01_reserve") as s:
        s.run(label="starting")
    with world.session("02_provision") as s:
        s.run(label="starting")
    lease["_starting"] = 0
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
        if name == "B":
            with world.session("02_provision") as s:
                s.run(label="after B ended")
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
        s.run(range(failed, s.index_of("check_connectivity") + 1), label="given back")


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
    (world.node.state / "make_rc").write_text("2")
    with world.session("02_provision") as s:
        failed = stopped_at(s.run(label="server in ERROR"))
        failed = stopped_at(s.run(range(failed - 1, len(s.code)), label="cell above, then again"))
        (world.node.state / "make_rc").write_text("0")
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
    f.delete_polls = 10**6
    with world.session("02_provision", {"time.sleep(5)": "time.sleep(0)"}) as s:
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
    (the second server, its IP, both nodes set up, Ray's head and the join), then notebook 2
    again (nothing made twice); notebook 1 asking for 3 nodes beside the lease of 2; then the
    clean-up cell of notebook 2 (both servers)."""
    with world.session("01_reserve", nodes(2)) as s:
        s.run(label="two nodes")
    for label in ("two nodes", "again"):
        with world.session("02_provision") as s:
            s.run(label=label)
    with world.session("01_reserve", nodes(3)) as s:
        s.run(s.upto(LEASES), label="three asked")
    with world.session("02_provision", DELETE_SERVER) as s:
        s.run(s.upto(SETUP) + [s.index_of("DELETE_SERVER")], label="delete servers")


def nodes(count: int) -> dict:
    """Notebook 1's NODE_COUNT set to count, as the student edits its values cell."""
    return {"lab.NODE_TYPE, 1": f"lab.NODE_TYPE, {count}"}


def old_python_chi(world):
    for name in ("01_reserve", "02_provision"):
        with world.session(name) as s:
            s.run(label="python-chi 1.0.9")


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
}
