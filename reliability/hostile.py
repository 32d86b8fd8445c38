"""Hostile clients against the running services, each bounded in count and time (make reliability).

- slow_clients: N sockets that send half a request and never finish it; does /healthz still answer?
- chunked_body: a `Transfer-Encoding: chunked` body far over the limit; when does the 413 come, and
  how much memory does the service take meanwhile?
- crafted_canvases: small PNG files that declare a canvas of tens of megapixels, sent together;
  how high does the service's memory go, and does it come back down?
- repository_api: Triton's model-repository API without the node's secret (refused?) and with it.

Each returns one row (a dict) for docs/reliability.md; `ok` says whether it met its bound.
"""

from __future__ import annotations

import concurrent.futures
import io
import select
import socket
import time
from urllib.parse import urlparse

import requests
from PIL import Image

from reliability.procs import rss_tree_kib

SLOW_CLIENTS = 64  # half-open connections held at once
HEALTHZ_BOUND_S = 1.0  # /healthz must answer within this while they are held
CHUNKED_TOTAL_MB = 300  # what a hostile client offers to send
CANVAS_PIXELS = 6000 * 6000  # declared by each crafted PNG (under the lab's 40 Mpx cap)
CANVAS_CLIENTS = 16
RSS_RETURN_BOUND_MIB = 200  # resident memory after the crafted burst, above where it started


def _host_port(url: str) -> tuple[str, int]:
    parsed = urlparse(url)
    return parsed.hostname, parsed.port


def slow_clients(url: str, n: int = SLOW_CLIENTS, hold_s: float = 3.0) -> dict:
    """Hold n connections that sent an unfinished request; time GET /healthz meanwhile."""
    host, port = _host_port(url)
    sockets, opened = [], 0
    try:
        for _ in range(n):
            s = socket.create_connection((host, port), timeout=5)
            s.sendall(
                b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data\r\n"
            )  # no end
            sockets.append(s)
            opened += 1
        time.sleep(hold_s)  # let the server hand them to whatever reads requests
        start = time.perf_counter()
        try:
            status = requests.get(f"{url}/healthz", timeout=10).status_code
        except requests.RequestException as exc:
            status = type(exc).__name__
        seconds = time.perf_counter() - start
    finally:
        for s in sockets:
            s.close()
    return {
        "check": f"/healthz with {opened} half-open connections held",
        "status": status,
        "seconds": round(seconds, 3),
        "bound": f"< {HEALTHZ_BOUND_S:g} s",
        "ok": status == 200 and seconds < HEALTHZ_BOUND_S,
    }


def chunked_body(url: str, pid: int, total_mb: int = CHUNKED_TOTAL_MB, chunk_kb: int = 256) -> dict:
    """POST /predict with a chunked body of up to total_mb; stop sending once the server answers."""
    host, port = _host_port(url)
    rss_before = rss_tree_kib(pid)[0] / 1024
    peak = rss_before
    chunk = b"A" * (chunk_kb * 1024)
    sent = 0
    status = None
    reply = b""
    with socket.create_connection((host, port), timeout=30) as s:
        s.sendall(
            b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        s.sendall(b"%x\r\n%s\r\n" % (len(b'{"image": "'), b'{"image": "'))
        deadline = time.time() + 120
        while sent < total_mb * 2**20 and time.time() < deadline:
            if select.select([s], [], [], 0)[0]:
                break  # the server answered (413 expected) before the body ended
            try:
                s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))  # whole chunks only: blocking send
            except OSError:
                break  # the server closed the connection after answering
            sent += len(chunk)
            if sent % (16 * 2**20) < len(chunk):
                peak = max(peak, rss_tree_kib(pid)[0] / 1024)
        try:
            reply = s.recv(65536)
        except OSError:
            pass
        if reply.startswith(b"HTTP/1.1 "):
            status = int(reply[9:12])
    peak = max(peak, rss_tree_kib(pid)[0] / 1024)
    growth = peak - rss_before
    return {
        "check": f"chunked body (up to {total_mb} MB offered)",
        "status": status,
        "sent_mib": round(sent / 2**20, 1),
        "rss_before_mib": round(rss_before, 1),
        "rss_growth_mib": round(growth, 1),
        "bound": "413 before 32 MiB sent, growth < 64 MiB",
        "ok": status == 413 and sent < 32 * 2**20 and growth < 64,
    }


def crafted_png(pixels: int = CANVAS_PIXELS) -> bytes:
    """A flat-coloured PNG of `pixels` (square): tiny on disk, pixels * 3 bytes once decoded."""
    side = int(pixels**0.5)
    buf = io.BytesIO()
    Image.new("RGB", (side, side), (200, 120, 40)).save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def crafted_canvases(url: str, pid: int, clients: int = CANVAS_CLIENTS) -> dict:
    """`clients` concurrent /predict requests with crafted PNGs; resident memory before, peak and
    after."""
    import base64

    png = crafted_png()
    body = {"image": base64.b64encode(png).decode()}
    rss_before = rss_tree_kib(pid)[0] / 1024
    peak = [rss_before]
    done = []

    def post(_):
        resp = requests.post(f"{url}/predict", json=body, timeout=300)
        return resp.status_code

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        futures = [pool.submit(post, i) for i in range(clients)]
        while not all(f.done() for f in futures):
            peak.append(rss_tree_kib(pid)[0] / 1024)
            time.sleep(0.2)
        done = [f.result() for f in futures]
    time.sleep(2.0)  # let the allocator hand freed pages back
    rss_after = rss_tree_kib(pid)[0] / 1024
    return {
        "check": f"{clients} concurrent {len(png) // 1024} KiB PNGs declaring "
        f"{CANVAS_PIXELS / 1e6:.0f} Mpx",
        "status": sorted(set(done)),
        "rss_before_mib": round(rss_before, 1),
        "rss_peak_mib": round(max(peak), 1),
        "rss_after_mib": round(rss_after, 1),
        "bound": f"after - before < {RSS_RETURN_BOUND_MIB} MiB",
        "ok": all(s in (200, 413) for s in done) and rss_after - rss_before < RSS_RETURN_BOUND_MIB,
    }


def repository_api(triton_url: str, header: str, key: str) -> list[dict]:
    """A load request carrying a model file (what would run code) without the secret, then a plain
    index request with and without it."""
    evil = {
        "parameters": {
            "config": '{"backend": "python", "max_batch_size": 0}',
            "file:1/model.py": "cHJpbnQoJ3B3bmVkJyk=",
        }
    }  # base64 of print('pwned')
    rows = []
    for name, path, body, headers, want in (
        (
            "load with a model.py, no secret",
            "/v2/repository/models/pwned/load",
            evil,
            {},
            "refused",
        ),
        ("repository index, no secret", "/v2/repository/index", {}, {}, "refused"),
        (
            "repository index, wrong secret",
            "/v2/repository/index",
            {},
            {header: "guess"},
            "refused",
        ),
        (
            "repository index, the node's secret",
            "/v2/repository/index",
            {},
            {header: key},
            "allowed",
        ),
    ):
        resp = requests.post(f"{triton_url}{path}", json=body, headers=headers, timeout=30)
        allowed = resp.status_code == 200
        rows.append(
            {
                "check": f"Triton {name}",
                "status": resp.status_code,
                "detail": resp.text[:120].replace("\n", " "),
                "bound": want,
                "ok": allowed == (want == "allowed"),
            }
        )
    return rows
