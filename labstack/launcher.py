"""Local mode: the lab's services as native processes (no Docker, no GPU needed).

    python -m labstack.launcher up [--jupyter] [--no-triton]   # start, check, write .lab/urls.env
    python -m labstack.launcher status
    python -m labstack.launcher restart fastapi --set FASTAPI_BACKEND=onnx
    python -m labstack.launcher restart triton     # one service back after a crash (make restart)
    python -m labstack.launcher down                            # stop exactly what `up` started

Every service gets a port on 127.0.0.1 (LAB_BIND_HOST to change), runs in its own process
session with its log in .lab/logs/<name>.log, and is recorded in .lab/state.json; `down` stops
only processes recorded there whose command line still matches.

Restarts keep what a student relies on: each service gets the port it had last time when that port
is free (.lab/ports.json), the Jupyter token and Triton's admin key stay the same
(.lab/secrets.env), and `up` keeps edited config.pbtxt files in the model repository. Files
holding a secret (secrets.env, urls.env, state.json) are readable by their owner only; no secret
is on a command line the launcher starts (JupyterLab reads its token from the environment).
"""

from __future__ import annotations

import argparse
import contextlib
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

from servelab.paths import LAB_DIR, REPO_ROOT, model_repository_dir
from servelab.serving.runtimes import fastapi_backend
from servelab.tools import perf_analyzer_env

STATE = LAB_DIR / "state.json"
URLS_ENV = LAB_DIR / "urls.env"
SECRETS = LAB_DIR / "secrets.env"
PORTS = LAB_DIR / "ports.json"
LOGS = LAB_DIR / "logs"
BIND = os.environ.get("LAB_BIND_HOST", "127.0.0.1")
SECRET_KEYS = ("JUPYTER_TOKEN", "TRITON_ADMIN_KEY")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((BIND, 0))
        return s.getsockname()[1]


def _port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((BIND, port))
            return True
        except OSError:
            return False


def port_for(name: str) -> int:
    """The port `name` had the last time (bookmarks and open browser tabs keep working), if free."""
    try:
        previous = json.loads(PORTS.read_text()).get(name)
    except (OSError, ValueError):
        previous = None
    port = previous if previous and _port_is_free(previous) else free_port()
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
    """Write a file only its owner can read (0600), in a folder only its owner can list (0700)."""
    LAB_DIR.mkdir(parents=True, exist_ok=True)
    LAB_DIR.chmod(0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    path.chmod(0o600)


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


def _url(port: int) -> str:
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


# ---------------------------------------------------------------- process handling


def _alive(pid: int, marker: str) -> bool:
    """True if pid runs and its command line still contains marker (guards against PID reuse)."""
    try:
        cmdline = (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return False
    return marker in cmdline


def _stop(pid: int, marker: str, grace: float = 10.0) -> bool:
    """SIGTERM the process group, SIGKILL after `grace` seconds. False if it was not running."""
    if not _alive(pid, marker):
        return False
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.time() + wait
        while time.time() < deadline:
            if not Path(f"/proc/{pid}").exists() or _zombie(pid):
                return True
            time.sleep(0.1)
    return True


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def _log_tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def start(service: Service) -> dict:
    """Start one service in its own session and wait for its health URL; on failure, raise with
    its log."""
    LOGS.mkdir(parents=True, exist_ok=True)
    log_path = LOGS / f"{service.name}.log"
    env = {**os.environ, **service.env}
    with open(log_path, "ab") as log:
        log.write(f"\n=== {time.strftime('%F %T')} {' '.join(service.argv)}\n".encode())
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
        "argv": service.argv,
        "health": service.health,
        "log": str(log_path),
        "env": kept_env,
        **{k: v for k, v in service.ports.items() if k not in SECRET_KEYS},
    }
    deadline = time.time() + service.timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"{service.name} exited with code {proc.returncode} before it was ready. "
                f"Last lines of {log_path}:\n{_log_tail(log_path)}"
            )
        try:
            if requests.get(service.health, timeout=2).status_code == 200:
                return record
        except requests.RequestException:
            pass
        time.sleep(0.5)
    _stop(proc.pid, record["marker"])
    raise RuntimeError(
        f"{service.name} not healthy after {service.timeout:.0f} s ({service.health}). "
        f"Last lines of {log_path}:\n{_log_tail(log_path)}"
    )


# ---------------------------------------------------------------- the services

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
        health=f"{_url(port)}/health",
        marker=app,
        env=env,
        ports={"port": port},
    )


def flask_service(port: int, env: dict) -> Service:
    # waitress, as in the Docker image (flask_app/serve.py): slow clients cannot hold its threads
    return Service(
        "flask",
        _module("flask_app.serve") + ["--host", BIND, "--port", str(port)],
        health=f"{_url(port)}/healthz",
        marker="flask_app.serve",
        env=env,
        ports={"port": port},
    )


def triton_service(repo: Path, admin_key: str) -> Service:
    from labstack import triton_local

    http, grpc, metrics = port_for("triton"), port_for("triton_grpc"), port_for("triton_metrics")
    argv, env = triton_local.server_command(repo, http, grpc, metrics, admin_key=admin_key)
    return Service(
        "triton",
        argv,
        health=f"{_url(http)}/v2/health/ready",
        env=env,
        timeout=300,
        ports={"port": http, "grpc_port": grpc, "metrics_port": metrics},
    )


def jupyter_service(port: int, token: str, env: dict) -> Service:
    # the token reaches JupyterLab through its environment (JUPYTER_TOKEN), not its command line,
    # which every user of the machine can read
    return Service(
        "jupyter",
        _module("jupyterlab")
        + [
            "--no-browser",
            f"--ip={BIND}",
            f"--port={port}",
            f"--ServerApp.root_dir={REPO_ROOT}",
            "--ServerApp.open_browser=False",
        ]
        + (["--allow-root"] if os.geteuid() == 0 else []),
        health=f"{_url(port)}/api",
        marker=f"--port={port}",
        env={**env, "JUPYTER_TOKEN": token},
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
        lines["FASTAPI_SERVER_URL"] = _url(services["fastapi"]["port"])
    if "flask" in services:
        lines["FLASK_SERVER_URL"] = _url(services["flask"]["port"])
    if "triton" in services:
        t = services["triton"]
        lines.update(
            TRITON_SERVER_URL=_url(t["port"]),
            TRITON_GRPC_URL=f"127.0.0.1:{t['grpc_port']}",
            TRITON_METRICS_URL=f"{_url(t['metrics_port'])}/metrics",
            TRITON_MODEL_REPOSITORY=state.get("model_repository", ""),
            TRITON_ADMIN_KEY=lab_secrets()[
                "TRITON_ADMIN_KEY"
            ],  # the repository API's header (labenv)
        )
    if "jupyter" in services:
        lines["JUPYTER_URL"] = (
            f"{_url(services['jupyter']['port'])}/lab?token={lab_secrets()['JUPYTER_TOKEN']}"
        )
    _write_private(URLS_ENV, "".join(f"{k}={v}\n" for k, v in lines.items() if v))


def _urls_for_clients(state: dict) -> dict:
    """The URL variables, as the notebooks and Flask see them."""
    write_state(state)
    return dict(line.split("=", 1) for line in URLS_ENV.read_text().splitlines() if "=" in line)


def clean_stale() -> None:
    """After a crash: stop anything a previous `up` left running, forget its state."""
    state = read_state()
    for name, rec in state.get("services", {}).items():
        if _stop(rec["pid"], rec["marker"]):
            print(f"stopped leftover {name} (pid {rec['pid']})")
    for path in (STATE, URLS_ENV):
        path.unlink(missing_ok=True)


def _flask_env(state: dict, urls: dict) -> dict:
    env = {k: v for k, v in urls.items() if k.endswith("_SERVER_URL") or k == "LAB_MODE"}
    env["FLASK_BACKEND"] = os.environ.get("FLASK_BACKEND", "fastapi")
    env["FOOD11_MODEL_NAME"] = os.environ.get("FOOD11_MODEL_NAME", "food_classifier")
    return env


def _jupyter_env(state: dict) -> dict:
    urls = _urls_for_clients(state)
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
    port = rec.get("port") or port_for(name)
    if name == "fastapi":
        return fastapi_service(
            port,
            env.get("FASTAPI_BACKEND") or os.environ.get("FASTAPI_BACKEND", "pt"),
            env.get("WEB_CONCURRENCY") or 1,
        )
    if name == "flask":
        return flask_service(port, {**_flask_env(state, _urls_for_clients(state)), **env})
    if name == "triton":
        return triton_service(Path(state["model_repository"]), lab_secrets()["TRITON_ADMIN_KEY"])
    if name == "jupyter":
        return jupyter_service(port, lab_secrets()["JUPYTER_TOKEN"], _jupyter_env(state))
    raise SystemExit(f"no service called {name!r} (fastapi, flask, triton, jupyter)")


def up(jupyter: bool = False, triton: bool = True) -> dict:
    clean_stale()
    lab_secrets()  # made once; the same token and key after every restart
    state: dict = {"services": {}, "started": time.strftime("%F %T")}
    try:
        runtime = os.environ.get("FASTAPI_BACKEND", "pt")
        print(f"starting fastapi ({runtime}) ...", flush=True)
        state["services"]["fastapi"] = start(
            _service("fastapi", state, {"FASTAPI_BACKEND": runtime})
        )
        write_state(state)
        if triton:
            from servelab import model_repository

            state["model_repository"] = str(model_repository_dir())
            model_repository.populate(model_repository_dir(), mode="local", keep_configs=True)
            print(
                "starting triton (loading every model; about 15-30 s per model on a 2-core CPU) "
                "...",
                flush=True,
            )
            state["services"]["triton"] = start(_service("triton", state))
            write_state(state)
        print("starting flask ...", flush=True)
        state["services"]["flask"] = start(_service("flask", state))
        write_state(state)
        if jupyter:
            print("starting jupyterlab ...", flush=True)
            state["services"]["jupyter"] = start(_service("jupyter", state))
            write_state(state)
    except BaseException:
        down(quiet=True)
        raise
    print_status(state)
    return state


def restart(name: str, overrides: dict | None = None) -> dict:
    """Restart one service on its port, with the same secrets and, optionally, changed settings
    (e.g. FASTAPI_BACKEND=onnx). After a crash this brings back the one service that died; the
    model repository is not touched (Triton loads the configs as they are now)."""
    state = read_state()
    rec = state["services"].get(name)
    if rec is None:
        raise SystemExit(
            f"{name} is not running (services: {sorted(state['services'])}); run `make up` first"
        )
    _stop(rec["pid"], rec["marker"])
    for key in ("port", "grpc_port", "metrics_port"):
        if key in rec:
            _wait_port_free(rec[key])
    state["services"][name] = start(_service(name, state, overrides))
    write_state(state)
    print(f"{name} restarted" + (f" with {overrides}" if overrides else ""))
    return state


def _wait_port_free(port: int, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((BIND, port))
                return
            except OSError:
                time.sleep(0.2)
    raise RuntimeError(f"port {port} still in use after {timeout:.0f} s")


@contextlib.contextmanager
def paused(reason: str = ""):
    """Stop (SIGSTOP) every running service of the local stack for the block, then let them go on
    (SIGCONT): a measurement of the raw model gets the cores to itself, as on an idle machine."""
    groups = [
        rec["pid"]
        for rec in read_state().get("services", {}).values()
        if _alive(rec["pid"], rec["marker"])
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


def down(quiet: bool = False) -> None:
    state = read_state()
    stopped = []
    for name in reversed(list(state.get("services", {}))):
        rec = state["services"][name]
        if _stop(rec["pid"], rec["marker"]):
            stopped.append(name)
    for path in (STATE, URLS_ENV):
        path.unlink(missing_ok=True)
    if not quiet:
        print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")


def print_status(state: dict | None = None) -> None:
    state = state or read_state()
    if not state.get("services"):
        print("local stack is not running (make up)")
        return
    for name, rec in state["services"].items():
        alive = _alive(rec["pid"], rec["marker"])
        try:
            healthy = alive and requests.get(rec["health"], timeout=2).status_code == 200
        except requests.RequestException:
            healthy = False
        state = "healthy" if healthy else "DOWN"
        print(
            f"  {name:8s} pid {rec['pid']:<7d} {state:8s} {_url(rec['port'])}   log: {rec['log']}"
        )
    if URLS_ENV.exists():
        print(f"\n{URLS_ENV}:\n" + URLS_ENV.read_text())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up")
    p_up.add_argument("--jupyter", action="store_true", help="also start JupyterLab")
    p_up.add_argument("--no-triton", action="store_true", help="FastAPI half only")
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
        up(jupyter=args.jupyter, triton=not args.no_triton)
    elif args.cmd == "down":
        down()
    elif args.cmd == "status":
        print_status()
    else:
        restart(args.name, dict(kv.split("=", 1) for kv in args.set))


if __name__ == "__main__":
    main()
