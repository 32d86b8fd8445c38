"""Notebook 4's verdicts, each claim judged on your own runs (the per-request tables loadgen.run
returned, handed over as the notebook holds them); one call per claim, in the order the verdict
cells print them.

Introduced in notebook 4.
"""

from __future__ import annotations

import pandas as pd

from servelab import claims
from servelab.claims import Prediction
from servelab.loadgen import median_ms, summarize


def onnx_is_faster(pytorch: pd.DataFrame, onnx: pd.DataFrame, predicted: Prediction) -> None:
    """4.5: ONNX Runtime against PyTorch eager, one request at a time (median speed-up), your
    prediction of it beside it."""
    speedup = median_ms(pytorch) / median_ms(onnx)
    claims.compare_prediction(predicted, speedup)
    claims.at_least(
        "ONNX Runtime serves a sequential request faster than PyTorch eager (median speed-up)",
        speedup,
        1.0,
    )


def growth_is_queuing(sequential: pd.DataFrame, under_load: pd.DataFrame, runtime: str) -> None:
    """4.6, on one runtime's two runs: from one sender to many, the median latency grows at least
    3x, and at least 3x more than the model's own time (Server-Timing's `infer`): the growth is
    waiting, not the model."""
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


def workers_share_the_cores(one: pd.DataFrame, two: pd.DataFrame) -> None:
    """4.7: two worker processes (run `two`) keep at least 80 % of one's throughput (`one`)."""
    claims.at_least(
        "two workers keep at least 80% of one worker's throughput (they share the cores, "
        "they do not fight over them)",
        claims.Measured.exact(summarize(two)["throughput_rps"] / summarize(one)["throughput_rps"]),
        0.8,
    )
