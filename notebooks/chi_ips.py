"""Floating IPs for notebooks 1 and 2, in a project whose whole class shares one list of them.

A lease's reserved IP is attached only to the student's own server, never moved from a
classmate's (`stop_if_taken`). A lease without one gets an IP from the site's pool, described
"public IP of SERVER for lease LEASE_ID, allocated by notebook 2" (`own_public_ip`): unlike a
reserved IP, it does not end with the lease, so `give_back_ips` gives it back to the pool when
the server is deleted, when its lease is deleted, and whenever notebook 1 or 2 finds its lease
over, for both of the student's servers (the first node and notebook 9's second one); an IP a
classmate's server holds is left alone and named. A student holds at most one pool IP per
server: one left unattached (its server deleted in Horizon) is taken again, for the new lease.
"""

from __future__ import annotations

import logging
import re

import chi
from chi import network

# python-chi makes a neutronclient for each call, and each logs a deprecation warning: noise here
logging.getLogger("neutronclient.v2_0.client").setLevel(logging.ERROR)

MARKER = re.compile(r"public IP of (\S+?)(?: for lease (\S+))?, allocated by notebook 2")


def _marker(server_name: str, lease_id: str) -> str:
    return f"public IP of {server_name} for lease {lease_id}, allocated by notebook 2"


def taken_for(fip: dict, server_name: str) -> str | None:
    """The id of the lease notebook 2 took this IP for, if it took it for server_name ("" when an
    older notebook did not record the lease); None for any other IP. The name is compared whole:
    node-serve-system-stud's IP is not node-serve-system-student's."""
    found = MARKER.fullmatch(fip.get("description") or "")
    if found is None or found.group(1) != server_name:
        return None
    return found.group(2) or ""


def holder(fip: dict):
    """The Nova server a floating IP is attached to, or None (also when that server is gone)."""
    from novaclient.exceptions import NotFound

    if not fip["port_id"]:
        return None
    port = chi.neutron().show_port(fip["port_id"])["port"]
    try:
        return chi.nova().servers.get(port["device_id"])
    except NotFound:
        return None


def ip_holder(address: str) -> str | None:
    """Which server holds a project's floating IP ("server NAME of user ID"); None if unbound."""
    found = holder(network.get_floating_ip(address))
    return None if found is None else f"server {found.name} of user {found.user_id}"


def stop_if_taken(address: str, server_name: str) -> None:
    taken = ip_holder(address)
    if taken is not None:
        raise RuntimeError(
            f"The IP {address} reserved with your lease is attached to {taken}, not to "
            f"{server_name}: ask that student (or your instructor) to detach it, then run "
            "this cell again."
        )


def own_public_ip(server_name: str, lease_id: str) -> str:
    """An IP for a lease without a reserved one: the one taken for this server earlier and left
    unattached (for this lease, or relabelled from an earlier one), or a fresh one from the
    site's pool. Never any other unbound IP of the project, which may be a classmate's reserved
    IP whose server is still booting."""
    from neutronclient.common.exceptions import NeutronClientException

    mine = [f for f in network.list_floating_ips() if taken_for(f, server_name) is not None]
    for fip in sorted(mine, key=lambda f: taken_for(f, server_name) != lease_id):
        if fip["port_id"] is None:
            if taken_for(fip, server_name) != lease_id:  # an earlier lease's: now this one's
                body = {"floatingip": {"description": _marker(server_name, lease_id)}}
                chi.neutron().update_floatingip(fip["id"], body)
                print(f"{fip['floating_ip_address']}, taken for {server_name} before, used again")
            return fip["floating_ip_address"]
        if taken_for(fip, server_name) == lease_id:
            taken = ip_holder(fip["floating_ip_address"])
            print(
                f"{fip['floating_ip_address']}, taken for you earlier, is now attached to {taken}"
            )
    body = {
        "floatingip": {
            "floating_network_id": network.get_network_id(network.PUBLIC_NETWORK),
            "description": _marker(server_name, lease_id),
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
    print(
        f"a fresh public IP from the site's pool (your lease reserved none): {address}. It does "
        "not end with your lease: the last cell of this notebook gives it back (and notebooks 1 "
        "and 2 do whenever they find its lease over)."
    )
    return address


def give_back_ips(server_names: tuple, live: list | None = None) -> list[str]:
    """Give back to the site's pool the IPs notebook 2 took for the student's servers (the
    first node and notebook 9's second one): all of them (live=None: the servers are gone), or
    those taken for a lease that is not among the ids in `live` (its lease is over). An IP a
    classmate's server holds is left alone and named."""
    me, given = chi.session().get_user_id(), []
    for fip in network.list_floating_ips():
        server_name = next((n for n in server_names if taken_for(fip, n) is not None), None)
        if server_name is None:
            continue
        lease_id, address = taken_for(fip, server_name), fip["floating_ip_address"]
        if live is not None and (lease_id == "" or lease_id in live):
            continue
        other = holder(fip)
        if other is not None and other.user_id != me:
            print(
                f"public IP {address}, taken for {server_name} by notebook 2, is attached to "
                f"server {other.name} of user {other.user_id}: left alone (ask them, or your "
                "instructor, to detach it; then this cell gives it back)"
            )
            continue
        chi.neutron().delete_floatingip(fip["id"])
        given.append(address)
        why = "" if live is None else f" (its lease {lease_id} is over)"
        print(f"public IP {address} given back to the site's pool{why}")
    return given
