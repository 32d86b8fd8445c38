"""Real service processes for the measurements: started by the launcher's own start() on free
127.0.0.1 ports (logs: $LAB_STATE_DIR/logs/reliability-*.log), and what /proc says about them."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import signal
import time
from pathlib import Path

import requests

from labstack import launcher
from servelab.serving import triton_watchdog


def running(pid: int, marker: str) -> bool:
    """pid runs (not a zombie) and its command line still contains marker."""
    return launcher.is_running(pid, marker) and not launcher.is_zombie(pid)


class Proc:
    """One service started with launcher.start(); kill() is a crash (SIGKILL), stop() a clean
    shutdown."""

    def __init__(self, service: launcher.Service, name: str):
        service.name = f"reliability-{name}"  # its own log file, never the user's fastapi.log
        self.name = name
        started = time.perf_counter()
        self.record = launcher.start(service)
        self.ready_s = time.perf_counter() - started
        self.url = launcher.service_url(self.record["port"])
        self.repo: Path | None = None  # Triton only: its model repository

    @property
    def pid(self) -> int:
        return self.record["pid"]

    def alive(self) -> bool:
        return running(self.pid, self.record["marker"])

    def kill(self) -> None:
        """SIGKILL the whole process group (workers and stubs too): a crash, not a shutdown."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.time() + 10
        while time.time() < deadline and self.alive():
            time.sleep(0.05)

    def stop(self) -> None:
        launcher.stop_process(self.pid, self.record["marker"], grace=5)

    def tritonserver_pid(self) -> int:
        """The tritonserver process: this one, or its child when it runs under the watchdog."""
        for pid in [self.pid, *children(self.pid)]:
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "tritonserver":
                    return pid
            except OSError:
                continue
        return self.pid


def start_fastapi(runtime: str, port: int | None = None) -> Proc:
    return Proc(
        launcher.fastapi_service(port or launcher.free_port(), runtime), f"fastapi-{runtime}"
    )


def start_flask(fastapi_url: str) -> Proc:
    env = {"FLASK_BACKEND": "fastapi", "FASTAPI_SERVER_URL": fastapi_url}
    return Proc(launcher.flask_service(launcher.free_port(), env), "flask")


@contextlib.contextmanager
def fastapi_and_flask():
    """FastAPI (pt, onnx) and Flask in front of the onnx one, as {"pt", "onnx", "flask": Proc}; all
    stopped on exit."""
    started: list[Proc] = []
    try:
        for runtime in ("pt", "onnx"):
            started.append(start_fastapi(runtime))
        started.append(start_flask(started[1].url))
        yield dict(zip(("pt", "onnx", "flask"), started))
    finally:
        for proc in reversed(started):
            proc.stop()


def start_triton(workdir: Path, watchdog_args: list[str] | None = None) -> Proc:
    """tritonserver (local mode, CPU) on free ports, both models from a fresh repository under
    workdir, so a broken config written by a fault scenario never touches the user's
    model_repository/; started as every part of the lab starts it (triton_local.service: its
    admin key masked, none in its environment). watchdog_args (a list, even empty): under the
    lab's watchdog repairing it, as `make up` runs it (its health file in workdir); None: the
    watchdog only starts it (--no-repair)."""
    from labstack import triton_local
    from servelab.triton import model_repository

    repo = Path(workdir) / "model_repository"
    model_repository.populate(repo, mode="local", kind="cpu", verbose=False)
    ports: set[int] = set()
    while len(ports) < 3:
        ports.add(launcher.free_port())
    # no address: the default the launcher's Triton gets too (LAB_BIND_HOST, else 127.0.0.1)
    service = triton_local.service(
        repo,
        tuple(sorted(ports)),
        Path(workdir) / "triton_health.json",
        backends=Path(workdir) / "backends",
        repair=watchdog_args is not None,
        watchdog_args=watchdog_args or [],
    )
    proc = Proc(service, "triton")
    proc.repo = repo
    return proc


def children(pid: int) -> list[int]:
    """Every descendant of pid (Triton's Python-backend stubs, uvicorn's workers)."""
    return triton_watchdog.descendants(pid)


def rss_tree_kib(pid: int) -> tuple[int, int]:
    """(sum of VmRSS in KiB, number of processes) over pid and all its descendants: a worker
    or a Triton Python-backend stub holds the model, so the parent alone would hide a leak."""
    total, count = 0, 0
    for p in [pid, *children(pid)]:
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        m = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        total += int(m.group(1)) if m else 0
        count += 1
    return total, count


def _listening() -> list[tuple[int, str, int]]:
    """(socket inode, local address, port) of every TCP socket that LISTENs (/proc/net/tcp and
    tcp6): what the kernel says, not what a config file claims."""
    found = []
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            addr, hex_port = parts[1].split(":")
            if parts[3] != "0A":  # 0A = LISTEN
                continue
            raw = bytes.fromhex(addr)
            if v6:  # four little-endian 32-bit words; ::ffff:127.0.0.1 (gRPC's socket) is 127.0.0.1
                ip6 = ipaddress.IPv6Address(b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4)))
                address = str(ip6.ipv4_mapped or ip6)
            else:
                address = str(ipaddress.IPv4Address(raw[::-1]))
            found.append((int(parts[9]), address, int(hex_port, 16)))
    return found


def listen_addresses(port: int) -> set[str]:
    """Local addresses on which something LISTENs on TCP `port`."""
    return {address for _, address, p in _listening() if p == port}


def listening_sockets(pids) -> list[tuple[int, str, int]]:
    """(pid, local address, port) of every TCP socket these processes LISTEN on (their open
    sockets, /proc/<pid>/fd, matched with the kernel's tables)."""
    owner = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:["):
                        owner[int(target[8:-1])] = pid
    return sorted({(owner[i], a, p) for i, a, p in _listening() if i in owner})


def is_loopback(address: str) -> bool:
    return ipaddress.ip_address(address).is_loopback


def healthy(url: str) -> bool:
    try:
        return requests.get(url, timeout=5).status_code == 200
    except requests.RequestException:
        return False
