"""Notebook 9's verdicts, each claim judged on your own runs (the per-request tables of loadgen and
open_loop, handed over as the notebook holds them, your predictions beside them); one call per
step, in the order the verdict cells print them. The notebook names the step (`step`), whose number
heads each claim.

Introduced in notebook 9.
"""

from __future__ import annotations

import pandas as pd

from servelab import claims, loadgen
from servelab.claims import Prediction
from servelab.ray_serving import REQUEST_TIMEOUT_S, row


def one_replica(step: str, one_at_once: pd.DataFrame, two_at_once: pd.DataFrame) -> None:
    """9.1: taking one request at a time, the replica idles while requests wait at the router;
    taking two serves more (the two capacity runs)."""
    one = row(one_at_once, one_at_once.attrs.get("label", ""), 1)
    claims.at_most(
        f"{step}: with one request at a time the replica was idle part of the time while requests "
        "waited at the router (busy_U)",
        one["busy_U"],
        0.8,
        {"in_flight_N": one["in_flight_N"]},
    )
    claims.at_least(
        f"{step}: taking 2 at once serves more than 1 at once (x)",
        loadgen.throughput(two_at_once) / loadgen.throughput(one_at_once),
        1,
    )


def replicas(
    step: str,
    one: pd.DataFrame,
    two: pd.DataFrame,
    four: pd.DataFrame,
    two_served: Prediction,
    four_over_two: Prediction,
) -> None:
    """9.2: your predictions, then what 2 and 4 replicas on two nodes bought over 1 (their runs at
    the same offered rate)."""
    t1, t2, t4 = (loadgen.throughput(run) for run in (one, two, four))
    claims.compare_prediction(two_served, t2)
    claims.compare_prediction(four_over_two, t4 / t2)
    claims.at_least(
        f"{step}: two replicas on two nodes serve more than one at 150 % of one", t2 / t1, 1
    )
    claims.at_most(
        f"{step}: four replicas on two nodes of one core each add little over two", t4 / t2, 1.15
    )
    claims.at_most(
        f"{step}: the runs with 2 and 4 replicas were the open loop they claim (% sent late)",
        max(loadgen.summarize(run)["delayed_pct"] for run in (two, four)),
        5,
    )


def autoscaling(
    step: str,
    seen: pd.DataFrame,
    load_step: list[float],
    recovery,
    budget_ms: float,
    predicted: Prediction,
) -> None:
    """9.3: the autoscaler added a replica during the load step (`load_step`: seconds before,
    during and after it) and removed it after; p95's recovery (s, None: never) against the load
    step's length, your prediction of it beside it."""
    up, down = load_step[0], load_step[0] + load_step[1]
    running = seen["RUNNING"] if "RUNNING" in seen else pd.Series(0, index=seen.index)
    claims.at_least(
        f"{step}: the autoscaler added a replica during the step (most running)",
        float(running[(seen["t_s"] > up) & (seen["t_s"] <= down)].max()),
        2,
    )
    claims.at_most(
        f"{step}: and removed it after the step down (running at the end)",
        float(running.iloc[-1]),  # sampled until the autoscaler settled, after the step
        1,
    )
    if recovery is not None:
        claims.compare_prediction(predicted, recovery)
    claims.at_most(
        f"{step}: p95 came back under the budget while the step lasted (s after the step up)",
        recovery if recovery is not None else float("inf"),
        load_step[1],
        {"budget_ms": budget_ms, "step_s": load_step[1]},
    )


def crash(step: str, run: pd.DataFrame, replaced) -> None:
    """9.4: Ray replaced the killed replica (`replaced`: seconds after the kill, None: not), no
    request hung, and each failure was an HTTP error with a message."""
    failed = run[run["status"] != 200].reindex(columns=["status", "detail"])
    claims.fact(
        f"{step}: Ray replaced the killed replica (two running again, the killed one not "
        "among them)",
        replaced is not None,
        {"seconds after the kill": "never" if replaced is None else round(replaced, 1)},
    )
    claims.fact(
        f"{step}: no request hung: each was answered within the proxy's timeout",
        bool(run["latency_ms"].max() < 1000 * (REQUEST_TIMEOUT_S + 5)),
        {"slowest ms": float(run["latency_ms"].max())},
    )
    clean = [
        isinstance(status, int) and 400 <= status < 600 and bool(detail)
        for status, detail in zip(failed["status"], failed["detail"])
    ]
    claims.fact(
        f"{step}: every failed request got an HTTP error (4xx/5xx) with a message, none a broken "
        "connection",
        all(clean),
        {"failed": len(failed), "statuses": failed["status"].value_counts().to_dict()},
    )


def against_triton(
    step: str,
    ray_one,
    triton_one,
    ray_at_rate,
    triton_at_rate,
    rate: float,
    predicted: Prediction,
) -> None:
    """9.5: your prediction, then Ray's path against Triton's, one at a time (`ray_one`,
    `triton_one`) and at `rate` (9.2's two replicas, `ray_at_rate`, against Triton's two
    instances); triton_one None: no Triton in this mode."""
    if triton_one is None:
        claims.not_checkable(
            f"{step}: Ray's path adds to Triton's at the same load",
            "no Triton server in this mode (local mode: `make up` starts one)",
        )
        return
    ray_ms = loadgen.median_ms(ray_one)
    triton_ms = loadgen.median_ms(triton_one)
    claims.compare_prediction(predicted, ray_ms.value - triton_ms.value)
    claims.at_least(
        f"{step}: one at a time, Ray's proxy and router add to Triton's path (median, x)",
        ray_ms / triton_ms,
        1,
    )
    p95 = [loadgen.summarize(run)["p95_ms"] for run in (ray_at_rate, triton_at_rate)]
    claims.at_least(
        f"{step}: at {rate}/s, 2 Triton instances keep p95 lower than 2 Ray replicas (x)",
        claims.Measured.exact(p95[0] / p95[1]),
        1,
    )
