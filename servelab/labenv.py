"""What a notebook needs to find the services, the same in every way of running the lab.

Introduced in notebook 3. Switching a service's settings (and Docker's host steps):
servelab/services.py.

Notebook cells only read URLs from environment variables. In Docker, compose sets them; in
local mode `make up` writes them to .lab/urls.env and `load()` copies them into os.environ
(never overriding a variable that is already set, except the services' URLs in local mode: the
launcher's file is where they are now, should a service have had to move to a new port).
"""

from __future__ import annotations

import os
import time

import requests

from servelab import passes
from servelab.passes import node_calls
from servelab.paths import LAB_DIR

URLS_ENV = LAB_DIR / "urls.env"


_TRITON_URLS = ("TRITON_SERVER_URL", "TRITON_GRPC_URL", "TRITON_METRICS_URL")
# in local mode, the launcher's urls.env is the truth for these (a JupyterLab started before a
# service moved still has the old ones in its environment)
# notebook 9's Ray cluster, and how to use its token (Ray's mode, the path of the token's file:
# Ray reads the token there; urls.env never holds it)
_RAY_URLS = (
    "RAY_ADDRESS",
    "RAY_DASHBOARD_URL",
    "RAY_SERVE_URL",
    "RAY_AUTH_MODE",
    "RAY_AUTH_TOKEN_PATH",
)
_LOCAL_URLS = ("FASTAPI_SERVER_URL", "FLASK_SERVER_URL", *_TRITON_URLS, *_RAY_URLS)
# what load() returns (not the secrets it loads)
_SHOWN = ("LAB_MODE", "FASTAPI_SERVER_URL", "FASTAPI_BACKEND", "FLASK_SERVER_URL", *_TRITON_URLS)
_SHOWN += ("RAY_ADDRESS", "RAY_SERVE_URL")
# what a measure pass keeps of its environment, for the review pass to name things as it did
_KEPT = (*_LOCAL_URLS, "LAB_MODE", "TRITON_MODEL_REPOSITORY")


# Where the lab's Jupyter reaches each service in the class's Docker stacks
# (docker/docker-compose-*.yaml): the addresses a notebook's lines name in the prepare pass, which
# runs before any service does (tests/test_compose.py ties them to the compose files)
CLASS_URLS = {
    "FASTAPI_SERVER_URL": "http://fastapi_server:8000",
    "FLASK_SERVER_URL": "http://flask:5000",
    "TRITON_SERVER_URL": "http://triton_server:8000",
    "TRITON_GRPC_URL": "triton_server:8001",
    "TRITON_METRICS_URL": "http://triton_server:8002/metrics",
}


def load() -> dict:
    """The services' URLs in os.environ (see the module's docstring); returns what it shows. The
    measure pass keeps them in its bundle, and the review pass takes the bundle's: the notebook
    then names the services as it did when it measured (and reaches none of them)."""
    if passes.replays():
        kept = {k: node_calls.setting("urls", k, None) for k in _KEPT}
        os.environ.update({k: v for k, v in kept.items() if v})
    elif URLS_ENV.exists():
        values = {}
        for line in URLS_ENV.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and key:
                values[key] = value
        local = values.get("LAB_MODE") == "local" and os.environ.get("LAB_MODE", "local") == "local"
        for key, value in values.items():
            if key in _RAY_URLS and os.environ.get("LAB_RAY_HEAD"):
                continue  # a cluster started elsewhere (services.use_ray_cluster), not the lab's
            if key not in os.environ or (local and key in _LOCAL_URLS):
                os.environ[key] = value
    os.environ.setdefault("LAB_MODE", "docker")
    for name in _KEPT:
        if os.environ.get(name):
            node_calls.setting("urls", name, os.environ[name])
    keys = (*_SHOWN, "TRITON_MODEL_REPOSITORY")
    return {k: os.environ[k] for k in keys if k in os.environ}


def url(name: str) -> str:
    """A service's URL from the environment; in the prepare pass, where no service runs yet, the
    address the class's Docker stack gives it (CLASS_URLS)."""
    value = os.environ.get(name)
    if not value and passes.current() == passes.PREPARE:
        value = CLASS_URLS.get(name)
    if not value:
        raise RuntimeError(
            f"{name} is not set. Local mode: run `make up` in the repository first. "
            "Docker: open this notebook from the lab's Jupyter container, which sets it."
        )
    return value.rstrip("/")


# Triton's own default ports, for a library call made where no variable is set (a Triton
# started by hand on this machine); notebooks use url()/triton_urls(), which ask for the variables.
TRITON_DEFAULTS = {
    "TRITON_SERVER_URL": "http://localhost:8000",
    "TRITON_GRPC_URL": "localhost:8001",
    "TRITON_METRICS_URL": "http://localhost:8002/metrics",
}


def _http(address: str) -> str:
    """host:port (as perf_analyzer's -u and tritonclient take it) or a URL -> a URL, no end /."""
    address = address.rstrip("/")
    return address if "://" in address else f"http://{address}"


def triton_url(url: str | None = None) -> str:
    """Triton's HTTP address, written out once for every module: `url` as given (host:port or
    http://host:port), else TRITON_SERVER_URL, else Triton's default; http://host:port."""
    return _http(url or os.environ.get("TRITON_SERVER_URL") or TRITON_DEFAULTS["TRITON_SERVER_URL"])


def metrics_url(url: str | None = None, server: str | None = None) -> str:
    """Triton's metrics URL: `url` as given, else that of the Triton at `server`: the environment's
    TRITON_METRICS_URL when `server` is the environment's own (or None), else Triton's default
    port 8002 on `server`'s host, so a run's utilisation comes from the server it measured."""
    if url:
        return _http(url)
    if server is None or triton_url(server) == triton_url():
        return _http(os.environ.get("TRITON_METRICS_URL") or TRITON_DEFAULTS["TRITON_METRICS_URL"])
    return triton_url(server).rsplit(":", 1)[0] + ":8002/metrics"


def triton_urls() -> tuple[str, str, str]:
    """Triton's HTTP URL, gRPC host:port and metrics URL. Without TRITON_GRPC_URL /
    TRITON_METRICS_URL, Triton's default ports (8001, 8002) on the HTTP URL's host."""
    http = triton_url(url("TRITON_SERVER_URL"))
    host = http.rsplit(":", 1)[0]  # http://triton_server:8000 -> http://triton_server
    grpc = os.environ.get("TRITON_GRPC_URL") or host.split("://")[-1] + ":8001"
    metrics = os.environ.get("TRITON_METRICS_URL") or host + ":8002/metrics"
    return http, grpc, metrics


# Every Triton API that changes the server's state or memory answers only requests carrying this
# header with the node's secret (TRITON_ADMIN_KEY): the model repository (it can load a model.py,
# i.e. run code), system and CUDA shared memory (a region registered by anyone could make the
# server write into another process's memory), logging and trace settings. Triton's names for
# these API groups (its --http-restricted-api / --grpc-restricted-protocol flags):
RESTRICTED_APIS = ("model-repository", "shared-memory", "logging", "trace")
ADMIN_HEADER = "lab-admin-key"
# Over gRPC Triton looks for the same key as metadata with this prefix (Triton 2.51,
# src/grpc/grpc_server.h: kRestrictedProtocolHeaderTemplate).
GRPC_ADMIN_HEADER = "triton-grpc-protocol-" + ADMIN_HEADER


def admin_headers() -> dict:
    """The header Triton's restricted APIs want, for requests and both tritonclient clients
    (HTTP and gRPC) alike: `client.load_model(name, headers=labenv.admin_headers())`,
    `grpc_client.register_system_shared_memory(..., headers=labenv.admin_headers())`. It holds
    the key under both names; each protocol reads its own and ignores the other."""
    key = os.environ.get("TRITON_ADMIN_KEY")
    return {ADMIN_HEADER: key, GRPC_ADMIN_HEADER: key} if key else {}


def param(name: str, default: int) -> int:
    """Request counts etc.; `make lab` and CI shrink them through LAB_<NAME> variables. The review
    pass uses the value the measure pass ran with (kept in its bundle)."""
    return int(node_calls.setting("settings", name, int(os.environ.get(f"LAB_{name}", default))))


def param_word(name: str, default: str) -> str:
    """A word from LAB_<NAME> (e.g. LAB_RAY_THREE_WAY=on), kept in the bundle as param's are."""
    return str(node_calls.setting("settings", name, os.environ.get(f"LAB_{name}", default)))


def param_list(name: str, default: str) -> list[int]:
    """A comma-separated list of numbers from LAB_<NAME> (e.g. LAB_HW_INSTANCES=1,2,4)."""
    text = node_calls.setting("settings", name, os.environ.get(f"LAB_{name}", default))
    return [int(v) for v in text.split(",") if v.strip()]


def wait_healthy(
    health_url: str, timeout: float = 120.0, check=lambda r: True, in_a_row: int = 1
) -> dict:
    """Wait until health_url answers 200 and check(response) holds, `in_a_row` times in a row
    (several worker processes answer in turn, and each must have loaded its model)."""
    deadline = time.time() + timeout
    last, good = "no answer", 0
    while time.time() < deadline:
        try:
            resp = requests.get(health_url, timeout=3)
            if resp.status_code == 200 and check(resp):
                good += 1
                if good < in_a_row:
                    continue
                json = resp.headers.get("content-type", "").startswith("application/json")
                return resp.json() if json else {}
            last = f"HTTP {resp.status_code}: {resp.text[:200]}"
        except requests.RequestException as exc:
            last = type(exc).__name__
        good = 0
        time.sleep(1)
    raise TimeoutError(f"{health_url} not ready after {timeout:.0f} s (last: {last})")
