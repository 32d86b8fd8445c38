"""Uploads that cost CPU, not memory, against the running services (make reliability), each bounded
in count and time (issue 35):

- scan_bombs: progressive JPEGs with thousands of scans of a few bytes each (reliability.corpus
  makes them; libjpeg visits every block of the image in every scan), sent together: are they
  answered soon with a 4xx that says why, and does the health endpoint answer meanwhile?
- costly_photos: legitimate but large photos (40 Mpx progressive JPEGs, about 0.5 s of CPU
  each), more at once than the service decodes at once: does health answer meanwhile?
- held_uploads (Flask): every upload slot held by a model server that never answers; does the
  page's /healthz still answer, and does one more upload get a page at once?

Each returns one row (a dict) for docs/reliability.md; `ok` says whether it met its bound.
"""

from __future__ import annotations

import base64
import concurrent.futures
import io
import socket
import threading
import time

import requests

from reliability import corpus

ANSWER_BOUND_S = 10.0  # every bomb answered within this (the goal)
HEALTH_BOUND_S = 2.0  # the health endpoint answers within this meanwhile


def _post(url: str, target: str, name: str, data: bytes, timeout: float = 120) -> tuple[int, str]:
    """(status, the error message or page text) of one upload, as the service's clients send it."""
    if target == "flask":
        resp = requests.post(
            f"{url}/predict", files={"file": (name, data, "image/jpeg")}, timeout=timeout
        )
        return resp.status_code, resp.text
    body = {"image": base64.b64encode(data).decode()}
    resp = requests.post(f"{url}/predict", json=body, timeout=timeout)
    try:
        return resp.status_code, resp.json().get("detail", resp.text)
    except ValueError:
        return resp.status_code, resp.text


class _HealthWatch:
    """Times GET `url` every 0.2 s in a thread while the block runs; .worst is the longest."""

    def __init__(self, url: str):
        self.url, self.times, self.failed = url, [], 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            start = time.perf_counter()
            try:
                ok = requests.get(self.url, timeout=30).status_code == 200
            except requests.RequestException:
                ok = False
            self.times.append(time.perf_counter() - start)
            self.failed += not ok
            self._stop.wait(0.2)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=60)

    @property
    def worst(self) -> float:
        return max(self.times, default=float("nan"))


def _burst(url: str, target: str, files: list[tuple[str, bytes]], health: str):
    """Send `files` at once; (answers [(status, text, seconds)], the health watch)."""

    def one(item):
        start = time.perf_counter()
        status, text = _post(url, target, *item)
        return status, text, time.perf_counter() - start

    with _HealthWatch(health) as watch:
        time.sleep(0.3)  # a look before the burst
        with concurrent.futures.ThreadPoolExecutor(len(files)) as pool:
            answers = list(pool.map(one, files))
        time.sleep(0.3)
    return answers, watch


def scan_bombs(url: str, target: str = "flask", clients: int = 2, scans: int = 5000) -> dict:
    """`clients` scan-bomb uploads at once; how soon each is answered, with what, and the health
    endpoint's longest answer meanwhile."""
    bomb = corpus.jpeg_scan_bomb(2000, scans)
    health = f"{url}/healthz" if target == "flask" else f"{url}/health"
    answers, watch = _burst(url, target, [(f"bomb{i}.jpg", bomb) for i in range(clients)], health)
    slowest = max(s for _, _, s in answers)
    clear = all(st == 413 and "JPEG scans" in text for st, text, _ in answers)
    return {
        "check": f"{'Flask' if target == 'flask' else 'FastAPI'}: {clients} scan-bomb uploads at "
        f"once ({len(bomb) // 1024} KiB progressive JPEGs, {scans:,} scans of 2000x2000)",
        "status": sorted({st for st, _, _ in answers}),
        "slowest_answer_s": round(slowest, 3),
        "health_worst_s": round(watch.worst, 3),
        "bound": f"413 naming the scans within {ANSWER_BOUND_S:g} s; health < {HEALTH_BOUND_S:g} s",
        "ok": clear
        and slowest < ANSWER_BOUND_S
        and watch.worst < HEALTH_BOUND_S
        and not watch.failed,
    }


def large_progressive_jpeg(side: int = 6300, seed: int = 0) -> bytes:
    """A legitimate photo at the pixel cap: side x side progressive JPEG of smooth noise (about
    0.5 s of CPU to decode on the lab's machine)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    small = rng.integers(0, 255, (side // 16, side // 16, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(small).resize((side, side)).save(buf, "JPEG", quality=85, progressive=True)
    return buf.getvalue()


def costly_photos(url: str, target: str = "fastapi", clients: int = 8) -> dict:
    """`clients` large, legitimate photos at once (more than the service decodes at once): the
    health endpoint's longest answer meanwhile."""
    photo = large_progressive_jpeg()
    health = f"{url}/healthz" if target == "flask" else f"{url}/health"
    answers, watch = _burst(url, target, [(f"photo{i}.jpg", photo) for i in range(clients)], health)
    statuses = sorted({st for st, _, _ in answers})
    return {
        "check": f"{'Flask' if target == 'flask' else 'FastAPI'}: {clients} 40 Mpx progressive "
        f"JPEGs ({len(photo) // 1024} KiB) at once",
        "status": statuses,
        "slowest_answer_s": round(max(s for _, _, s in answers), 3),
        "health_worst_s": round(watch.worst, 3),
        "bound": f"health < {HEALTH_BOUND_S:g} s; no 5xx but 502/503 (model server, busy)",
        "ok": watch.worst < HEALTH_BOUND_S
        and not watch.failed
        and all(st < 500 or st in (502, 503) for st in statuses),
    }


class BlackHole:
    """A TCP server that accepts connections and never answers: a model server that hangs."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self):
        self.sock.close()
        for conn in self.held:
            conn.close()


def held_uploads(flask_url: str, slots: int) -> dict:
    """Flask in front of a model server that never answers (BlackHole): `slots` uploads hold
    every upload slot; then /healthz is timed, and one more upload should get its page at once."""
    from reliability.hostile import crafted_png

    photo = crafted_png(64 * 64)
    pool = concurrent.futures.ThreadPoolExecutor(slots)
    try:
        held = [
            pool.submit(_post, flask_url, "flask", f"p{i}.png", photo, 90) for i in range(slots)
        ]
        time.sleep(3.0)  # each is now waiting on the model server
        start = time.perf_counter()
        health = requests.get(f"{flask_url}/healthz", timeout=30).status_code
        health_s = time.perf_counter() - start
        start = time.perf_counter()
        extra, text = _post(flask_url, "flask", "one_more.png", photo, 30)
        extra_s = time.perf_counter() - start
        still_held = sum(not f.done() for f in held)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return {
        "check": f"Flask: {slots} uploads waiting on a model server that never answers",
        "status": f"/healthz {health}, one more upload {extra}",
        "health_s": round(health_s, 3),
        "one_more_s": round(extra_s, 3),
        "held": still_held,
        "bound": f"/healthz 200 < {HEALTH_BOUND_S:g} s; one more: 503 page < {HEALTH_BOUND_S:g} s",
        "ok": health == 200
        and health_s < HEALTH_BOUND_S
        and extra == 503
        and "try again" in text
        and extra_s < HEALTH_BOUND_S
        and still_held == slots,
    }
