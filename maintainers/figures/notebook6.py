"""Figures of notebook 6 (Triton) on its H100 page, derived as the notebook derives them: its
summary rows, servelab.queueing's models, the decisions it printed, and ONNX Runtime's
batch-size check (labstack.batch_switch) run beside it."""

from __future__ import annotations

import math
import re

import pandas as pd

from maintainers.figures.core import figure
from maintainers.figures.pages import page
from servelab import queueing
from servelab.triton import gpu_scaling

H100 = ("h100", "06_triton_benchmarks")
LIMIT = ("h100", "07_how_close_to_the_hardware")  # notebook 7's raw model, for 6.1 and 6.2


def pct(share: float) -> str:
    """A share as the texts write it: 0.95 -> '95 %'."""
    return f"{share * 100:.0f} %"


def span(values: list[float], fmt: str = ".2f", unit: str = "") -> str:
    """'low–high' of values as the texts write a range ('1.00' when both round alike)."""
    low, high = (format(v, fmt) for v in (min(values), max(values)))
    return f"{low}{unit}" if low == high else f"{low}–{high}{unit}"


def late(percent: float) -> str:
    return "none sent late" if percent == 0 else f"{percent:g} % sent late"


def rows() -> pd.DataFrame:
    return page(*H100).summary("triton")


def row(run: str) -> pd.Series:
    return rows().loc[run]


def capacity() -> float:
    """6.6's capacity of one ONNX instance (infer/s at 4 in flight) and the rates it sets."""
    return page(*H100).csv("results/triton/perf_6.6_capacity_c4.csv")["Inferences/Second"][0]


def rates() -> list[int]:
    """6.6's offered rates: 60, 100 and 140 % of the capacity, as the notebook rounds them."""
    return [int(f * capacity()) for f in (0.6, 1.0, 1.4)]


def busy_ms() -> float:
    return 1000 / capacity()


def outside_ms(run: str) -> float:
    """The part of a request's latency outside its execution (a pure delay in the models)."""
    return row(run).avg_latency_ms - row(run).execution_ms


def printed(decision: str) -> str:
    """A decision as notebook 6 printed it on the page's run, e.g. '6.3: the stubs on GPU 0'."""
    log = page(*H100).log("06_triton_benchmarks.log")
    return re.search(rf"{re.escape(decision)}: '?([^,']+)'?,", log)[1]


def mva(n: int) -> float:
    """6.1's closed-loop model of one instance at n in flight, from the c1 row."""
    return queueing.closed_loop(n, row("6.1 c1").execution_ms, outside_ms("6.1 c1"))["latency_ms"]


def mva_onnx(n: int) -> float:
    c1 = row("6.4 onnx c1")
    return queueing.closed_loop(n, c1.execution_ms, outside_ms("6.4 onnx c1"), servers=2)[
        "latency_ms"
    ]


def batch_service() -> queueing.ServiceTime:
    """6.6's service time of a batch: the line through one image and a client batch of 8."""
    b8 = row("6.6 b8").execution_ms * busy_ms() / row("6.4 onnx c1").execution_ms
    return queueing.ServiceTime.from_two_batches(1, busy_ms(), 8, b8)


def batching_model(rate: int) -> float:
    return queueing.open_loop_batching(rate, batch_service(), 8, 0.1, outside_ms("6.4 onnx c1"))[
        "latency_ms"
    ]


def open_model(rate: int, poisson: bool = True) -> dict:
    return queueing.open_loop(rate, busy_ms(), outside_ms("6.4 onnx c1"), poisson=poisson)


def gain() -> float:
    """At 140 %: mean latency without dynamic batching over with it."""
    top = rates()[2]
    return (
        row(f"6.6 no batching poisson {top}/s").avg_latency_ms
        / row(f"6.6 batching poisson {top}/s").avg_latency_ms
    )


def switch_rows() -> dict:
    return page(*H100).json("results/batch_switch.json")["rows"]


def one_session() -> dict:
    return switch_rows()["one session, EXHAUSTIVE"]


def labs_sessions() -> dict:
    return next(r for name, r in switch_rows().items() if name.startswith("the lab's"))


@figure("h100_6_day")
def day() -> str:
    return page(*H100).day("triton")


@figure("h100_6_batching_gain")
def batching_gain() -> str:
    return f"{gain():.0f}x"


@figure("h100_6_batching_gain_rates")
def batching_gain_rates() -> str:
    top = rates()[2]
    none, batched = (
        row(f"6.6 {kind} poisson {top}/s").avg_latency_ms for kind in ("no batching", "batching")
    )
    return f"{batched:.1f} ms mean against {none:,.0f} ms without, {gain():.0f}x lower"


# --- 6.1 and 6.2: one Python-backend instance


@figure("h100_6.1_queue16")
def queue_16() -> str:
    return f"{row('6.1 c16').server_queue_ms:.0f}"


@figure("h100_6.1_queue_estimate")
def queue_estimate() -> str:
    service = row("6.1 c1").execution_ms
    model = queueing.closed_loop(16, service, outside_ms("6.1 c1"))["queue_ms"]
    return (
        f"15 × {service:.1f} = {15 * service:.0f} ms on the H100; the model (MVA) says {model:.0f}"
    )


@figure("h100_6.1_rows")
def rows_61() -> str:
    x = [row(f"6.1 c{n}").throughput_infer_s for n in (1, 8, 16)]
    q = [row(f"6.1 c{n}").server_queue_ms for n in (1, 8, 16)]
    return (
        f"H100: {x[0]:.1f}, {x[1]:.1f}, {x[2]:.1f}/s at 1, 8, 16 in flight) while the queue grows "
        f"about linearly ({q[0]:.2f}, {q[1]:.1f}, {q[2]:.1f} ms"
    )


@figure("h100_6.1_laws")
def laws_61() -> str:
    busy = [row(f"6.1 c{n}").busy_U for n in (1, 8, 16)]
    c1 = row("6.1 c1")
    return (
        f"{pct(busy[0])}, {pct(busy[1])}, {pct(busy[2])} of the time (U = "
        f"{c1.throughput_infer_s:.1f}/s × {c1.execution_ms:.1f} ms = "
        f"{c1.throughput_infer_s * c1.execution_ms / 1000:.2f}"
    )


@figure("h100_6.1_in_flight")
def in_flight_61() -> str:
    laws = [
        queueing.laws(r.throughput_infer_s, r.avg_latency_ms, r.execution_ms, r.server_queue_ms)
        for r in (row("6.1 c8"), row("6.1 c16"))
    ]
    return (
        f"{laws[0]['in_flight_N']:.1f} and {laws[1]['in_flight_N']:.1f} in flight, "
        f"{laws[0]['waiting_N']:.1f} and {laws[1]['waiting_N']:.1f} of them waiting"
    )


@figure("h100_6.1_model")
def model_61() -> str:
    model = [mva(n) for n in (1, 8, 16)]
    measured = [row(f"6.1 c{n}").avg_latency_ms for n in (1, 8, 16)]
    ratios = ", ".join(f"{m / p:.2f}" for m, p in zip(measured, model))
    model_ms, measured_ms = (", ".join(f"{x:.1f}" for x in v) for v in (model, measured))
    return f"{model_ms} ms against {measured_ms} measured ({ratios}x)"


@figure("h100_6.1_gpu")
def gpu_61() -> str:
    gpu = [row(f"6.1 c{n}").gpu0_util_pct for n in (1, 8, 16)]
    return span(gpu, ".0f", " %")


def raw_ms(batch: int) -> float:
    """Notebook 7's raw eager fp32 model: ms for a batch on the H100 (its page's raw_limit.csv)."""
    raw = page(*LIMIT).csv("results/hardware/raw_limit.csv")
    rate = raw[(raw.path == "eager fp32") & (raw.batch == batch)].images_per_s.iloc[0]
    return 1000 * batch / rate


@figure("h100_6.1_forward")
def forward_61() -> str:
    raw = page(*LIMIT).csv("results/hardware/raw_limit.csv")
    rate = raw[(raw.path == "eager fp32") & (raw.batch == 1)].images_per_s.iloc[0]
    return (
        f"{raw_ms(1):.1f} ms of the {row('6.1 c1').execution_ms:.1f} on an H100 (notebook 7's raw "
        f"eager fp32, batch 1: {rate:.0f} images/s"
    )


@figure("h100_6.2_ratio")
def ratio_62() -> str:
    return f"{row('6.2 b16').execution_ms / row('6.1 c1').execution_ms:.1f}"


@figure("h100_6.2_rows")
def rows_62() -> str:
    one, b16 = row("6.1 c1"), row("6.2 b16")
    return (
        f"{b16.execution_ms:.1f} ms against {one.execution_ms:.1f} for one "
        f"({b16.execution_ms / one.execution_ms:.1f}x), so the instance served "
        f"{b16.throughput_infer_s / one.throughput_infer_s:.1f}x as many images per second "
        f"({b16.throughput_infer_s:.1f} against {one.throughput_infer_s:.1f}), busy "
        f"{pct(b16.busy_U)} of the time"
    )


@figure("h100_6.2_forward")
def forward_62() -> str:
    return f"{raw_ms(16):.1f} ms for 16 images against {raw_ms(1):.1f} for one"


# --- 6.3 and 6.4: instances, the ONNX model


def throughputs_63() -> list[float]:
    return [row(r).throughput_infer_s for r in ("6.1 c8", "6.3 2 inst c8", "6.3 4 inst c8")]


@figure("h100_6.3g_decision")
def decision_63g() -> str:
    """6.3g as notebook 6 judges it now, on the page's rows: the cheapest instances per device
    whose p95 at 8 in flight meets 3 x 6.1a's p95 (one GPU: one per device is 6.1b's run)."""
    objective = 3 * row("6.1 c1").p95_ms
    p95 = {n: row(r).p95_ms for n, r in ((1, "6.1 c8"), (2, "6.3 2 inst c8"), (4, "6.3 4 inst c8"))}
    chosen = next((n for n, ms in p95.items() if ms <= objective), "none")
    shown = ", ".join(f"{ms:.1f}" for ms in p95.values())
    return f"{chosen} (p95 {shown} ms at 1, 2, 4 per device; objective {objective:.1f} ms)"


@figure("h100_6.3h_decision")
def decision_63h() -> str:
    """6.3h as notebook 6 judges it now, on the page's row of four per device."""
    four = row("6.3 4 inst c8")
    gpu = max(four[c] for c in four.index if c.startswith("gpu") and c.endswith("_util_pct"))
    cpu = four.get("cpu_util_pct")
    full = [d for d, pct in (("GPU", gpu), ("CPU", cpu)) if pct == pct and pct and pct >= 90]
    chosen = full[0] if full else "instances" if four.busy_U >= 0.9 else "load"
    cpu_said = f", the CPU {cpu:.0f} %" if cpu == cpu and cpu is not None else ""
    return f'`"{chosen}"` (busy_U {four.busy_U:.2f}, the busiest GPU {gpu:.0f} %{cpu_said})'


@figure("h100_6.6h_decision")
def decision_66h() -> str:
    """6.6h as notebook 6 judges it now: the product's 400 requests/s, read at the sweep's lowest
    rate at or above it, against 10 x the busy time."""
    users, objective = 400, 10 * busy_ms()
    rate = min((r for r in rates() if r >= users), default=None)
    if rate is None:
        return f'`"more instances"` (no rate of the sweep reaches {users}/s)'
    alone = f"6.6 poisson {rate}/s" if rate == rates()[0] else f"6.6 no batching poisson {rate}/s"
    one = row(alone).avg_latency_ms
    batched = row(f"6.6 batching poisson {rate}/s").avg_latency_ms
    chosen = next(
        (n for n, ms in (("one instance", one), ("batching", batched)) if ms < objective),
        "more instances",
    )
    return (
        f'`"{chosen}"` (at {rate}/s: {one:,.0f} ms without batching, {batched:.1f} ms with it; '
        f"objective {objective:.1f} ms)"
    )


@figure("h100_6.3_stubs")
def stubs_63() -> str:
    return printed("6.3: the stubs on GPU 0")


@figure("h100_6.3_rows")
def rows_63() -> str:
    x = throughputs_63()
    q = [row(r).server_queue_ms for r in ("6.1 c8", "6.3 2 inst c8", "6.3 4 inst c8")]
    return (
        f"{x[1]:.0f}/s ({x[1] / x[0]:.2f}x one instance's {x[0]:.0f}/s at 8 in flight), four "
        f"{x[2]:.0f}/s ({x[2] / x[0]:.1f}x); the queue fell from {q[0]:.0f} to {q[1]:.0f} to "
        f"{q[2]:.0f} ms"
    )


@figure("h100_6.3_busy")
def busy_63() -> str:
    busy = [row(r).busy_U for r in ("6.3 2 inst c8", "6.3 4 inst c8")]
    return f"busy_U {span(busy)}"


@figure("h100_6.3_gpu")
def gpu_63() -> str:
    gpu = [row(r).gpu0_util_pct for r in ("6.1 c8", "6.3 2 inst c8", "6.3 4 inst c8")]
    return f"{gpu[0]:.0f} % to {gpu[1]:.0f} % to {gpu[2]:.0f} % busy"


@figure("h100_6.3_waiting")
def waiting_63() -> str:
    return f"{row('6.3 4 inst c8').waiting_N:.1f}"


@figure("h100_6.4_c1")
def c1_64() -> str:
    onnx, python = row("6.4 onnx c1"), row("6.1 c1")
    return (
        f"{onnx.throughput_infer_s:.0f}/s against {python.throughput_infer_s:.0f} "
        f"({onnx.throughput_infer_s / python.throughput_infer_s:.2f}x)"
    )


@figure("h100_6.4_two")
def two_64() -> str:
    c8, c16 = row("6.4 onnx 2 inst c8"), row("6.4 onnx 2 inst c16")
    busy = [c8.busy_U, c16.busy_U]
    return (
        f"{c8.throughput_infer_s:.0f}/s at 8 in flight and {c16.throughput_infer_s:.0f}/s at 16, "
        f"each instance busy {span([b * 100 for b in busy], '.0f', ' %')} of the time, "
        f"{c8.waiting_N:.1f} and "
        f"then {c16.waiting_N:.1f} requests waiting"
    )


@figure("h100_6.4_execution")
def execution_64() -> str:
    ms = [row(r).execution_ms for r in ("6.4 onnx c1", "6.4 onnx 2 inst c8", "6.4 onnx 2 inst c16")]
    return f"{ms[0]:.2f} ms at 1 in flight, {ms[1]:.2f} and {ms[2]:.2f} ms with two instances"


@figure("h100_6.4_model")
def model_64() -> str:
    model = [mva_onnx(n) for n in (8, 16)]
    measured = [row(f"6.4 onnx 2 inst c{n}").avg_latency_ms for n in (8, 16)]
    return (
        f"{model[0]:.1f} and {model[1]:.1f} ms against {measured[0]:.1f} and {measured[1]:.1f} "
        f"measured ({measured[0] / model[0]:.2f}x, {measured[1] / model[1]:.2f}x)"
    )


@figure("h100_6.4_gpu")
def gpu_64() -> str:
    gpu = [row(f"6.4 onnx 2 inst c{n}").gpu0_util_pct for n in (8, 16)]
    return span(gpu, ".0f", " %")


# --- 6.6: open loop, dynamic batching


@figure("h100_6.6_rates")
def rates_66() -> str:
    r = rates()
    return f"{r[0]}, {r[1]}, {r[2]}/s"


@figure("h100_6.6_with_batching")
def with_batching() -> str:
    return f"{row(f'6.6 batching poisson {rates()[2]}/s').avg_latency_ms:.1f}"


@figure("h100_6.6_batch_cost")
def batch_cost() -> str:
    b8 = row("6.6 b8").execution_ms / row("6.4 onnx c1").execution_ms
    saturation = queueing.saturation_rate(batch_service(), max_batch=8)
    return (
        f"a batch of 8 cost {b8:.2f}x one image, so batches of 8 lift capacity "
        f"{saturation / capacity():.1f}x, {capacity():.0f} → {saturation:.0f}/s"
    )


@figure("h100_6.6_none_mean")
def none_mean() -> str:
    return f"{row(f'6.6 no batching poisson {rates()[2]}/s').avg_latency_ms:,.0f} ms mean"


@figure("h100_6.6_open_loop")
def open_loop() -> str:
    low = rates()[0]
    even, poisson = row(f"6.6 constant {low}/s"), row(f"6.6 poisson {low}/s")
    busy = [even.busy_U, poisson.busy_U]
    return (
        f"at {low}/s (60 % of the measured capacity, {capacity():.0f}/s, {busy_ms():.2f} ms per "
        f"request when busy): queue {even.server_queue_ms:.1f} ms evenly spaced, "
        f"{poisson.server_queue_ms:.1f} ms Poisson "
        f"({poisson.server_queue_ms / even.server_queue_ms:.2f}x); the instance busy "
        f"{span([b * 100 for b in busy], '.0f', ' %')}, {even.waiting_N:.1f} and "
        f"{poisson.waiting_N:.1f} "
        "requests waiting on average"
    )


def even_queue_times() -> float:
    """6.6: the evenly spaced run's queue, in service times."""
    return row(f"6.6 constant {rates()[0]}/s").server_queue_ms / busy_ms()


def model_queue_times() -> float:
    """The M/D/1 model's queue for Poisson arrivals at the 60 % rate, in service times."""
    return open_model(rates()[0])["queue_ms"] / busy_ms()


@figure("h100_6.6_queue_times")
def queue_times() -> str:
    return (
        f"queued {even_queue_times():.2f} service times, more than the model gives even "
        f"Poisson arrivals ({model_queue_times():.2f})"
    )


@figure("h100_6.6_open_model")
def open_model_66() -> str:
    low = rates()[0]
    model = [open_model(low, poisson)["latency_ms"] for poisson in (False, True)]
    measured = [row(f"6.6 {k} {low}/s").avg_latency_ms for k in ("constant", "poisson")]
    return (
        f"{model[0]:.2f} and {model[1]:.2f} ms, is {measured[0] / model[0]:.2f}x and "
        f"{measured[1] / model[1]:.2f}x below the measured {measured[0]:.2f} and "
        f"{measured[1]:.2f} ms"
    )


@figure("h100_6.6_tail")
def tail() -> str:
    low = rates()[0]
    even, poisson = row(f"6.6 constant {low}/s"), row(f"6.6 poisson {low}/s")
    return (
        f"p99 {even.p99_ms:.1f} and {poisson.p99_ms:.1f} ms against medians of "
        f"{even.p50_ms:.1f} and {poisson.p50_ms:.1f}"
    )


@figure("h100_6.6_served")
def served() -> str:
    low = rates()[0]
    x = [row(f"6.6 {k} {low}/s").throughput_infer_s for k in ("constant", "poisson")]
    return f"{x[0]:.0f} and {x[1]:.0f} of {low} offered"


@figure("h100_6.6_top_none")
def top_none() -> str:
    top = rates()[2]
    none = row(f"6.6 no batching poisson {top}/s")
    return f"{none.throughput_infer_s:.0f}/s of {top} offered with {late(none.delayed_pct)}"


@figure("h100_6.6_top_queue")
def top_queue() -> str:
    none = row(f"6.6 no batching poisson {rates()[2]}/s")
    return f"mean {none.avg_latency_ms:,.0f} ms, {none.waiting_N:,.0f} waiting on average"


@figure("h100_6.6_top_batching")
def top_batching() -> str:
    top = row(f"6.6 batching poisson {rates()[2]}/s")
    b8 = row("6.6 b8").execution_ms / row("6.4 onnx c1").execution_ms
    return (
        f"{top.throughput_infer_s:.0f}/s at a mean of {top.avg_latency_ms:.1f} ms in batches of "
        f"{top.avg_batch_size:.1f} ({late(top.delayed_pct)}): a batch of 8 costs "
        f"{b8:.2f}x one image here"
    )


@figure("h100_6.6_mid")
def mid() -> str:
    rate = rates()[1]
    none, batched = (row(f"6.6 {k} poisson {rate}/s") for k in ("no batching", "batching"))
    return (
        f"*At 100 %* ({rate}/s): {none.throughput_infer_s:.0f}/s served at a mean of "
        f"{none.avg_latency_ms:,.0f} ms without batching, {batched.throughput_infer_s:.0f}/s at "
        f"{batched.avg_latency_ms:.1f} ms with it (batches of {batched.avg_batch_size:.1f})"
    )


@figure("h100_6.6_low_batches")
def low_batches() -> str:
    rate = rates()[0]
    batch = row(f"6.6 batching poisson {rate}/s").avg_batch_size
    return f"({rate}/s): batches stayed near 1 ({batch:.2f})"


@figure("h100_6.6_low_means")
def low_means() -> str:
    rate = rates()[0]
    batched, none = row(f"6.6 batching poisson {rate}/s"), row(f"6.6 poisson {rate}/s")
    return f"{batched.avg_latency_ms:.1f} ms mean with it, {none.avg_latency_ms:.1f} without"


def batching_ratios() -> list[float]:
    """Measured mean latency with batching over the model's, at each rate."""
    return [row(f"6.6 batching poisson {r}/s").avg_latency_ms / batching_model(r) for r in rates()]


@figure("h100_6.6_batching_model")
def batching_model_66() -> str:
    r = rates()
    model = [batching_model(rate) for rate in r]
    measured = [row(f"6.6 batching poisson {rate}/s").avg_latency_ms for rate in r]
    ratios = ", ".join(f"{x:.2f}x" for x in batching_ratios())
    return (
        f"{model[0]:.2f}, {model[1]:.2f} and {model[2]:.2f} ms at {r[0]}, {r[1]} and {r[2]}/s, "
        f"the runs measured {measured[0]:.2f}, {measured[1]:.2f} and {measured[2]:.2f} ({ratios})"
    )


@figure("h100_6.6_service_line")
def service_line() -> str:
    service, top = batch_service(), row(f"6.6 batching poisson {rates()[2]}/s")
    return (
        f"{service.fixed_ms:.2f} + {service.per_item_ms:.2f} × b ms, "
        f"{service(top.avg_batch_size):.2f} ms for a batch of {top.avg_batch_size:.1f}"
    )


@figure("h100_6.6_top_execution")
def top_execution() -> str:
    rate = rates()[2]
    top = row(f"6.6 batching poisson {rate}/s")
    return (
        f"an execution took {top.execution_ms:.2f} ms at {rate}/s, and the tail is long "
        f"(p99 {top.p99_ms:.0f} ms, median {top.p50_ms:.1f})"
    )


@figure("h100_6.6_md1")
def md1() -> str:
    rate = rates()[1]
    model = open_model(rate)["latency_ms"]
    measured = row(f"6.6 no batching poisson {rate}/s").avg_latency_ms
    load = math.floor(rate * busy_ms()) / 1000  # 0.9997 reads 0.999, not 1.000
    return f"{model:,.0f} ms where {measured:,.0f} were measured: at {load:.3f} utilisation"


@figure("h100_6.6_top_batch")
def top_batch() -> str:
    rate = rates()[2]
    return f"batches of {row(f'6.6 batching poisson {rate}/s').avg_batch_size:.1f} at {rate}/s"


@figure("h100_6.6_capacity_served")
def capacity_served() -> str:
    return f"{row(f'6.6 no batching poisson {rates()[2]}/s').throughput_infer_s:.0f}/s"


# --- ONNX Runtime's batch-size changes (labstack.batch_switch, on the same page)


@figure("h100_6_switch_seconds")
def switch_seconds() -> str:
    one = one_session()
    return (
        f"{one['mixed_mean_ms'] / 1000:.1f} s a batch, the same sizes grouped "
        f"{one['grouped_mean_ms']:.1f} ms"
    )


@figure("h100_6_switch_ms")
def switch_ms() -> str:
    one = one_session()
    return f"{one['mixed_mean_ms']:,.0f} ms a call against {one['grouped_mean_ms']:.1f} ms grouped"


@figure("h100_6_switch_labs")
def switch_labs() -> str:
    return f"{labs_sessions()['ratio']:.2f}x"


@figure("h100_6_switch_served")
def switch_served() -> str:
    """The check through Triton (labstack.batch_switch triton), kept with the day it ran."""
    served = page(*H100).json("results/batch_switch_triton.json")["rows"]
    return f"{next(iter(served.values()))['ratio']:.2f}x"


# --- one GPU or two: the utilisation law per GPU on the one-GPU page (the key's section)


def gpu_laws() -> list[pd.Series]:
    """GPU 0's law for 1, 2 and 4 instances at 8 in flight (servelab.triton.gpu_scaling)."""
    return [
        gpu_scaling.laws_per_gpu(row(name).to_dict(), {"GPU 0": n}, 1).loc["GPU 0"]
        for name, n in (("6.1 c8", 1), ("6.3 2 inst c8", 2), ("6.3 4 inst c8", 4))
    ]


def _three(values: list[float], fmt: str) -> str:
    return f"{format(values[0], fmt)}, {format(values[1], fmt)} and {format(values[2], fmt)}"


@figure("h100_6_gpu_laws")
def gpu_laws_figure() -> str:
    laws = gpu_laws()
    return (
        f"1, 2 and 4 instances on one GPU ran "
        f"{_three([law.executions_s for law in laws], '.1f')} executions/s with the GPU "
        f"{_three([law.util_pct for law in laws], '.1f')} % busy, so the GPU was busy "
        f"{_three([law.gpu_ms_per_execution for law in laws], '.3f')} ms of each execution of "
        f"{_three([law.execution_ms for law in laws], '.3f')} ms: a GPU share of "
        f"{_three([law.gpu_share_of_execution for law in laws], '.3g')}"
    )


@figure("h100_6_execution_growth")
def execution_growth() -> str:
    one, two, _ = (law.execution_ms for law in gpu_laws())
    return f"{one:.1f} to {two:.1f} ms from one instance to two"


@figure("h100_6_not_gpu")
def not_gpu() -> str:
    return f"{100 * (1 - max(law.gpu_share_of_execution for law in gpu_laws())):.0f} %"


@figure("h100_6_gpu_share_range")
def gpu_share_range() -> str:
    shares = [100 * law.gpu_share_of_execution for law in gpu_laws()]
    return f"{min(shares):.0f} to {max(shares):.0f} %"


@figure("h100_6.3_throughputs")
def throughputs_63_figure() -> str:
    x = throughputs_63()
    return f"{x[0]:.0f}, {x[1]:.0f}, {x[2]:.0f}/s at 1, 2, 4"


@figure("h100_6_my_client")
def my_client() -> str:
    """The optional asyncio client's throughput beside perf_analyzer's, as notebook 6 printed."""
    log = page(*H100).log("06_triton_benchmarks.log")
    found = re.search(r"my client, 1 in flight: (\d+)/s; perf_analyzer, 1 in flight: (\d+)/s", log)
    return f"{found[1]}/s from the asyncio client against perf_analyzer's {found[2]}/s"
