"""The student's bare-metal servers for notebook 2 (python-chi's `chi.server` and Nova): which one
is theirs, when one must be replaced, and the three long waits a server brings (its delete, its
boot, its SSH), each ending in one sentence when it runs out, each asking Nova again after a
passing fault of the site (limits and faults: chi_waits.py).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import chi
import chi_waits

LEASE_KEY = "serve_system_lease"  # server metadata: the id of the lease the server was made on
FAILED_BOOTS = Path(".serve_system_failed_boots.json")  # survives a kernel restart


# ---------------------------------------------------------------------- which server
def find_server(name: str):
    """The server of this name as Nova lists it (with its status and metadata), or None: one
    read of the project's list, the name compared whole (node-serve-system-ann is not
    node-serve-system-joann). A server being deleted is gone already."""
    listed = [s for s in chi.nova().servers.list() if s.name == name and not being_deleted(s)]
    return listed[0] if listed else None


def lab_servers(names: tuple) -> list:
    """The student's servers of these names, as Nova lists them: one look at the project's list,
    no object built for each of the class's servers (each would look up its image and key)."""
    me = chi.session().get_user_id()
    return [s for s in chi.nova().servers.list() if s.name in names and s.user_id == me]


def being_deleted(nova_server) -> bool:
    return getattr(nova_server, "OS-EXT-STS:task_state", None) == "deleting"


def why_replace(old, my_lease) -> str | None:
    """Why the student's server must be deleted (again) and made again, or None to keep it:
    ERROR, already being deleted (the clean-up cell does not wait), or made on another lease
    that is over (Blazar deletes a lease's servers when it ends)."""
    if old is None:
        return None
    found = chi.nova().servers.get(old.id)
    if found.status == "ERROR":
        fault = (getattr(found, "fault", None) or {}).get("message", "no reason given")
        return f"which is in ERROR ({fault})"
    if being_deleted(found):
        return "which is being deleted already"
    recorded = (found.metadata or {}).get(LEASE_KEY)
    if recorded not in (None, my_lease.id):
        return f"which was made on another lease ({recorded}), now over"
    return None


def fixed_ip(server_id: str) -> str:
    """A server's private (fixed) IP on the site's shared network, as Nova reports it: where the
    nodes of one lease reach each other (notebook 2, section 5)."""
    addresses = chi.nova().servers.get(server_id).addresses
    return next(
        a["addr"]
        for net in addresses.values()
        for a in net
        if a.get("OS-EXT-IPS:type") == "fixed" and a.get("version") == 4
    )


@contextlib.contextmanager
def nova_refusal(name: str):
    """Around Server.submit: Nova refusing the server because the project holds as many servers
    as its quota allows (403, "Quota exceeded for instances") stops the cell with one sentence;
    python-chi raises it as ResourceError(the client's error)."""
    from chi.exception import ResourceError

    try:
        yield
    except ResourceError as err:
        said = _quota_refusal(err)
        if said is None:
            raise
        raise RuntimeError(
            f"Nova refused {name}: the project holds as many servers as its quota allows "
            f"({said}), servers being deleted included; ask your instructor to raise the "
            "project's instances quota (or classmates to delete servers they no longer use), "
            "then run this cell again: your lease stays yours meanwhile."
        ) from None


def _quota_refusal(err) -> str | None:
    from novaclient.exceptions import Forbidden
    from openstack.exceptions import HttpException

    while err is not None:
        status = getattr(err, "status_code", None) if isinstance(err, HttpException) else None
        if isinstance(err, Forbidden):
            status = 403
        if status == 403 and "quota exceeded" in str(err).lower():
            text = str(err)
            return text[text.lower().index("quota exceeded") :].strip().rstrip(".")
        err = err.__cause__ or err.__context__
    return None


# ---------------------------------------------------------------------- the waits
def wait_until_gone(name: str) -> None:
    """After a delete: until Nova lists no server of this name (a bare-metal delete takes
    minutes), so that the next cell makes a new one instead of finding the old one."""
    print(f"waiting until {name} is gone (up to {chi_waits.DELETE_MINUTES} minutes) ...")
    wait = chi_waits.Wait(
        "Nova", f"{name} to be deleted", "your lease and its reserved IP stay yours"
    )
    gone = wait.until(
        lambda: True if not [s for s in chi.nova().servers.list() if s.name == name] else None,
        chi_waits.DELETE_MINUTES,
        every_s=15,
    )
    if gone is None:
        raise RuntimeError(
            f"{name} is still being deleted after {chi_waits.DELETE_MINUTES} minutes (Nova still "
            "lists it while its node is torn down; your lease and its reserved IP stay yours): "
            "run this cell again in 5 minutes, and if it is still listed half an hour after the "
            "delete, show this message to your instructor."
        )
    print("deleted")


def wait_for_boot(node, lease_id: str) -> None:
    """After Server.submit(wait_for_active=False): until Nova says ACTIVE or ERROR."""
    wait = chi_waits.Wait(
        "Nova", f"{node.name} to boot", "your lease and the server being made stay yours"
    )
    wait.ask(node.refresh)  # python-chi learns the server's id only when it reads it back
    print(
        f"waiting for {node.name} to boot (up to {chi_waits.BOOT_MINUTES} minutes; bare metal "
        "takes 10 to 20) ..."
    )
    status = wait.until(lambda: _settled(node.id), chi_waits.BOOT_MINUTES, every_s=30)
    if status is None:
        raise RuntimeError(
            f"{node.name} is still booting (BUILD) after {chi_waits.BOOT_MINUTES} minutes, holding "
            "your lease's node and no IP yet: run this cell again, which waits again for the same "
            "server, and if it is still BUILD an hour after it was made, delete it (last cell, "
            "DELETE_SERVER = True) and run this notebook again, which boots a new one."
        )
    if status == "ERROR":
        found = wait.ask(lambda: chi.nova().servers.get(node.id))
        fault = (getattr(found, "fault", None) or {}).get("message", "no reason given")
        gone = wait.ask(lambda: lease_gone(lease_id)) if "no valid host" in fault.lower() else None
        if gone is not None:
            raise RuntimeError(
                f"{node.name} failed to start (ERROR: {fault}) because your lease is {gone}, "
                "not ACTIVE: Nova takes a server for any lease and fails it when the lease has "
                "no node for it, so the node is not at fault; delete the server (cell above) and "
                "make a new lease in notebook 1, then run this notebook again."
            )
        raise RuntimeError(boot_failure(lease_id, node.id, node.name, fault))
    print(f"{node.name} status: {status}")


def lease_gone(lease_id: str) -> str | None:
    """The lease's state when it holds no node for a server any more (ended, being deleted or
    ended, in ERROR, deleted), or None while it is ACTIVE (or UPDATING)."""
    from blazarclient.exception import BlazarClientException

    try:
        status = chi.blazar().lease.get(lease_id)["status"]
    except BlazarClientException as err:
        if err.kwargs.get("code") != 404:
            raise
        return "deleted"
    return None if status in ("ACTIVE", "UPDATING") else status


def _settled(server_id: str) -> str | None:
    status = chi.nova().servers.get(server_id).status
    return None if status == "BUILD" else status


def wait_for_ssh(node) -> None:
    """Until the node takes an SSH login with your key (sshd starts, and cloud-init installs the
    key, minutes after ACTIVE): a real login, not only an open port."""
    from paramiko.ssh_exception import SSHException

    wait = chi_waits.Wait(
        "Nova", f"SSH on {node.name}", "your lease, your server and its IP stay yours"
    )
    address = wait.ask(node.get_floating_ip)
    print(f"waiting for SSH on {address} (up to {chi_waits.SSH_MINUTES} minutes) ...")
    conn, last = node.ssh_connection(connect_timeout=10), ["no answer"]

    def login():
        try:
            conn.run("true", hide=True)
            return True
        except (OSError, EOFError, SSHException) as err:
            last[0] = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            conn.close()
            return None

    if wait.until(login, chi_waits.SSH_MINUTES, every_s=20) is None:
        raise RuntimeError(
            f"{node.name} ({address}) has not taken an SSH login in {chi_waits.SSH_MINUTES} "
            f"minutes (last answer: {last[0]}), while it holds your lease's node and the IP "
            f"{address}: run this cell again to wait longer, and if it still does not answer, "
            "delete the server (last cell: DELETE_SERVER = True, BRING_BACK_BUNDLES = False) and "
            "run this notebook again, which boots a new one on your lease."
        )
    conn.close()
    print(f"SSH answers on {address}")


# ---------------------------------------------------------------------- servers that fail to boot
def boot_failure(lease_id: str, server_id: str, name: str, fault: str) -> str:
    """What to do about a server in ERROR: retry once; a second failure of this server on the
    lease, or a node Nova cannot use at all, calls for a new lease (which gets another node)."""
    seen = json.loads(FAILED_BOOTS.read_text()) if FAILED_BOOTS.exists() else {}
    key = f"{lease_id} {name}"
    failed = sorted(set(seen.get(key, [])) | {server_id})
    FAILED_BOOTS.write_text(json.dumps({**seen, key: failed}))
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
