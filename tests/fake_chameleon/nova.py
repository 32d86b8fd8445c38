"""Nova for bare metal: every student's servers in one project, one server per reserved host.

A server boots on a host of the ACTIVE (or UPDATING) host reservation named in its scheduler
hint, one that runs no server yet (a reservation of two hosts takes two servers), on the
site's clock (common.py): BUILD for `boot_s` (the next creations' own times may be queued in
`boots`), then ACTIVE. Nova accepts any reservation hint, as the site's does: a reservation that
is not ACTIVE (its lease ended, deleted, in ERROR or not started) or whose hosts all run a server
already leaves the server in ERROR ("No valid host was found", as Nova says, 20 s later); the
project's instances quota (`server_quota`, servers being deleted counted) refuses it at once
(403, as Nova does). It ends in ERROR after `boot_fail_s` when the host is in
`bad_hosts` (it fails every deploy) or while `servers_fail` > 0 (a deploy that fails once): both
after `boot_fail_s`. A server that was ACTIVE can fail later (`break_server`: ERROR, its floating
IP still bound). A deleted server stays listed, its task state "deleting", for
`server_delete_s`, as a bare-metal delete takes minutes; its port goes at once, which unbinds its
floating IP. A server keeps the metadata it was made with (string keys and values, as Nova
checks them) and reports its private (fixed) IP on the shared network beside its floating one;
the list filters `name` as Nova does, as a regular expression searched in the name (so
`name=node-serve-system-stud` also lists node-serve-system-student's server).
"""

from __future__ import annotations

import hashlib
import re

from .common import Reply, fingerprint, new_id, now, sim_now

NO_VALID_HOST = "No valid host was found. There are not enough hosts available."
DEPLOY_FAILED = "Build of instance aborted: Failed to provision instance: deploy failed"


class NovaMixin:
    def nova_versions(self, method, query, body, headers):
        return Reply(300, {"versions": [self._nova_version_doc()]})

    def nova_version(self, method, query, body, headers):
        return {"version": self._nova_version_doc()}

    def _nova_version_doc(self):
        return {
            "id": "v2.1",
            "status": "CURRENT",
            "version": "2.96",
            "min_version": "2.1",
            "updated": "2013-07-23T11:33:21Z",
            "links": [{"rel": "self", "href": f"{self.base}/{self.site.uid}/nova/v2.1/"}],
            "media-types": [
                {
                    "base": "application/json",
                    "type": "application/vnd.openstack.compute+json;version=2.1",
                }
            ],
        }

    def _nova_not_found(self, what):
        return Reply(404, {"itemNotFound": {"code": 404, "message": what}})

    def flavors(self, method, query, body, headers):
        self._token_check(headers)
        return {"flavors": [self.flavor]}

    def flavor_item(self, method, query, body, headers, flavor_id):
        self._token_check(headers)
        if flavor_id != self.flavor["id"]:
            raise self._nova_not_found(f"Flavor {flavor_id} could not be found.")
        return {"flavor": self.flavor}

    # -------------------------------------------------------------- key pairs (the student's own)
    def keypairs_collection(self, method, query, body, headers):
        self._token_check(headers)
        if method == "GET":
            return {"keypairs": [{"keypair": k} for k in self.keypairs.values()]}
        kp = body["keypair"]
        key = {
            "name": kp["name"],
            "public_key": kp["public_key"],
            "fingerprint": fingerprint(kp["public_key"]),
            "type": kp.get("type", "ssh"),
            "user_id": self.user_id,
        }
        self.keypairs[kp["name"]] = key
        return {"keypair": key}

    def keypair_item(self, method, query, body, headers, name):
        self._token_check(headers)
        if name not in self.keypairs:
            raise self._nova_not_found(f"Keypair {name} not found for user {self.user_id}")
        if method == "DELETE":
            del self.keypairs[name]
            return Reply(202, None)
        return {
            "keypair": dict(
                self.keypairs[name], id=1, created_at="2025-01-01T00:00:00.000000", deleted=False
            )
        }

    # ------------------------------------------------------------------ servers
    def _active_host_reservations(self):
        self._advance_leases()
        return {
            r["id"]
            for lease in self.leases.values()
            if lease["status"] in ("ACTIVE", "UPDATING") and lease["project_id"] == self.project_id
            for r in lease["reservations"]
            if r["resource_type"] == "physical:host"
        }

    @staticmethod
    def _microversion(headers) -> tuple[int, int]:
        """The compute API microversion asked for (python-chi 1.1 asks 2.10, 1.2.10 asks 2.61)."""
        lower = {k.lower(): v for k, v in headers.items()}
        asked = lower.get("x-openstack-nova-api-version") or lower.get(
            "openstack-api-version", "compute 2.1"
        )
        return tuple(int(x) for x in asked.split()[-1].split("."))

    def servers_collection(self, method, query, body, headers):
        self._token_check(headers)
        if method == "GET":
            self._advance_deletes()
            version = self._microversion(headers)
            listed = [
                s
                for s in self.servers.values()
                if "name" not in query or re.search(query["name"][0], s["name"])
            ]
            return {"servers": [self._server_json(s, version) for s in listed]}
        return Reply(202, {"server": self._create_server(body)})

    def _create_server(self, body):
        s = body["server"]
        hints = body.get("OS-SCH-HNT:scheduler_hints") or body.get("os:scheduler_hints") or {}
        problems = []
        if s.get("imageRef") not in self.images:
            problems.append(f"Image {s.get('imageRef')} could not be found.")
        if s.get("flavorRef") != self.flavor["id"]:
            problems.append(f"Flavor {s.get('flavorRef')} could not be found.")
        if s.get("key_name") not in self.keypairs:
            problems.append(f"Invalid key_name provided: {s.get('key_name')}")
        if s.get("networks") != [{"uuid": self.site.shared_net}]:
            problems.append(f"networks {s.get('networks')}")
        if not hints.get("reservation"):
            problems.append("this fake expects a reservation hint (bare metal needs one)")
        metadata = s.get("metadata", {})
        if not isinstance(metadata, dict) or not all(
            isinstance(v, str) and 0 < len(k) <= 255 and len(v) <= 255 for k, v in metadata.items()
        ):
            problems.append(f"Invalid input for field/attribute metadata: {metadata!r}")
        if problems:
            raise Reply(400, {"badRequest": {"code": 400, "message": "; ".join(problems)}})
        self._advance_deletes()
        used = len(self.servers)  # Nova counts a server being deleted until it is gone
        if self.server_quota is not None and used >= self.server_quota:
            raise Reply(
                403,
                {
                    "forbidden": {
                        "code": 403,
                        "message": f"Quota exceeded for instances: Requested 1, but already "
                        f"used {used} of {self.server_quota} instances",
                    }
                },
            )
        fail = self.servers_fail > 0
        self.servers_fail -= 1 if fail else 0
        server = self.add_server(
            self.user_id,
            s["name"],
            hints["reservation"],
            key_name=s["key_name"],
            image=s["imageRef"],
            fault=DEPLOY_FAILED if fail else None,
            metadata=metadata,
        )
        return {
            "id": server["id"],
            "links": [],
            "OS-DCF:diskConfig": "MANUAL",
            "adminPass": "x",
            "security_groups": [{"name": "default"}],
        }

    def add_server(
        self,
        owner,
        name,
        reservation_id,
        key_name=None,
        image=None,
        fault=None,
        final="ACTIVE",
        metadata=None,
    ):
        """A server on a free host of a reservation (the student's, or a classmate's made
        beforehand)."""

        def busy(host):
            return any(
                x["host"] == host["id"] and x["final"] != "ERROR" and x["id"] not in self.deleting
                for x in self.servers.values()
            )

        # Nova takes any reservation hint; Blazar's filter then finds a host of an ACTIVE
        # reservation, or none ("No valid host", ERROR within a minute): a lease that is not
        # ACTIVE (ended, deleted, in ERROR, not started) or whose hosts all run a server
        active = reservation_id in self._active_host_reservations()
        hosts = self.hosts_of(reservation_id) if active else []
        free = [h for h in hosts if not busy(h)]
        host = free[0] if free else (hosts[0] if hosts else None)
        fault = fault if free else NO_VALID_HOST
        if host is not None and host["id"] in self.bad_hosts:
            fault = fault or DEPLOY_FAILED
        boot_s = self.boots.pop(0) if self.boots else self.boot_s
        takes = 20 if fault == NO_VALID_HOST else self.boot_fail_s if fault else boot_s
        sid = new_id()
        port = self._new_port(sid)
        self.ports[port["id"]] = port
        self.port_owner[port["id"]] = sid  # kept after the port goes, for the tests
        self.fixed_ips[sid] = port["fixed_ips"][0]["ip_address"]  # so is the server's private IP
        self.servers[sid] = {
            "id": sid,
            "name": name,
            "user_id": owner,
            "key_name": key_name or f"{name}-key",
            "image": image or self.site.images[0][0],
            "reservation": reservation_id,
            "host": host["id"] if host else None,
            "status": "BUILD",
            "final": "ERROR" if fault else final,
            "fault": fault,
            "created": now(),
            "ready_at": sim_now() + takes,  # when BUILD ends (simulated clock)
            "active_at": None,
            "metadata": dict(metadata or {}),
        }
        return self.servers[sid]

    def _advance_server(self, s):
        if s["status"] == "BUILD" and sim_now() >= s["ready_at"]:
            s["status"] = s["final"]
            if s["status"] == "ACTIVE":
                s["active_at"] = s["ready_at"]

    def ssh_ready(self) -> dict:
        """The student's servers that answer SSH now, by the floating IP bound to them:
        {address: (server name, server id, whether sshd takes the key yet)}. sshd answers
        `sshd_s` after the server turned ACTIVE, and takes the key `keys_s` later."""
        ready = {}
        for s in self.servers.values():
            if s["user_id"] != self.user_id or s["id"] in self.deleting:
                continue
            self._advance_server(s)
            if s["status"] != "ACTIVE" or s["active_at"] is None:
                continue
            up = sim_now() - s["active_at"] - self.sshd_s
            ports = {p["id"] for p in self.ports.values() if p["device_id"] == s["id"]}
            for f in self.fips.values():
                if up >= 0 and f["port_id"] in ports:
                    ready[f["floating_ip_address"]] = (s["name"], s["id"], up >= self.keys_s)
        return ready

    def finish_deletes(self) -> None:
        """Every delete under way is done (Nova lists none of them any more)."""
        for sid in self.deleting:
            self.deleting[sid] = sim_now()
        self._advance_deletes()

    def _advance_deletes(self):
        for sid, gone_at in list(self.deleting.items()):
            if sim_now() >= gone_at:
                del self.deleting[sid]
                self.servers.pop(sid, None)

    def break_server(self, server_id: str, fault: str = DEPLOY_FAILED) -> None:
        """A server that was running fails (ERROR); its floating IP stays bound to its port."""
        s = self.servers[server_id]
        s.update(status="ERROR", final="ERROR", fault=fault)

    def _server_json(self, s, version=(2, 61)):
        self._advance_server(s)
        ports = [p for p in self.ports.values() if p["device_id"] == s["id"]]
        addresses = [
            {
                "version": 4,
                "addr": p["fixed_ips"][0]["ip_address"],
                "OS-EXT-IPS:type": "fixed",
                "OS-EXT-IPS-MAC:mac_addr": p["mac_address"],
            }
            for p in ports
        ]
        port_ids = {p["id"] for p in ports}
        addresses += [
            {
                "version": 4,
                "addr": f["floating_ip_address"],
                "OS-EXT-IPS:type": "floating",
                "OS-EXT-IPS-MAC:mac_addr": ports[0]["mac_address"],
            }
            for f in self.fips.values()
            if f["port_id"] in port_ids
        ]
        created = s["created"].strftime("%Y-%m-%dT%H:%M:%SZ")
        host_id = hashlib.sha224(
            f"{self.project_id}{s['host']}".encode()
        ).hexdigest()  # as Nova hashes it
        doc = {
            "id": s["id"],
            "name": s["name"],
            "status": s["status"],
            "tenant_id": self.project_id,
            "user_id": s["user_id"],
            "metadata": dict(s["metadata"]),
            "hostId": host_id,
            "host_status": "UP",
            "image": {"id": s["image"], "links": []},
            "flavor": {
                "vcpus": 1,
                "ram": 1,
                "disk": 1,
                "ephemeral": 0,
                "swap": 0,
                "original_name": "baremetal",
                "extra_specs": {},
            },
            "created": created,
            "updated": created,
            "addresses": {"sharednet1": addresses} if addresses else {},
            "accessIPv4": "",
            "accessIPv6": "",
            "links": [],
            "OS-DCF:diskConfig": "MANUAL",
            "key_name": s["key_name"],
            "OS-EXT-AZ:availability_zone": "nova",
            "config_drive": "",
            "OS-EXT-STS:power_state": 1 if s["status"] == "ACTIVE" else 0,
            "OS-EXT-STS:task_state": "deleting" if s["id"] in self.deleting else None,
            "OS-EXT-STS:vm_state": s["status"].lower(),
            "OS-SRV-USG:launched_at": None,
            "OS-SRV-USG:terminated_at": None,
            "progress": 0,
            "security_groups": [{"name": "default"}],
            "locked": False,
            "locked_reason": None,
            "description": None,
            "tags": [],
            "trusted_image_certificates": None,
            "os-extended-volumes:volumes_attached": [],
        }
        if version < (2, 47):  # before 2.47 Nova names the flavor instead of describing it
            doc["flavor"] = {"id": self.flavor["id"], "links": []}
        if s["status"] == "ERROR":
            doc["fault"] = {"code": 500, "created": created, "message": s["fault"]}
        return doc

    def server_item(self, method, query, body, headers, server_id):
        self._token_check(headers)
        self._advance_deletes()
        s = self.servers.get(server_id)
        if s is None:
            raise self._nova_not_found(f"Instance {server_id} could not be found.")
        if method == "GET":
            return {"server": self._server_json(s, self._microversion(headers))}
        if method == "DELETE":
            self._delete_server(server_id)
            return Reply(204, None)
        raise Reply(405)

    def _delete_server(self, server_id):
        # twice is accepted, as by Nova; the second changes nothing
        self.deleting.setdefault(server_id, sim_now() + self.server_delete_s)
        for pid in [p["id"] for p in self.ports.values() if p["device_id"] == server_id]:
            self._unbind_port(pid)
            del self.ports[pid]
