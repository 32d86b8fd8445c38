"""Uploads that cost CPU, not memory, against the running services (make reliability), each bounded
in count and time (issue 35):

- scan_bombs: progressive JPEGs with thousands of scans of a few bytes each (reliability.corpus
  makes them; libjpeg visits every block of the image in every scan), sent together: are they
  answered soon with a 4xx that says why, and does the health endpoint answer meanwhile?
- costly_photos: legitimate but large photos (40 Mpx progressive JPEGs, about 0.5 s of CPU
  each), more at once than the service decodes at once: does health answer meanwhile?
- held_uploads (Flask): every upload slot held by a model server that never answers; does the
  page still answer (/livez), and does one more upload get a page at once?
- attackers_and_victims (issue 52): clients sending costly files back to back (D3: a reserved
  marker hiding 2,000 scans from the structure walk, and its variants; or, against a service
  started with a low LAB_DECODE_CPU_S, photos that pass every structure check, so that only the
  kernel's CPU limit on the decode worker stops them) while other clients upload large photos:
  is each costly file answered within its CPU budget, and is every other upload served?

Each returns one row (a dict) for docs/reliability.md; `ok` says whether it met its bound.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import html
import io
import os
import re
import socket
import statistics
import threading
import time
from pathlib import Path

import requests

from maintainers.reliability import corpus
from servelab import decode_budget

ANSWER_BOUND_S = 10.0  # every bomb answered within this (the goal)
HEALTH_BOUND_S = 2.0  # the health endpoint answers within this meanwhile


def _post(url: str, target: str, name: str, data: bytes, timeout: float = 120) -> tuple[int, str]:
    """(status, the error message or page text) of one upload, as the service's clients send it."""
    if target == "flask":
        resp = requests.post(
            f"{url}/predict", files={"file": (name, data, "image/jpeg")}, timeout=timeout
        )
        said = re.search(r'class="error">.*?<br>\s*(.*?)\s*</div>', resp.text, re.S)
        return resp.status_code, html.unescape(said.group(1)) if said else resp.text
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
    health = f"{url}/livez" if target == "flask" else f"{url}/health"
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
    health = f"{url}/livez" if target == "flask" else f"{url}/health"
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
    every upload slot; then /livez is timed, and one more upload should get its page at once."""
    from maintainers.reliability.hostile import crafted_png

    photo = crafted_png(64 * 64)
    pool = concurrent.futures.ThreadPoolExecutor(slots)
    try:
        held = [
            pool.submit(_post, flask_url, "flask", f"p{i}.png", photo, 90) for i in range(slots)
        ]
        time.sleep(3.0)  # each is now waiting on the model server
        start = time.perf_counter()
        health = requests.get(f"{flask_url}/livez", timeout=30).status_code
        health_s = time.perf_counter() - start
        start = time.perf_counter()
        extra, text = _post(flask_url, "flask", "one_more.png", photo, 30)
        extra_s = time.perf_counter() - start
        still_held = sum(not f.done() for f in held)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return {
        "check": f"Flask: {slots} uploads waiting on a model server that never answers",
        "status": f"/livez {health}, one more upload {extra}",
        "health_s": round(health_s, 3),
        "one_more_s": round(extra_s, 3),
        "held": still_held,
        "bound": f"/livez 200 < {HEALTH_BOUND_S:g} s; one more: 503 page < {HEALTH_BOUND_S:g} s",
        "ok": health == 200
        and health_s < HEALTH_BOUND_S
        and extra == 503
        and "try again" in text
        and extra_s < HEALTH_BOUND_S
        and still_held == slots,
    }


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of a service's process tree so far: each process's own and that of the
    children it has reaped (a decode worker the kernel ended counts in its parent's)."""
    tick, total = os.sysconf("SC_CLK_TCK"), 0
    for member in _tree(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return total / tick


def _tree(pid: int) -> list[int]:
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    tree, todo = [], [pid]
    while todo:
        tree.append(todo.pop())
        todo += [child for child, parent in parents.items() if parent == tree[-1]]
    return tree


def d3_files() -> list[tuple[str, bytes]]:
    """Issue 52's D3 and its variants: a reserved marker (FF 02, FF 50, FF BF) with a length
    after a scan with a restart interval, hiding about 2,000 scans (66 KB)."""
    return [
        (f"d3_ff{m:02x}.jpg", corpus.jpeg_restart_hidden_scans(marker=m)) for m in (2, 0x50, 0xBF)
    ]


def attackers_and_victims(
    url: str,
    target: str,
    pid: int,
    costly: list[tuple[str, bytes]] | None = None,
    attackers: int = 4,
    rounds: int = 3,
    victims: int = 20,
    victim: bytes | None = None,
    budget_s: float | None = None,
) -> dict:
    """First the costly files alone, `attackers` x `rounds` of them at once: their answers, the
    slowest, and the service's CPU per file (its process tree's, decode workers included; under
    `budget_s`, the service's MAX_DECODE_CPU_S). Then `attackers` clients sending them back to
    back while `victims` uploads of a large photo go two at a time (and, before, the same
    victims alone): every victim served, their latency."""
    costly = costly or d3_files()
    victim = victim or large_progressive_jpeg(4000)
    health = f"{url}/livez" if target == "flask" else f"{url}/health"
    files = [costly[i % len(costly)] for i in range(attackers * rounds)]
    before = tree_cpu_s(pid)
    answers, watch = _burst(url, target, files, health)  # `attackers` at once, per round
    per_file = (tree_cpu_s(pid) - before) / len(files)
    alone = _victims(url, target, victim, victims)
    stop, attacks = threading.Event(), []

    def attacker(i: int) -> None:
        while not stop.is_set():
            status, _ = _post(url, target, *costly[i % len(costly)])
            attacks.append(status)

    threads = [threading.Thread(target=attacker, args=(i,)) for i in range(attackers)]
    for t in threads:
        t.start()
    try:
        attacked = _victims(url, target, victim, victims)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    budget = budget_s or decode_budget.MAX_DECODE_CPU_S
    slowest = max(s for _, _, s in answers)
    served = [st for st, _ in attacked]
    return {
        "check": f"{'Flask' if target == 'flask' else 'FastAPI'}: {attackers} clients sending "
        f"{', '.join(n for n, _ in costly)} ({len(costly[0][1]) // 1024} KiB) while {victims} "
        f"{len(victim) // 1024} KiB photos are uploaded",
        "status": sorted({st for st, _, _ in answers}),
        "answer": answers[0][1][:90],
        "slowest_answer_s": round(slowest, 2),
        "cpu_per_file_s": round(per_file, 2),
        "health_worst_s": round(watch.worst, 3),
        "attacks_meanwhile": len(attacks),
        "victims_served": f"{served.count(200)} of {len(served)}",
        "victim_p50_s": f"alone {_p50(alone)}, attacked {_p50(attacked)}",
        "bound": f"each answered 413 within {ANSWER_BOUND_S:g} s at < {budget:g} s of CPU (a "
        f"refused decode: its budget, and a new worker's start); every victim 200; health < "
        f"{HEALTH_BOUND_S:g} s",
        "ok": all(st == 413 for st, _, _ in answers)
        and slowest < ANSWER_BOUND_S
        and per_file < budget
        and watch.worst < HEALTH_BOUND_S
        and served.count(200) == len(served),
    }


def _victims(url: str, target: str, photo: bytes, count: int) -> list[tuple[int, float]]:
    """`count` uploads of `photo`, two at a time: [(status, seconds)]."""

    def one(i: int) -> tuple[int, float]:
        start = time.perf_counter()
        status, _ = _post(url, target, f"victim{i}.jpg", photo)
        return status, time.perf_counter() - start

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, range(count)))


def _p50(rows: list[tuple[int, float]]) -> str:
    return f"{statistics.median(s for _, s in rows):.2f} s"
