"""The notebooks' HTTP load generator: N requests, sequentially or from C concurrent senders
(a closed loop), or requests at a fixed rate whatever the answers (an open loop, notebook 9).

Introduced in notebook 4.

Each request's client-side latency is recorded together with the service's own Server-Timing
(decode / queue / infer), so a run shows how much of the latency is the model and how much is
waiting. `make bench` cross-checks its throughput against wrk on the same endpoint.

Notebook 4 has you write the core of it, the function that sends one request, times it and
collects what came back (`send_one`); run(send=send_one) then sends every request with yours.
Each summary row carries the two laws every measured row of the lab shows (servelab.queueing.laws):
U = X·S, how many model locks were busy on average, and N = X·R, how many requests were in flight.

open_loop() offers a rate, as perf_analyzer's --request-rate-range does for Triton: each request
has its moment (evenly spaced or Poisson), and leaves then whether or not earlier ones came back,
from a pool of `max_in_flight` sender threads. A request that leaves more than LATE_MS after its
moment (every sender was waiting for an answer) counts as late; a run with more than 5 % late was
not the open loop it claims (`delayed_pct`); one later than SKIP_LATE_MS is not sent at all
(status "not sent", an error of the run): an overloaded server would otherwise stretch the run for
as long as its backlog lasts. `phases` makes a load step: [(seconds, rate), ...].
over_time() cuts a run into windows: offered, served, in flight and p95 in each.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import count

import numpy as np
import pandas as pd
import requests

from servelab import queueing

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


def _one(
    session: requests.Session, url: str, body: bytes, timeout: float, headers: dict | None = None
) -> dict:
    start = time.perf_counter()
    try:
        resp = session.post(
            url, data=body, headers=headers or {"Content-Type": "application/json"}, timeout=timeout
        )
        status, timing = resp.status_code, _server_timing(resp.headers.get("Server-Timing"))
        if status != 200:  # what the service said, for a failure's row
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
    write it); default: the lab's own, which encodes the body once for all requests. A payload
    of bytes is sent as it is (application/octet-stream), with `headers` if given."""
    raw = isinstance(payload, bytes)
    body = payload if raw else json.dumps(payload).encode()
    kind = "application/octet-stream" if raw else "application/json"
    headers = {"Content-Type": kind, **(headers or {})}
    sessions = threading.local()
    counter = iter(range(n))
    lock = threading.Lock()
    records: list[dict] = []
    bar = (
        tqdm(total=n, desc=label or f"c={concurrency}", leave=False)
        if (tqdm and progress)
        else None
    )

    def sender():
        sessions.s = getattr(sessions, "s", None) or requests.Session()
        while True:
            with lock:
                if next(counter, None) is None:
                    return
            record = (
                _one(sessions.s, url, body, timeout, headers)
                if send is None
                else _sent_by(send, sessions.s, url, payload)
            )
            with lock:
                records.append(record)
            if bar:
                bar.update(1)

    wall_start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for f in [pool.submit(sender) for _ in range(concurrency)]:
            f.result()
    wall = time.perf_counter() - wall_start
    if bar:
        bar.close()
    df = pd.DataFrame(records).sort_values("t_start").reset_index(drop=True)
    df["t_start"] -= wall_start
    df.attrs.update(label=label, concurrency=concurrency, wall_s=wall, url=url)
    return df


LATE_MS = 10.0  # a request sent later than this after its moment is late (open_loop)
SKIP_LATE_MS = 2000.0  # ... and one this late is not sent at all (the run keeps its length)


def schedule(phases: list[tuple[float, float]], poisson: bool = True, seed: int = 0) -> np.ndarray:
    """The moments (s from the start) at which an open loop sends: for each (seconds, rate) phase,
    rate per second, evenly spaced or as Poisson arrivals (exponential gaps)."""
    rng, moments, start = np.random.default_rng(seed), [], 0.0
    for seconds, rate in phases:
        t = start
        while rate > 0:
            t += rng.exponential(1 / rate) if poisson else 1 / rate
            if t >= start + seconds:
                break
            moments.append(t)
        start += seconds
    return np.asarray(moments)


def open_loop(
    url: str,
    body: bytes,
    rate: float = 0.0,
    seconds: float = 0.0,
    phases: list[tuple[float, float]] | None = None,
    poisson: bool = True,
    headers: dict | None = None,
    label: str = "",
    timeout: float = 60.0,
    max_in_flight: int = 256,
) -> pd.DataFrame:
    """POST `body` at `rate` requests/s for `seconds` (or through `phases`), each at its moment;
    one row per request: t_scheduled and t_start (s), late_ms, latency_ms, status, server_*_ms."""
    phases = phases or [(seconds, rate)]
    moments = schedule(phases, poisson)
    headers = {"Content-Type": "application/octet-stream", **(headers or {})}
    sessions, records, lock, nxt = threading.local(), [], threading.Lock(), count()
    t0 = time.perf_counter() + 0.05

    def sender():
        sessions.s = getattr(sessions, "s", None) or requests.Session()
        while (i := next(nxt)) < len(moments):  # count() is atomic under the GIL
            time.sleep(max(0.0, t0 + moments[i] - time.perf_counter()))
            late_ms = (time.perf_counter() - t0 - moments[i]) * 1e3
            if late_ms > SKIP_LATE_MS:  # every sender waits on an overloaded server: not sent
                record = {
                    "t_start": time.perf_counter(),
                    "latency_ms": np.nan,
                    "status": "not sent",
                }
            else:
                record = _one(sessions.s, url, body, timeout, headers)
            record.update(t_scheduled=moments[i], late_ms=late_ms)
            with lock:
                records.append(record)

    with ThreadPoolExecutor(max_workers=max_in_flight) as pool:
        for f in [pool.submit(sender) for _ in range(min(max_in_flight, len(moments)))]:
            f.result()
    df = pd.DataFrame(records).sort_values("t_scheduled").reset_index(drop=True)
    df["t_start"] -= t0
    done = (df["t_start"] + df["latency_ms"] / 1e3).max()
    offered = len(moments) / sum(s for s, _ in phases)
    df.attrs.update(
        label=label, concurrency=None, wall_s=done, url=url, request_rate=offered, t0=t0
    )
    return df


def over_time(df: pd.DataFrame, window_s: float = 1.0) -> pd.DataFrame:
    """A run in windows of `window_s`: requests sent (offered per s), answered with 200 (served
    per s), in flight at the window's end (sent, not yet answered: waiting or served), and the
    p95 latency of the requests sent in the window (ms)."""
    end = df["t_start"] + df["latency_ms"].fillna(0) / 1e3
    ok = df["status"] == 200
    rows = []
    for lo in np.arange(0.0, float(end.max()) + window_s, window_s):
        hi = lo + window_s
        sent = df[(df["t_start"] >= lo) & (df["t_start"] < hi) & df["latency_ms"].notna()]
        rows.append(
            {
                "t_s": hi,
                "offered_per_s": len(sent) / window_s,
                "served_per_s": int((ok & (end >= lo) & (end < hi)).sum()) / window_s,
                "in_flight": int(((df["t_start"] < hi) & (end >= hi)).sum()),
                "p95_ms": float(np.percentile(sent["latency_ms"], 95)) if len(sent) else np.nan,
            }
        )
    return pd.DataFrame(rows)


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
    row["lock_busy_U"], row["in_flight_N"] = laws["U"], laws["N"]
    if "late_ms" in df:  # an open loop: what it offered, and how much of it left late
        row["request_rate"] = df.attrs.get("request_rate")
        row["delayed_pct"] = float((df["late_ms"] > LATE_MS).mean() * 100)
    return row


def median_ms(df: pd.DataFrame, column: str = "latency_ms"):
    """The median of a column over the run's successful requests, with its 95% bootstrap interval
    (claims.Measured): what the notebooks compare, so noise cannot decide a claim unnoticed."""
    from servelab.claims import Measured

    ok = df[df["status"] == 200]
    return Measured.from_samples(ok[column].dropna().to_numpy())


def throughput(df: pd.DataFrame, windows: int = 5):
    """Requests per second of a run (summarize's throughput_rps), with an interval: the run cut
    into `windows` equal spans of time and the rate of answers in each, as perf_analyzer's
    measurement windows (claims.Measured.from_windows)."""
    from servelab.claims import Measured

    ok = df[df["status"] == 200]
    done = (ok["t_start"] + ok["latency_ms"] / 1000).to_numpy()
    start, end = float(ok["t_start"].min()), float(done.max())
    edges = np.linspace(start, end, windows + 1)
    counts, _ = np.histogram(done, bins=edges)
    rates = counts / np.diff(edges)
    return Measured.from_windows(rates, summarize(df)["throughput_rps"])
