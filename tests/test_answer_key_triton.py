"""The answer key's notebook-6 figures, recomputed from the committed H100 reference
(docs/results/h100/results/triton/): each number the key quotes is derived here the way the
notebook derives it (servelab.queueing), and must appear in docs/answer_key.md as written, so the
text cannot drift from the files it cites."""

import re

import pandas as pd
import pytest

from servelab import queueing
from servelab.paths import REPO_ROOT

REFERENCE = REPO_ROOT / "docs" / "results" / "h100" / "results" / "triton"
KEY = (REPO_ROOT / "docs" / "answer_key.md").read_text()
NOTEBOOK_6 = KEY[KEY.index("## Notebook 6") : KEY.index("## Notebook 7")]


@pytest.fixture(scope="module")
def h100() -> pd.DataFrame:
    table = pd.read_csv(REFERENCE / "summary.csv").set_index("run")
    parts = ["server_compute_input_ms", "server_compute_infer_ms", "server_compute_output_ms"]
    table["execution_ms"] = table[parts].sum(axis=1)  # per request: one execution when unbatched
    return table


def quoted(*numbers: str) -> None:
    """Each number is in the notebook-6 section of the key, as a number (not part of another)."""
    for number in numbers:
        assert re.search(rf"(?<![\d.]){re.escape(number)}(?![\d])", NOTEBOOK_6), number


def test_6_1_laws_and_model(h100):
    c1 = h100.loc["6.1 c1"]
    service, outside = c1.execution_ms, c1.avg_latency_ms - c1.execution_ms
    quoted(f"{c1.throughput_infer_s * service / 1000:.2f}", f"{service:.1f}")  # U = 0.95, 12.3 ms
    for n, name in ((8, "6.1 c8"), (16, "6.1 c16")):
        row = h100.loc[name]
        laws = queueing.run_laws(
            row.throughput_infer_s, row.avg_latency_ms, row.server_queue_ms, row.execution_ms
        )
        model = queueing.closed_loop(n, service, outside)["latency_ms"]
        quoted(f"{laws['in_flight_N']:.1f}", f"{laws['waiting_N']:.1f}")
        quoted(f"{model:.3g}", f"{row.avg_latency_ms / model:.2f}")
    assert queueing.closed_loop(16, service, outside)["queue_ms"] == pytest.approx(184, abs=0.5)


def test_6_4_model_misses_by_the_execution_time_that_grew(h100):
    c1 = h100.loc["6.4 onnx c1"]
    service, outside = c1.execution_ms, c1.avg_latency_ms - c1.execution_ms
    for n, name in ((8, "6.4 onnx 2 inst c8"), (16, "6.4 onnx 2 inst c16")):
        row = h100.loc[name]
        model = queueing.closed_loop(n, service, outside, servers=2)["latency_ms"]
        quoted(f"{model:.1f}", f"{row.avg_latency_ms:.1f}", f"{row.execution_ms:.2f}")
        quoted(f"{row.avg_latency_ms / model:.1f}x")


def test_6_6_open_loop_and_batching(h100):
    capacity = pd.read_csv(REFERENCE / "perf_6.6_capacity_c4.csv")["Inferences/Second"][0]
    busy = 1000 / capacity
    outside = h100.loc["6.4 onnx c1"].avg_latency_ms - h100.loc["6.4 onnx c1"].execution_ms
    rates = [int(f * capacity) for f in (0.6, 1.0, 1.4)]
    assert rates == [185, 309, 433]
    quoted(*(str(r) for r in rates), f"{busy:.2f}", f"{capacity:.0f}/s")
    for name, poisson in (("6.6 constant 185/s", False), ("6.6 poisson 185/s", True)):
        model = queueing.open_loop(185, busy, outside, poisson=poisson)["latency_ms"]
        measured = h100.loc[name].avg_latency_ms
        quoted(f"{model:.1f}", f"{measured:.1f}", f"{measured / model:.2f}x")
    quoted(f"{h100.loc['6.6 constant 185/s'].server_queue_ms / busy:.2f}")  # 1.24 service times
    b8 = pd.read_csv(REFERENCE / "perf_6.6_b8.csv")
    b8_ms = (
        b8[["Server Compute Input", "Server Compute Infer", "Server Compute Output"]].sum(axis=1)[0]
        / 1000
    )
    onnx_ms = h100.loc["6.4 onnx c1"].execution_ms
    service = queueing.ServiceTime.from_two_batches(1, busy, 8, b8_ms * busy / onnx_ms)
    quoted(f"{b8_ms / onnx_ms:.1f}x", f"{queueing.saturation_rate(service, max_batch=8):.0f}/s")
    quoted(f"{service.fixed_ms:.2f} + {service.per_item_ms:.2f} × b")
    for rate in (123, 309, 433):
        row = h100.loc[f"6.6 batching poisson {rate}/s"]
        model = queueing.open_loop_batching(rate, service, 8, 0.1, outside)["latency_ms"]
        quoted(f"{model:.1f}", f"{row.avg_latency_ms / model:.1f}x")
    top, none = h100.loc["6.6 batching poisson 433/s"], h100.loc["6.6 no batching poisson 433/s"]
    quoted(f"{none.avg_latency_ms / top.avg_latency_ms:.1f}x", f"{service(top.avg_batch_size):.1f}")
    quoted(f"{none.throughput_infer_s:.0f}/s", f"{top.avg_batch_size:.1f}")
