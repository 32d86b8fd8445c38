"""Blazar as the class meets it: leases of many students in one project, hosts booked by time
window, reservable floating IPs that run out, and refusals worded as Blazar words them.

A host reservation takes `min` (= `max`, as python-chi asks) hosts of the node type that Blazar
will book for the project (its `reservable` flag set: a host in maintenance has it cleared; and,
when the host carries the extra capability `authorized_projects`, the project among them) with
no allocation overlapping the lease's window (otherwise "Not enough hosts available"); a
floating-IP reservation takes `amount` reservable addresses free over the window ("Not enough
floating IPs available"); with `su_left` set, a lease costing more service units (node-hours)
is refused as Chameleon's usage enforcement does; `after_refusal` is called after each refusal
(a scenario's classmate acting just then).

A lease's states, on the simulated clock (common.py), as Blazar's periodic task moves them:
PENDING until its start date; STARTING for `lease_start_s` (a lease made to start now is
STARTING at once), then ACTIVE, when its reserved floating IPs appear in the project tagged with
the reservation (as Blazar's floating-IP plugin does), or ERROR for a lease marked to fail its
start (`fail_starts`: its hosts stay booked); UPDATING while it is changed (`update_lease`),
then ACTIVE again; ERROR at any time (`error_lease`: a failed update; its hosts, servers and IPs
stay); DELETING for `lease_delete_s` after a DELETE, then gone from the list; TERMINATING for
`lease_end_s` when it ends (`end_lease`), then TERMINATED. A deleted or ending lease gives its
hosts and reserved IPs back, and its servers are deleted (Blazar's on_end); an IP taken from
the pool stays in the project. `lost_answers`: how many lease creations are stored but answered
by a closed connection (the answer lost on its way back); `errors_after_create`: how many are
stored, left in ERROR and answered 500, as Blazar does when a plugin fails after the lease is in
its database.
"""

from __future__ import annotations

import copy
import datetime as dt
import json

from .common import BLAZAR_IN, BLAZAR_OUT, Drop, Reply, new_id, now, sim_now

LIVE = ("PENDING", "STARTING", "ACTIVE", "UPDATING")


def _parse(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, BLAZAR_OUT)


def _public(lease: dict) -> dict:
    """The lease as Blazar shows it: without the fake's own notes (keys starting with _)."""
    out = {k: copy.deepcopy(v) for k, v in lease.items() if not k.startswith("_")}
    out["reservations"] = [
        {k: v for k, v in r.items() if not k.startswith("_")} for r in out["reservations"]
    ]
    return out


def _overlaps(a_start, a_end, b_start, b_end) -> bool:
    return a_start < b_end and b_start < a_end


class BlazarMixin:
    """Routes /<site>/blazar/v1/... for FakeChameleon (state lives in FakeChameleon.__init__)."""

    def _blazar_error(self, code, name, message):
        # python-chi reads only the message (it logs it and raises "Unable to make lease")
        return Reply(code, {"error_code": code, "error_name": name, "error_message": message})

    # ------------------------------------------------------------------ reading leases
    def _advance(self, lease):
        """Move a lease on as Blazar's periodic task does, by the clocks (see the docstring)."""
        status = lease["status"]
        if status == "PENDING" and _parse(lease["start_date"]) <= now():
            lease.update(status="STARTING", _until=sim_now() + lease.get("_start_s", 0))
        elif status == "STARTING" and sim_now() >= lease["_until"]:
            if lease.get("_fails"):
                lease["status"] = "ERROR"
            else:
                self._activate(lease)
        elif status == "UPDATING" and sim_now() >= lease["_until"]:
            lease["status"] = "ACTIVE"
        elif status == "TERMINATING" and sim_now() >= lease["_until"]:
            lease["status"] = "TERMINATED"
        elif status == "DELETING" and sim_now() >= lease["_until"]:
            del self.leases[lease["id"]]
            return
        if lease["status"] != status:
            self._advance(lease)  # PENDING may go on to STARTING and ACTIVE at once

    def _advance_leases(self):
        for lease in list(self.leases.values()):
            self._advance(lease)

    def _lease_json(self, lease):
        return _public(lease)

    def _activate(self, lease):
        lease["status"] = "ACTIVE"
        for r in lease["reservations"]:
            r["status"] = "active"
            for address in r.get("_addresses", []):  # a floating-IP reservation's addresses
                fip = self._new_fip(
                    address,
                    tags=["blazar", f"reservation:{r['id']}"],
                    project_id=lease["project_id"],
                )
                fip["description"] = f"reserved by lease {lease['id']}"

    def leases_collection(self, method, query, body, headers):
        self._token_check(headers)
        if method == "GET":
            self._advance_leases()
            return {
                "leases": [
                    self._lease_json(x)
                    for x in self.leases.values()
                    if x["project_id"] == self.project_id
                ]
            }
        if method != "POST":
            raise Reply(405)
        made = self._create_lease(body, self.user_id, self.project_id)
        if self.lost_answers > 0:  # stored, but the answer never reaches the student
            self.lost_answers -= 1
            raise Drop()
        if self.errors_after_create > 0:  # stored, then a plugin failed: ERROR, and a 500
            self.errors_after_create -= 1
            self.leases[made["id"]]["status"] = "ERROR"
            raise self._blazar_error(
                500, "BlazarException", "An unknown exception occurred (lease left in ERROR)."
            )
        return Reply(201, {"lease": made})

    def lease_item(self, method, query, body, headers, lease_id):
        self._token_check(headers)
        if lease_id in self.leases:
            self._advance(self.leases[lease_id])
        lease = self.leases.get(lease_id)
        if lease is None or lease["project_id"] != self.project_id:
            raise self._blazar_error(
                404, "NotFound", f"Object with {{'lease_id': '{lease_id}'}} not found"
            )
        if method == "GET":
            return {"lease": self._lease_json(lease)}
        if method == "DELETE":
            if lease["status"] in ("DELETING", "TERMINATING"):
                raise self._blazar_error(
                    409, "InvalidStatus", f"Invalid lease status: {lease['status']}"
                )
            self._end_lease(lease)
            lease.update(status="DELETING", _until=sim_now() + self.lease_delete_s)
            return Reply(204, None)
        raise Reply(405)

    def end_lease(self, lease_id):
        """The lease's end time has come (Blazar's on_end): TERMINATING, its servers deleted,
        then TERMINATED."""
        lease = self.leases[lease_id]
        self._end_lease(lease)
        lease.update(status="TERMINATING", _until=sim_now() + self.lease_end_s)
        for r in lease["reservations"]:
            r["status"] = "deleted"

    def error_lease(self, lease_id):
        """A failed update (or start): ERROR; what the lease holds stays (hosts, servers, IPs)."""
        self.leases[lease_id]["status"] = "ERROR"

    def degrade(self, lease_id, replaced: bool):
        """A host of the lease failed (Blazar's monitor put it in maintenance): the lease is
        `degraded`; with `replaced`, Blazar healed the reservation with another free host of the
        type (`resources_changed`), else the host is just missing (`missing_resources`). A
        server on the failed host goes to ERROR with it."""
        lease = self.leases[lease_id]
        res = next(r for r in lease["reservations"] if r["resource_type"] == "physical:host")
        failed = self.hosts_of(res["id"])[0]
        failed["reservable"] = False
        allocation = next(a for a in self.allocations[failed["id"]] if a["id"] == res["id"])
        self.allocations[failed["id"]].remove(allocation)
        for s in self.servers.values():
            if s["host"] == failed["id"] and s["reservation"] == res["id"]:
                self.break_server(s["id"], "Node failed: its power and health checks failed")
        start, end = _parse(lease["start_date"]), _parse(lease["end_date"])
        spare = self._free_hosts(failed["node_type"], start, end, lease["project_id"])
        if replaced and spare:
            self.allocations[spare[0]["id"]].append(allocation)
            res["resources_changed"] = True
        else:
            res["missing_resources"] = True
        lease["degraded"] = True
        return failed, (spare[0] if replaced and spare else None)

    def update_lease(self, lease_id, for_s: float):
        """The lease is being changed (extended in Horizon, say): UPDATING for for_s."""
        self.leases[lease_id].update(status="UPDATING", _until=sim_now() + for_s)

    def _end_lease(self, lease):
        """What Blazar does at a lease's end or deletion: hosts and reserved IPs go back, and the
        servers on its hosts are deleted; an IP the project took from the pool stays."""
        hosts = {r["id"] for r in lease["reservations"] if r["resource_type"] == "physical:host"}
        for sid in [s["id"] for s in self.servers.values() if s["reservation"] in hosts]:
            self._delete_server(sid)
        for host_allocs in self.allocations.values():
            host_allocs[:] = [a for a in host_allocs if a["lease_id"] != lease["id"]]
        for r in lease["reservations"]:
            self.fip_bookings[:] = [b for b in self.fip_bookings if b["reservation_id"] != r["id"]]
            for fid in [
                f["id"] for f in self.fips.values() if f"reservation:{r['id']}" in f["tags"]
            ]:
                del self.fips[fid]

    # ------------------------------------------------------------------ making leases
    def _create_lease(self, body, user_id, project_id):
        expected = {"name", "start_date", "end_date", "reservations", "events", "before_end_date"}
        if set(body) != expected:
            raise self._blazar_error(
                400, "MalformedRequestBody", f"unexpected keys {sorted(set(body) ^ expected)}"
            )
        if not isinstance(body["name"], str) or not body["name"]:
            raise self._blazar_error(400, "MalformedParameter", "Malformed parameter name")
        start = (
            now()
            if body["start_date"] == "now"
            else dt.datetime.strptime(body["start_date"], BLAZAR_IN)
        )
        end = dt.datetime.strptime(body["end_date"], BLAZAR_IN)
        if end <= start:
            raise self._blazar_error(400, "InvalidInput", "End date must be later than start date")
        if body["start_date"] != "now" and start < now() - dt.timedelta(minutes=1):
            raise self._blazar_error(
                400, "InvalidInput", "Start date must be later than current date"
            )
        kinds = [r.get("resource_type") for r in body["reservations"]]
        if "physical:host" not in kinds or any(
            k not in ("physical:host", "virtual:floatingip") for k in kinds
        ):
            raise self._blazar_error(
                400, "InvalidInput", f"this fake expects a host reservation: {kinds}"
            )
        try:
            self._check_allocation(body, start, end, project_id)
        except Reply:
            self.after_refusal()  # a classmate may act just then (scenarios)
            raise
        if any(
            x["name"] == body["name"] and x["project_id"] == project_id
            for x in self.leases.values()
        ):
            raise self._blazar_error(  # the lease table's unique name, as Blazar's database has it
                409, "LeaseNameAlreadyExists", f"The lease with name: {body['name']} already exists"
            )
        lease_id = new_id()
        reservations = [
            self._reserve(r, lease_id, start, end, project_id) for r in body["reservations"]
        ]
        lease = {
            "id": lease_id,
            "name": body["name"],
            "user_id": user_id,
            "project_id": project_id,
            "start_date": start.strftime(BLAZAR_OUT),
            "end_date": end.strftime(BLAZAR_OUT),
            "created_at": now().strftime("%Y-%m-%d %H:%M:%S"),
            "updated_at": None,
            "trust_id": new_id(),
            "status": "STARTING" if body["start_date"] == "now" else "PENDING",
            "degraded": False,
            "reservations": reservations,
            "events": [],
            "_start_s": self.lease_start_s,
            "_until": sim_now() + self.lease_start_s,
            "_fails": self.fail_starts > 0,
        }
        self.fail_starts -= 1 if self.fail_starts > 0 else 0
        self.leases[lease_id] = lease
        return _public(lease)

    def _check_allocation(self, body, start, end, project_id):
        """Everything Blazar checks before it books anything: a refused lease books nothing."""
        hours = (end - start).total_seconds() / 3600
        hosts_needed, fips_needed = {}, 0
        for r in body["reservations"]:
            if r["resource_type"] == "physical:host":
                props = json.loads(r["resource_properties"])
                if not (isinstance(r.get("min"), int) and 1 <= r["min"] == r["max"] <= 8):
                    raise self._blazar_error(
                        400, "MalformedParameter", f"min/max {r.get('min')}/{r.get('max')}"
                    )
                if (
                    props[:2] != ["==", "$node_type"]
                    or len(props) != 3
                    or r.get("hypervisor_properties") != ""
                ):
                    raise self._blazar_error(
                        400, "InvalidInput", f"resource_properties {r['resource_properties']}"
                    )
                if props[2] not in {h["node_type"] for h in self.hosts}:
                    raise self._blazar_error(
                        400, "InvalidInput", f"no host matches {r['resource_properties']}"
                    )
                hosts_needed[props[2]] = hosts_needed.get(props[2], 0) + r["min"]
            elif r.get("network_id") != self.site.public_net or r.get("amount") not in range(1, 9):
                raise self._blazar_error(400, "InvalidInput", f"floating IP reservation {r}")
            else:
                fips_needed += r["amount"]
        if self.su_left is not None and hours * sum(hosts_needed.values()) > self.su_left:
            name = next(p["name"] for p in self.projects if p["id"] == project_id)
            raise self._blazar_error(
                403,
                "NotAuthorized",
                f"Reservation for project {name} would spend "
                f"{hours * sum(hosts_needed.values()):f} SUs, only {self.su_left:f} left",
            )
        for node_type, count in hosts_needed.items():
            if len(self._free_hosts(node_type, start, end, project_id)) < count:
                raise self._blazar_error(409, "NotEnoughHostsAvailable", self.no_hosts_words)
        if len(self._free_reservable_fips(start, end)) < fips_needed:
            raise self._blazar_error(
                409, "NotEnoughFloatingIPAvailable", "Not enough floating IPs available"
            )

    def _free_hosts(self, node_type, start, end, project_id):
        return [
            h
            for h in self.hosts
            if h["node_type"] == node_type
            and h["reservable"]
            and project_id in h.get("authorized_projects", project_id).split(",")
            and not any(
                _overlaps(start, end, _parse(a["start_date"]), _parse(a["end_date"]))
                for a in self.allocations[h["id"]]
            )
        ]

    def _free_reservable_fips(self, start, end):
        return [
            a
            for a in self.reservable_fips
            if not any(
                b["address"] == a and _overlaps(start, end, b["start"], b["end"])
                for b in self.fip_bookings
            )
        ]

    def _reserve(self, r, lease_id, start, end, project_id):
        rid = new_id()
        common = {
            "id": rid,
            "lease_id": lease_id,
            "resource_type": r["resource_type"],
            "resource_id": new_id(),
            "status": "pending",
        }
        if r["resource_type"] == "physical:host":
            node_type = json.loads(r["resource_properties"])[2]
            hosts = self._free_hosts(node_type, start, end, project_id)[: r["min"]]
            for host in hosts:  # one allocation per host, each named by the reservation
                self.allocations[host["id"]].append(
                    {
                        "id": rid,
                        "lease_id": lease_id,
                        "start_date": start.strftime(BLAZAR_OUT),
                        "end_date": end.strftime(BLAZAR_OUT),
                    }
                )
            return {
                **common,
                "min": r["min"],
                "max": r["max"],
                "resource_properties": r["resource_properties"],
                "hypervisor_properties": "",
                "before_end": "default",
                "on_start": "default",
                "missing_resources": False,
                "resources_changed": False,
                "_host_ids": [h["id"] for h in hosts],
            }
        addresses = self._free_reservable_fips(start, end)[: r["amount"]]
        for address in addresses:
            self.fip_bookings.append(
                {"address": address, "reservation_id": rid, "start": start, "end": end}
            )
        return {
            **common,
            "network_id": self.site.public_net,
            "amount": r["amount"],
            "required_floatingips": [],
            "_addresses": addresses,
        }

    def add_lease(
        self,
        name,
        user_id,
        start_in_hours,
        hours=3,
        node_type="gpu_p100",
        fip=False,
        status=None,
        project_id="p-0002",
        starting=0,
    ):
        """A lease someone made earlier, through the same checks as a new one; status=TERMINATED
        gives an ended one (nothing booked); starting=N: one that started and stays STARTING for
        N more simulated seconds (Blazar still setting up its node)."""
        start = now() + dt.timedelta(hours=start_in_hours)
        if status == "TERMINATED":
            lease_id = new_id()
            self.leases[lease_id] = {
                "id": lease_id,
                "name": name,
                "user_id": user_id,
                "project_id": project_id,
                "start_date": start.strftime(BLAZAR_OUT),
                "end_date": (start + dt.timedelta(hours=hours)).strftime(BLAZAR_OUT),
                "created_at": start.strftime("%Y-%m-%d %H:%M:%S"),
                "updated_at": None,
                "trust_id": new_id(),
                "status": status,
                "degraded": False,
                "events": [],
                "reservations": [
                    {
                        "id": new_id(),
                        "lease_id": lease_id,
                        "resource_type": "physical:host",
                        "status": "deleted",
                        "min": 1,
                        "max": 1,
                        "hypervisor_properties": "",
                        "resource_properties": json.dumps(["==", "$node_type", node_type]),
                    }
                ],
            }
            return self.leases[lease_id]
        reservations = [
            {
                "resource_type": "physical:host",
                "min": 1,
                "max": 1,
                "hypervisor_properties": "",
                "resource_properties": json.dumps(["==", "$node_type", node_type]),
            }
        ]
        if fip:
            reservations.append(
                {
                    "resource_type": "virtual:floatingip",
                    "network_id": self.site.public_net,
                    "amount": 1,
                }
            )
        body = {
            "name": name,
            "reservations": reservations,
            "events": [],
            "before_end_date": None,
            "start_date": start.strftime(BLAZAR_IN),
            "end_date": (start + dt.timedelta(hours=hours)).strftime(BLAZAR_IN),
        }
        if start_in_hours <= 0:  # started already: booked from its (past) start
            body["start_date"] = "now"
        lease = self.leases[self._create_lease(body, user_id, project_id)["id"]]
        lease["_start_s"] = starting
        if start_in_hours <= 0:
            lease.update(start_date=start.strftime(BLAZAR_OUT), _until=sim_now() + starting)
            if not starting:
                self._activate(lease)
        return lease

    # ------------------------------------------------------------------ hosts and their calendar
    def blazar_hosts(self, method, query, body, headers):
        self._token_check(headers)
        return {
            "hosts": [
                dict(h, trust_id="t", cpu_info="{}", vcpus=48, memory_mb=131072, local_gb=200)
                for h in self.hosts
            ]
        }

    def blazar_allocations(self, method, query, body, headers):
        self._token_check(headers)
        return {
            "allocations": [
                {"resource_id": h, "reservations": r} for h, r in self.allocations.items()
            ]
        }

    def blazar_allocation(self, method, query, body, headers, host_id):
        self._token_check(headers)
        if host_id not in self.allocations:
            raise self._blazar_error(
                404, "NotFound", f"Object with {{'host_id': '{host_id}'}} not found"
            )
        return {"allocation": {"resource_id": host_id, "reservations": self.allocations[host_id]}}

    def book(self, host_id: str, hours_from: float, hours_to: float):
        """Another project's reservation of a host (it shows in the calendar, not in our leases)."""
        self.allocations[host_id].append(
            {
                "id": new_id(),
                "lease_id": new_id(),
                "start_date": (now() + dt.timedelta(hours=hours_from)).strftime(BLAZAR_OUT),
                "end_date": (now() + dt.timedelta(hours=hours_to)).strftime(BLAZAR_OUT),
            }
        )

    def book_all(self, node_type: str, hours_from: float, hours_to: float):
        for h in self.hosts:
            if h["node_type"] == node_type:
                self.book(h["id"], hours_from, hours_to)

    def host_of(self, reservation_id: str) -> dict | None:
        return next(iter(self.hosts_of(reservation_id)), None)

    def hosts_of(self, reservation_id: str) -> list[dict]:
        """The hosts a host reservation holds (one for each of its `min` hosts)."""
        return [
            h for h in self.hosts for a in self.allocations[h["id"]] if a["id"] == reservation_id
        ]
