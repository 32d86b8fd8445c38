"""Local mode: the lab's services as native processes (no Docker, no GPU needed).

    python -m labstack.launcher up [--jupyter] [--no-triton] [--ray]  # start, check, write urls.env
    python -m labstack.launcher ray             # a local Ray cluster beside the rest (notebook 9)
    python -m labstack.launcher status
    python -m labstack.launcher restart fastapi --set FASTAPI_BACKEND=onnx
    python -m labstack.launcher restart triton     # one service back after a crash (make restart)
    python -m labstack.launcher down                            # stop exactly what `up` started

Every service gets a port on 127.0.0.1 (LAB_BIND_HOST to change), runs in its own process
session with its log in .lab/logs/<name>.log, and is recorded in .lab/state.json; `down` stops
only processes recorded there whose command line still matches. One command at a time changes
the stack: up, restart and down hold a lock (.lab/launcher.lock), so two at once run one after
the other and the state file records every process started.

Restarts keep what a student relies on: `up` after a crash starts only what is not running and
healthy (JupyterLab and its kernels survive a FastAPI crash); each service comes back on the port
it had (.lab/ports.json; a port just freed by a killed process is waited for, and one taken by
another program is replaced, with Flask restarted on the new URLs and notebooks reading them with
labenv.load()); the Jupyter token and Triton's admin key stay the same (.lab/secrets.env); `up`
keeps edited config.pbtxt files in the model repository.

With --ray (or `launcher ray`, which keeps what runs), a Ray head and a second Ray node run as
two more services, one core each (labstack/ray_cluster.py); `up` keeps a running cluster and
`down` stops it with the rest.

Triton runs under servelab.serving.triton_watchdog: a model whose Python-backend stub dies is
loaded again, a crashed tritonserver is started again on its ports, and `status` shows each
model's health from it (.lab/triton_health.json). Its stubs' /dev/shm regions are private and
removed after a crash.

Secrets: files holding one (secrets.env, urls.env) and every log are readable by their owner
only; nothing the launcher prints, records in state.json or writes to a log carries the token or
the key (they are named, not shown). JupyterLab reads its token from its environment, the Triton
watchdog the admin key; tritonserver takes the key only on its command line, where the watchdog
masks it once the server has read it (docs/security.md).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

from servelab.paths import LAB_DIR, NOTEBOOKS, REPO_ROOT, model_repository_dir
from servelab.perf.tool import perf_analyzer_env
from servelab.serving.runtimes import fastapi_backend

STATE = LAB_DIR / "state.json"
URLS_ENV = LAB_DIR / "urls.env"
SECRETS = LAB_DIR / "secrets.env"
PORTS = LAB_DIR / "ports.json"
LOGS = LAB_DIR / "logs"
LOCK = LAB_DIR / "launcher.lock"
TRITON_HEALTH = LAB_DIR / "triton_health.json"  # written by Triton's watchdog
BIND = os.environ.get("LAB_BIND_HOST", "127.0.0.1")
SECRET_KEYS = ("JUPYTER_TOKEN", "TRITON_ADMIN_KEY")
PORT_WAIT_S = 20.0  # how long a port a killed process held may take to be free again


def free_port() -> int:
    with socket.socket() as s:
        s.bind((BIND, 0))
        return s.getsockname()[1]


def _port_is_free(port: int) -> bool:
    """Free to listen on, as the servers bind (SO_REUSEADDR: connections a killed server left in
    TIME_WAIT do not count; without it, every crash moved the service to a new port)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((BIND, port))
            return True
        except OSError:
            return False


def port_for(name: str, preferred: int | None = None, wait: float = PORT_WAIT_S) -> int:
    """The port `name` had (`preferred`, else the last one in ports.json), waited for while a
    process that just stopped lets it go; a new one only if another program holds it (said)."""
    if preferred is None:
        try:
            preferred = json.loads(PORTS.read_text()).get(name)
        except (OSError, ValueError):
            preferred = None
    port = None
    if preferred:
        deadline = time.time() + wait
        while port is None and time.time() < deadline:
            port = preferred if _port_is_free(preferred) else None
            if port is None:
                time.sleep(0.2)
        if port is None:
            port = free_port()
            print(f"{name}: port {preferred} is taken by another program; now on port {port}")
    port = port or free_port()
    _remember_port(name, port)
    return port


def _remember_port(name: str, port: int) -> None:
    try:
        ports = json.loads(PORTS.read_text())
    except (OSError, ValueError):
        ports = {}
    ports[name] = port
    _write_private(PORTS, json.dumps(ports, indent=2))


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (0600), in a folder only its owner can list (0700),
    all at once: a reader (status, another command) never sees it half written."""
    LAB_DIR.mkdir(parents=True, exist_ok=True)
    LAB_DIR.chmod(0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


_lock_depth = 0


@contextlib.contextmanager
def locked():
    """Hold the launcher's lock: commands that change the stack (up, restart, down) run one at a
    time, so none works from a state file that another is rewriting. Re-entrant in a process."""
    global _lock_depth
    if _lock_depth:
        _lock_depth += 1
        try:
            yield
        finally:
            _lock_depth -= 1
        return
    LAB_DIR.mkdir(parents=True, exist_ok=True)
    LAB_DIR.chmod(0o700)
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("another launcher command is running; waiting for it ...", flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        _lock_depth = 1
        try:
            yield
        finally:
            _lock_depth = 0
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def lab_secrets() -> dict:
    """The Jupyter token and Triton's admin key: made once, the same after every restart."""
    values = {}
    if SECRETS.exists():
        values = dict(
            line.split("=", 1) for line in SECRETS.read_text().splitlines() if "=" in line
        )
    if not all(values.get(k) for k in SECRET_KEYS):
        values = {k: values.get(k) or secrets.token_hex(16) for k in SECRET_KEYS}
        _write_private(SECRETS, "".join(f"{k}={v}\n" for k, v in values.items()))
    return values


def service_url(port: int) -> str:
    """The address a client on this machine uses for a service on `port` (127.0.0.1 when the
    services bind to every address)."""
    host = "127.0.0.1" if BIND in ("0.0.0.0", "") else BIND
    return f"http://{host}:{port}"


@dataclass
class Service:
    name: str
    argv: list[str]
    health: str  # URL that answers 200 once the service is ready
    marker: str = ""  # a word of its command line, to recognise the process later
    env: dict = field(default_factory=dict)
    timeout: float = 120.0
    ports: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)  # more to record in state.json (never a secret)


# ---------------------------------------------------------------- process handling


def is_running(pid: int, marker: str) -> bool:
    """True if pid runs and its command line still contains marker (guards against PID reuse)."""
    try:
        cmdline = (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return False
    return marker in cmdline


def stop_process(pid: int, marker: str, grace: float = 10.0) -> bool:
    """SIGTERM the process group, SIGKILL after `grace` seconds. False if it was not running."""
    if not is_running(pid, marker):
        return False
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.time() + wait
        while time.time() < deadline:
            if not Path(f"/proc/{pid}").exists() or is_zombie(pid):
                return True
            time.sleep(0.1)
    return True


def is_zombie(pid: int) -> bool:
    """True if pid has exited but was not yet reaped, or is gone (nothing left to stop)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def _log_tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _redact(text: str, env: dict) -> str:
    """text with the value of every secret the launcher knows replaced by its name."""
    known = {k: v for k in SECRET_KEYS for v in (env.get(k), os.environ.get(k)) if v}
    if SECRETS.exists():
        known.update({k: v for k, v in lab_secrets().items() if v})
    for name, value in known.items():
        text = text.replace(value, f"${name}")
    return text


LOG_ROTATE_BYTES = 16 * 2**20  # a log past this when its service starts becomes <name>.log.1


def _private_log(path: Path):
    """The service's log, appended to, readable by its owner only (it may hold what the service
    prints about its requests). One past LOG_ROTATE_BYTES is moved aside first (one kept): the
    services also rate-limit what they log per request (servelab.serving.log_limit)."""
    LOGS.mkdir(parents=True, exist_ok=True)
    LOGS.chmod(0o700)
    with contextlib.suppress(OSError):
        if path.stat().st_size > LOG_ROTATE_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)  # a log made by an older launcher
    return os.fdopen(fd, "ab")


def start(service: Service) -> dict:
    """Start one service in its own session and wait for its health URL; on failure, raise with
    its log."""
    log_path = LOGS / f"{service.name}.log"
    env = {**os.environ, **service.env}
    with _private_log(log_path) as log:
        shown = _redact(" ".join(service.argv), service.env)
        log.write(f"\n=== {time.strftime('%F %T')} {shown}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            service.argv,
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    # what a restart needs, never a secret (the secrets stay in secrets.env)
    kept_env = {
        k: v for k, v in service.env.items() if k in RESTART_KEYS or k.endswith("_SERVER_URL")
    }
    record = {
        "pid": proc.pid,
        "marker": service.marker or service.argv[0],
        "health": service.health,
        "log": str(log_path),
        "env": kept_env,
        **{k: v for k, v in service.ports.items() if k not in SECRET_KEYS},
        **{k: v for k, v in service.extra.items() if k not in SECRET_KEYS},
    }
    deadline = time.time() + service.timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"{service.name} exited with code {proc.returncode} before it was ready. "
                f"Last lines of {log_path}:\n{_redact(_log_tail(log_path), service.env)}"
            )
        try:
            if requests.get(service.health, timeout=2).status_code == 200:
                return record
        except requests.RequestException:
            pass
        time.sleep(0.5)
    stop_process(proc.pid, record["marker"])
    raise RuntimeError(
        f"{service.name} not healthy after {service.timeout:.0f} s ({service.health}). "
        f"Last lines of {log_path}:\n{_redact(_log_tail(log_path), service.env)}"
    )


# ---------------------------------------------------------------- the services

RAY_SERVICES = ("ray_head", "ray_node")  # labstack/ray_cluster.py, in the order they start
RESTART_KEYS = (
    "FASTAPI_BACKEND",
    "WEB_CONCURRENCY",
    "FLASK_BACKEND",
    "FOOD11_MODEL_NAME",
    "LAB_MODE",
)


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
        health=f"{service_url(port)}/healthz",
        marker="flask_app.serve",
        env=env,
        ports={"port": port},
    )


def triton_service(repo: Path, admin_key: str, ports: dict | None = None) -> Service:
    """tritonserver under its watchdog (servelab.serving.triton_watchdog), on the ports it had.

    The watchdog gets the admin key in its environment (to load a model whose stub died again)
    and adds the flags that pass it to tritonserver, which takes it only on its own command line,
    then masks it there once the server has read it: no command line shows it (docs/security.md)."""
    from labstack import triton_local

    ports = ports or {}
    http = port_for("triton", ports.get("port"))
    grpc = port_for("triton_grpc", ports.get("grpc_port"))
    metrics = port_for("triton_metrics", ports.get("metrics_port"))
    argv, env = triton_local.server_command(
        repo, http, grpc, metrics, admin_key=admin_key, key_on_command_line=False
    )
    health_file = f"--health-file={TRITON_HEALTH}"
    return Service(
        "triton",
        triton_local.watchdog_command(argv, http, TRITON_HEALTH),
        health=f"{service_url(http)}/v2/health/ready",
        marker=health_file,
        env=env,
        timeout=300,
        ports={"port": http, "grpc_port": grpc, "metrics_port": metrics},
        extra={"shm_prefix": triton_local.shm_prefix(http), "health_file": str(TRITON_HEALTH)},
    )


# One more Jupyter config folder for JupyterLab: its labconfig/page_config.json turns off
# JupyterLab 4's announcements plugin (the "Would you like to get notified about official Jupyter
# news?" prompt of a first start, and the check for updates), the file that `jupyter labextension
# disable "@jupyterlab/apputils-extension:announcements"` writes
JUPYTER_CONFIG = Path(__file__).resolve().parent / "jupyter_config"


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


# ---------------------------------------------------------------- state and urls.env


def read_state() -> dict:
    try:
        return json.loads(STATE.read_text())
    except (OSError, ValueError):
        return {"services": {}}


def write_state(state: dict) -> None:
    _write_private(STATE, json.dumps(state, indent=2))
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
            TRITON_ADMIN_KEY=lab_secrets()[
                "TRITON_ADMIN_KEY"
            ],  # the repository API's header (labenv)
        )
    if "ray_head" in services:
        from labstack import ray_cluster

        lines.update(ray_cluster.urls(services["ray_head"], service_url))
    if "jupyter" in services:
        lines["JUPYTER_URL"] = (
            f"{service_url(services['jupyter']['port'])}/lab?token={lab_secrets()['JUPYTER_TOKEN']}"
        )
    _write_private(URLS_ENV, "".join(f"{k}={v}\n" for k, v in lines.items() if v))


def client_urls(state: dict) -> dict:
    """The URL variables, as the notebooks and Flask see them."""
    write_state(state)
    return dict(line.split("=", 1) for line in URLS_ENV.read_text().splitlines() if "=" in line)


def _flask_env(state: dict, urls: dict) -> dict:
    env = {k: v for k, v in urls.items() if k.endswith("_SERVER_URL") or k == "LAB_MODE"}
    env["FLASK_BACKEND"] = os.environ.get("FLASK_BACKEND", "fastapi")
    env["FOOD11_MODEL_NAME"] = os.environ.get("FOOD11_MODEL_NAME", "food_classifier")
    return env


def _jupyter_env(state: dict) -> dict:
    urls = client_urls(state)
    if (
        "triton" in state["services"]
    ):  # so `perf_analyzer ...` typed in a terminal or `!` cell just works
        tools = perf_analyzer_env()
        urls.update(PATH=tools["PATH"], LD_LIBRARY_PATH=tools["LD_LIBRARY_PATH"])
    return urls


def _service(name: str, state: dict, overrides: dict | None = None) -> Service:
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
        return flask_service(port, {**_flask_env(state, client_urls(state)), **env})
    if name == "triton":
        key = lab_secrets()["TRITON_ADMIN_KEY"]
        return triton_service(Path(state["model_repository"]), key, rec)
    if name == "jupyter":
        port = port_for(name, rec.get("port"))
        return jupyter_service(port, lab_secrets()["JUPYTER_TOKEN"], _jupyter_env(state))
    if name in RAY_SERVICES:
        from labstack import ray_cluster

        if name == "ray_head":
            return ray_cluster.head_service(Service, port_for, service_url, ray_cluster.temp_dir())
        return ray_cluster.node_service(Service, port_for, state["services"]["ray_head"])
    raise SystemExit(f"no service called {name!r} (fastapi, flask, triton, jupyter, ray_*)")


def _healthy(rec: dict) -> bool:
    if not is_running(rec["pid"], rec["marker"]) or is_zombie(rec["pid"]):
        return False
    try:
        return requests.get(rec["health"], timeout=5).status_code == 200
    except requests.RequestException:
        return False


def _stop_service(name: str, rec: dict, say: str = "") -> bool:
    """Stop a recorded service (its whole process group); after Triton, remove the /dev/shm
    regions its stubs may have left. True if it was running."""
    if name in RAY_SERVICES:  # a node and the workers Ray started for it (their own groups)
        from labstack import ray_cluster

        stopped = is_running(rec["pid"], rec["marker"])
        ray_cluster.stop_sessions([rec["pid"]] if stopped else [])
        ray_cluster.remove_temp_dir(rec.get("temp_dir"))
    else:
        stopped = stop_process(rec["pid"], rec["marker"])
    if stopped and say:
        print(f"{say} {name} (pid {rec['pid']})")
    left = _left_by_watchdog(rec) if name == "triton" and not stopped else []
    if left:  # its watchdog died, the server and its stubs did not: end them too (SIGTERM)
        print(f"stopped tritonserver and its stubs {left}, left running by their dead watchdog")
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        stopped = True
    if name == "triton":
        _wait_group_gone(rec["pid"])  # its stubs map their regions until they exit
        from servelab.serving.triton_watchdog import remove_stale_regions

        removed = remove_stale_regions(rec.get("shm_prefix", ""))
        if removed:
            print(f"removed {len(removed)} shared-memory region(s) Triton's stubs left behind")
    return stopped


TRITON_COMMS = ("tritonserver", "triton_python_b")  # /proc/<pid>/comm: the server, a stub


def _left_by_watchdog(rec: dict) -> list[int]:
    """tritonserver and its stubs still running in Triton's process group after the watchdog, the
    group's leader, died (recognised by name as well as group: never another program)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        pid = int(stat.parent.name)
        if _group_of(stat) == rec["pid"] and pid != rec["pid"] and not is_zombie(pid):
            if _comm(pid) in TRITON_COMMS:
                found.append(pid)
    return sorted(found)


def _wait_group_gone(pgid: int, timeout: float = 15.0) -> None:
    """Wait until no process of the group is left (SIGKILL what remains after `timeout`/2)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        members = [
            p
            for p in Path("/proc").glob("[0-9]*/stat")
            if _group_of(p) == pgid and not is_zombie(int(p.parent.name))
        ]
        if not members:
            return
        if time.time() > deadline - timeout / 2:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        time.sleep(0.2)


def _group_of(stat: Path) -> int:
    try:
        return int(stat.read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return -1


def _keep(name: str, rec: dict | None, state: dict) -> str:
    """Why a recorded service can stay as it is ('' if it must be started again)."""
    if not rec or not _healthy(rec):
        return ""
    env = rec.get("env", {})
    if name == "ray_node" and rec.get("head_pid") != state["services"].get("ray_head", {}).get(
        "pid"
    ):
        return ""  # it belonged to a head that is gone
    if name == "fastapi":
        asked = os.environ.get("FASTAPI_BACKEND")
        if asked and fastapi_backend(asked) != env.get("FASTAPI_BACKEND"):
            return ""
    if name == "flask":
        urls = {k: v for k, v in client_urls(state).items() if k.endswith("_SERVER_URL")}
        if any(env.get(k) not in (None, v) for k, v in urls.items()):
            return ""  # a model server it calls moved
        for key in ("FLASK_BACKEND", "FOOD11_MODEL_NAME"):
            if os.environ.get(key) and os.environ[key] != env.get(key):
                return ""
    return "running and healthy"


def up(jupyter: bool = False, triton: bool = True, ray: bool = False) -> dict:
    """Bring the stack up: start what is not running and healthy, keep what is (a crash of one
    service restarts that one; JupyterLab and its kernels survive), each on the port it had.
    ray: also a local Ray cluster (kept anyway when one runs: notebook 9 may have started it)."""
    with locked():
        lab_secrets()  # made once; the same token and key after every restart
        before = read_state()
        previous = before.get("services", {})
        wanted = ["fastapi", *(["triton"] if triton else []), "flask"]
        if ray or all(n in previous for n in RAY_SERVICES):
            wanted += list(RAY_SERVICES)
        wanted += ["jupyter"] if jupyter else []
        state: dict = {"services": {}, "started": time.strftime("%F %T")}
        if triton:
            state["model_repository"] = str(model_repository_dir())
        if triton and before.get("model_repository") not in (None, state["model_repository"]):
            # another stack (`make lab` runs one of its own): nothing of the running one is kept
            print("the running stack serves another model repository: starting afresh")
            for name in reversed(list(previous)):
                _stop_service(name, previous[name], "stopped")
            previous = {}
        for name in [n for n in previous if n not in wanted]:  # `up` says what the stack is
            _stop_service(name, previous[name], "stopped")
        try:
            for name in wanted:
                rec = previous.get(name)
                why = _keep(name, rec, state)
                if why:
                    print(f"{name}: {why} (pid {rec['pid']}), kept", flush=True)
                    state["services"][name] = rec
                    write_state(state)
                    continue
                if rec:
                    _stop_service(name, rec, "stopped leftover")
                state["services"][name] = _start_fresh(name, state)
                write_state(state)
        except BaseException:
            down(quiet=True)
            raise
        _moved(previous, state)
        print_status(state)
        return state


def _start_fresh(name: str, state: dict) -> dict:
    if name in RAY_SERVICES:
        from labstack import ray_cluster

        print(f"starting {name} (a Ray node, one core) ...", flush=True)
        record = start(_service(name, state))
        if name == "ray_node":
            head = state["services"]["ray_head"]
            record["head_pid"] = head["pid"]  # a node of another head is not kept (_keep)
            try:
                ray_cluster.wait_for_nodes(service_url(head["port"]))
            except RuntimeError as exc:
                _stop_service(name, record)
                tail = _log_tail(Path(record["log"]))
                raise RuntimeError(f"{exc}; last lines of {record['log']}:\n{tail}") from None
        return record
    if name == "fastapi":
        runtime = os.environ.get("FASTAPI_BACKEND", "pt")
        print(f"starting fastapi ({runtime}) ...", flush=True)
        return start(_service("fastapi", state, {"FASTAPI_BACKEND": runtime}))
    if name == "triton":
        from servelab.triton import model_repository

        model_repository.populate(model_repository_dir(), mode="local", keep_configs=True)
        print(
            "starting triton (loading every model; about 15-30 s per model on a 2-core CPU) ...",
            flush=True,
        )
        return start(_service("triton", state))
    print(f"starting {'jupyterlab' if name == 'jupyter' else name} ...", flush=True)
    return start(_service(name, state))


def _moved(before: dict, state: dict) -> None:
    """Tell the student which URLs changed (a port taken by another program): a running
    JupyterLab keeps its environment, and its notebooks read the new ones with labenv.load()."""
    changed = [
        n
        for n, r in state["services"].items()
        if n in before and before[n].get("port") != r["port"]
    ]
    if changed and "jupyter" in state["services"]:
        print(
            f"{', '.join(changed)} moved to a new port: in a running notebook, run "
            "`labenv.load()` again (it reads the new URLs from .lab/urls.env)"
        )


def restart(name: str, overrides: dict | None = None) -> dict:
    """Restart one service on its port, with the same secrets and, optionally, changed settings
    (e.g. FASTAPI_BACKEND=onnx). After a crash this brings back the one service that died; the
    model repository is not touched (Triton loads the configs as they are now)."""
    with locked():
        state = read_state()
        rec = state["services"].get(name)
        if rec is None:
            raise SystemExit(
                f"{name} is not running (services: {sorted(state['services'])}); "
                "run `make up` first"
            )
        _stop_service(name, rec)
        state["services"][name] = start(_service(name, state, overrides))
        write_state(state)
        print(f"{name} restarted" + (f" with {overrides}" if overrides else ""))
        new_port = state["services"][name]["port"]
        if (
            new_port != rec["port"]
            and name in ("fastapi", "triton")
            and "flask" in state["services"]
        ):
            _stop_service("flask", state["services"]["flask"])
            state["services"]["flask"] = start(_service("flask", state))
            write_state(state)
            print("flask restarted: the model server it calls moved")
        _moved({name: rec}, state)
        return state


def _wait_port_free(port: int, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if _port_is_free(port):
            return
        time.sleep(0.2)
    raise RuntimeError(f"port {port} still in use after {timeout:.0f} s")


@contextlib.contextmanager
def paused(reason: str = ""):
    """Stop (SIGSTOP) every running service of the local stack for the block, then let them go on
    (SIGCONT): a measurement of the raw model gets the cores to itself, as on an idle machine."""
    groups = [
        rec["pid"]
        for rec in read_state().get("services", {}).values()
        if is_running(rec["pid"], rec["marker"])
    ]
    for pid in groups:
        os.killpg(pid, signal.SIGSTOP)
    print(f"paused {len(groups)} local service(s)" + (f" ({reason})" if reason else ""), flush=True)
    try:
        yield
    finally:
        for pid in groups:
            os.killpg(pid, signal.SIGCONT)
        print(f"resumed {len(groups)} local service(s)", flush=True)


def ray() -> dict:
    """The local Ray cluster beside whatever runs (notebook 9's first cell): kept when both nodes
    run and are healthy, else started afresh; nothing else is touched."""
    with locked():
        state = read_state()
        services = state.setdefault("services", {})
        if all(n in services and _healthy(services[n]) for n in RAY_SERVICES):
            print("the Ray cluster runs and is healthy: kept", flush=True)
        else:
            for name in reversed(RAY_SERVICES):
                if name in services:
                    _stop_service(name, services.pop(name), "stopped leftover")
            try:
                for name in RAY_SERVICES:
                    services[name] = _start_fresh(name, state)
                    write_state(state)
            except BaseException:
                for name in reversed(RAY_SERVICES):
                    if name in services:
                        _stop_service(name, services.pop(name))
                write_state(state)
                raise
        print_status(state)
        return state


def down(quiet: bool = False) -> None:
    with locked():
        state = read_state()
        stopped = []
        for name in reversed(list(state.get("services", {}))):
            if _stop_service(name, state["services"][name]):
                stopped.append(name)
        for path in (STATE, URLS_ENV, TRITON_HEALTH):
            path.unlink(missing_ok=True)
    if not quiet:
        print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")


def _triton_models(rec: dict) -> tuple[bool, list[str]]:
    """Triton's health per model: its own readiness and its watchdog's report on the stubs."""
    from servelab.serving.triton_watchdog import check

    health_file = Path(rec.get("health_file") or TRITON_HEALTH)
    return check(f"http://127.0.0.1:{rec['port']}", health_file)


def _triton_status(rec: dict) -> tuple[str, list[str]]:
    """Triton's word (healthy, DEGRADED, DOWN) and lines: per model from Triton and its watchdog's
    report, and whether the watchdog itself runs (killed, it leaves a server nothing repairs)."""
    if is_running(rec["pid"], rec["marker"]) and not is_zombie(rec["pid"]):
        healthy, lines = _triton_models(rec)
        if not healthy and any(ln.startswith("FAILED") for ln in lines):
            lines.append(f"recover: `make restart SERVICE=triton` (log: {rec['log']})")
        return ("healthy" if healthy else "DEGRADED"), lines
    servers = [p for p in _left_by_watchdog(rec) if _comm(p) == "tritonserver"]
    _, lines = _triton_models(rec)
    lines = [ln for ln in lines if not ln.startswith("watchdog:")]
    if servers:
        return "DEGRADED", [
            f"its watchdog (pid {rec['pid']}) is not running: tritonserver (pid {servers[0]}) "
            "still serves, but nothing repairs a model whose stub dies or a server that wedges",
            *lines,
            "recover: `make up` (starts Triton and its watchdog again, on the same ports)",
        ]
    return "DOWN", [*lines, "recover: `make up` (or `make restart SERVICE=triton`)"]


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def red(word: str) -> str:
    """A status word for a person: in red where a terminal shows it (NO_COLOR set: never)."""
    if word == "healthy" or not sys.stdout.isatty() or os.environ.get("NO_COLOR"):
        return word
    return f"\033[1;31m{word}\033[0m"


def print_status(state: dict | None = None) -> None:
    """Each service: running and healthy or not (Triton: per model, and its watchdog), its URL and
    log, and what recovers one that is not; where the secrets are, never their values."""
    state = state or read_state()
    if not state.get("services"):
        print("local stack is not running (make up)")
        return
    for name, rec in state["services"].items():
        if name == "triton":
            word, lines = _triton_status(rec)
        else:
            word = "healthy" if _healthy(rec) else "DOWN"
            lines = [] if word == "healthy" else ["recover: `make up` starts it again"]
        shown = red(word) + " " * max(0, 8 - len(word))
        print(
            f"  {name:8s} pid {rec['pid']:<7d} {shown} {service_url(rec['port'])}"
            f"   log: {rec['log']}"
        )
        for line in lines:
            print(f"             {line}")
    if URLS_ENV.exists():
        shown = [
            line
            for line in URLS_ENV.read_text().splitlines()
            if line.split("=", 1)[0] not in (*SECRET_KEYS, "JUPYTER_URL")
        ]
        print(f"\n{URLS_ENV} (what notebooks and tools read):\n  " + "\n  ".join(shown))
        if "jupyter" in state["services"]:
            print(
                f"\nJupyterLab: {service_url(state['services']['jupyter']['port'])}/lab; "
                "the link with "
                f"its token is the JUPYTER_URL line of {URLS_ENV}"
            )
        print(
            f"Secrets (the Jupyter token, Triton's admin key): {SECRETS} and {URLS_ENV}, "
            "readable only by you; not shown here"
        )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up")
    p_up.add_argument("--jupyter", action="store_true", help="also start JupyterLab")
    p_up.add_argument("--no-triton", action="store_true", help="FastAPI half only")
    p_up.add_argument("--ray", action="store_true", help="also a local Ray cluster (notebook 9)")
    sub.add_parser("ray", help="a local Ray cluster (two nodes) beside what runs")
    sub.add_parser("down")
    sub.add_parser("status")
    p_re = sub.add_parser("restart")
    p_re.add_argument("name", choices=["fastapi", "flask", "triton", "jupyter"])
    p_re.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="e.g. FASTAPI_BACKEND=onnx (or pt); FLASK_BACKEND=triton FOOD11_MODEL_NAME=...",
    )
    args = parser.parse_args(argv)
    if args.cmd == "up":
        up(jupyter=args.jupyter, triton=not args.no_triton, ray=args.ray)
    elif args.cmd == "ray":
        ray()
    elif args.cmd == "down":
        down()
    elif args.cmd == "status":
        print_status()
    else:
        restart(args.name, dict(kv.split("=", 1) for kv in args.set))


if __name__ == "__main__":
    main()
