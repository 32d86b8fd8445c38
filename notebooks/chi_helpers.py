"""Helpers for notebooks 1 and 2 around python-chi (`chi`), for a class sharing one project:
the class settings checked against the site, the choice among a student's leases, Blazar's
refusals explained with the one change that helps, and floating IPs that stay with their owner.
Every message names what to set and where.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import math
from pathlib import Path

import chi
from chi import context, hardware, image, network
from chi.exception import CHIValueError

# python-chi makes a neutronclient for each call, and each logs a deprecation warning: noise here
logging.getLogger("neutronclient.v2_0.client").setLevel(logging.ERROR)

LIVE = ("PENDING", "STARTING", "ACTIVE")
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
    one that starts first; None without a live lease."""
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


def no_active_lease(picked, mine: list) -> str:
    if picked is not None:
        return (
            f"Your lease {picked.name} is {picked.status} and starts at "
            f"{picked.start_date:%Y-%m-%d %H:%M} UTC: run this notebook again after that."
        )
    return (
        f"You have no pending or active lease for this lab (yours: {describe(mine)}): make one "
        "in notebook 1."
    )


def others_unused(picked, live: list) -> str | None:
    """Other ACTIVE leases hold a node nobody uses now (a PENDING one may be for a later
    session)."""
    others = [x for x in live if x.id != picked.id and x.status == "ACTIVE"]
    if not others:
        return None
    return (
        f"Using {picked.name}, which ends last; your other lease(s) {describe(others)} hold nodes "
        "nobody uses: delete them in Horizon (Reservations > Leases) if you do not need them."
    )


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


def explain_refusal(said: list[str], project: str, site: str, node_type: str, hours: float) -> str:
    """The one change that helps, as one sentence (the hosts case prints the free slots first)."""
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
    start_in = next_start_in_hours(node_type, hours)
    alternatives = nvidia_types_free_now(hours, exclude=node_type)
    print(
        f"NVIDIA GPU node types free now at {site} for {hours} h:",
        ", ".join(alternatives) or "none",
    )
    other_type = f" (or NODE_TYPE in {SETTINGS} to a type above)" if alternatives else ""
    if start_in is None:
        return f"No {node_type} node at {site} is free for {hours} h: set NODE_TYPE in {SETTINGS}."
    return (
        f"No {node_type} node at {site} is free for {hours} h at the start you asked for: set "
        f"START_IN_HOURS = {start_in} in {VALUES_CELL}{other_type}."
    )


def _next_free(node, hours: float) -> datetime.datetime:
    start, _ = node.next_free_timeslot(minimum_hours=hours)
    return max(start.replace(tzinfo=None), utcnow())  # python-chi may answer a time in the past


def next_start_in_hours(node_type: str, hours: float) -> int | None:
    """Whole hours from now until a node_type node is free for the lease (a gap of hours + 1,
    so that starting on the next whole hour still fits)."""
    nodes = hardware.get_nodes(node_type=node_type)
    if not nodes:
        return None
    first = min(_next_free(n, hours + 1) for n in nodes)
    print(f"next {node_type} free for {hours} h from (UTC): {first:%Y-%m-%d %H:%M}")
    return math.ceil((first - utcnow()).total_seconds() / 3600)


def nvidia_types_free_now(hours: float, exclude: str) -> list[str]:
    """GPU node types with an NVIDIA GPU (the lab's images need CUDA) and a node free from now
    for the whole lease."""
    free = set()
    soon = utcnow() + datetime.timedelta(minutes=5)
    for node in hardware.get_nodes(gpu=True):
        gpu = node.gpu[0] if isinstance(node.gpu, list) else node.gpu
        if (
            node.type in free
            or node.type == exclude
            or "nvidia" not in str(gpu.get("gpu_vendor", "")).lower()
        ):
            continue
        if _next_free(node, hours) <= soon:
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


# ---------------------------------------------------------------------- floating IPs
def ip_holder(address: str) -> str | None:
    """Which server holds a project's floating IP ("server NAME of user ID"); None if unbound."""
    fip = network.get_floating_ip(address)
    if not fip["port_id"]:
        return None
    port = chi.neutron().show_port(fip["port_id"])["port"]
    holder = chi.nova().servers.get(port["device_id"])
    return f"server {holder.name} of user {holder.user_id}"


def stop_if_taken(address: str, server_name: str) -> None:
    holder = ip_holder(address)
    if holder is not None:
        raise RuntimeError(
            f"The IP {address} reserved with your lease is attached to {holder}, not to "
            f"{server_name}: ask that student (or your instructor) to detach it, then run "
            "this cell again."
        )


def _marker(server_name: str) -> str:
    return f"public IP of {server_name}, allocated by notebook 2"


def own_public_ip(server_name: str) -> str:
    """An IP for a lease without a reserved one: the one allocated for this server earlier, or a
    fresh one from the site's pool. Never an unbound IP of the project, which may be a classmate's
    reserved IP whose server is still booting."""
    from neutronclient.common.exceptions import NeutronClientException

    for fip in network.list_floating_ips():
        if fip.get("description") == _marker(server_name) and fip["port_id"] is None:
            return fip["floating_ip_address"]
    body = {
        "floatingip": {
            "floating_network_id": network.get_network_id(network.PUBLIC_NETWORK),
            "description": _marker(server_name),
        }
    }
    try:
        fip = chi.neutron().create_floatingip(body)["floatingip"]
    except NeutronClientException as err:
        if "quota" in str(err).lower():
            raise RuntimeError(
                f"The project has as many floating IPs as its quota allows ({err}): ask your "
                "instructor to raise the quota or release unused IPs (Network > Floating IPs)."
            ) from None
        raise RuntimeError(
            f"The site has no public IP free right now ({err}): run this cell again in a "
            "few minutes, as classmates finish; if it keeps failing, tell your instructor."
        ) from None
    address = fip["floating_ip_address"]
    print(f"a fresh public IP from the site's pool (your lease reserved none): {address}")
    return address


def release_own_ips(server_name: str) -> list[str]:
    """Give back the IPs own_public_ip allocated for this server (never a reserved one)."""
    mine = [f for f in network.list_floating_ips() if f.get("description") == _marker(server_name)]
    for fip in mine:
        chi.neutron().delete_floatingip(fip["id"])
    return [f["floating_ip_address"] for f in mine]
