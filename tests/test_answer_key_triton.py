"""The answer key's notebook-4 and notebook-6 figures, recomputed from the committed H100 reference
of 2026-11-25 (docs/results/h100_2026-11-25/, ONNX Runtime on the GPU): each number the key
quotes is derived here the way the notebook derives it (servelab.queueing, the per-request CSVs,
the notebook's printed model line), and must appear in docs/answer_key.md as written, so the text
cannot drift from the files it cites."""

import re

import pandas as pd
import pytest

from servelab import queueing
from servelab.paths import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "results" / "h100_2026-11-25"
REFERENCE = PAGE / "results" / "triton"
FASTAPI = PAGE / "results" / "fastapi"
KEY = " ".join((REPO_ROOT / "docs" / "answer_key.md").read_text().split())  # lines rejoined
NOTEBOOK_4 = KEY[KEY.index("## Notebook 4") : KEY.index("## Notebook 5")]
NOTEBOOK_6 = KEY[KEY.index("## Notebook 6") : KEY.index("## Notebook 7")]


@pytest.fixture(scope="module")
def h100() -> pd.DataFrame:
    return pd.read_csv(REFERENCE / "summary.csv").set_index("run")


def quoted(*numbers: str, section: str = NOTEBOOK_6) -> None:
    """Each number is in the section of the key, as a number (not part of another)."""
    for number in numbers:
        assert re.search(rf"(?<![\d.]){re.escape(number)}(?![\d])", section), number


def test_the_key_cites_the_2026_11_25_run():
    for section in (NOTEBOOK_4, NOTEBOOK_6):
        assert "results/h100_2026-11-25/" in section
        assert "results/h100/" not in section  # the run where ONNX ran on the CPU


def requests(name: str) -> pd.DataFrame:
    return pd.read_csv(FASTAPI / f"requests_{name}.csv")


def test_4_figures():
    def q(*numbers):
        quoted(*numbers, section=NOTEBOOK_4)

    seq = {n: requests(f"{n}_sequential") for n in ("pytorch", "onnx")}
    c16 = {n: requests(f"{n}_concurrent_16") for n in ("pytorch", "onnx")}
    summary = pd.read_csv(FASTAPI / "summary.csv").set_index("run")
    pt, onnx = (seq[n].latency_ms.median() for n in ("pytorch", "onnx"))
    q(f"{pt:.1f}", f"{pt / onnx:.2f}x", f"{pt / onnx:.2f}")  # 4.4, 4.5
    infer = {n: seq[n].server_infer_ms.median() for n in seq}
    decode = {n: seq[n].server_decode_ms.median() for n in seq}
    q(f"{infer['pytorch']:.2f} → {infer['onnx']:.2f} ms")
    q(
        f"{decode['pytorch']:.2f} → {decode['onnx']:.2f} ms",
        f"{infer['pytorch'] / infer['onnx']:.1f}x",
    )
    x = summary.loc["onnx_concurrent_16", "throughput_rps"]
    r, w = c16["onnx"].latency_ms.mean(), c16["onnx"].server_queue_ms.mean()
    s = c16["onnx"].server_infer_ms.mean()
    q(f"{c16['onnx'].latency_ms.median():.1f}", f"{r:.1f}", f"{x:.0f}")
    q(f"{x:.0f}/s × {s:.2f} ms (mean `infer`) =", f"{x * s / 1000:.2f}")
    q(f"{x:.0f}/s × {w:.1f} ms (mean `queue`) = {x * w / 1000:.1f}")
    q(f"{x:.0f}/s × {r:.1f} ms = {x * r / 1000:.1f}")
    q(f"`infer` {seq['onnx'].server_infer_ms.mean():.2f} → {s:.2f} ms mean")
    q(f"{s / seq['onnx'].server_infer_ms.mean():.2f}x")
    q(f"{seq['onnx'].server_decode_ms.mean():.1f} to {c16['onnx'].server_decode_ms.mean():.1f} ms")
    for n, growth in (("onnx", "ONNX"), ("pytorch", "PyTorch")):
        lat = c16[n].latency_ms.median() / seq[n].latency_ms.median()
        own = c16[n].server_infer_ms.median() / seq[n].server_infer_ms.median()
        q(f"{growth} {lat:.1f}x", f"{own:.2f}x")
    model = re.search(r"model:\s+([\d.]+) ms mean,\s+(\d+) requests/s", _log("04"))
    q(model[1], model[2], f"{r / float(model[1]):.2f}x")
    two = summary.loc["onnx_concurrent_16_2_workers", "throughput_rps"]
    q(f"{two / x:.2f}x", f"{two:.0f} against {x:.0f}")


def _log(notebook: str) -> str:
    return next(PAGE.glob(f"{notebook}_*.log")).read_text()


def test_6_1_laws_and_model(h100):
    c1 = h100.loc["6.1 c1"]
    service, outside = c1.execution_ms, c1.avg_latency_ms - c1.execution_ms
    quoted(f"{c1.throughput_infer_s * service / 1000:.2f}", f"{service:.1f}")  # U = 0.94, 12.7 ms
    quoted(f"{15 * service:.0f} ms")
    assert queueing.closed_loop(16, service, outside)["queue_ms"] == pytest.approx(190, abs=0.5)
    quoted(f"{h100.loc['6.1 c16'].server_queue_ms:.0f}")
    for n, name in ((8, "6.1 c8"), (16, "6.1 c16")):
        row = h100.loc[name]
        laws = queueing.laws(
            row.throughput_infer_s, row.avg_latency_ms, row.execution_ms, row.server_queue_ms
        )
        model = queueing.closed_loop(n, service, outside)["latency_ms"]
        quoted(f"{laws['in_flight_N']:.1f}", f"{laws['waiting_N']:.1f}")
        quoted(f"{model:.3g}", f"{row.avg_latency_ms / model:.2f}", f"{row.avg_latency_ms:.1f}")


def test_6_2_to_6_4(h100):
    one, b16 = h100.loc["6.1 c1"], h100.loc["6.2 b16"]
    quoted(f"{b16.execution_ms / one.execution_ms:.1f}x", f"{b16.execution_ms:.1f} ms")
    quoted(f"{b16.throughput_infer_s:.1f} against {one.throughput_infer_s:.1f}")
    c8, two, four = (h100.loc[n] for n in ("6.1 c8", "6.3 2 inst c8", "6.3 4 inst c8"))
    quoted(f"{two.throughput_infer_s / c8.throughput_infer_s:.2f}x")
    quoted(f"{four.throughput_infer_s / c8.throughput_infer_s:.1f}x", f"{four.waiting_N:.1f}")
    c1 = h100.loc["6.4 onnx c1"]
    quoted(f"{c1.throughput_infer_s / one.throughput_infer_s:.2f}x")
    service, outside = c1.execution_ms, c1.avg_latency_ms - c1.execution_ms
    for n, name in ((8, "6.4 onnx 2 inst c8"), (16, "6.4 onnx 2 inst c16")):
        row = h100.loc[name]
        model = queueing.closed_loop(n, service, outside, servers=2)["latency_ms"]
        quoted(f"{model:.1f}", f"{row.avg_latency_ms:.1f}", f"{row.execution_ms:.2f}")
        quoted(f"{row.avg_latency_ms / model:.2f}x", f"{row.waiting_N:.1f}")


def test_6_6_open_loop_and_batching(h100):
    capacity = pd.read_csv(REFERENCE / "perf_6.6_capacity_c4.csv")["Inferences/Second"][0]
    busy = 1000 / capacity
    outside = h100.loc["6.4 onnx c1"].avg_latency_ms - h100.loc["6.4 onnx c1"].execution_ms
    rates = [int(f * capacity) for f in (0.6, 1.0, 1.4)]
    assert rates == [273, 455, 637]
    quoted(*(str(r) for r in rates), f"{busy:.2f}", f"{capacity:.0f}/s")
    constant, poisson = h100.loc["6.6 constant 273/s"], h100.loc["6.6 poisson 273/s"]
    quoted(f"{poisson.server_queue_ms / constant.server_queue_ms:.2f}x")
    quoted(f"{constant.server_queue_ms / busy:.2f}")  # 1.19 service times
    for row, p in ((constant, False), (poisson, True)):
        model = queueing.open_loop(273, busy, outside, poisson=p)["latency_ms"]
        quoted(f"{model:.2f}", f"{row.avg_latency_ms:.2f}", f"{row.avg_latency_ms / model:.2f}x")
        quoted(f"{row.p99_ms:.1f}")
    b8_ms, onnx_ms = h100.loc["6.6 b8"].execution_ms, h100.loc["6.4 onnx c1"].execution_ms
    service = queueing.ServiceTime.from_two_batches(1, busy, 8, b8_ms * busy / onnx_ms)
    saturation = queueing.saturation_rate(service, max_batch=8)
    quoted(f"{b8_ms / onnx_ms:.2f}x", f"{saturation:.0f}/s", f"{saturation / capacity:.1f}x")
    quoted(f"{service.fixed_ms:.2f} + {service.per_item_ms:.2f} × b")
    for rate in rates:
        row = h100.loc[f"6.6 batching poisson {rate}/s"]
        model = queueing.open_loop_batching(rate, service, 8, 0.1, outside)["latency_ms"]
        quoted(f"{model:.2f}", f"{row.avg_latency_ms:.2f}", f"{row.avg_latency_ms / model:.2f}x")
    top, none = h100.loc["6.6 batching poisson 637/s"], h100.loc["6.6 no batching poisson 637/s"]
    quoted(f"{none.avg_latency_ms / top.avg_latency_ms:.1f}x", f"{service(top.avg_batch_size):.2f}")
    quoted(
        f"{none.throughput_infer_s:.0f}/s", f"{top.avg_batch_size:.1f}", f"{top.execution_ms:.2f}"
    )
    quoted(f"{none.avg_latency_ms:,.0f}", f"{none.waiting_N:,.0f}", f"{top.avg_latency_ms:.1f}")
    assert queueing.open_loop(637, busy, outside)["saturated"]
    quoted(f"{queueing.open_loop(455, busy, outside)['latency_ms']:.0f} ms")
    mid = h100.loc["6.6 no batching poisson 455/s"]
    quoted(f"{mid.avg_latency_ms:.0f}", f"{h100.loc['6.6 batching poisson 455/s'].avg_batch_size}")


def test_the_decisions_table(h100):
    """The decisions' H100 values, from the same rows the notebook's checks read."""
    rows = [h100.loc[n, "throughput_infer_s"] for n in ("6.1 c8", "6.3 2 inst c8", "6.3 4 inst c8")]
    quoted(f"{rows[0]:.0f}, {rows[1]:.0f}, {rows[2]:.0f}/s at 1, 2, 4")
    assert rows[2] * 0.9 > rows[1]  # so the fewest within 90 % of the best is 4
    c16 = h100.loc["6.4 onnx 2 inst c16"]
    quoted(f"busy_U {c16.busy_U:.2f}, GPU {c16.gpu0_util_pct:.0f} %")
    capacity = pd.read_csv(REFERENCE / "perf_6.6_capacity_c4.csv")["Inferences/Second"][0]
    budget = 10 * 1000 / capacity
    met, missed = h100.loc["6.6 poisson 273/s"], h100.loc["6.6 no batching poisson 455/s"]
    assert met.avg_latency_ms < budget < missed.avg_latency_ms
    quoted(f"({budget:.1f} ms)", f"273/s: {met.avg_latency_ms:.1f} ms")
    quoted(f"455/s: {missed.avg_latency_ms:.0f} ms")
