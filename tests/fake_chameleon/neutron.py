"""Neutron's floating IPs as a class shares them: one project, everyone's addresses in one list.

Floating IPs come from two places: Blazar's reservable addresses (created in the project when
their lease starts, tagged `reservation:<id>`) and the site's shared pool (allocated on request;
`pool` empty = "No more IP addresses available", as Neutron answers; `fip_quota` reached =
"Quota exceeded"). As in Neutron, an update
may move an IP that is bound to one port onto another (so a careless client can take a
classmate's IP); it is refused only when the target port already has a floating IP.
Which node answers SSH on which address follows from the bindings (nova.py's `ssh_ready`, read
by the harness). Each port gets a fixed IP of its own on the shared network (never one reused).
"""

from __future__ import annotations

import copy

from .common import Reply, new_id, now


def _neutron_error(status, kind, message):
    return Reply(status, {"NeutronError": {"type": kind, "message": message, "detail": ""}})


class NeutronMixin:
    def neutron_versions(self, method, query, body, headers):
        return {
            "versions": [
                {
                    "id": "v2.0",
                    "status": "CURRENT",
                    "links": [
                        {"rel": "self", "href": f"{self.base}/{self.site.uid}/neutron/v2.0/"}
                    ],
                }
            ]
        }

    def networks_collection(self, method, query, body, headers):
        self._token_check(headers)
        nets = [
            n
            for n in self.networks.values()
            if all(str(n.get(k)) == v[0] for k, v in query.items() if k in ("name", "id"))
        ]
        return {"networks": nets}

    def network_item(self, method, query, body, headers, ref):
        self._token_check(headers)
        if ref not in self.networks:
            raise _neutron_error(404, "NetworkNotFound", f"Network {ref} could not be found.")
        return {"network": self.networks[ref]}

    # ------------------------------------------------------------------ floating IPs
    def _new_fip(self, address, tags=(), project_id=None, description=""):
        project_id = project_id or self.project_id
        fip = {
            "id": new_id(),
            "floating_ip_address": address,
            "floating_network_id": self.site.public_net,
            "port_id": None,
            "fixed_ip_address": None,
            "router_id": None,
            "status": "DOWN",
            "project_id": project_id,
            "tenant_id": project_id,
            "tags": list(tags),
            "description": description,
            "port_details": None,
            "dns_domain": "",
            "dns_name": "",
            "qos_policy_id": None,
            "revision_number": 0,
            "created_at": now().isoformat() + "Z",
            "updated_at": now().isoformat() + "Z",
        }
        self.fips[fip["id"]] = fip
        self.fip_history[fip["id"]] = {
            "address": address,
            "tags": list(tags),
            "description": description,
        }
        return fip

    def fips_collection(self, method, query, body, headers):
        self._token_check(headers)
        if method == "GET":
            return {
                "floatingips": [
                    copy.deepcopy(f)
                    for f in self.fips.values()
                    if f["project_id"] == self.project_id
                ]
            }
        req = body["floatingip"]
        if req.get("floating_network_id") != self.site.public_net:
            raise _neutron_error(400, "BadRequest", "bad network")
        in_project = sum(f["project_id"] == self.project_id for f in self.fips.values())
        if self.fip_quota is not None and in_project >= self.fip_quota:
            raise _neutron_error(409, "OverQuota", "Quota exceeded for resources: ['floatingip'].")
        if not self.pool:
            raise _neutron_error(
                409,
                "IpAddressGenerationFailure",
                f"No more IP addresses available on network {self.site.public_net}.",
            )
        fip = self._new_fip(self.pool.pop(0), description=req.get("description", ""))
        return Reply(201, {"floatingip": copy.deepcopy(fip)})

    def fip_item(self, method, query, body, headers, fip_id):
        self._token_check(headers)
        fip = self.fips.get(fip_id)
        if fip is None or fip["project_id"] != self.project_id:
            raise _neutron_error(
                404, "FloatingIPNotFound", f"Floating IP {fip_id} could not be found"
            )
        if method == "PUT":  # only the fields sent change, as in Neutron
            if "description" in body["floatingip"]:
                fip["description"] = body["floatingip"]["description"]
                self.fip_history[fip_id]["description"] = fip["description"]
            if "port_id" in body["floatingip"]:
                self._bind(fip, body["floatingip"]["port_id"])
            return {"floatingip": copy.deepcopy(fip)}
        if method == "DELETE":
            self._bind(fip, None)
            del self.fips[fip_id]
            if not any("reservation:" in t for t in fip["tags"]):
                self.pool.append(fip["floating_ip_address"])  # back to the shared pool
            return Reply(204, None)
        return {"floatingip": copy.deepcopy(fip)}

    def _bind(self, fip, port_id):
        if port_id is not None and port_id not in self.ports:
            raise _neutron_error(404, "PortNotFound", f"Port {port_id} could not be found.")
        if port_id is not None and any(
            f["port_id"] == port_id for f in self.fips.values() if f is not fip
        ):
            raise _neutron_error(
                409,
                "FloatingIPPortAlreadyAssociated",
                f"Cannot associate floating IP {fip['floating_ip_address']} with port "
                f"{port_id}: that fixed IP already has a floating IP.",
            )
        fixed = self.ports[port_id]["fixed_ips"][0]["ip_address"] if port_id else None
        fip.update(port_id=port_id, status="ACTIVE" if port_id else "DOWN", fixed_ip_address=fixed)

    def _unbind_port(self, port_id):
        for f in self.fips.values():
            if f["port_id"] == port_id:
                self._bind(f, None)

    # ------------------------------------------------------------------ ports
    def _new_port(self, server_id):
        n = len(self.port_owner) + 17  # every port made so far (port_owner keeps them all)
        port = {
            "id": new_id(),
            "device_id": server_id,
            "device_owner": "compute:nova",
            "network_id": self.site.shared_net,
            "mac_address": f"fa:16:3e:00:{n // 256:02x}:{n % 256:02x}",
            "status": "ACTIVE",
            "admin_state_up": True,
            "name": "",
            "fixed_ips": [
                {"subnet_id": "sub-shared", "ip_address": f"{self.site.fixed}.{n // 256}.{n % 256}"}
            ],
            "project_id": self.project_id or "p-0002",
            "tenant_id": self.project_id or "p-0002",
            "tags": [],
        }
        return port

    def ports_collection(self, method, query, body, headers):
        self._token_check(headers)
        ports = [
            p for p in self.ports.values() if all(str(p.get(k)) == v[0] for k, v in query.items())
        ]
        return {"ports": ports}

    def port_item(self, method, query, body, headers, port_id):
        self._token_check(headers)
        if port_id not in self.ports:
            raise _neutron_error(404, "PortNotFound", f"Port {port_id} could not be found.")
        return {"port": self.ports[port_id]}
