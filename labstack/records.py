"""What the launcher records: state.json (what runs: process ids, ports, settings, never a
secret) and urls.env (what notebooks and tools read: the services' URLs, and the secrets they
need, in a file only its owner can read). Both are rewritten whole after every change, so they
say what runs at every moment, a Ctrl-C included."""

from __future__ import annotations

import json

from labstack import ray_cluster
from labstack.lab_files import STATE, URLS_ENV, write_private
from labstack.lab_secrets import lab_secrets
from labstack.ports import service_url


def read_state() -> dict:
    try:
        return json.loads(STATE.read_text())
    except (OSError, ValueError):
        return {"services": {}}


def write_state(state: dict) -> None:
    write_private(STATE, json.dumps(state, indent=2))
    services = state["services"]
    backend = services.get("fastapi", {}).get("env", {}).get("FASTAPI_BACKEND", "")
    lines = {"LAB_MODE": "local", "FASTAPI_BACKEND": backend}
    if "fastapi" in services:
        lines["FASTAPI_SERVER_URL"] = service_url(services["fastapi"]["port"])
    if "flask" in services:
        lines["FLASK_SERVER_URL"] = service_url(services["flask"]["port"])
    if "triton" in services:
        t = services["triton"]
        lines.update(
            TRITON_SERVER_URL=service_url(t["port"]),
            TRITON_GRPC_URL=f"127.0.0.1:{t['grpc_port']}",
            TRITON_METRICS_URL=f"{service_url(t['metrics_port'])}/metrics",
            TRITON_MODEL_REPOSITORY=state.get("model_repository", ""),
            # the repository API's header (labenv.admin_headers)
            TRITON_ADMIN_KEY=lab_secrets()["TRITON_ADMIN_KEY"],
        )
    if "ray_head" in services:
        lines.update(ray_cluster.urls(services["ray_head"]))
    if "jupyter" in services:
        lines["JUPYTER_URL"] = (
            f"{service_url(services['jupyter']['port'])}/lab?token={lab_secrets()['JUPYTER_TOKEN']}"
        )
    write_private(URLS_ENV, "".join(f"{k}={v}\n" for k, v in lines.items() if v))


def forget(state: dict) -> None:
    """Record that nothing runs: no state.json, no urls.env."""
    state["services"] = {}
    for path in (STATE, URLS_ENV):
        path.unlink(missing_ok=True)


def client_urls(state: dict) -> dict:
    """The URL variables, as the notebooks and Flask see them."""
    write_state(state)
    return dict(line.split("=", 1) for line in URLS_ENV.read_text().splitlines() if "=" in line)
