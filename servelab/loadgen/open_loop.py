"""HTTP load at a rate, whatever the answers (an open loop), and a run cut into windows of time.

Introduced in notebook 9 (servelab/loadgen/'s closed loop keeps N requests in flight instead).

    df = open_loop.run(url, body, rate=40, seconds=10)            # Poisson arrivals at 40/s
    df = open_loop.run(url, body, phases=[(10, 8), (30, 40), (20, 8)])   # a load step
    open_loop.over_time(df)       # per second: offered, served, in the system, p95

An open loop offers a rate, as perf_analyzer's --request-rate-range does for Triton (notebook 6):
each request has its moment (evenly spaced or Poisson) and leaves then, whether or not earlier ones
came back, from a pool of `max_in_flight` sender threads. A request that leaves more than LATE_MS
after its moment (every sender was waiting for an answer) counts as late, and a run with more than
5 % late was not the open loop it claims (loadgen.summarize's `delayed_pct`); one later than
SKIP_LATE_MS is not sent at all (status "not sent", an error of the run): an overloaded server
would otherwise stretch the run for as long as its backlog lasts. Rows are loadgen's, so
loadgen.summarize and loadgen.throughput read them as any run.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import count

import numpy as np
import pandas as pd
import requests

from servelab.loadgen.closed_loop import post_once

LATE_MS = 10.0  # a request sent later than this after its moment is late
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


def _send_at(moments: np.ndarray, t0: float, send, max_in_flight: int) -> list[dict]:
    """Each moment's request sent by send(session) at t0 + moment from `max_in_flight` threads
    (a session each); a request due more than SKIP_LATE_MS ago is recorded as not sent."""
    sessions, records, lock, nxt = threading.local(), [], threading.Lock(), count()

    def sender():
        sessions.s = getattr(sessions, "s", None) or requests.Session()
        while (i := next(nxt)) < len(moments):  # count() is atomic under the GIL
            time.sleep(max(0.0, t0 + moments[i] - time.perf_counter()))
            late_ms = (time.perf_counter() - t0 - moments[i]) * 1e3
            if late_ms > SKIP_LATE_MS:  # every sender waits on an overloaded server
                record = {
                    "t_start": time.perf_counter(),
                    "latency_ms": np.nan,
                    "status": "not sent",
                }
            else:
                record = send(sessions.s)
            record.update(t_scheduled=moments[i], late_ms=late_ms)
            with lock:
                records.append(record)

    with ThreadPoolExecutor(max_workers=max_in_flight) as pool:
        for f in [pool.submit(sender) for _ in range(min(max_in_flight, len(moments)))]:
            f.result()
    return records


def run(
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
    t0 = time.perf_counter() + 0.05
    records = _send_at(
        moments, t0, lambda s: post_once(s, url, body, timeout, headers), max_in_flight
    )
    df = pd.DataFrame(records).sort_values("t_scheduled").reset_index(drop=True)
    df["t_start"] -= t0
    offered = len(moments) / sum(s for s, _ in phases)
    done = (df["t_start"] + df["latency_ms"] / 1e3).max()
    df.attrs.update(label=label, concurrency=None, wall_s=done, url=url, t0=t0)
    df.attrs.update(request_rate=offered, late_limit_ms=LATE_MS)
    return df


def over_time(df: pd.DataFrame, window_s: float = 1.0) -> pd.DataFrame:
    """A run in windows of `window_s`: requests sent (offered per s), answered with 200 (served
    per s), in the system at the window's end (sent, not yet answered: waiting or served), and
    the p95 latency of the requests sent in the window (ms; none when none was sent)."""
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
