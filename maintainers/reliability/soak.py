"""Bounded soak: sustained concurrent load on one service for a set time; every request must
succeed, latency percentiles reported, and resident memory of the server's process tree before and
after (growth bounded by RSS_GROWTH_LIMIT_MIB)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import numpy as np
import requests

from maintainers.reliability.common import HTTP_TIMEOUT
from maintainers.reliability.fuzz_triton import good_request
from maintainers.reliability.procs import rss_tree_kib
from servelab import food11
from servelab.serving import triton_clients


def _blast(send, duration: float, concurrency: int, rows: list) -> None:
    """`concurrency` threads call send(session) back to back until `duration` is over."""
    stop_at = time.perf_counter() + duration
    lock = threading.Lock()

    def worker():
        session = requests.Session()
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            try:
                ok, detail = send(session)
            except (
                Exception
            ) as exc:  # a failed request is counted, never a hang (send has timeouts)
                ok, detail = False, f"{type(exc).__name__}: {exc}"
            with lock:
                rows.append(((time.perf_counter() - t0) * 1e3, ok, detail))

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(duration + HTTP_TIMEOUT + 10)


def soak(
    name: str, send, seconds: float, concurrency: int, pid: int, warmup_s: float = 2.0
) -> dict:
    """Load for `seconds`, after a warm-up at the same concurrency: lazily allocated buffers (thread
    pools, allocator arenas) are then already in the 'before' figure, and the growth is what the
    sustained load adds."""
    _blast(send, warmup_s, concurrency, [])
    rss_before, nproc = rss_tree_kib(pid)
    rows: list = []
    t_start = time.perf_counter()
    _blast(send, seconds, concurrency, rows)
    wall = time.perf_counter() - t_start
    time.sleep(0.5)
    rss_after, _ = rss_tree_kib(pid)
    lat = np.array([ms for ms, ok, _ in rows if ok])
    errors = [detail for _, ok, detail in rows if not ok]

    def pct(q):
        return round(float(np.percentile(lat, q)), 1) if len(lat) else float("nan")

    return {
        "target": name,
        "seconds": round(wall, 1),
        "concurrency": concurrency,
        "requests": len(rows),
        "errors": len(errors),
        "error_examples": Counter(errors).most_common(3),
        "throughput_rps": round(len(lat) / wall, 1) if wall else float("nan"),
        "p50_ms": pct(50),
        "p95_ms": pct(95),
        "p99_ms": pct(99),
        "max_ms": pct(100),
        "processes": nproc,
        "rss_before_mib": round(rss_before / 1024, 1),
        "rss_after_mib": round(rss_after / 1024, 1),
        "rss_growth_mib": round((rss_after - rss_before) / 1024, 1),
    }


# Senders: one request each, (ok, detail); ok only for a real answer (a Food-11 class), not any 200.


def fastapi_sender(url: str, b64: str):
    body = json.dumps({"image": b64}).encode()

    def send(session):
        r = session.post(
            f"{url}/predict",
            data=body,
            headers={"Content-Type": "application/json"},
            timeout=HTTP_TIMEOUT,
        )
        return r.status_code == 200 and r.json().get(
            "prediction"
        ) in food11.CLASSES, f"HTTP {r.status_code}"

    return send


def flask_sender(url: str, image: bytes):
    def send(session):
        r = session.post(
            f"{url}/predict",
            files={"file": ("soak.jpg", image, "image/jpeg")},
            timeout=HTTP_TIMEOUT,
        )
        return r.status_code == 200 and 'class="label"' in r.text, f"HTTP {r.status_code}"

    return send


def triton_sender(url: str, model: str, b64: str):
    ask = good_request(model, b64)  # the image is prepared once, not per request

    def send(_session):
        from tritonclient.utils import InferenceServerException

        try:  # through tritonclient, one client per sending thread
            return ask(triton_clients.for_this_thread(url)), "ok"
        except InferenceServerException as exc:
            return False, str(exc)[:120]

    return send
