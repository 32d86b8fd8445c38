"""Chameleon's APIs as python-chi reaches them, on one HTTP server (see __init__.py).

URL layout on http://127.0.0.1:PORT, for each site (common.SITES: CHI@TACC under /tacc, CHI@UC
under /uc, each with its own state: inventory, leases, servers, IPs, key pairs, network ids):
  /reference/sites.json, /reference/sites/<uid>/clusters/chameleon/nodes.json
                      (CHI_RESOURCE_API_URL)
  /hub/users/<name>                                                          (JUPYTERHUB_API_URL)
  /tacc:5000/v3/...   Keystone (python-chi builds auth_url as f"{site['web']}:5000/v3", and the
                      site's "web" is http://127.0.0.1:PORT/tacc)
  /tacc/blazar/v1, /tacc/nova/v2.1, /tacc/neutron, /tacc/glance: the service catalog's endpoints
  /_clock             the site's clock, for the notebooks' waits (common.py), not logged
Blazar, Nova and Neutron live in blazar.py, nova.py and neutron.py; this file holds the state,
the HTTP plumbing, identity, the hardware catalog, Glance and the site's passing faults.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from .blazar import BlazarMixin
from .common import (
    MINUTE,
    SITE,
    SITES,
    Drop,
    Reply,
    Reset,
    Site,
    advance,
    jumped,
    new_id,
    now,
    sim_now,
    user_id_of,
)
from .neutron import NeutronMixin
from .nova import NovaMixin

# What the site's proxy (HAProxy, in front of each API) answers when the service behind it is
# down or slow, and what each service answers for its own unexpected error.
PROXY_PAGES = {
    502: "<html><body><h1>502 Bad Gateway</h1>\nThe server returned an invalid or incomplete "
    "response.\n</body></html>\n",
    503: "<html><body><h1>503 Service Unavailable</h1>\nNo server is available to handle this "
    "request.\n</body></html>\n",
    504: "<html><body><h1>504 Gateway Time-out</h1>\nThe server didn't respond in time.\n"
    "</body></html>\n",
}
SERVICE_ERRORS = {
    "nova": {
        "computeFault": {
            "code": 500,
            "message": "Unexpected API Error. Please report this at "
            "http://bugs.launchpad.net/nova/ and attach the Nova API log if possible.\n"
            "<class 'oslo_db.exception.DBConnectionError'>",
        }
    },
    "neutron": {
        "NeutronError": {
            "type": "HTTPInternalServerError",
            "message": "Request Failed: internal server error while processing your request.",
            "detail": "",
        }
    },
    "blazar": {
        "error_code": 500,
        "error_name": "BlazarException",
        "error_message": "An unknown exception occurred.",
    },
}


class FakeChameleon(BlazarMixin, NovaMixin, NeutronMixin):
    """One project of a class at one site (`site`; the first one made answers for every site
    on its HTTP server, `at(name)`: the others), plus knobs for the scenarios.

    Knobs: `servers_fail` (how many server creations end in ERROR), `bad_hosts` (host ids whose
    every deploy fails), the site's durations in simulated seconds (common.py: `lease_start_s`,
    `boot_s` and `boots` (the next servers' own), `boot_fail_s`, `sshd_s` (sshd answers that
    long after ACTIVE), `keys_s` (and takes the key that much later, once cloud-init put it
    there), `server_delete_s`, `lease_delete_s`, `lease_end_s`), lease failures (`fail_starts`,
    `lost_answers`, `errors_after_create`: blazar.py), `su_left` (service units left in the
    project; None = no limit), `fip_quota` (floating IPs the project may hold), `server_quota`
    (Nova's instances quota), `faults()` (the site's passing faults: 5xx answers and resets on
    chosen requests), `degrade` (blazar.py: a lease's node fails, replaced or missing), `pool`
    (the shared pool's free addresses), `reservable_fips` (the
    addresses Blazar can reserve), `after_refusal` (called when Blazar refuses a lease), the
    hosts' calendars (`book`, `book_all`) and flags (a host's `reservable`, cleared in
    maintenance; `authorized_projects`, a comma-separated list of the projects it is kept for).
    """

    def __init__(
        self,
        user: str = "student",
        pool_size: int = 8,
        reservable: int = 60,
        site: Site = SITES[SITE],
        cloud: "FakeChameleon | None" = None,
    ):
        self.site, self.cloud = site, cloud or self  # cloud: the one serving HTTP for every site
        self.user = user
        self.user_id = user_id_of(user)
        self.projects = [
            {"id": "p-0001", "name": "CHI-000001"},
            {"id": "p-0002", "name": "CHI-231138"},
        ]
        self.project_id = None  # set by the project-scoped token
        self.hub_token = self.cloud.hub_token if cloud else "oidc-" + new_id()
        self.servers_fail = 0
        self.bad_hosts: set[str] = set()
        # how long the site takes (simulated seconds): as a class meets it on a good day
        self.lease_start_s = 3 * MINUTE
        self.boot_s, self.boots, self.boot_fail_s = 11 * MINUTE, [], 6 * MINUTE
        self.sshd_s, self.keys_s = 4 * MINUTE, MINUTE
        self.server_delete_s, self.lease_delete_s, self.lease_end_s = 90.0, MINUTE, MINUTE
        self.fail_starts = self.lost_answers = self.errors_after_create = 0
        self.su_left: float | None = None
        self.fip_quota: int | None = None  # floating IPs the project may hold (None: no limit)
        self.server_quota: int | None = None  # Nova's instances quota of the project
        self.pool = [f"{site.addresses}.1.{i}" for i in range(1, pool_size + 1)]
        self.reservable_fips = [f"{site.addresses}.0.{i}" for i in range(10, 10 + reservable)]
        self.fip_bookings: list[dict] = []
        self.after_refusal = lambda: None
        self.no_hosts_words = "Not enough hosts available"  # Blazar's words (another release's)
        self.fault_list: list[dict] = []  # the site's passing faults (faults())
        self.lock = self.cloud.lock if cloud else threading.RLock()
        self.log: list[dict] = self.cloud.log if cloud else []  # every site's requests, in order
        self.leases: dict[str, dict] = {}
        self.servers: dict[str, dict] = {}
        self.deleting: dict[str, int] = {}
        self.fips: dict[str, dict] = {}
        self.fip_history: dict[str, dict] = {}  # every floating IP ever made, for the tests
        self.ports: dict[str, dict] = {}
        self.port_owner: dict[str, str] = {}
        self.fixed_ips: dict[str, str] = {}  # server id -> its private IP, kept for the tests
        self.keypairs: dict[str, dict] = {}
        self.networks = {
            site.shared_net: {
                "id": site.shared_net,
                "name": "sharednet1",
                "router:external": False,
            },
            site.public_net: {"id": site.public_net, "name": "public", "router:external": True},
        }
        for net in self.networks.values():
            net.update(
                status="ACTIVE",
                admin_state_up=True,
                shared=True,
                subnets=[],
                tags=[],
                project_id="admin",
                tenant_id="admin",
                mtu=1500,
                description="",
            )
        self.images = {
            image_id: {
                "id": image_id,
                "name": name,
                "build-repo": "https://github.com/ChameleonCloud/cc-images",
            }
            for image_id, name in site.images
        }
        for img in self.images.values():
            img.update(
                status="active",
                visibility="public",
                created_at="2025-01-06T10:00:00Z",
                updated_at="2025-01-06T10:00:00Z",
                disk_format="qcow2",
                container_format="bare",
                tags=[],
                self=f"/v2/images/{img['id']}",
                file=f"/v2/images/{img['id']}/file",
                schema="/v2/schemas/image",
                min_disk=0,
                min_ram=0,
                protected=False,
                size=1,
            )
        self.flavor = {
            "id": "flv-bm",
            "name": "baremetal",
            "ram": 1,
            "disk": 1,
            "vcpus": 1,
            "OS-FLV-EXT-DATA:ephemeral": 0,
            "swap": "",
            "rxtx_factor": 1.0,
            "os-flavor-access:is_public": True,
            "description": None,
            "links": [],
            "extra_specs": {},
        }
        # Blazar's hosts, the hardware catalog's nodes (same uid) and each host's calendar
        self.hosts, self.gpus = [], {}
        for node_type, count, gpus, model, vendor in site.inventory:
            self.gpus[node_type] = (gpus, model, vendor)
            for _ in range(count):
                n = len(self.hosts)
                self.hosts.append(
                    {
                        "id": str(n + 1),
                        "hypervisor_hostname": new_id(),
                        "node_type": node_type,
                        "node_name": f"P3-{node_type.upper()}-{n:03d}",
                        "reservable": True,
                    }
                )
        self.allocations: dict[str, list] = {h["id"]: [] for h in self.hosts}
        self.front, self._own_front, self._base = None, False, ""
        # the other sites, answered by this one's HTTP server, under their own /<uid>
        self.by_uid = {site.uid: self}
        if cloud is None:
            for other in SITES.values():
                if other != site:
                    self.by_uid[other.uid] = FakeChameleon(
                        user, pool_size, reservable, site=other, cloud=self
                    )

    @property
    def base(self) -> str:
        return self.cloud._base

    def at(self, site_name: str) -> "FakeChameleon":
        """The site of that name (CHI@TACC, CHI@UC), served by the same HTTP server."""
        return next(x for x in self.cloud.by_uid.values() if x.site.name == site_name)

    # ------------------------------------------------------------------ lifecycle
    def start(self, front: "Front | None" = None) -> "FakeChameleon":
        """Answer on `front` (a worker's server, kept from one scenario to the next: the same
        address, so the kernels' zygote stays valid), or on a server of its own."""
        self.front = front or Front()
        self._own_front = front is None
        self.front.target = self
        self._base = self.front.base
        return self

    def stop(self) -> None:
        if self._own_front:
            self.front.stop()
        else:
            self.front.target = None

    def env(self) -> dict:
        """What Chameleon's Jupyter sets for python-chi (an OIDC token the hub refreshes)."""
        return {
            "OS_AUTH_URL": f"{self.base}/{self.site.uid}:5000/v3",
            "OS_AUTH_TYPE": "v3oidcaccesstoken",
            "OS_IDENTITY_PROVIDER": "chameleon",
            "OS_PROTOCOL": "openid",
            "OS_INTERFACE": "public",
            "OS_ACCESS_TOKEN": "expired",
            "OS_PROJECT_DOMAIN_NAME": "chameleon",
            "OS_REGION_NAME": self.site.name,
            "OS_USERNAME": self.user,
            "USER": self.user,
            "JUPYTERHUB_API_URL": f"{self.base}/hub",
            "JUPYTERHUB_API_TOKEN": "hub-secret",
            "JUPYTERHUB_USER": self.user,
            "CHI_RESOURCE_API_URL": f"{self.base}/reference",
        }

    # ------------------------------------------------------------------ dispatch
    def handle(self, method: str, raw_path: str, headers: dict, raw: bytes):
        parts = urlsplit(raw_path)
        path, query = parts.path, parse_qs(parts.query)
        body = json.loads(raw) if raw else None
        if path == "/_clock":  # the notebooks' waits (harness.py): not the site's API, not logged
            return 200, {"now": advance(body["advance"]) if body else sim_now()}, {}
        entry = {
            "method": method,
            "path": path,
            "query": {k: v[0] for k, v in query.items()},
            "body": body,
            "at": now().isoformat(),
        }  # when it arrived, for checking the times a notebook sends
        site = self.by_uid.get(re.split(r"[/:]", path + "/")[1], self)
        with self.lock:
            self.log.append(entry)
            try:
                site._fault(method, path, entry)
                out = site._route(method, path, query, headers, body)
                if not isinstance(out, Reply):
                    out = Reply(200, out)
                status, reply, extra = out.status, out.body, out.headers
            except Reply as r:
                status, reply, extra = r.status, r.body, r.headers
            except Drop:
                entry["status"] = "no answer"
                raise
            except Exception as exc:  # a bug in the fake: show it, never pass silently
                status, reply, extra = 500, {"fake_error": f"{type(exc).__name__}: {exc}"}, {}
        entry["status"] = status
        if method == "POST" and status < 300:
            entry["reply"] = copy.deepcopy(reply)
        return status, reply, extra

    # ------------------------------------------------------------------ the site's passing faults
    def faults(self, method: str, path: str, replies: list, waiting: bool = False) -> dict:
        """The next requests of `method` to a path matching `path` (a regex) get `replies`, one
        each, before the API answers again: 500 (the service's own error), 502, 503 or 504 (the
        site's proxy: an HTML page), "reset" (the connection reset) or "drop" (closed without an
        answer). waiting=True: only once a notebook's wait has moved the clock on since (the
        requests of the wait's own loop, not those before it). Returns the fault, whose
        "replies" left can be read, or emptied to end it."""
        fault = {"method": method, "path": path, "replies": list(replies), "waiting": waiting}
        fault["armed_at"] = jumped()
        self.fault_list.append(fault)
        return fault

    def _fault(self, method, path, entry):
        for fault in self.fault_list:
            if not fault["replies"] or method != fault["method"]:
                continue
            if not re.fullmatch(fault["path"], path):
                continue
            if fault["waiting"] and jumped() == fault["armed_at"]:
                continue  # no wait has moved the clock on since it was armed
            reply = fault["replies"].pop(0)
            entry["fault"] = reply
            if reply == "reset":
                raise Reset()
            if reply == "drop":
                raise Drop()
            if reply == 500:
                service = path.split("/")[2]
                raise Reply(500, SERVICE_ERRORS[service])
            raise Reply(reply, PROXY_PAGES[reply])

    def _route(self, method, path, query, headers, body):
        u = self.site.uid
        routes = [
            (r"/reference/sites\.json", self.sites),
            (r"/reference/sites/(\w+)/clusters/chameleon/nodes\.json", self.catalog_nodes),
            (r"/hub/users/([^/]+)", self.hub_user),
            (rf"/{u}:5000(/v3)?/?", self.keystone_versions),
            (
                rf"/{u}:5000/v3/OS-FEDERATION/identity_providers/chameleon/protocols/openid/auth",
                self.federated,
            ),
            (rf"/{u}:5000/v3/auth/tokens", self.tokens),
            (rf"/{u}:5000/v3/users/([^/]+)/projects", self.user_projects),
            (rf"/{u}:5000/v3/projects/([^/]+)", self.project),
            (rf"/{u}/blazar/v1/leases", self.leases_collection),
            (rf"/{u}/blazar/v1/leases/([^/]+)", self.lease_item),
            (rf"/{u}/blazar/v1/os-hosts", self.blazar_hosts),
            (rf"/{u}/blazar/v1/os-hosts/allocations", self.blazar_allocations),
            (rf"/{u}/blazar/v1/os-hosts/([^/]+)/allocation", self.blazar_allocation),
            (rf"/{u}/nova/?", self.nova_versions),
            (rf"/{u}/nova/v2\.1/?", self.nova_version),
            (rf"/{u}/nova/v2\.1/flavors/detail", self.flavors),
            (rf"/{u}/nova/v2\.1/flavors/([^/]+)", self.flavor_item),
            (rf"/{u}/nova/v2\.1/os-keypairs", self.keypairs_collection),
            (rf"/{u}/nova/v2\.1/os-keypairs/([^/]+)", self.keypair_item),
            (rf"/{u}/nova/v2\.1/servers(/detail)?", self.servers_collection),
            (rf"/{u}/nova/v2\.1/servers/([^/]+)", self.server_item),
            (rf"/{u}/neutron/?", self.neutron_versions),
            (rf"/{u}/neutron/v2\.0/networks", self.networks_collection),
            (rf"/{u}/neutron/v2\.0/networks/([^/]+)", self.network_item),
            (rf"/{u}/neutron/v2\.0/floatingips", self.fips_collection),
            (rf"/{u}/neutron/v2\.0/floatingips/([^/]+)", self.fip_item),
            (rf"/{u}/neutron/v2\.0/ports", self.ports_collection),
            (rf"/{u}/neutron/v2\.0/ports/([^/]+)", self.port_item),
            (rf"/{u}/glance/?", self.glance_versions),
            (rf"/{u}/glance/v2/schemas/image", self.image_schema),
            (rf"/{u}/glance/v2/images", self.images_collection),
            (rf"/{u}/glance/v2/images/([^/]+)", self.image_item),
        ]
        for pattern, fn in routes:
            m = re.fullmatch(pattern, path)
            if m:
                args = [g for g in m.groups() if g is not None and not g.startswith("/")]
                return fn(method, query, body, headers, *args)
        if path.startswith(f"/{u}/neutron/"):  # as Neutron answers a path it has no resource for
            self.log[-1]["unrouted"] = True
            raise Reply(
                404,
                {
                    "NeutronError": {
                        "type": "HTTPNotFound",
                        "message": "The resource could not be found.",
                        "detail": "",
                    }
                },
            )
        raise Reply(501, {"fake_error": f"not served by the fake: {method} {path}"})

    def _token_check(self, headers):
        token = headers.get("X-Auth-Token") or headers.get("x-auth-token")
        if token != "ks-project-token":
            raise Reply(
                401,
                {
                    "error": {
                        "code": 401,
                        "message": "The request you have made requires authentication.",
                        "title": "Unauthorized",
                    }
                },
            )

    # -------------------------------------------------------------- reference API, hub, keystone
    def sites(self, method, query, body, headers):
        return {
            "items": [
                {
                    "name": x.site.name,
                    "web": f"{self.base}/{x.site.uid}",
                    "location": x.site.location,
                    "user_support_contact": "help@chameleoncloud.org",
                    "site_class": "core",
                    "uid": x.site.uid,
                }
                for x in self.cloud.by_uid.values()
            ]
        }

    def catalog_nodes(self, method, query, body, headers, uid):
        site = self.cloud.by_uid[uid]

        def gpu(node_type):
            count, model, vendor = site.gpus[node_type]
            if not count:
                return {"gpu": False}
            return {
                "gpu": True,
                "gpu_count": count,
                "gpu_model": model,
                "gpu_name": model,
                "gpu_vendor": vendor,
            }

        items = [
            {
                "node_name": h["node_name"],
                "node_type": h["node_type"],
                "uid": h["hypervisor_hostname"],
                "gpu": gpu(h["node_type"]),
                "architecture": {"smt_size": 48, "platform_type": "x86_64"},
                "bios": {},
                "processor": {},
                "main_memory": {"humanized_ram_size": "128 GiB"},
                "network_adapters": [],
                "placement": {},
                "storage_devices": [],
                "version": "1",
            }
            for h in site.hosts
        ]
        return {"items": items}

    def hub_user(self, method, query, body, headers, name):
        if headers.get("authorization") != "token hub-secret" or name != self.user:
            raise Reply(403, {"status": 403, "message": "Forbidden"})
        expires = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)).timestamp()
        return {"name": name, "auth_state": {"access_token": self.hub_token, "expires_at": expires}}

    def keystone_versions(self, method, query, body, headers):
        v3 = {
            "id": "v3.14",
            "status": "stable",
            "updated": "2020-04-07T00:00:00Z",
            "links": [{"rel": "self", "href": f"{self.base}/{self.site.uid}:5000/v3/"}],
            "media-types": [
                {"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}
            ],
        }
        return {"version": v3}

    def _token_body(self, project: dict | None):
        token = {
            "methods": ["mapped" if project is None else "token"],
            "user": {
                "id": self.user_id,
                "name": self.user,
                "domain": {"id": "default", "name": "Default"},
                "OS-FEDERATION": {
                    "identity_provider": {"id": "chameleon"},
                    "protocol": {"id": "openid"},
                    "groups": [],
                },
            },
            "expires_at": "2099-01-01T00:00:00.000000Z",
            "issued_at": now().strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
            "audit_ids": ["a"],
        }
        if project is not None:
            token["project"] = {
                "id": project["id"],
                "name": project["name"],
                "domain": {"id": "chameleon-id", "name": "chameleon"},
            }
            token["roles"] = [{"id": "r1", "name": "member"}]
            token["catalog"] = self._catalog()
        return {"token": token}

    def _catalog(self):
        def service(kind, name, path):
            return {
                "type": kind,
                "name": name,
                "id": name,
                "endpoints": [
                    {
                        "id": f"{name}-{i}",
                        "interface": i,
                        "region": self.site.name,
                        "region_id": self.site.name,
                        "url": f"{self.base}{path}",
                    }
                    for i in ("public", "internal")
                ],
            }

        u = self.site.uid
        return [
            service("identity", "keystone", f"/{u}:5000/v3"),
            service("reservation", "blazar", f"/{u}/blazar/v1"),
            service("compute", "nova", f"/{u}/nova/v2.1"),
            service("network", "neutron", f"/{u}/neutron"),
            service("image", "glance", f"/{u}/glance"),
        ]

    def federated(self, method, query, body, headers):
        if method != "POST":
            raise Reply(405)
        if headers.get("Authorization") != f"Bearer {self.hub_token}":
            raise Reply(
                401,
                {
                    "error": {
                        "code": 401,
                        "message": "access token not valid (not the hub's)",
                        "title": "Unauthorized",
                    }
                },
            )
        raise Reply(201, self._token_body(None), {"X-Subject-Token": "ks-unscoped-token"})

    def tokens(self, method, query, body, headers):
        auth = body["auth"]
        ident = auth["identity"]
        if ident["methods"] != ["token"] or ident["token"]["id"] != "ks-unscoped-token":
            raise Reply(
                401, {"error": {"code": 401, "message": "bad token", "title": "Unauthorized"}}
            )
        scope = auth.get("scope", {}).get("project")
        if scope is None:
            raise Reply(201, self._token_body(None), {"X-Subject-Token": "ks-unscoped-token"})
        match = [
            p
            for p in self.projects
            if scope.get("id") == p["id"]
            or (
                scope.get("name") == p["name"]
                and scope.get("domain", {}).get("name") == "chameleon"
            )
        ]
        if not match:
            raise Reply(
                401,
                {"error": {"code": 401, "message": f"no project {scope}", "title": "Unauthorized"}},
            )
        self.project_id = match[0]["id"]
        raise Reply(201, self._token_body(match[0]), {"X-Subject-Token": "ks-project-token"})

    def user_projects(self, method, query, body, headers, user_id):
        if user_id != self.user_id:
            raise Reply(403, {"error": {"code": 403, "message": "not you", "title": "Forbidden"}})
        return {
            "projects": [
                dict(
                    p,
                    domain_id="chameleon-id",
                    enabled=True,
                    description="",
                    is_domain=False,
                    parent_id="chameleon-id",
                    tags=[],
                    links={},
                )
                for p in self.projects
            ],
            "links": {"self": "", "next": None, "previous": None},
        }

    def project(self, method, query, body, headers, project_id):
        self._token_check(headers)
        for p in self.projects:
            if p["id"] == project_id:
                return {"project": dict(p, domain_id="chameleon-id", enabled=True, links={})}
        raise Reply(
            404, {"error": {"code": 404, "message": "Could not find project", "title": "Not Found"}}
        )

    # ------------------------------------------------------------------ glance
    def glance_versions(self, method, query, body, headers):
        return Reply(
            300,
            {
                "versions": [
                    {
                        "id": "v2.16",
                        "status": "CURRENT",
                        "links": [
                            {"rel": "self", "href": f"{self.base}/{self.site.uid}/glance/v2/"}
                        ],
                    }
                ]
            },
        )

    def image_schema(self, method, query, body, headers):
        self._token_check(headers)
        props = {
            k: {"type": ["null", "string"]}
            for k in (
                "id",
                "name",
                "status",
                "visibility",
                "created_at",
                "updated_at",
                "disk_format",
                "container_format",
                "self",
                "file",
                "schema",
            )
        }
        props.update(
            tags={"type": "array", "items": {"type": "string"}},
            min_disk={"type": "integer"},
            min_ram={"type": "integer"},
            protected={"type": "boolean"},
            size={"type": ["null", "integer"]},
        )
        return {
            "name": "image",
            "properties": props,
            "additionalProperties": {"type": "string"},
            "links": [],
        }

    def images_collection(self, method, query, body, headers):
        self._token_check(headers)
        images = [
            i for i in self.images.values() if "name" not in query or i["name"] == query["name"][0]
        ]
        return {"images": images, "first": "/v2/images", "schema": "/v2/schemas/images"}

    def image_item(self, method, query, body, headers, image_id):
        self._token_check(headers)
        if image_id not in self.images:
            raise Reply(404, None)
        return self.images[image_id]


class Front:
    """The HTTP server on 127.0.0.1 answering for a FakeChameleon (`target`, every site)."""

    def __init__(self):
        front = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _serve(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if front.target is None:  # between two scenarios: a last request of a kernel
                    self.send_error(503)
                    return
                try:
                    status, body, headers = front.target.handle(
                        self.command, self.path, dict(self.headers), raw
                    )
                except Reset:  # RST instead of an answer: SO_LINGER 0, then close
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.connection.close()
                    self.close_connection = True
                    return
                except Drop:  # the answer lost: the connection closes without one
                    self.close_connection = True
                    return
                text = isinstance(body, str)  # a proxy's HTML page (a 502/503/504)
                data = b"" if body is None else (body if text else json.dumps(body)).encode()
                self.send_response(status)
                if body is not None:
                    self.send_header("Content-Type", "text/html" if text else "application/json")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _serve

        self.target: FakeChameleon | None = None
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
