"""Chameleon's APIs as python-chi 1.2.10 reaches them, on one HTTP server (see __init__.py).

URL layout on http://127.0.0.1:PORT:
  /reference/sites.json, /reference/sites/<site>/clusters/chameleon/nodes.json   (CHI_RESOURCE_API_URL)
  /hub/users/<name>                                                                (JUPYTERHUB_API_URL)
  /tacc:5000/v3/...        Keystone (python-chi builds auth_url as f"{site['web']}:5000/v3", and the
                           site's "web" is http://127.0.0.1:PORT/tacc)
  /tacc/blazar/v1, /tacc/nova/v2.1, /tacc/neutron, /tacc/glance: the service catalog's endpoints
"""
from __future__ import annotations

import base64
import copy
import datetime as dt
import hashlib
import json
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

BLAZAR_IN = "%Y-%m-%d %H:%M"
BLAZAR_OUT = "%Y-%m-%dT%H:%M:%S.%f"
SITE = "CHI@TACC"


class Reply(Exception):
    def __init__(self, status: int, body=None, headers: dict | None = None):
        self.status, self.body, self.headers = status, body, headers or {}


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def new_id() -> str:
    return str(uuid.uuid4())


def fingerprint(public_key: str) -> str:
    digest = hashlib.md5(base64.b64decode(public_key.split()[1])).hexdigest()
    return ":".join(digest[i:i + 2] for i in range(0, 32, 2))


class FakeChameleon:
    """State of one project at one site, plus knobs for the scenarios.

    Knobs: `free_hosts` (0 = Blazar refuses new host reservations), `servers_fail` (how many
    server creations end in ERROR), `delete_polls` (how many server-list reads still show a
    deleted server, as a bare-metal delete takes a while).
    """

    def __init__(self, user: str = "student", fip_address: str = "127.20.0.10"):
        self.user = user
        self.user_id = "u-" + hashlib.sha1(user.encode()).hexdigest()[:24]
        self.projects = [{"id": "p-0001", "name": "CHI-000001"}, {"id": "p-0002", "name": "CHI-231138"}]
        self.project_id = None  # set by the project-scoped token
        self.hub_token = "oidc-" + new_id()
        self.free_hosts = 1
        self.servers_fail = 0
        self.delete_polls = 1
        self.fip_address = fip_address
        self.lock = threading.RLock()
        self.log: list[dict] = []
        self.leases: dict[str, dict] = {}
        self.servers: dict[str, dict] = {}
        self.deleting: dict[str, int] = {}
        self.fips: dict[str, dict] = {}
        self.ports: dict[str, dict] = {}
        self.keypairs: dict[str, dict] = {}
        self.networks = {
            "net-shared": {"id": "net-shared", "name": "sharednet1", "router:external": False},
            "net-public": {"id": "net-public", "name": "public", "router:external": True},
        }
        for net in self.networks.values():
            net.update(status="ACTIVE", admin_state_up=True, shared=True, subnets=[], tags=[],
                       project_id="admin", tenant_id="admin", mtu=1500, description="")
        self.images = {
            "img-cuda": {"id": "img-cuda", "name": "CC-Ubuntu24.04-CUDA",
                         "build-repo": "https://github.com/ChameleonCloud/cc-images"},
            "img-plain": {"id": "img-plain", "name": "CC-Ubuntu24.04",
                          "build-repo": "https://github.com/ChameleonCloud/cc-images"},
        }
        for img in self.images.values():
            img.update(status="active", visibility="public", created_at="2025-01-06T10:00:00Z",
                       updated_at="2025-01-06T10:00:00Z", disk_format="qcow2", container_format="bare",
                       tags=[], self=f"/v2/images/{img['id']}", file=f"/v2/images/{img['id']}/file",
                       schema="/v2/schemas/image", min_disk=0, min_ram=0, protected=False, size=1)
        self.flavor = {"id": "flv-bm", "name": "baremetal", "ram": 1, "disk": 1, "vcpus": 1,
                       "OS-FLV-EXT-DATA:ephemeral": 0, "swap": "", "rxtx_factor": 1.0,
                       "os-flavor-access:is_public": True, "description": None, "links": [],
                       "extra_specs": {}}
        # Blazar's hosts and the hardware catalog: two gpu_p100 nodes and one gpu_v100
        self.hosts = [{"id": str(i + 1), "hypervisor_hostname": new_id(), "node_type": t,
                       "node_name": f"P3-GPU-{i:03d}", "reservable": True}
                      for i, t in enumerate(["gpu_p100", "gpu_p100", "gpu_v100"])]
        self.allocations: dict[str, list] = {h["id"]: [] for h in self.hosts}
        self.server = None
        self.base = ""

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "FakeChameleon":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _serve(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                status, body, headers = fake.handle(self.command, self.path, dict(self.headers), raw)
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                if body is not None:
                    self.send_header("Content-Type", "application/json")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server:
            self.server.shutdown()

    def env(self) -> dict:
        """What Chameleon's Jupyter sets for python-chi (OIDC access token refreshed via the hub)."""
        return {
            "OS_AUTH_URL": f"{self.base}/tacc:5000/v3", "OS_AUTH_TYPE": "v3oidcaccesstoken",
            "OS_IDENTITY_PROVIDER": "chameleon", "OS_PROTOCOL": "openid", "OS_INTERFACE": "public",
            "OS_ACCESS_TOKEN": "expired", "OS_PROJECT_DOMAIN_NAME": "chameleon",
            "OS_REGION_NAME": SITE, "OS_USERNAME": self.user, "USER": self.user,
            "JUPYTERHUB_API_URL": f"{self.base}/hub", "JUPYTERHUB_API_TOKEN": "hub-secret",
            "JUPYTERHUB_USER": self.user, "CHI_RESOURCE_API_URL": f"{self.base}/reference",
        }

    # ------------------------------------------------------------------ dispatch
    def handle(self, method: str, raw_path: str, headers: dict, raw: bytes):
        parts = urlsplit(raw_path)
        path, query = parts.path, parse_qs(parts.query)
        body = json.loads(raw) if raw else None
        entry = {"method": method, "path": path, "query": {k: v[0] for k, v in query.items()}, "body": body}
        with self.lock:
            self.log.append(entry)
            try:
                out = self._route(method, path, query, headers, body)
                if not isinstance(out, Reply):
                    out = Reply(200, out)
                status, reply, extra = out.status, out.body, out.headers
            except Reply as r:
                status, reply, extra = r.status, r.body, r.headers
            except Exception as exc:  # a bug in the fake: show it, never pass silently
                status, reply, extra = 500, {"fake_error": f"{type(exc).__name__}: {exc}"}, {}
        entry["status"] = status
        if method == "POST" and status < 300:
            entry["reply"] = copy.deepcopy(reply)
        return status, reply, extra

    def _route(self, method, path, query, headers, body):
        routes = [
            (r"/reference/sites\.json", self.sites),
            (r"/reference/sites/(\w+)/clusters/chameleon/nodes\.json", self.catalog_nodes),
            (r"/hub/users/([^/]+)", self.hub_user),
            (r"/tacc:5000(/v3)?/?", self.keystone_versions),
            (r"/tacc:5000/v3/OS-FEDERATION/identity_providers/chameleon/protocols/openid/auth", self.federated),
            (r"/tacc:5000/v3/auth/tokens", self.tokens),
            (r"/tacc:5000/v3/users/([^/]+)/projects", self.user_projects),
            (r"/tacc:5000/v3/projects/([^/]+)", self.project),
            (r"/tacc/blazar/v1/leases", self.leases_collection),
            (r"/tacc/blazar/v1/leases/([^/]+)", self.lease_item),
            (r"/tacc/blazar/v1/os-hosts", self.blazar_hosts),
            (r"/tacc/blazar/v1/os-hosts/allocations", self.blazar_allocations),
            (r"/tacc/blazar/v1/os-hosts/([^/]+)/allocation", self.blazar_allocation),
            (r"/tacc/nova/?", self.nova_versions),
            (r"/tacc/nova/v2\.1/?", self.nova_version),
            (r"/tacc/nova/v2\.1/flavors/detail", self.flavors),
            (r"/tacc/nova/v2\.1/flavors/([^/]+)", self.flavor_item),
            (r"/tacc/nova/v2\.1/os-keypairs", self.keypairs_collection),
            (r"/tacc/nova/v2\.1/os-keypairs/([^/]+)", self.keypair_item),
            (r"/tacc/nova/v2\.1/servers(/detail)?", self.servers_collection),
            (r"/tacc/nova/v2\.1/servers/([^/]+)", self.server_item),
            (r"/tacc/neutron/?", self.neutron_versions),
            (r"/tacc/neutron/v2\.0/networks", self.networks_collection),
            (r"/tacc/neutron/v2\.0/networks/([^/]+)", self.network_item),
            (r"/tacc/neutron/v2\.0/floatingips", self.fips_collection),
            (r"/tacc/neutron/v2\.0/floatingips/([^/]+)", self.fip_item),
            (r"/tacc/neutron/v2\.0/ports", self.ports_collection),
            (r"/tacc/glance/?", self.glance_versions),
            (r"/tacc/glance/v2/schemas/image", self.image_schema),
            (r"/tacc/glance/v2/images", self.images_collection),
            (r"/tacc/glance/v2/images/([^/]+)", self.image_item),
        ]
        for pattern, fn in routes:
            m = re.fullmatch(pattern, path)
            if m:
                args = [g for g in m.groups() if g is not None and not g.startswith("/")]
                return fn(method, query, body, headers, *args)
        raise Reply(501, {"fake_error": f"not served by the fake: {method} {path}"})

    def _token_check(self, headers):
        token = headers.get("X-Auth-Token") or headers.get("x-auth-token")
        if token != "ks-project-token":
            raise Reply(401, {"error": {"code": 401, "message": "The request you have made requires authentication.",
                                        "title": "Unauthorized"}})

    # ------------------------------------------------------------------ reference API, hub, keystone
    def sites(self, method, query, body, headers):
        site = {"name": SITE, "web": f"{self.base}/tacc", "location": "Austin, Texas, USA",
                "user_support_contact": "help@chameleoncloud.org", "site_class": "core", "uid": "tacc"}
        other = dict(site, name="CHI@UC", web=f"{self.base}/uc", location="Chicago, Illinois, USA", uid="uc")
        return {"items": [site, other]}

    def catalog_nodes(self, method, query, body, headers, site):
        items = [{"node_name": h["node_name"], "node_type": h["node_type"], "uid": h["hypervisor_hostname"],
                  "gpu": {"gpu": True, "gpu_count": 2 if h["node_type"] == "gpu_p100" else 4,
                          "gpu_model": "P100" if h["node_type"] == "gpu_p100" else "V100"},
                  "architecture": {"smt_size": 48, "platform_type": "x86_64"}, "bios": {}, "processor": {},
                  "main_memory": {"humanized_ram_size": "128 GiB"}, "network_adapters": [], "placement": {},
                  "storage_devices": [], "version": "1"} for h in self.hosts]
        return {"items": items}

    def hub_user(self, method, query, body, headers, name):
        if headers.get("authorization") != "token hub-secret" or name != self.user:
            raise Reply(403, {"status": 403, "message": "Forbidden"})
        expires = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)).timestamp()
        return {"name": name, "auth_state": {"access_token": self.hub_token, "expires_at": expires}}

    def keystone_versions(self, method, query, body, headers):
        v3 = {"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
              "links": [{"rel": "self", "href": f"{self.base}/tacc:5000/v3/"}],
              "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}]}
        return {"version": v3}

    def _token_body(self, project: dict | None):
        token = {"methods": ["mapped" if project is None else "token"],
                 "user": {"id": self.user_id, "name": self.user, "domain": {"id": "default", "name": "Default"},
                          "OS-FEDERATION": {"identity_provider": {"id": "chameleon"}, "protocol": {"id": "openid"},
                                            "groups": []}},
                 "expires_at": "2099-01-01T00:00:00.000000Z", "issued_at": now().strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
                 "audit_ids": ["a"]}
        if project is not None:
            token["project"] = {"id": project["id"], "name": project["name"],
                                "domain": {"id": "chameleon-id", "name": "chameleon"}}
            token["roles"] = [{"id": "r1", "name": "member"}]
            token["catalog"] = self._catalog()
        return {"token": token}

    def _catalog(self):
        def service(kind, name, path):
            return {"type": kind, "name": name, "id": name,
                    "endpoints": [{"id": f"{name}-{i}", "interface": i, "region": SITE, "region_id": SITE,
                                   "url": f"{self.base}{path}"} for i in ("public", "internal")]}
        return [service("identity", "keystone", "/tacc:5000/v3"), service("reservation", "blazar", "/tacc/blazar/v1"),
                service("compute", "nova", "/tacc/nova/v2.1"), service("network", "neutron", "/tacc/neutron"),
                service("image", "glance", "/tacc/glance")]

    def federated(self, method, query, body, headers):
        if method != "POST":
            raise Reply(405)
        if headers.get("Authorization") != f"Bearer {self.hub_token}":
            raise Reply(401, {"error": {"code": 401, "message": "access token not valid (not the hub's)",
                                        "title": "Unauthorized"}})
        raise Reply(201, self._token_body(None), {"X-Subject-Token": "ks-unscoped-token"})

    def tokens(self, method, query, body, headers):
        auth = body["auth"]
        ident = auth["identity"]
        if ident["methods"] != ["token"] or ident["token"]["id"] != "ks-unscoped-token":
            raise Reply(401, {"error": {"code": 401, "message": "bad token", "title": "Unauthorized"}})
        scope = auth.get("scope", {}).get("project")
        if scope is None:
            raise Reply(201, self._token_body(None), {"X-Subject-Token": "ks-unscoped-token"})
        match = [p for p in self.projects
                 if scope.get("id") == p["id"] or (scope.get("name") == p["name"]
                                                   and scope.get("domain", {}).get("name") == "chameleon")]
        if not match:
            raise Reply(401, {"error": {"code": 401, "message": f"no project {scope}", "title": "Unauthorized"}})
        self.project_id = match[0]["id"]
        raise Reply(201, self._token_body(match[0]), {"X-Subject-Token": "ks-project-token"})

    def user_projects(self, method, query, body, headers, user_id):
        if user_id != self.user_id:
            raise Reply(403, {"error": {"code": 403, "message": "not you", "title": "Forbidden"}})
        return {"projects": [dict(p, domain_id="chameleon-id", enabled=True, description="", is_domain=False,
                                  parent_id="chameleon-id", tags=[], links={}) for p in self.projects],
                "links": {"self": "", "next": None, "previous": None}}

    def project(self, method, query, body, headers, project_id):
        self._token_check(headers)
        for p in self.projects:
            if p["id"] == project_id:
                return {"project": dict(p, domain_id="chameleon-id", enabled=True, links={})}
        raise Reply(404, {"error": {"code": 404, "message": "Could not find project", "title": "Not Found"}})

    # ------------------------------------------------------------------ blazar
    def _blazar_error(self, code, name, message):
        return Reply(code, {"error_code": code, "error_name": name, "error_message": message})

    def _lease_json(self, lease):
        # a lease whose start time has come moves on, as Blazar's periodic task does
        if lease["status"] == "PENDING" and dt.datetime.strptime(lease["start_date"], BLAZAR_OUT) <= now():
            self._activate(lease)
        elif lease["status"] == "STARTING":
            self._activate(lease)
        return copy.deepcopy(lease)

    def _activate(self, lease):
        lease["status"] = "ACTIVE"
        for r in lease["reservations"]:
            r["status"] = "active"
            if r["resource_type"] == "virtual:floatingip":
                fip = self._new_fip(self.fip_address, tags=["blazar", f"reservation:{r['id']}"])
                r["required_floatingips"] = []
                fip["description"] = f"reserved by lease {lease['id']}"

    def leases_collection(self, method, query, body, headers):
        self._token_check(headers)
        if method == "GET":
            return {"leases": [self._lease_json(x) for x in self.leases.values()
                               if x["project_id"] == self.project_id]}
        if method != "POST":
            raise Reply(405)
        return Reply(201, {"lease": self._create_lease(body)})

    def _create_lease(self, body):
        expected = {"name", "start_date", "end_date", "reservations", "events", "before_end_date"}
        if set(body) != expected:
            raise self._blazar_error(400, "MalformedRequestBody", f"unexpected keys {sorted(set(body) ^ expected)}")
        if not isinstance(body["name"], str) or not body["name"]:
            raise self._blazar_error(400, "MalformedParameter", "Malformed parameter name")
        start = now() if body["start_date"] == "now" else dt.datetime.strptime(body["start_date"], BLAZAR_IN)
        end = dt.datetime.strptime(body["end_date"], BLAZAR_IN)
        if end <= start:
            raise self._blazar_error(400, "InvalidInput", "End date must be later than start date")
        if body["start_date"] != "now" and start < now() - dt.timedelta(minutes=1):
            raise self._blazar_error(400, "InvalidInput", "Start date must be later than current date")
        reservations = []
        for r in body["reservations"]:
            kind = r.get("resource_type")
            rid = new_id()
            if kind == "physical:host":
                props = json.loads(r["resource_properties"])
                if not (isinstance(r.get("min"), int) and r["min"] == r["max"] == 1):
                    raise self._blazar_error(400, "MalformedParameter", f"min/max {r.get('min')}/{r.get('max')}")
                if props[:2] != ["==", "$node_type"] or len(props) != 3 or r.get("hypervisor_properties") != "":
                    raise self._blazar_error(400, "InvalidInput", f"resource_properties {r['resource_properties']}")
                node_type = props[2]
                if node_type not in {h["node_type"] for h in self.hosts}:
                    raise self._blazar_error(400, "InvalidInput", f"no host matches {r['resource_properties']}")
                if self.free_hosts <= 0:
                    raise self._blazar_error(409, "NotEnoughHostsAvailable", "Not enough hosts available")
                self.free_hosts -= 1
                reservations.append({"id": rid, "resource_type": kind, "resource_id": new_id(), "status": "pending",
                                     "min": 1, "max": 1, "resource_properties": r["resource_properties"],
                                     "hypervisor_properties": "", "before_end": "default", "on_start": "default",
                                     "missing_resources": False, "resources_changed": False, "node_type": node_type})
            elif kind == "virtual:floatingip":
                if r.get("network_id") != "net-public" or r.get("amount") != 1:
                    raise self._blazar_error(400, "InvalidInput", f"floating IP reservation {r}")
                reservations.append({"id": rid, "resource_type": kind, "resource_id": new_id(), "status": "pending",
                                     "network_id": "net-public", "amount": 1, "required_floatingips": []})
            else:
                raise self._blazar_error(400, "InvalidInput", f"resource_type {kind}")
        if not any(r["resource_type"] == "physical:host" for r in reservations):
            raise self._blazar_error(400, "InvalidInput", "this fake expects a host reservation")
        lease_id = new_id()
        for r in reservations:
            r["lease_id"] = lease_id
        created = now()
        lease = {"id": lease_id, "name": body["name"], "user_id": self.user_id, "project_id": self.project_id,
                 "start_date": start.strftime(BLAZAR_OUT), "end_date": end.strftime(BLAZAR_OUT),
                 "created_at": created.strftime("%Y-%m-%d %H:%M:%S"), "updated_at": None, "trust_id": new_id(),
                 "status": "STARTING" if body["start_date"] == "now" else "PENDING", "degraded": False,
                 "reservations": reservations, "events": []}
        self.leases[lease_id] = lease
        return copy.deepcopy(lease)

    def add_lease(self, name, status, hours_ago=48, user_id=None, project_id="p-0002"):
        """A lease made earlier (e.g. last week's, TERMINATED)."""
        start = now() - dt.timedelta(hours=hours_ago)
        lease_id = new_id()
        self.leases[lease_id] = {
            "id": lease_id, "name": name, "user_id": user_id or self.user_id, "project_id": project_id,
            "start_date": start.strftime(BLAZAR_OUT), "end_date": (start + dt.timedelta(hours=3)).strftime(BLAZAR_OUT),
            "created_at": start.strftime("%Y-%m-%d %H:%M:%S"), "updated_at": None, "trust_id": new_id(),
            "status": status, "degraded": False, "events": [],
            "reservations": [{"id": new_id(), "lease_id": lease_id, "resource_type": "physical:host",
                              "status": "deleted" if status == "TERMINATED" else "active", "min": 1, "max": 1,
                              "resource_properties": '["==", "$node_type", "gpu_p100"]', "hypervisor_properties": ""}]}
        return lease_id

    def lease_item(self, method, query, body, headers, lease_id):
        self._token_check(headers)
        lease = self.leases.get(lease_id)
        if lease is None or lease["project_id"] != self.project_id:
            raise self._blazar_error(404, "NotFound", f"Object with {{'lease_id': '{lease_id}'}} not found")
        if method == "GET":
            return {"lease": self._lease_json(lease)}
        if method == "DELETE":
            del self.leases[lease_id]
            return Reply(204, None)
        raise Reply(405)

    def blazar_hosts(self, method, query, body, headers):
        self._token_check(headers)
        return {"hosts": [dict(h, trust_id="t", cpu_info="{}", vcpus=48, memory_mb=131072, local_gb=200)
                          for h in self.hosts]}

    def blazar_allocations(self, method, query, body, headers):
        self._token_check(headers)
        return {"allocations": [{"resource_id": h, "reservations": r} for h, r in self.allocations.items()]}

    def blazar_allocation(self, method, query, body, headers, host_id):
        self._token_check(headers)
        if host_id not in self.allocations:
            raise self._blazar_error(404, "NotFound", f"Object with {{'host_id': '{host_id}'}} not found")
        return {"allocation": {"resource_id": host_id, "reservations": self.allocations[host_id]}}

    def book(self, host_id: str, hours_from: float, hours_to: float):
        """Someone else's reservation of a host (for the hardware calendar)."""
        self.allocations[host_id].append({"id": new_id(), "lease_id": new_id(),
                                          "start_date": (now() + dt.timedelta(hours=hours_from)).strftime(BLAZAR_OUT),
                                          "end_date": (now() + dt.timedelta(hours=hours_to)).strftime(BLAZAR_OUT)})

    # ------------------------------------------------------------------ nova
    def nova_versions(self, method, query, body, headers):
        return Reply(300, {"versions": [self._nova_version_doc()]})

    def nova_version(self, method, query, body, headers):
        return {"version": self._nova_version_doc()}

    def _nova_version_doc(self):
        return {"id": "v2.1", "status": "CURRENT", "version": "2.96", "min_version": "2.1",
                "updated": "2013-07-23T11:33:21Z",
                "links": [{"rel": "self", "href": f"{self.base}/tacc/nova/v2.1/"}],
                "media-types": [{"base": "application/json",
                                 "type": "application/vnd.openstack.compute+json;version=2.1"}]}

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

    def keypairs_collection(self, method, query, body, headers):
        self._token_check(headers)
        if method == "GET":
            return {"keypairs": [{"keypair": k} for k in self.keypairs.values()]}
        kp = body["keypair"]
        key = {"name": kp["name"], "public_key": kp["public_key"], "fingerprint": fingerprint(kp["public_key"]),
               "type": kp.get("type", "ssh"), "user_id": self.user_id}
        self.keypairs[kp["name"]] = key
        return {"keypair": key}

    def keypair_item(self, method, query, body, headers, name):
        self._token_check(headers)
        if name not in self.keypairs:
            raise self._nova_not_found(f"Keypair {name} not found for user {self.user_id}")
        if method == "DELETE":
            del self.keypairs[name]
            return Reply(202, None)
        return {"keypair": dict(self.keypairs[name], id=1, created_at="2025-01-01T00:00:00.000000", deleted=False)}

    def _active_host_reservations(self):
        return {r["id"]: lease for lease in self.leases.values() if lease["status"] == "ACTIVE"
                for r in lease["reservations"] if r["resource_type"] == "physical:host"}

    def servers_collection(self, method, query, body, headers):
        self._token_check(headers)
        if method == "GET":
            for sid in list(self.deleting):  # a deleted server shows for a few more reads
                self.deleting[sid] -= 1
                if self.deleting[sid] < 0:
                    del self.deleting[sid]
                    self.servers.pop(sid, None)
            return {"servers": [self._server_json(s) for s in self.servers.values()]}
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
        if s.get("networks") != [{"uuid": "net-shared"}]:
            problems.append(f"networks {s.get('networks')}")
        leases = self._active_host_reservations()
        if hints.get("reservation") not in leases:
            problems.append(f"reservation {hints.get('reservation')} is not an active host reservation")
        if problems:
            raise Reply(400, {"badRequest": {"code": 400, "message": "; ".join(problems)}})
        sid = new_id()
        fail = self.servers_fail > 0
        self.servers_fail -= 1 if fail else 0
        port = {"id": new_id(), "device_id": sid, "device_owner": "compute:nova", "network_id": "net-shared",
                "mac_address": "fa:16:3e:00:00:01", "status": "ACTIVE", "admin_state_up": True,
                "fixed_ips": [{"subnet_id": "sub-shared", "ip_address": "10.52.3.17"}], "name": "",
                "project_id": self.project_id, "tenant_id": self.project_id, "tags": []}
        self.ports[port["id"]] = port
        self.servers[sid] = {"id": sid, "name": s["name"], "key_name": s["key_name"], "image": s["imageRef"],
                             "reservation": hints["reservation"], "status": "BUILD",
                             "final": "ERROR" if fail else "ACTIVE", "reads": 0, "created": now()}
        return {"id": sid, "links": [], "OS-DCF:diskConfig": "MANUAL", "adminPass": "x",
                "security_groups": [{"name": "default"}]}

    def _server_json(self, s):
        s["reads"] += 1
        if s["status"] == "BUILD" and s["reads"] > 1:
            s["status"] = s["final"]
        addresses = [{"version": 4, "addr": p["fixed_ips"][0]["ip_address"], "OS-EXT-IPS:type": "fixed",
                      "OS-EXT-IPS-MAC:mac_addr": p["mac_address"]}
                     for p in self.ports.values() if p["device_id"] == s["id"]]
        port_ids = {p["id"] for p in self.ports.values() if p["device_id"] == s["id"]}
        addresses += [{"version": 4, "addr": f["floating_ip_address"], "OS-EXT-IPS:type": "floating",
                       "OS-EXT-IPS-MAC:mac_addr": "fa:16:3e:00:00:01"}
                      for f in self.fips.values() if f["port_id"] in port_ids]
        created = s["created"].strftime("%Y-%m-%dT%H:%M:%SZ")
        doc = {"id": s["id"], "name": s["name"], "status": s["status"], "tenant_id": self.project_id,
               "user_id": self.user_id, "metadata": {}, "hostId": "h" * 8, "host_status": "UP",
               "image": {"id": s["image"], "links": []},
               "flavor": {"vcpus": 1, "ram": 1, "disk": 1, "ephemeral": 0, "swap": 0, "original_name": "baremetal",
                          "extra_specs": {}},
               "created": created, "updated": created, "addresses": {"sharednet1": addresses} if addresses else {},
               "accessIPv4": "", "accessIPv6": "", "links": [], "OS-DCF:diskConfig": "MANUAL",
               "key_name": s["key_name"], "OS-EXT-AZ:availability_zone": "nova", "config_drive": "",
               "OS-EXT-STS:power_state": 1 if s["status"] == "ACTIVE" else 0,
               "OS-EXT-STS:task_state": "deleting" if s["id"] in self.deleting else None,
               "OS-EXT-STS:vm_state": s["status"].lower(), "OS-SRV-USG:launched_at": None,
               "OS-SRV-USG:terminated_at": None, "progress": 0, "security_groups": [{"name": "default"}],
               "locked": False, "locked_reason": None, "description": None, "tags": [],
               "trusted_image_certificates": None, "os-extended-volumes:volumes_attached": []}
        if s["status"] == "ERROR":
            doc["fault"] = {"code": 500, "created": created,
                            "message": "Build of instance aborted: Failed to provision instance: deploy failed"}
        return doc

    def server_item(self, method, query, body, headers, server_id):
        self._token_check(headers)
        s = self.servers.get(server_id)
        if s is None:
            raise self._nova_not_found(f"Instance {server_id} could not be found.")
        if method == "GET":
            return {"server": self._server_json(s)}
        if method == "DELETE":
            self.deleting.setdefault(server_id, self.delete_polls)  # deleting twice is accepted, as by Nova
            for pid in [p["id"] for p in self.ports.values() if p["device_id"] == server_id]:
                del self.ports[pid]
                for f in self.fips.values():
                    if f["port_id"] == pid:
                        f.update(port_id=None, fixed_ip_address=None, status="DOWN")
            return Reply(204, None)
        raise Reply(405)

    # ------------------------------------------------------------------ neutron
    def neutron_versions(self, method, query, body, headers):
        return {"versions": [{"id": "v2.0", "status": "CURRENT",
                              "links": [{"rel": "self", "href": f"{self.base}/tacc/neutron/v2.0/"}]}]}

    def networks_collection(self, method, query, body, headers):
        self._token_check(headers)
        nets = [n for n in self.networks.values() if all(str(n.get(k)) == v[0] for k, v in query.items()
                                                         if k in ("name", "id"))]
        return {"networks": nets}

    def network_item(self, method, query, body, headers, ref):
        self._token_check(headers)
        if ref not in self.networks:
            raise Reply(404, {"NeutronError": {"type": "NetworkNotFound",
                                               "message": f"Network {ref} could not be found.",
                                               "detail": ""}})
        return {"network": self.networks[ref]}

    def _new_fip(self, address, tags=()):
        fip = {"id": new_id(), "floating_ip_address": address, "floating_network_id": "net-public",
               "port_id": None, "fixed_ip_address": None, "router_id": None, "status": "DOWN",
               "project_id": self.project_id, "tenant_id": self.project_id, "tags": list(tags),
               "description": "", "port_details": None, "dns_domain": "", "dns_name": "", "qos_policy_id": None,
               "revision_number": 0, "created_at": now().isoformat() + "Z", "updated_at": now().isoformat() + "Z"}
        self.fips[fip["id"]] = fip
        return fip

    def fips_collection(self, method, query, body, headers):
        self._token_check(headers)
        if method == "GET":
            return {"floatingips": [copy.deepcopy(f) for f in self.fips.values() if f["project_id"] == self.project_id]}
        req = body["floatingip"]
        if req.get("floating_network_id") != "net-public":
            raise Reply(400, {"NeutronError": {"type": "BadRequest", "message": "bad network", "detail": ""}})
        return Reply(201, {"floatingip": self._new_fip("127.20.0.99")})  # from the shared pool

    def fip_item(self, method, query, body, headers, fip_id):
        self._token_check(headers)
        fip = self.fips.get(fip_id)
        if fip is None:
            raise Reply(404, {"NeutronError": {"type": "FloatingIPNotFound",
                                               "message": f"Floating IP {fip_id} could not be found", "detail": ""}})
        if method == "PUT":
            port_id = body["floatingip"].get("port_id")
            if port_id is not None and port_id not in self.ports:
                raise Reply(404, {"NeutronError": {"type": "PortNotFound", "message": f"Port {port_id} not found",
                                                   "detail": ""}})
            if port_id is not None and fip["port_id"] not in (None, port_id):
                raise Reply(409, {"NeutronError": {"type": "FloatingIPPortAlreadyAssociated",
                                                   "message": "already associated", "detail": ""}})
            fip.update(port_id=port_id, status="ACTIVE" if port_id else "DOWN",
                       fixed_ip_address=self.ports[port_id]["fixed_ips"][0]["ip_address"] if port_id else None)
            return {"floatingip": copy.deepcopy(fip)}
        if method == "DELETE":
            del self.fips[fip_id]
            return Reply(204, None)
        return {"floatingip": copy.deepcopy(fip)}

    def ports_collection(self, method, query, body, headers):
        self._token_check(headers)
        ports = [p for p in self.ports.values() if all(str(p.get(k)) == v[0] for k, v in query.items())]
        return {"ports": ports}

    # ------------------------------------------------------------------ glance
    def glance_versions(self, method, query, body, headers):
        return Reply(300, {"versions": [{"id": "v2.16", "status": "CURRENT",
                                         "links": [{"rel": "self", "href": f"{self.base}/tacc/glance/v2/"}]}]})

    def image_schema(self, method, query, body, headers):
        self._token_check(headers)
        props = {k: {"type": ["null", "string"]} for k in ("id", "name", "status", "visibility", "created_at",
                                                         "updated_at", "disk_format", "container_format",
                                                         "self", "file", "schema")}
        props.update(tags={"type": "array", "items": {"type": "string"}}, min_disk={"type": "integer"},
                     min_ram={"type": "integer"}, protected={"type": "boolean"}, size={"type": ["null", "integer"]})
        return {"name": "image", "properties": props, "additionalProperties": {"type": "string"}, "links": []}

    def images_collection(self, method, query, body, headers):
        self._token_check(headers)
        images = [i for i in self.images.values() if "name" not in query or i["name"] == query["name"][0]]
        return {"images": images, "first": "/v2/images", "schema": "/v2/schemas/images"}

    def image_item(self, method, query, body, headers, image_id):
        self._token_check(headers)
        if image_id not in self.images:
            raise Reply(404, None)
        return self.images[image_id]
