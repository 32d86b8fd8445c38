"""Helpers for notebooks 1 and 2 around python-chi (`chi`), for a class sharing one project:
the class settings checked against the site, the choice among a student's leases (a server stays
with the lease it was made on), Blazar's refusals explained with the one change that helps, and
floating IPs that stay with their owner (chi_ips.py). Every message names what to set and where.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import math
from pathlib import Path

import chi
from chi import context, hardware, image
from chi.exception import CHIValueError

LIVE = ("PENDING", "STARTING", "ACTIVE")
SETTINGS = "notebooks/lab_settings.py"
VALUES_CELL = "the second cell of notebook 1"
LEASE_KEY = "serve_system_lease"  # server metadata: the id of the lease the server was made on


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
        found.append(
            f"NODE_TYPE {node_type} has no node at {site}: set NODE_TYPE in {SETTINGS} to a "
            "type of that site (Chameleon's Hardware Catalog lists them)."
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


# ---------------------------------------------------------------------- which lease
def pick_lease(live: list):
    """The lease notebooks 1 and 2 use: an ACTIVE one (the one that ends last), else the PENDING
    or STARTING one that starts first; None without a live lease."""
    status = {x.id: x.status for x in live}  # each read asks Blazar: read once
    active = [x for x in live if status[x.id] == "ACTIVE"]
    if active:
        return max(active, key=lambda x: x.end_date)
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
    lease cannot grow, so say what to do instead of going on with one node."""
    if lease is not None and host_count(lease) < wanted:
        raise RuntimeError(
            f"Your lease {lease.name} holds {host_count(lease)} node(s) and NODE_COUNT is "
            f"{wanted}; a lease cannot grow. Set NODE_COUNT = {host_count(lease)} in "
            f"{VALUES_CELL} to go on with it, or delete it (DELETE_LEASE, last cell) and run "
            "this notebook again for a new lease."
        )


def fixed_ip(server_id: str) -> str:
    """A server's private (fixed) IP on the site's shared network, as Nova reports it: where the
    nodes of one lease reach each other (notebook 2, section 5: Ray's ports stay there)."""
    addresses = chi.nova().servers.get(server_id).addresses
    return next(
        a["addr"]
        for net in addresses.values()
        for a in net
        if a.get("OS-EXT-IPS:type") == "fixed" and a.get("version") == 4
    )


def find_server(name: str):
    """The server of this name as Nova lists it (with its status and metadata), or None: one
    read of the project's list, the name compared whole (node-serve-system-ann is not
    node-serve-system-joann). A server being deleted is gone already."""
    listed = [s for s in chi.nova().servers.list() if s.name == name and not _going(s)]
    return listed[0] if listed else None


def _going(nova_server) -> bool:
    return getattr(nova_server, "OS-EXT-STS:task_state", None) == "deleting"


def lease_for(found, live: list):
    """The lease notebook 2 goes on with: the one the student's server runs on, as recorded on
    the server when it was made (a server cannot move to another lease), while that lease is
    ACTIVE; else pick_lease's choice. A server in ERROR is replaced, so it does not count."""
    if found is None or found.status == "ERROR":
        return pick_lease(live)
    active = [x for x in live if x.status == "ACTIVE"]
    recorded = (found.metadata or {}).get(LEASE_KEY)
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


def no_active_lease(picked, mine: list) -> str:
    if picked is not None and picked.status == "STARTING":
        return (
            f"Your lease {picked.name} is STARTING: Blazar is preparing its node, which takes a "
            "few minutes. Run this notebook again in 5 minutes."
        )
    if picked is not None:
        return (
            f"Your lease {picked.name} is {picked.status} and starts at "
            f"{picked.start_date:%Y-%m-%d %H:%M} UTC: run this notebook again after that."
        )
    return (
        f"You have no pending or active lease for this lab (yours: {describe(mine)}): make one "
        "in notebook 1."
    )


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


def why_replace(old, my_lease) -> str | None:
    """Why the student's server must be deleted (again) and made again, or None to keep it:
    ERROR, already being deleted (the clean-up cell does not wait), or made on another lease
    that is over (Blazar deletes a lease's servers when it ends)."""
    if old is None:
        return None
    found = chi.nova().servers.get(old.id)
    if found.status == "ERROR":
        return "which is in ERROR"
    if _going(found):
        return "which is being deleted already"
    recorded = (found.metadata or {}).get(LEASE_KEY)
    if recorded not in (None, my_lease.id):
        return f"which was made on another lease ({recorded}), now over"
    return None


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


def refusal_kind(message: str) -> str:
    """hosts, floating_ips, quota, duration or other, from Blazar's words."""
    text = message.lower()
    if "floating ip" in text:
        return "floating_ips"
    if "not enough hosts" in text or "not enough resources" in text or "no valid host" in text:
        return "hosts"
    if any(w in text for w in ("would spend", "allocation", "quota", "balance")):
        return "quota"
    if "lease duration" in text or "maximum lease" in text:
        return "duration"
    return "other"


def explain_refusal(
    said: list[str], project: str, site: str, node_type: str, hours: float, asked: float
) -> str:
    """The one change that helps, as one sentence (the hosts case prints the free slots first);
    asked: START_IN_HOURS, the start Blazar refused, never given back as the advice."""
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
    if kind == "other":
        return f"Chameleon refused the lease ({message}): show this message to your instructor."
    return _no_host_advice(site, node_type, hours, asked)


def _no_host_advice(site: str, node_type: str, hours: float, asked: float) -> str:
    calendar = Calendar()
    alternatives = calendar.nvidia_types_free_now(hours, exclude=node_type)
    print(
        f"NVIDIA GPU node types free now at {site} for {hours} h:",
        ", ".join(alternatives) or "none",
    )
    other_type = f" (or NODE_TYPE in {SETTINGS} to a type above)" if alternatives else ""
    start_in = calendar.next_start_in_hours(node_type, hours)
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

    def free_from(self, host_id: str, hours: float) -> datetime.datetime:
        """The first time from now on when the host is free for `hours`."""
        start, length = utcnow(), datetime.timedelta(hours=hours)
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

    def next_start_in_hours(self, node_type: str, hours: float) -> int | None:
        """Whole hours from now until a bookable node_type node is free for the lease (a gap of
        hours + 1, so that starting on the next whole hour still fits); None: none bookable."""
        hosts = [h for node, h in self.bookable if node.type == node_type]
        if not hosts:
            return None
        first = min(self.free_from(h, hours + 1) for h in hosts)
        print(f"next {node_type} free for {hours} h from (UTC): {first:%Y-%m-%d %H:%M}")
        return math.ceil((first - utcnow()).total_seconds() / 3600)

    def nvidia_types_free_now(self, hours: float, exclude: str) -> list[str]:
        """Bookable GPU node types with an NVIDIA GPU (the lab's images need CUDA) and a node
        free from now for the whole lease."""
        soon = utcnow() + datetime.timedelta(minutes=5)
        free = set()
        for node, host in self.bookable:
            gpu = node.gpu[0] if isinstance(node.gpu, list) else (node.gpu or {})
            if node.type == exclude or "nvidia" not in str(gpu.get("gpu_vendor", "")).lower():
                continue
            if node.type not in free and self.free_from(host, hours) <= soon:
                free.add(node.type)
        return sorted(free)


# ---------------------------------------------------------------------- servers that fail to boot
FAILED_BOOTS = Path(".serve_system_failed_boots.json")  # survives a kernel restart


def boot_failure(lease_id: str, server_id: str, name: str, fault: str) -> str:
    """What to do about a server in ERROR: retry once; a second failure on the lease's one node,
    or a node Nova cannot use at all, calls for a new lease (which gets another node)."""
    seen = json.loads(FAILED_BOOTS.read_text()) if FAILED_BOOTS.exists() else {}
    failed = sorted(set(seen.get(lease_id, [])) | {server_id})
    FAILED_BOOTS.write_text(json.dumps({**seen, lease_id: failed}))
    if len(failed) >= 2 or "no valid host" in fault.lower():
        return (
            f"{name} failed to start on this lease's node again (ERROR: {fault}), so that node is "
            "likely faulty: delete the server (cell above) and this lease (notebook 1, last cell), "
            "then make a new lease in notebook 1, which most likely gets another node."
        )
    return (
        f"{name} failed to start (ERROR: {fault}); bare metal does this now and then: run the cell "
        "above (it deletes the failed server), then this cell again."
    )
