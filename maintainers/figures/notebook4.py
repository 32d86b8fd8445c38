"""Figures of notebook 4 (FastAPI, PyTorch vs ONNX Runtime) on its H100 page, derived as the
notebook derives them: the per-request CSVs, the summary, the model line the notebook printed."""

from __future__ import annotations

import re

import pandas as pd

from maintainers.figures.core import figure
from maintainers.figures.pages import page
from servelab import loadgen, queueing

H100 = ("h100", "04_fastapi_benchmarks")


def _requests(name: str) -> pd.DataFrame:
    return page(*H100).csv(f"results/fastapi/requests_{name}.csv")


def _throughput(run: str) -> float:
    return page(*H100).summary("fastapi").loc[run, "throughput_rps"]


def _onnx_16() -> dict:
    """4.6's laws on ONNX with 16 senders: X (requests/s), R, W, S (mean ms)."""
    c16 = _requests("onnx_concurrent_16")
    return {
        "X": _throughput("onnx_concurrent_16"),
        "R": c16.latency_ms.mean(),
        "W": c16.server_queue_ms.mean(),
        "S": c16.server_infer_ms.mean(),
    }


def median_ms(name: str, column: str = "latency_ms") -> float:
    return _requests(name)[column].median()


@figure("h100_4_day")
def day() -> str:
    return page(*H100).day("fastapi")


@figure("h100_4.4_median")
def pytorch_median() -> str:
    return f"{median_ms('pytorch_sequential'):.1f}"


@figure("h100_4.5_speedup")
def speedup() -> str:
    return f"{median_ms('pytorch_sequential') / median_ms('onnx_sequential'):.2f}"


@figure("h100_4.5_runtime_speedup")
def runtime_speedup() -> str:
    infer = [median_ms(f"{n}_sequential", "server_infer_ms") for n in ("pytorch", "onnx")]
    return f"{infer[0] / infer[1]:.1f}"


@figure("h100_4.5_infer")
def infer() -> str:
    pt, onnx = (median_ms(f"{n}_sequential", "server_infer_ms") for n in ("pytorch", "onnx"))
    return f"{pt:.2f} → {onnx:.2f} ms"


@figure("h100_4.5_decode")
def decode() -> str:
    pt, onnx = (median_ms(f"{n}_sequential", "server_decode_ms") for n in ("pytorch", "onnx"))
    return f"{pt:.2f} → {onnx:.2f} ms"


@figure("h100_4.6_median")
def onnx_16_median() -> str:
    return f"{median_ms('onnx_concurrent_16'):.1f}"


def printed_model() -> tuple[float, float]:
    """The queueing model's line as notebook 4 printed it: (mean ms, requests/s)."""
    found = re.search(
        r"model:\s+([\d.]+) ms mean,\s+(\d+) requests/s",
        page(*H100).log("04_fastapi_benchmarks.log"),
    )
    return float(found[1]), float(found[2])


@figure("h100_4.6_model")
def model() -> str:
    mean, rate = printed_model()
    return f"{mean:g} ms and {rate:.0f} requests/s"


@figure("h100_4.6_measured")
def measured() -> str:
    laws = _onnx_16()
    return (
        f"a mean of {laws['R']:.1f} ms (median {median_ms('onnx_concurrent_16'):.1f}) and "
        f"{laws['X']:.0f} requests/s: {laws['R'] / printed_model()[0]:.2f}x off"
    )


@figure("h100_4.6_reason")
def reason_46() -> str:
    """4.6's sentence on the model's line as servelab.queueing says it now, on the page's rows
    (the page's log keeps what the run printed then)."""
    rows = page(*H100).summary("fastapi")
    loaded, alone = rows.loc["onnx_concurrent_16"], rows.loc["onnx_sequential"]
    return queueing.model_miss(
        printed_model()[0],
        loaded.mean_ms,
        loaded.lock_busy_U,
        alone.infer_mean_ms,
        loaded.infer_mean_ms,
    )


@figure("h100_4.6_U")
def utilisation() -> str:
    laws = _onnx_16()
    busy = laws["X"] * laws["S"] / 1000
    return (
        f"U = X·S = {laws['X']:.0f}/s × {laws['S']:.2f} ms (mean `infer`) = {busy:.2f}: the lock "
        f"was free {1 - busy:.0%} of the time"
    )


@figure("h100_4.6_waiting")
def waiting() -> str:
    laws = _onnx_16()
    waiting = laws["X"] * laws["W"] / 1000
    return f"X·W = {laws['X']:.0f}/s × {laws['W']:.1f} ms (mean `queue`) = {waiting:.1f}"


@figure("h100_4.6_decode")
def decode_under_load() -> str:
    seq, c16 = (
        _requests(n).server_decode_ms.mean() for n in ("onnx_sequential", "onnx_concurrent_16")
    )
    return f"{seq:.1f} to {c16:.1f} ms mean"


@figure("h100_4.6_infer")
def infer_under_load() -> str:
    seq, c16 = (
        _requests(n).server_infer_ms.mean() for n in ("onnx_sequential", "onnx_concurrent_16")
    )
    return f"`infer` {seq:.2f} → {c16:.2f} ms mean, {c16 / seq:.2f}x"


@figure("h100_4.6_little")
def little() -> str:
    laws = _onnx_16()
    return f"N = X·R = {laws['X']:.0f}/s × {laws['R']:.1f} ms = {laws['X'] * laws['R'] / 1000:.1f}"


def growth(runtime: str, column: str) -> float:
    """How many times a runtime's median grew from sequential to 16 senders."""
    return median_ms(f"{runtime}_concurrent_16", column) / median_ms(
        f"{runtime}_sequential", column
    )


@figure("h100_4.6_growth")
def latency_growth() -> str:
    return (
        f"ONNX {growth('onnx', 'latency_ms'):.1f}x, PyTorch {growth('pytorch', 'latency_ms'):.1f}x"
    )


@figure("h100_4.6_own_growth")
def own_growth() -> str:
    return f"{growth('onnx', 'server_infer_ms'):.2f}x, {growth('pytorch', 'server_infer_ms'):.2f}x"


@figure("h100_4.7_workers")
def workers() -> str:
    one, two = (_throughput(r) for r in ("onnx_concurrent_16", "onnx_concurrent_16_2_workers"))
    return f"{two / one:.2f}x throughput, {two:.0f} against {one:.0f} requests/s"


@figure("h100_4.7_real")
def real_47() -> str:
    """4.7 as notebook 4 judges it now, on the page's runs: is the second worker's gain real (the
    two throughputs' windows apart) or noise (they overlap)?"""
    runs = ("onnx_concurrent_16", "onnx_concurrent_16_2_workers")
    (one, one_x), (two, two_x) = ((loadgen.throughput(_requests(r)), _throughput(r)) for r in runs)
    verdict = "real" if one.hi < two.lo or two.hi < one.lo else "noise"
    return (
        f"{verdict} (two workers {two_x:.0f}/s, windows {two.lo:.0f} to {two.hi:.0f}; one "
        f"{one_x:.0f}/s, {one.lo:.0f} to {one.hi:.0f})"
    )


@figure("h100_4.7_decision")
def decision() -> str:
    """4.7's choice as the notebook printed it on the page's run, with the two rows."""
    log = page(*H100).log("04_fastapi_benchmarks.log")
    chosen = re.search(r"4\.7: the worker processes to run: (\d+)", log)[1]
    one, two = (_throughput(r) for r in ("onnx_concurrent_16", "onnx_concurrent_16_2_workers"))
    return f"{chosen} ({two:.0f} against {one:.0f} requests/s)"
