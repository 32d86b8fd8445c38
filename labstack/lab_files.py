"""The launcher's files under .lab/ (LAB_STATE_DIR): where each lives, written privately and whole,
and the lock that lets one command at a time change the stack.

Every file here is readable by its owner only (0600) in a folder only its owner can list (0700):
some hold a secret (secrets.env, urls.env, ray_token), the others say where the secrets are used.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from servelab.paths import LAB_DIR

STATE = LAB_DIR / "state.json"  # what runs: process ids, ports, settings (never a secret)
URLS_ENV = LAB_DIR / "urls.env"  # what notebooks and tools read (servelab.labenv.load)
SECRETS = LAB_DIR / "secrets.env"  # the Jupyter token and Triton's admin key
RAY_TOKEN = LAB_DIR / "ray_token"  # the Ray cluster's token (RAY_AUTH_TOKEN_PATH), alone in it
PORTS = LAB_DIR / "ports.json"  # the port each service had, to come back on it
LOGS = LAB_DIR / "logs"
LOCK = LAB_DIR / "launcher.lock"
TRITON_HEALTH = LAB_DIR / "triton_health.json"  # written by Triton's watchdog


def private_dir() -> Path:
    """.lab/, made if missing, listable by its owner only."""
    LAB_DIR.mkdir(parents=True, exist_ok=True)
    LAB_DIR.chmod(0o700)
    return LAB_DIR


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (0600), in a folder only its owner can list (0700),
    all at once: a reader (status, another command) never sees it half written."""
    private_dir()
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
    private_dir()
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
