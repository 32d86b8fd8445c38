"""The local stack's services as the launcher starts them: FastAPI, Flask, Triton under its
watchdog, JupyterLab and the two Ray nodes, each a Service (labstack.processes) on the port it
had, with its settings and the secrets it needs in its environment, never on its command line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from labstack import ray_cluster
from labstack.lab_files import TRITON_HEALTH
from labstack.lab_secrets import lab_secrets
from labstack.ports import BIND, port_for, service_url
from labstack.processes import Service
from labstack.records import client_urls
from servelab.paths import NOTEBOOKS
from servelab.perf.tool import perf_analyzer_env
from servelab.serving.runtimes import fastapi_backend

RAY_SERVICES = ("ray_head", "ray_node")  # labstack/ray_cluster.py, in the order they start
# One more Jupyter config folder for JupyterLab: its labconfig/page_config.json turns off
# JupyterLab 4's announcements plugin (the "Would you like to get notified about official Jupyter
# news?" prompt of a first start, and the check for updates), the file that `jupyter labextension
# disable "@jupyterlab/apputils-extension:announcements"` writes
JUPYTER_CONFIG = Path(__file__).resolve().parent / "jupyter_config"


def _module(name: str) -> list[str]:
    """`python -m name` with this interpreter: works in a venv and with PYTHONPATH alike."""
    return [sys.executable, "-m", name]


def fastapi_service(port: int, runtime: str, workers: int | str = 1) -> Service:
    """The FastAPI service running `runtime`: 'pt' (or 'pytorch') or 'onnx' (FASTAPI_BACKEND)."""
    try:
        setting = fastapi_backend(runtime)  # 'pt' or 'onnx', as in fastapi_pt/ and fastapi_onnx/
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    app = f"fastapi_{setting}.app:app"
    # uvicorn starts WEB_CONCURRENCY worker processes; each loads the model with its share of the
    # cores
    env = {"FASTAPI_BACKEND": setting, "WEB_CONCURRENCY": str(int(workers))}
    from servelab.serving.inference_api import UVICORN_ARGS  # the header limit

    return Service(
        "fastapi",
        _module("uvicorn")
        + [app, "--host", BIND, "--port", str(port), "--no-access-log", *UVICORN_ARGS],
        health=f"{service_url(port)}/health",
        marker=app,
        env=env,
        ports={"port": port},
    )


def flask_service(port: int, env: dict) -> Service:
    # waitress, as in the Docker image (flask_app/serve.py): slow clients cannot hold its threads
    return Service(
        "flask",
        _module("flask_app.serve") + ["--host", BIND, "--port", str(port)],
        health=f"{service_url(port)}/livez",  # up; /healthz: can it classify (make status)
        marker="flask_app.serve",
        env=env,
        ports={"port": port},
    )


def triton_service(repo: Path, admin_key: str, ports: dict | None = None) -> Service:
    """tritonserver under its watchdog (servelab.serving.triton_watchdog), on the ports it had,
    as every part of the lab starts it (triton_local.service): the watchdog gets the admin key in
    its environment (to load a model whose stub died again) and adds the flags that pass it to
    tritonserver, which takes it only on its own command line, then masks it there once the
    server has read it; tritonserver and its stubs start without it (docs/security.md)."""
    from labstack import triton_local

    ports = ports or {}
    http = port_for("triton", ports.get("port"))
    grpc = port_for("triton_grpc", ports.get("grpc_port"))
    metrics = port_for("triton_metrics", ports.get("metrics_port"))
    return triton_local.service(repo, (http, grpc, metrics), TRITON_HEALTH, admin_key=admin_key)


def jupyter_service(port: int, token: str, env: dict) -> Service:
    """JupyterLab with the students' folder (notebooks/) as its root: the file browser shows the
    notebooks, and nothing above them (the sources with their answers, the solved edition).
    Kernels still start in the notebook's folder, and import servelab from the venv."""
    # the token reaches JupyterLab through its environment (JUPYTER_TOKEN), not its command line,
    # which every user of the machine can read
    config_path = os.pathsep.join(
        p for p in (str(JUPYTER_CONFIG), os.environ.get("JUPYTER_CONFIG_PATH", "")) if p
    )
    return Service(
        "jupyter",
        _module("jupyterlab")
        + [
            "--no-browser",
            f"--ip={BIND}",
            f"--port={port}",
            f"--ServerApp.root_dir={NOTEBOOKS}",
            "--ServerApp.open_browser=False",
        ]
        + (["--allow-root"] if os.geteuid() == 0 else []),
        health=f"{service_url(port)}/api",
        marker=f"--port={port}",
        env={**env, "JUPYTER_TOKEN": token, "JUPYTER_CONFIG_PATH": config_path},
        ports={"port": port},
    )


def flask_env(urls: dict) -> dict:
    env = {k: v for k, v in urls.items() if k.endswith("_SERVER_URL") or k == "LAB_MODE"}
    env["FLASK_BACKEND"] = os.environ.get("FLASK_BACKEND", "fastapi")
    env["FOOD11_MODEL_NAME"] = os.environ.get("FOOD11_MODEL_NAME", "food_classifier")
    return env


def jupyter_env(state: dict) -> dict:
    urls = client_urls(state)
    if "triton" in state["services"]:
        # so `perf_analyzer ...` typed in a terminal or `!` cell just works
        tools = perf_analyzer_env()
        urls.update(PATH=tools["PATH"], LD_LIBRARY_PATH=tools["LD_LIBRARY_PATH"])
    return urls


def service_for(name: str, state: dict, overrides: dict | None = None) -> Service:
    """The Service for `name`, on the port it has (or had) and with its settings plus overrides."""
    rec = state["services"].get(name, {})
    env = {**rec.get("env", {}), **(overrides or {})}
    if name == "fastapi":
        return fastapi_service(
            port_for(name, rec.get("port")),
            env.get("FASTAPI_BACKEND") or os.environ.get("FASTAPI_BACKEND", "pt"),
            env.get("WEB_CONCURRENCY") or 1,
        )
    if name == "flask":
        port = port_for(name, rec.get("port"))
        return flask_service(port, {**flask_env(client_urls(state)), **env})
    if name == "triton":
        key = lab_secrets()["TRITON_ADMIN_KEY"]
        return triton_service(Path(state["model_repository"]), key, rec)
    if name == "jupyter":
        port = port_for(name, rec.get("port"))
        return jupyter_service(port, lab_secrets()["JUPYTER_TOKEN"], jupyter_env(state))
    if name == "ray_head":
        return ray_cluster.head_service(ray_cluster.temp_dir())
    if name == "ray_node":
        return ray_cluster.node_service(state["services"]["ray_head"])
    raise SystemExit(f"no service called {name!r} (fastapi, flask, triton, jupyter, ray_*)")
