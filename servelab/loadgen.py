"""The notebooks' HTTP load generator: N requests, sequentially or from C concurrent senders (a
closed loop; servelab/open_loop.py sends at a rate instead, notebook 9).

Introduced in notebook 4.

Each request's client-side latency is recorded together with the service's own Server-Timing
(decode / queue / infer), so a run shows how much of the latency is the model and how much is
waiting. `make bench` cross-checks its throughput against wrk on the same endpoint.

Notebook 4 has you write the core of it, the function that sends one request, times it and
collects what came back (`send_one`); run(send=send_one) then sends every request with yours.
Each summary row carries the two laws every measured row of the lab shows (servelab.queueing.laws):
U = X·S, how many model locks were busy on average, and N = X·R, how many requests were in flight.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import requests

from servelab import claims, queueing

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
    bytes is sent as it is (application/octet-stream), with `headers` if given (notebook 9)."""
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


def summarize(df: pd.DataFrame) -> dict:
    """One table row: the numbers the notebooks compare (ms, requests/s), with the laws beside
    them: lock_busy_U = X·S (throughput × mean `infer`: how many model locks were busy on average,
    at most one per worker process) and in_flight_N = X·R (throughput × mean latency: how many
    requests were in flight on average; Little's law)."""
    ok = df[df["status"] == 200]
    lat = ok["latency_ms"].to_numpy()
    row = {
        "run": df.attrs.get("label", ""),
        "concurrency": df.attrs.get("concurrency", 1),
        "requests": len(df),
        "errors": int(len(df) - len(ok)),
        "median_ms": float(np.median(lat)) if len(lat) else float("nan"),
        "p95_ms": float(np.percentile(lat, 95)) if len(lat) else float("nan"),
        "p99_ms": float(np.percentile(lat, 99)) if len(lat) else float("nan"),
        "throughput_rps": len(ok) / df.attrs["wall_s"] if df.attrs.get("wall_s") else float("nan"),
        "mean_ms": float(np.mean(lat)) if len(lat) else float("nan"),
    }
    for part in ("decode", "queue", "infer"):
        column = f"server_{part}_ms"
        row[f"{part}_median_ms"] = (
            float(ok[column].median()) if column in ok and len(ok) else float("nan")
        )
    infer = "server_infer_ms"
    row["infer_mean_ms"] = float(ok[infer].mean()) if infer in ok and len(ok) else float("nan")
    laws = queueing.laws(row["throughput_rps"], row["mean_ms"], row["infer_mean_ms"])
    row["lock_busy_U"], row["in_flight_N"] = laws["busy_U"], laws["in_flight_N"]
    if "late_ms" in df:  # an open loop (servelab/open_loop.py): what it offered, what left late
        row["request_rate"] = df.attrs.get("request_rate")
        row["delayed_pct"] = float((df["late_ms"] > df.attrs.get("late_limit_ms", 10)).mean() * 100)
    return row


def median_ms(df: pd.DataFrame, column: str = "latency_ms"):
    """The median of a column over the run's successful requests, with its 95% bootstrap interval
    (claims.Measured): what the notebooks compare, so noise cannot decide a claim unnoticed."""
    ok = df[df["status"] == 200]
    return claims.Measured.from_samples(ok[column].dropna().to_numpy())


def throughput(df: pd.DataFrame, windows: int = 5):
    """Requests per second of a run (summarize's throughput_rps), with an interval: the run cut
    into `windows` equal spans of time and the rate of answers in each, as perf_analyzer's
    measurement windows (claims.Measured.from_windows)."""
    ok = df[df["status"] == 200]
    done = (ok["t_start"] + ok["latency_ms"] / 1000).to_numpy()
    start, end = float(ok["t_start"].min()), float(done.max())
    edges = np.linspace(start, end, windows + 1)
    counts, _ = np.histogram(done, bins=edges)
    rates = counts / np.diff(edges)
    return claims.Measured.from_windows(rates, summarize(df)["throughput_rps"])


def growth_is_queuing(sequential: pd.DataFrame, under_load: pd.DataFrame, runtime: str) -> None:
    """Notebook 4's claims (4.6) on one runtime's two runs: from one sender to many, the median
    latency grows at least 3x, and at least 3x more than the model's own time (Server-Timing's
    `infer`): the growth is waiting, not the model."""
    senders = under_load.attrs.get("concurrency", "many")
    latency = median_ms(under_load) / median_ms(sequential)
    model = median_ms(under_load, "server_infer_ms") / median_ms(sequential, "server_infer_ms")
    claims.at_least(
        f"{runtime}: latency grows with {senders} senders (median at least 3x sequential)",
        latency,
        3,
    )
    claims.at_least(
        f"{runtime}: the growth is queuing, not the model (latency grew at least 3x more "
        "than the model's own time)",
        latency / model,
        3,
    )
