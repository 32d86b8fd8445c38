"""The local stack's ports: each service on 127.0.0.1 (LAB_BIND_HOST to change), on the port it
had before (.lab/ports.json), so a restart or a crash gives the student the same URLs back."""

from __future__ import annotations

import json
import os
import socket
import time

from labstack.lab_files import PORTS, write_private

BIND = os.environ.get("LAB_BIND_HOST", "127.0.0.1")
PORT_WAIT_S = 20.0  # how long a port a killed process held may take to be free again


def free_port() -> int:
    with socket.socket() as s:
        s.bind((BIND, 0))
        return s.getsockname()[1]


def port_is_free(port: int) -> bool:
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
            port = preferred if port_is_free(preferred) else None
            if port is None:
                time.sleep(0.2)
        if port is None:
            port = free_port()
            print(f"{name}: port {preferred} is taken by another program; now on port {port}")
    port = port or free_port()
    remember_port(name, port)
    return port


def remember_port(name: str, port: int) -> None:
    try:
        ports = json.loads(PORTS.read_text())
    except (OSError, ValueError):
        ports = {}
    ports[name] = port
    write_private(PORTS, json.dumps(ports, indent=2))


def wait_port_free(port: int, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if port_is_free(port):
            return
        time.sleep(0.2)
    raise RuntimeError(f"port {port} still in use after {timeout:.0f} s")


def service_url(port: int) -> str:
    """The address a client on this machine uses for a service on `port` (127.0.0.1 when the
    services bind to every address)."""
    host = "127.0.0.1" if BIND in ("0.0.0.0", "") else BIND
    return f"http://{host}:{port}"
