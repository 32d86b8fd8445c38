"""An open loop sent from several processes at once: rates one Python process cannot send.

Introduced for the three-way comparison (servelab/three_way.py, notebook 9's optional section).

    with spread.Senders(4) as senders:       # 4 processes, started once, kept for many runs
        df = senders.run(url, body, rate=2000, seconds=5, headers=..., label="...")

open_loop.run's senders are threads of one interpreter: past some hundreds of requests per
second (fewer with large bodies) they leave late, and the run says so (its `delayed_pct`). Here
each of P processes runs open_loop.run at rate / P, with Poisson arrivals of its own seed, from
the same moment t0 (time.perf_counter() is the machine's clock, the same in every process): the
sum of independent Poisson streams is one Poisson stream at the sum of their rates, so the server
sees what one faster sender would send. The rows come back as one run (loadgen.summarize and
loadgen.throughput read it as any other): offered the sum, its wall time the longest part's.
With one process, nothing is started: open_loop.run runs here.
"""

from __future__ import annotations

import multiprocessing
import time

import pandas as pd

from servelab.loadgen import open_loop

START_AHEAD_S = 0.5  # t0 this far ahead: every process is ready to send at its first moment


def _part(url, body, rate, seconds, headers, seed, t0, max_in_flight, timeout) -> tuple[list, dict]:
    df = open_loop.run(
        url,
        body,
        rate=rate,
        seconds=seconds,
        headers=headers,
        seed=seed,
        t0=t0,
        max_in_flight=max_in_flight,
        timeout=timeout,
    )
    return df.to_dict("records"), dict(df.attrs)


def _ready(_: int) -> bool:
    return True


class Senders:
    """P sender processes, all started at once and kept for many runs (a process started per run
    would cost seconds; multiprocessing's Pool starts all its workers at once, where a process
    pool may start one only when no other is free)."""

    def __init__(self, processes: int = 1, max_in_flight: int = 256):
        self.processes, self.max_in_flight = max(1, int(processes)), max_in_flight
        self.pool = None
        if self.processes > 1:
            context = multiprocessing.get_context("spawn")  # no fork of a process with threads
            self.pool = context.Pool(self.processes)
            self._workers = list(multiprocessing.active_children())
            # every process has imported what a run needs before the first run's t0
            self.pool.map(_ready, range(self.processes))

    def __enter__(self) -> Senders:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool.join()
            self.pool = None

    def pids(self) -> list[int]:
        """The sender processes (their CPU is the load generator's)."""
        return [p.pid for p in self._workers] if self.pool is not None else []

    def run(
        self,
        url: str,
        body: bytes,
        rate: float,
        seconds: float,
        headers: dict | None = None,
        label: str = "",
        seed: int = 0,
        timeout: float = 60.0,
    ) -> pd.DataFrame:
        """POST `body` at `rate` requests/s (Poisson) for `seconds` from every process together;
        one row per request, as open_loop.run's (each waited for `timeout` s at most)."""
        if self.pool is None:
            kwargs = dict(headers=headers, label=label, seed=seed, max_in_flight=self.max_in_flight)
            return open_loop.run(url, body, rate=rate, seconds=seconds, timeout=timeout, **kwargs)
        t0 = time.perf_counter() + START_AHEAD_S
        share = rate / self.processes
        args = [
            (url, body, share, seconds, headers, seed * 1000 + i, t0, self.max_in_flight, timeout)
            for i in range(self.processes)
        ]
        # P tasks for P idle workers: each takes one, so all send at once
        parts = self.pool.starmap(_part, args, chunksize=1)
        df = pd.DataFrame([row for rows, _ in parts for row in rows])
        df = df.sort_values("t_scheduled").reset_index(drop=True)
        first = parts[0][1]
        df.attrs.update(first)
        df.attrs.update(
            label=label,
            wall_s=max(attrs["wall_s"] for _, attrs in parts),
            request_rate=sum(attrs["request_rate"] for _, attrs in parts),
            senders=self.processes,
        )
        return df
