"""Figures of the maintainers' CPU check: docs/results/cpu/bench_fastapi/, made by
maintainers/experiments/bench_fastapi.py."""

from __future__ import annotations

from maintainers.figures.core import figure
from maintainers.figures.pages import page


def _bench() -> dict:
    return page("cpu", "bench_fastapi").json("bench_fastapi.json")


@figure("cpu_bench_date")
def bench_date() -> str:
    return _bench()["date"].split()[0]


@figure("cpu_bench_runtime_ratio")
def runtime_ratio() -> str:
    b = _bench()
    ratio = b["ratio_pytorch_over_onnx_p50"]
    return f"{b['pytorch_p50_ms']:.1f} / {b['onnx_p50_ms']:.1f} ms = {ratio:.2f}"


@figure("cpu_bench_loadgen_ratio")
def loadgen_ratio() -> str:
    b = _bench()
    return (
        f"{b['loadgen_rps']:.1f} / {b['wrk_rps']:.1f} requests/s = "
        f"{b['ratio_loadgen_over_wrk_rps']:.2f}"
    )
