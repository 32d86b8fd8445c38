"""Helpers for notebooks 1 and 2 around python-chi (`chi`), for a class sharing one project:
the class settings checked against the site, the choice among a student's leases (a server stays
with the lease it was made on) and the wait while Blazar starts one, and Blazar's refusals
explained with the one change that helps. Servers are in chi_servers.py, floating IPs in
chi_ips.py, files to and from the node in chi_files.py. Every message names what to set and where.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import math
import re

import chi
import chi_waits
from chi import context, hardware, image, lease
from chi.exception import CHIValueError
from chi_servers import LEASE_KEY

# Blazar's lease states: those that hold (or will hold) hosts; those that pass by themselves
# (Blazar starting the lease, or changing it, e.g. extending it); a failed start or update,
# whose hosts, server and IPs may stay until the lease is deleted; and the way out.
LIVE = ("PENDING", "STARTING", "ACTIVE", "UPDATING")
WAITING = ("STARTING", "UPDATING")
FAILED = "ERROR"
GOING = ("DELETING", "TERMINATING")
HOLDS_IPS = (*LIVE, FAILED)  # a pool IP taken for such a lease is not given back by itself
SETTINGS = "notebooks/lab_settings.py"
VALUES_CELL = "the second cell of notebook 1"


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


# ---------------------------------------------------------------------- settings against the site
def check_site(site: str) -> None:
    sites = list(context.list_sites())
    if site not in sites:
        raise RuntimeError(
            f"SITE {site} is not a Chameleon site: set SITE in {SETTINGS} to one of "
            f"{', '.join(sites)}."
        )


def check_project(project: str) -> None:
    """Before context.use_project: a project the student is not in cannot even be logged into."""
    projects = context.list_projects()
    if project not in projects:
        raise RuntimeError(
            f"PROJECT {project} is not one of your Chameleon projects ({', '.join(projects)}): "
            f"set PROJECT in {SETTINGS} to the course's project, or ask your instructor to "
            "add you to it."
        )


def check_node_type_and_image(site: str, node_type: str, image_name: str) -> None:
    """NODE_TYPE and IMAGE exist at the site (before any lease)."""
    found = []
    try:
        nodes = hardware.get_nodes(node_type=node_type)
    except CHIValueError:  # python-chi 1.2 refuses an unknown type; 1.1 returns no nodes
        nodes = []
    if not nodes:
        gpus = sorted({n.type for n in hardware.get_nodes() if "nvidia" in _gpu_vendor(n)})
        found.append(
            f"NODE_TYPE {node_type} has no node at {site}: set NODE_TYPE in {SETTINGS} to a "
            f"type of that site (with NVIDIA GPUs there: {', '.join(gpus) or 'none'}; Chameleon's "
            "Hardware Catalog lists them all)."
        )
    try:
        image.get_image(image_name)
    except CHIValueError:
        found.append(
            f"IMAGE {image_name} does not exist at {site}: set IMAGE in {SETTINGS} to an image "
            "listed in that site's Compute > Images."
        )
    if found:
        raise RuntimeError("The class settings need fixing first:\n- " + "\n- ".join(found))


def _gpu_vendor(node) -> str:
    """The GPU vendor of a hardware catalog node, lowercased ("" without a GPU)."""
    gpu = node.gpu[0] if isinstance(node.gpu, list) else (node.gpu or {})
    return str(gpu.get("gpu_vendor", "")).lower()


# ---------------------------------------------------------------------- which lease
def pick_lease(live: list):
    """The lease notebooks 1 and 2 use: a running one (ACTIVE, or UPDATING: being changed), the
    one that ends last; else the PENDING or STARTING one that starts first; None without one."""
    status = {x.id: x.status for x in live}  # each read asks Blazar: read once
    running = [x for x in live if status[x.id] in ("ACTIVE", "UPDATING")]
    if running:
        return max(running, key=lambda x: x.end_date)
    waiting = [x for x in live if status[x.id] in ("PENDING", "STARTING")]
    return min(waiting, key=lambda x: x.start_date) if waiting else None


def describe(leases: list) -> str:
    return (
        ", ".join(
            f"{x.name} {x.status} ({x.start_date:%Y-%m-%d %H:%M} to {x.end_date:%H:%M} UTC)"
            for x in leases
        )
        or "none"
    )


def host_count(lease) -> int:
    """How many nodes a lease holds (its host reservations' max, as python-chi asks min = max)."""
    return sum(int(r.get("max") or 0) for r in lease.node_reservations)


def check_node_count(lease, wanted: int) -> None:
    """Notebook 1 with NODE_COUNT = 2 (notebook 9 on two nodes) and a lease of fewer nodes: a
    lease cannot grow, so say what to do instead of going on with one node. A PENDING lease is
    kept by DELETE_LEASE alone (it is for a later session): the advice names both settings."""
    if lease is not None and host_count(lease) < wanted:
        delete = "DELETE_LEASE = True"
        if lease.status == "PENDING":
            delete += " and DELETE_LATER_LEASES = True, as it is PENDING"
        raise RuntimeError(
            f"Your lease {lease.name} holds {host_count(lease)} node(s) and NODE_COUNT is "
            f"{wanted}; a lease cannot grow. Set NODE_COUNT = {host_count(lease)} in "
            f"{VALUES_CELL} to go on with it, or delete it ({delete}, last cell) and run "
            "this notebook again for a new lease."
        )


def lease_for(found, live: list, mine: list):
    """The lease notebook 2 goes on with: the one the student's server runs on, as recorded on
    the server when it was made (a server cannot move to another lease), while that lease is
    running; else pick_lease's choice. A server in ERROR is replaced, so it does not count; a
    server still running on a lease in ERROR stops the notebook with what to do."""
    if found is None or found.status == "ERROR":
        return pick_lease(live)
    recorded = (found.metadata or {}).get(LEASE_KEY)
    failed = [x for x in mine if x.id == recorded and x.status == FAILED]
    if failed:
        raise RuntimeError(server_on_failed_lease(found, failed[0]))
    active = [x for x in live if x.status in ("ACTIVE", "UPDATING")]
    if recorded is None and len(active) > 1:
        raise RuntimeError(
            f"Your server {found.name} carries no record of the lease it runs on (it was made "
            f"in Horizon or by an older version of this notebook), and you have {len(active)} "
            f"active leases ({describe(active)}): this notebook cannot tell which one holds it. "
            "Copy results/ off the node, delete the server (DELETE_SERVER, last cell of this "
            "notebook), then run this notebook again: it makes a new server on the lease that "
            "ends last."
        )
    on = [x for x in active if recorded in (None, x.id)]
    return on[0] if on else pick_lease(live)


def server_on_failed_lease(found, failed) -> str:
    ips = [
        a["addr"]
        for net in (found.addresses or {}).values()
        for a in net
        if a.get("OS-EXT-IPS:type") == "floating"
    ]
    holding = f" with the public IP {ips[0]}" if ips else ""
    return (
        f"Your lease {failed.name} is in ERROR (Blazar failed to start or change it), yet your "
        f"server {found.name} still runs on it{holding}: bring your work back first (last cell "
        "of this notebook, DELETE_SERVER = True: it brings your result bundles back, then deletes "
        "the server and gives back an IP it took from the pool), then delete the lease (notebook "
        "1, last cell: DELETE_LEASE = True) and make a new one in notebook 1."
    )


def wait_for_start(picked, mine: list):
    """Notebook 2: a lease Blazar is starting (STARTING) or changing (UPDATING) is waited for,
    up to chi_waits.LEASE_START_MINUTES (Blazar's passing faults asked again: chi_waits); any
    other lease that is not ACTIVE stops the notebook with one sentence. Returns the ACTIVE
    lease."""
    now = picked.status if picked is not None else None  # each read asks Blazar
    if now in WAITING:
        print(
            f"your lease {picked.name} is {now}: waiting for Blazar to make it ACTIVE "
            f"(up to {chi_waits.LEASE_START_MINUTES} minutes) ..."
        )
        held = (
            "your server and its IP, if you made them, still on it"
            if now == "UPDATING"
            else "its node(s) booked for you and no server of yours on it yet"
        )
        wait = chi_waits.Wait("Blazar", f"your lease {picked.name}", "your lease stays yours")

        def moved_on():
            status = picked.status
            return None if status in WAITING else status

        now = wait.until(moved_on, chi_waits.LEASE_START_MINUTES, every_s=30)
        if now is None:
            now = wait.ask(lambda: picked.status)
            raise RuntimeError(
                f"Your lease {picked.name} is still {now} after {chi_waits.LEASE_START_MINUTES} "
                f"minutes, with {held}: run this cell again in 5 minutes, and if it is still not "
                "ACTIVE half an hour later, or it turns ERROR, delete it (notebook 1, last cell: "
                "DELETE_LEASE = True) and make a new lease in notebook 1."
            )
    if now != "ACTIVE":
        raise RuntimeError(no_active_lease(picked, mine))
    print(f"your lease {picked.name} is ACTIVE")
    check_hosts(picked)
    return picked


def check_hosts(active) -> None:
    """A lease Blazar marks degraded: a node it reserved failed (Blazar's health checks put it
    in maintenance). Blazar heals it with another free node of the type when it can
    (`resources_changed`: said, and the server on the failed node, in ERROR, is replaced); else
    the node is missing (`missing_resources`) and no server can start there: stop, saying so."""
    missing = [r for r in active.node_reservations if r.get("missing_resources")]
    if missing:
        raise RuntimeError(
            f"Your lease {active.name} is degraded: a node it reserved failed (Blazar took it out "
            "of service) and Blazar found no free node of its type to put in its place, so no "
            "server can start there: bring back what you need from a server of yours still "
            "running on it (last cell, DELETE_SERVER = True), delete the lease (notebook 1, last "
            "cell: DELETE_LEASE = True) and make a new one in notebook 1."
        )
    if any(r.get("resources_changed") for r in active.node_reservations):
        print(
            f"Your lease {active.name} is degraded: a node it reserved failed and Blazar put "
            "another node in its place; a server of yours on the failed node is in ERROR, and "
            "the next cells make a new one on the new node."
        )


def no_active_lease(picked, mine: list) -> str:
    if picked is not None and picked.status == FAILED:
        return failed_lease(picked)
    if picked is not None:
        return (
            f"Your lease {picked.name} is {picked.status} and starts at "
            f"{picked.start_date:%Y-%m-%d %H:%M} UTC: run this notebook again after that."
        )
    status = {x.id: x.status for x in mine}
    failed = [x for x in mine if status[x.id] == FAILED]
    if failed:
        return failed_lease(failed[0])
    going = [x for x in mine if status[x.id] in GOING]
    if going:
        return (
            f"Your lease {going[0].name} is {status[going[0].id]} (Blazar is ending it, and its "
            "servers and reserved IPs go with it): make a new lease in notebook 1."
        )
    return (
        f"You have no pending or active lease for this lab at {context.get('region_name')} "
        f"(yours there: {describe(mine)}): make one in notebook 1 (a lease is made at one site, "
        "SITE in lab_settings.py, and used there only)."
    )


def failed_lease(failed) -> str:
    return (
        f"Your lease {failed.name} is in ERROR (Blazar accepted it but could not start or change "
        "it, and it may still hold its hosts and IPs): delete it (notebook 1, last cell: "
        "DELETE_LEASE = True), then run notebook 1 again for a new lease, most likely on other "
        "nodes."
    )


def note_failed(mine: list) -> None:
    """Notebook 1: a lease of the student's in ERROR is named with what to do (it may hold hosts
    and IPs), though the notebook goes on (a new lease can be made beside it)."""
    for x in mine:
        if x.status == FAILED:
            print(failed_lease(x))


def stop_if_failed(lease) -> None:
    """Notebook 1's last check: a lease in ERROR is of no use; say what to do."""
    if lease.status == FAILED:
        raise RuntimeError(failed_lease(lease))


def lease_note(picked, live: list, server_name: str) -> str:
    """What notebook 2 says about the student's other ACTIVE leases: one that ends after the
    lease the server runs on is where the server could move; the others hold a node no server of
    this lab runs on (a PENDING one may be for a later session: not mentioned)."""
    others = [x for x in live if x.id != picked.id and x.status == "ACTIVE"]
    later = [x for x in others if x.end_date > picked.end_date]
    idle = [x for x in others if x not in later]
    lines = [f"your lease: {picked.name}, ends {picked.end_date:%Y-%m-%d %H:%M} UTC"]
    if later:
        lines.append(
            f"{server_name} runs on {picked.name} and stays on it (a server cannot move to "
            f"another lease): it goes when that lease ends. Your lease {describe(later)} ends "
            "later. To move to it: copy results/ off the node, delete the server (DELETE_SERVER, "
            "last cell), then run this notebook again, which makes a new server there."
        )
    if idle:
        lines.append(
            f"Your other lease(s) {describe(idle)} hold a node no server of this lab runs on: "
            "delete them in Horizon (Reservations > Leases) if you do not need them."
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------- when Blazar says no
@contextlib.contextmanager
def blazar_refusal():
    """Collect Blazar's reason for refusing a lease: python-chi only logs it (logger chi.lease)
    and raises ResourceError("Unable to make lease")."""
    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            said.append(record.getMessage())

    log, keep = logging.getLogger("chi.lease"), Keep(logging.ERROR)
    log.addHandler(keep)
    try:
        yield said
    finally:
        log.removeHandler(keep)


# Blazar's words as python-chi 1.2.10 logs them: lowercased, behind blazarclient's "error: ",
# which keeps python-chi's own parser (re.match on "not enough ... available") from matching;
# were either fixed, python-chi would log "there were not enough unreserved hosts to satisfy
# your request." instead. Both wordings are read here.
NO_HOSTS = re.compile(r"not enough (unreserved )?(hosts|resources)|no valid host")


def refusal_kind(message: str) -> str:
    """hosts, floating_ips, quota, duration, name or other, from Blazar's words."""
    text = message.lower()
    if "lease with name" in text and "already exists" in text:
        return "name"
    if "floating ip" in text:
        return "floating_ips"
    if NO_HOSTS.search(text):
        return "hosts"
    if any(w in text for w in ("would spend", "allocation", "quota", "balance")):
        return "quota"
    if "lease duration" in text or "maximum lease" in text:
        return "duration"
    return "other"


def accepted_anyway(name: str, failure: Exception, said: list[str], known: list):
    """After python-chi raised while making the lease: Blazar may have made it all the same (its
    answer lost on the way, or an error after it stored the lease). The student's new lease of
    that name (one not among `known`, the leases listed before), or None when Blazar has none
    (a refusal: explain_refusal says why)."""
    me, before = chi.session().get_user_id(), {x.id for x in known}
    made = [
        x for x in lease.list_leases() if x.name == name and x.user_id == me and x.id not in before
    ]
    if not made:
        return None
    cause = " ".join(said) or str(failure).strip().splitlines()[0]
    print(
        f"python-chi reported a failure ({cause}), yet Blazar made your lease {name} "
        f"({made[0].status}): this notebook goes on with it."
    )
    return made[0]


def unused_name(name: str, mine: list) -> str:
    """A lease name Blazar takes: it refuses a name a lease of the project has already (an
    ended one, one being deleted or in ERROR included), as its database keeps names unique. The
    name holds the start minute; a second try in the same minute gets "-2", "-3" ..."""
    taken, n, free = {x.name for x in mine}, 1, name
    while free in taken:
        n += 1
        free = f"{name}-{n}"
    return free


def explain_refusal(
    said: list[str], project: str, site: str, node_type: str, hours: float, asked: float
) -> str:
    """The one change that helps, as one sentence (the hosts case prints the free slots first);
    asked: START_IN_HOURS, the start Blazar refused, never given back as the advice. Words this
    does not know, while the calendar shows no node free at that start, are read as no node."""
    message = " ".join(said) or "no reason given"
    kind = refusal_kind(message)
    print(f"Blazar refused the lease: {message}")
    if kind == "floating_ips":
        return (
            f"{site} has no reservable public IP left for your hours: set "
            f"RESERVE_FLOATING_IP = False in {VALUES_CELL} and run it again (notebook 2 then "
            "takes an IP from the site's pool)."
        )
    if kind == "quota":
        return (
            f"Project {project} has not enough allocation left for a {hours} h lease: ask your "
            "instructor to extend the project's allocation, then run this notebook again."
        )
    if kind == "duration":
        return f"{hours} h is longer than {site} allows: set LEASE_HOURS in {SETTINGS} lower."
    if kind == "name":  # a lease of that name appeared after the leases were listed
        return "Blazar has a lease of that name already: run the cells above again."
    calendar = Calendar()
    if kind == "other" and calendar.next_start_in_hours(node_type, hours, asked) == asked:
        return f"Chameleon refused the lease ({message}): show this message to your instructor."
    return _no_host_advice(calendar, site, node_type, hours, asked)


def _no_host_advice(calendar, site: str, node_type: str, hours: float, asked: float) -> str:
    alternatives = calendar.nvidia_types_free(hours, exclude=node_type, asked=asked)
    when = "now" if asked == 0 else f"{asked} h from now"
    print(
        f"NVIDIA GPU node types free {when} at {site} for {hours} h:",
        ", ".join(alternatives) or "none",
    )
    other_type = f" (or NODE_TYPE in {SETTINGS} to a type above)" if alternatives else ""
    start_in = calendar.next_start_in_hours(node_type, hours, asked, show=True)
    if start_in is None:
        total = len([n for n in calendar.nodes if n.type == node_type])
        other_type = f"set NODE_TYPE in {SETTINGS} to a type above, or " if alternatives else ""
        return (
            f"No {node_type} node at {site} can be booked now: Blazar will book none of its "
            f"{total} (in maintenance, or kept for other projects). To go on now, {other_type}"
            "ask your instructor which node type to use."
        )
    if start_in == asked:  # free by the calendar read after the refusal: it changed meanwhile
        return (
            f"Blazar refused, yet its calendar now shows a {node_type} node free for {hours} h "
            f"from the start you asked for (a classmate's booking just went away): run the cells "
            "above again. If Blazar refuses again, show this message to your instructor."
        )
    return (
        f"No {node_type} node at {site} is free for {hours} h at the start you asked for: set "
        f"START_IN_HOURS = {start_in} in {VALUES_CELL}{other_type}."
    )


class Calendar:
    """The site's nodes that Blazar will book for this project (python-chi's `reservable`: a node
    in maintenance is not; and Blazar's `authorized_projects`, when a node is kept for some
    projects), with their bookings: three reads, whatever the number of nodes."""

    def __init__(self):
        project = chi.session().get_project_id()
        hosts = {h["hypervisor_hostname"]: h for h in chi.blazar().host.list()}
        self.nodes = hardware.get_nodes()
        self.bookable = []  # (node, Blazar host id)
        for node in self.nodes:
            host = hosts.get(node.uid, {})
            kept_for = host.get("authorized_projects")
            allowed = not isinstance(kept_for, str) or project in kept_for.split(",")
            if node.reservable is True and allowed:
                self.bookable.append((node, host["id"]))
        booked = chi.blazar().host.list_allocations()
        self.booked = {a["resource_id"]: a["reservations"] for a in booked}

    def free_from(self, host_id: str, hours: float, after_hours: float = 0) -> datetime.datetime:
        """The first time, from `after_hours` from now on, when the host is free for `hours`."""
        start = utcnow() + datetime.timedelta(hours=after_hours)
        length = datetime.timedelta(hours=hours)
        for r in sorted(self.booked.get(host_id, []), key=lambda r: r["start_date"]):
            begin, end = (
                datetime.datetime.strptime(r[k], "%Y-%m-%dT%H:%M:%S.%f")
                for k in ("start_date", "end_date")
            )
            if end <= start:
                continue
            if start + length <= begin:
                break
            start = end
        return start

    def next_start_in_hours(
        self, node_type: str, hours: float, asked: float = 0, show: bool = False
    ) -> int | None:
        """Whole hours from now until a bookable node_type node is free for the lease, from the
        start asked for on (a gap of hours + 1, so that starting on the next whole hour still
        fits); None: none bookable."""
        hosts = [h for node, h in self.bookable if node.type == node_type]
        if not hosts:
            return None
        first = min(self.free_from(h, hours + 1, after_hours=asked) for h in hosts)
        if show:
            print(f"next {node_type} free for {hours} h from (UTC): {first:%Y-%m-%d %H:%M}")
        return math.ceil((first - utcnow()).total_seconds() / 3600)

    def nvidia_types_free(self, hours: float, exclude: str, asked: float = 0) -> list[str]:
        """Bookable GPU node types with an NVIDIA GPU (the lab's images need CUDA) and a node
        free from the start asked for (hours from now) for the whole lease."""
        soon = utcnow() + datetime.timedelta(hours=asked, minutes=5)
        free = set()
        for node, host in self.bookable:
            if node.type == exclude or "nvidia" not in _gpu_vendor(node):
                continue
            if node.type not in free and self.free_from(host, hours, asked) <= soon:
                free.add(node.type)
        return sorted(free)
