"""Starting and stopping the local stack's processes: each service in a process session of its own,
its output in a private log, recognised later by a word of its command line (never a reused pid).

A service is recorded the moment its process exists (start's on_launch), before it is ready: a
Ctrl-C while it starts can no longer leave a process that nothing records (labstack.launcher
says what it does with one). uninterrupted() holds a Ctrl-C for the few lines that must not be
cut in two (a process started and its record written).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

from labstack.lab_files import LOGS
from labstack.lab_secrets import SECRET_KEYS, redact
from servelab.paths import REPO_ROOT

# Settings a restart needs, recorded in state.json (never a secret)
RESTART_KEYS = (
    "FASTAPI_BACKEND",
    "WEB_CONCURRENCY",
    "FLASK_BACKEND",
    "FOOD11_MODEL_NAME",
    "LAB_MODE",
)
LOG_ROTATE_BYTES = 16 * 2**20  # a log past this when its service starts becomes <name>.log.1


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
    base_env: dict | None = None  # the environment it starts from (None: the launcher's own)


@contextlib.contextmanager
def uninterrupted():
    """Hold a Ctrl-C (SIGINT) until the block is done, then raise it: what the block starts is
    recorded before the interruption is seen. Only the main thread receives signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    before = signal.signal(signal.SIGINT, lambda signum, _frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
        if held:
            raise KeyboardInterrupt


def is_running(pid: int, marker: str) -> bool:
    """True if pid runs and its command line still contains marker (guards against PID reuse)."""
    try:
        cmdline = (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return False
    return marker in cmdline


def is_zombie(pid: int) -> bool:
    """True if pid has exited but was not yet reaped, or is gone (nothing left to stop)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


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


def group_of(stat: Path) -> int:
    try:
        return int(stat.read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return -1


def wait_group_gone(pgid: int, timeout: float = 15.0) -> None:
    """Wait until no process of the group is left (SIGKILL what remains after `timeout`/2)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        members = [
            p
            for p in Path("/proc").glob("[0-9]*/stat")
            if group_of(p) == pgid and not is_zombie(int(p.parent.name))
        ]
        if not members:
            return
        if time.time() > deadline - timeout / 2:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        time.sleep(0.2)


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def private_log(path: Path):
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


def launch(service: Service, on_launch=None) -> tuple[subprocess.Popen, dict]:
    """Start the service's process in its own session; its record (what state.json keeps) is
    handed to on_launch before a Ctrl-C can interrupt (uninterrupted)."""
    log_path = LOGS / f"{service.name}.log"
    base = os.environ if service.base_env is None else service.base_env
    env = {**base, **service.env}
    with private_log(log_path) as log, uninterrupted():
        shown = redact(" ".join(service.argv), service.env)
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
        # what a restart needs, never a secret (the secrets stay in .lab/)
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
        if on_launch is not None:
            on_launch(record)
    return proc, record


def start(service: Service, on_launch=None) -> dict:
    """Start one service in its own session and wait for its health URL; on failure, stop it and
    raise with its log. on_launch(record): called once its process exists (see launch)."""
    proc, record = launch(service, on_launch)
    log_path = Path(record["log"])
    deadline = time.time() + service.timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"{service.name} exited with code {proc.returncode} before it was ready. "
                f"Last lines of {log_path}:\n{redact(log_tail(log_path), service.env)}"
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
        f"Last lines of {log_path}:\n{redact(log_tail(log_path), service.env)}"
    )


TRITON_COMMS = ("tritonserver", "triton_python_b")  # /proc/<pid>/comm: the server, a stub


def left_by_watchdog(rec: dict) -> list[int]:
    """tritonserver and its stubs still running in Triton's process group after the watchdog, the
    group's leader, died (recognised by name as well as group: never another program)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        pid = int(stat.parent.name)
        if group_of(stat) == rec["pid"] and pid != rec["pid"] and not is_zombie(pid):
            if comm(pid) in TRITON_COMMS:
                found.append(pid)
    return sorted(found)
