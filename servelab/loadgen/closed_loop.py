"""HTTP load as a closed loop: N requests, sequentially or from C concurrent senders
(servelab/loadgen/open_loop.py sends at a rate instead, notebook 9).

Introduced in notebook 4.

Each request's client-side latency is recorded together with the service's own Server-Timing
(decode / queue / infer), so a run shows how much of the latency is the model and how much is
waiting. `make bench` cross-checks its throughput against wrk on the same endpoint.

Notebook 4 has you write the core of it, the function that sends one request, times it and
collects what came back (`send_one`); run(send=send_one) then sends every request with yours.
A run's rows are read by servelab/loadgen/summary.py: its summary row carries the two laws every
measured row of the lab shows (U = X·S and N = X·R), its median and throughput their intervals.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import requests

from servelab import passes
from servelab.loadgen import saved

try:
    from tqdm.auto import tqdm
except ImportError:  # progress bars are a nicety
    tqdm = None


def _server_timing(header: str | None) -> dict:
    out = {}
    for part in (header or "").split(","):
        name, _, rest = part.strip().partition(";dur=")
        if rest:
            out[f"server_{name}_ms"] = float(rest)
    return out


def post_once(
    session: requests.Session, url: str, body: bytes, timeout: float, headers: dict | None = None
) -> dict:
    """One POST of `body`, timed: t_start, latency_ms, status (a number, or the exception's name
    when no answer came), the service's Server-Timing as server_*_ms and, for a status other than
    200, what the service said (`detail`)."""
    start = time.perf_counter()
    try:
        resp = session.post(
            url, data=body, headers=headers or {"Content-Type": "application/json"}, timeout=timeout
        )
        status, timing = resp.status_code, _server_timing(resp.headers.get("Server-Timing"))
        if status != 200:
            timing["detail"] = resp.text[:200]
    except requests.RequestException as exc:
        status, timing = f"error: {type(exc).__name__}", {}
    return {
        "t_start": start,
        "latency_ms": (time.perf_counter() - start) * 1e3,
        "status": status,
        **timing,
    }


def _sent_by(send, session: requests.Session, url: str, payload: dict) -> dict:
    """One request sent by your send(session, url, payload), which returns t_start, latency_ms,
    status and server_timing (the Server-Timing header); its header becomes server_*_ms columns."""
    try:
        record = dict(send(session, url, payload))
    except requests.RequestException as exc:
        return {
            "t_start": time.perf_counter(),
            "latency_ms": float("nan"),
            "status": f"error: {type(exc).__name__}",
        }
    return {**record, **_server_timing(record.pop("server_timing", None))}


def _send_all(one, n: int, concurrency: int, bar) -> list[dict]:
    """n requests, each sent by one(session), from `concurrency` threads with a session each."""
    sessions, counter, lock, records = threading.local(), iter(range(n)), threading.Lock(), []

    def sender():
        sessions.s = getattr(sessions, "s", None) or requests.Session()
        while True:
            with lock:
                if next(counter, None) is None:
                    return
            record = one(sessions.s)
            with lock:
                records.append(record)
            if bar:
                bar.update(1)

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for f in [pool.submit(sender) for _ in range(concurrency)]:
            f.result()
    return records


def run(
    url: str,
    payload: dict,
    n: int,
    concurrency: int = 1,
    label: str = "",
    timeout: float = 60.0,
    progress: bool = True,
    send=None,
    headers: dict | None = None,
) -> pd.DataFrame:
    """Send n POST requests with `concurrency` senders (1 = sequential); one row per request.

    send(session, url, payload): sends one request and returns its record (notebook 4 has you
    write it); default: the lab's own, which encodes the body once for all requests. A payload of
    bytes is sent as it is (application/octet-stream), with `headers` if given (notebook 9).
    The measure pass keeps the run in the notebook's bundle under its label
    (servelab/loadgen/saved.py); the review pass reads it from there."""

    def measure() -> pd.DataFrame:
        return _run(url, payload, n, concurrency, label, timeout, progress, send, headers)

    key = f"http {label or f'{n} requests, {concurrency} at once'}"
    return passes.on_node(key, "http", measure, save=saved.write, load=saved.read)


def _run(url, payload, n, concurrency, label, timeout, progress, send, headers) -> pd.DataFrame:
    """run()'s requests, sent."""
    raw = isinstance(payload, bytes)
    body = payload if raw else json.dumps(payload).encode()
    kind = {"Content-Type": "application/octet-stream" if raw else "application/json"}

    def one(session):
        if send is None:
            return post_once(session, url, body, timeout, {**kind, **(headers or {})})
        return _sent_by(send, session, url, payload)

    show = tqdm and progress
    bar = tqdm(total=n, desc=label or f"c={concurrency}", leave=False) if show else None
    wall_start = time.perf_counter()
    records = _send_all(one, n, concurrency, bar)
    wall = time.perf_counter() - wall_start
    if bar:
        bar.close()
    df = pd.DataFrame(records).sort_values("t_start").reset_index(drop=True)
    df["t_start"] -= wall_start
    df.attrs.update(label=label, concurrency=concurrency, wall_s=wall, url=url)
    return df
