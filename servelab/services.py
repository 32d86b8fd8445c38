"""Switching the lab's services from a notebook while they run: local mode restarts (or pauses)
them for you; with Docker, the notebook prints the command for the host and waits for its effect.

Introduced in notebook 4 (notebooks 6, 7 and 9 use it too).

    services.use_fastapi_backend("onnx", workers=2)   # FastAPI serves ONNX Runtime, 2 workers
    services.use_flask_triton_model("food_classifier_onnx")   # the Flask UI calls that model
    services.ask_host("docker compose ... exec ...")  # Docker: a command the host runs
    services.run_alone([...], "why")                  # local mode: a command with the lab paused
    services.use_ray_cluster()                        # notebook 9: the lab's Ray cluster, started

The lab's machinery (labstack) runs the local-mode steps as commands of its own: this library
knows nothing of it (pyproject.toml's import contracts).
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

from servelab import passes
from servelab.labenv import load, url, wait_healthy

# ---------------------------------------------- Docker: the steps only the host can do

# the repository's folders inside the Jupyter container (the compose files mount them there)
WORK_DIR = "/home/jovyan/work"


def compose_files() -> str:
    """The `-f ...` options of the compose files this Docker stack was started with.

    The compose files set LAB_COMPOSE_FILES in the Jupyter container themselves (a CPU override
    adds itself), so a printed host command keeps the overrides: without them `docker compose`
    would recreate containers with a GPU reservation on a CPU host.
    """
    files = os.environ.get("LAB_COMPOSE_FILES")
    if not files:
        raise RuntimeError(
            "LAB_COMPOSE_FILES is not set: this Jupyter container was not started by the "
            "lab's compose files (docker/docker-compose-*.yaml)"
        )
    return files


def host_path(container_path) -> str:
    """A path inside the Jupyter container as the host sees it from the docker/ folder."""
    path = str(container_path)
    if not path.startswith(WORK_DIR + "/"):
        raise ValueError(f"{path} is not in a folder the host shares with the Jupyter container")
    return "../" + path[len(WORK_DIR) + 1 :]


def ask_host(command: str) -> None:
    """Print a command for the student to run on the host; the calling cell then waits for its
    effect.

    The exact words matter: `make test-docker` reads this line and runs the command as printed.
    """
    print(
        "Run this on the host, in the repository's docker/ folder (this cell waits for it):\n  "
        + command,
        flush=True,
    )


def wait_for_file(path, complete=lambda text: bool(text), timeout: float = 1800.0) -> str:
    """Wait until the file a host command writes exists and `complete(text)` holds; return the
    text."""
    path = Path(path)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if path.is_file() and complete(text := path.read_text()):
            return text
        time.sleep(max(0.0, min(2.0, deadline - time.time())))  # no later than the deadline
    raise TimeoutError(
        f"{path} was not written within {timeout:.0f} s: did the host command run? "
        "Run it (above) and then this cell again."
    )


def _machinery(*args: str, capture: bool = True):
    """Local mode: a command of the lab's machinery (labstack), run as its own process: this
    library knows nothing of the machinery, as pyproject.toml's import contracts say."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", *args], capture_output=capture, text=True)


def _restart_local(service: str, settings: dict) -> None:
    """Local mode: the same as `make restart SERVICE=...` with new settings, typed for you."""
    sets = [x for key, value in settings.items() for x in ("--set", f"{key}={value}")]
    done = _machinery("labstack.launcher", "restart", service, *sets)
    if done.returncode != 0:
        raise RuntimeError(f"restarting {service} failed:\n{(done.stdout + done.stderr)[-2000:]}")


def run_alone(argv: list[str], reason: str) -> None:
    """Local mode: run a command while the lab's services are paused (SIGSTOP, then SIGCONT), so
    it has the machine's cores to itself (labstack.pause, the launcher's pause)."""
    _machinery("labstack.pause", "--reason", reason, "--", *argv, capture=False).check_returncode()


RAY_HEAD = "LAB_RAY_HEAD"  # host:port of a Ray cluster started elsewhere (Chameleon's two nodes)
SERVE_DEFAULT = "http://127.0.0.1:8000"  # Serve's own default: its proxy on the head node


def use_ray_cluster() -> dict:
    """Notebook 9: the Ray cluster to serve on. A cluster started elsewhere, named by LAB_RAY_HEAD
    (on Chameleon notebook 2's section 5 starts one over two nodes and prints it), is used in any
    mode, with Serve's proxy at LAB_RAY_SERVE_URL (default: port 8000 of the head node, where the
    notebook runs). Otherwise local mode starts the lab's (a head and a second node, `python -m
    labstack.launcher ray`; one that runs is kept) and reads its addresses."""
    head = os.environ.get(RAY_HEAD)
    if head:
        os.environ["RAY_ADDRESS"] = head
        os.environ["RAY_SERVE_URL"] = os.environ.get("LAB_RAY_SERVE_URL", SERVE_DEFAULT)
    elif os.environ.get("LAB_MODE") == "local":
        done = _machinery("labstack.launcher", "ray")
        if done.returncode != 0:
            raise RuntimeError(
                f"starting the Ray cluster failed:\n{(done.stdout + done.stderr)[-2000:]}"
            )
        load()
    return {"RAY_ADDRESS": url("RAY_ADDRESS"), "RAY_SERVE_URL": url("RAY_SERVE_URL")}


def _fastapi_serving(runtime: str, workers: int):
    """A /health check: `workers` worker processes (any may answer) each serving `runtime`."""
    ready = set()

    def serving(resp) -> bool:
        body = resp.json()
        if body.get("runtime") != runtime or int(body.get("workers", 1)) != int(workers):
            return False
        ready.add(body.get("pid"))
        return len(ready) >= int(workers)

    return serving


def use_fastapi_backend(runtime: str, workers: int = 1, timeout: float = 900.0) -> dict:
    """Switch the FastAPI service's runtime to 'pt' (PyTorch) or 'onnx' (ONNX Runtime), served by
    `workers` uvicorn worker processes, and wait until it serves that way. The name is that of the
    setting it changes, FASTAPI_BACKEND.

    Local mode restarts the process on the same port. With Docker, the student runs the printed
    command on the host and this waits for it. The review pass prints what the switch printed.
    """
    switch = lambda: _use_fastapi_backend(runtime, workers, timeout)  # noqa: E731
    return passes.change(f"FastAPI {runtime}, {workers} worker(s)", switch)


def _use_fastapi_backend(runtime: str, workers: int, timeout: float) -> dict:
    from servelab.serving.runtimes import FASTAPI_BACKENDS, fastapi_backend

    setting = fastapi_backend(runtime)  # 'pt' or 'onnx'
    # uvicorn reads WEB_CONCURRENCY
    settings = {"FASTAPI_BACKEND": setting, "WEB_CONCURRENCY": str(int(workers))}
    if os.environ.get("LAB_MODE") == "local":
        _restart_local("fastapi", settings)
    else:
        assignments = f"FASTAPI_BACKEND={shlex.quote(setting)}" + (
            f" WEB_CONCURRENCY={int(workers)}" if workers != 1 else ""
        )
        # ONNX: first the image notebook 2 started building (at once if built, or never started)
        first = "bash build_images.sh wait onnx; " if setting == "onnx" else ""
        ask_host(
            f"{first}{assignments} docker compose {compose_files()} up -d --build --wait "
            "fastapi_server"
        )
    serving = _fastapi_serving(FASTAPI_BACKENDS[setting], workers)  # the name /health answers
    health = wait_healthy(f"{url('FASTAPI_SERVER_URL')}/health", timeout, check=serving)
    os.environ.update(settings)
    print(
        f"FastAPI service now runs {health['runtime']} on {health['device']} in "
        f"{health['workers']} worker process(es), {health['threads']} thread(s) each "
        f"({health['weights']} weights)"
    )
    return health


def use_flask_triton_model(model: str, timeout: float = 900.0) -> dict:
    """Point the Flask UI at Triton's food_classifier or food_classifier_onnx and wait for it."""
    return passes.change(f"Flask on {model}", lambda: _use_flask_triton_model(model, timeout))


def _use_flask_triton_model(model: str, timeout: float) -> dict:
    base = url("FLASK_SERVER_URL")
    if os.environ.get("LAB_MODE") == "local":
        _restart_local("flask", {"FLASK_BACKEND": "triton", "FOOD11_MODEL_NAME": model})
    else:
        # --no-deps: recreate only flask (its model setting changed), never the Triton server
        ask_host(
            f"FOOD11_MODEL_NAME={shlex.quote(model)} docker compose {compose_files()} "
            "up -d --no-deps --wait flask"
        )
    health = wait_healthy(
        f"{base}/healthz", timeout, check=lambda r: f"'{model}'" in r.json().get("model_server", "")
    )
    print(f"Flask now uses: {health['model_server']}")
    return health
