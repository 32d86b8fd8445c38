"""The queueing model against results known in closed form (servelab/queueing.py)."""

import math

import pytest

from servelab import queueing
from servelab.queueing import ServiceTime


def test_closed_loop_one_server_is_littles_law():
    """One server of S ms, N clients, no overhead: the server is always busy, X = 1/S, R = N*S."""
    for n in (1, 4, 16):
        r = queueing.closed_loop(n, service_ms=10.0)
        assert r["throughput_per_s"] == pytest.approx(100.0)
        assert r["latency_ms"] == pytest.approx(10.0 * n)
        assert r["queue_ms"] == pytest.approx(10.0 * (n - 1))


def test_closed_loop_overhead_and_servers():
    # a large overhead (think time) keeps the server idle: X ~ N / (S + Z)
    light = queueing.closed_loop(2, service_ms=1.0, overhead_ms=100.0)
    assert light["throughput_per_s"] == pytest.approx(2 / 101 * 1000, rel=0.01)
    # two servers double the saturated throughput
    two = queueing.closed_loop(32, service_ms=10.0, servers=2)
    assert two["throughput_per_s"] == pytest.approx(200.0, rel=0.01)


def test_batching_in_closed_loop_raises_throughput_to_the_batch_curve():
    s = ServiceTime(fixed_ms=8.0, per_item_ms=1.0)
    r = queueing.closed_loop_batching(16, s, max_batch=16)
    assert r["batch"] == pytest.approx(16)
    assert r["throughput_per_s"] == pytest.approx(16 / 24 * 1000)
    capped = queueing.closed_loop_batching(64, s, max_batch=16)
    assert capped["batch"] == pytest.approx(16) and capped["latency_ms"] == pytest.approx(
        64 / (16 / 24)
    )


def test_open_loop_md1_wait_and_saturation():
    # M/D/1: Wq = rho S / (2 (1 - rho)); rho = 0.5 with S = 10 ms at 50 req/s -> 5 ms
    r = queueing.open_loop(50.0, service_ms=10.0)
    assert r["queue_ms"] == pytest.approx(5.0) and r["latency_ms"] == pytest.approx(15.0)
    assert queueing.open_loop(50.0, service_ms=10.0, poisson=False)["queue_ms"] == 0.0
    assert math.isinf(queueing.open_loop(120.0, service_ms=10.0)["latency_ms"])
    # two servers at the same load per server wait less than one
    assert queueing.open_loop(100.0, 10.0, servers=2)["queue_ms"] < r["queue_ms"]


def test_batching_moves_the_saturation_point():
    s = ServiceTime.from_two_batches(1, 9.0, 16, 24.0)
    assert (s.fixed_ms, s.per_item_ms) == pytest.approx((8.0, 1.0))
    no_batch = queueing.saturation_rate(s)  # 1 / 9 ms = 111 req/s
    batched = queueing.saturation_rate(s, max_batch=16)  # 16 / 24 ms = 667 req/s
    assert no_batch == pytest.approx(1000 / 9) and batched == pytest.approx(16000 / 24)
    at = 300.0  # beyond one instance without batching, well within it with batching
    assert queueing.open_loop(at, s(1))["saturated"]
    r = queueing.open_loop_batching(at, s, max_batch=16, max_delay_ms=0.1)
    assert not r["saturated"] and 1 < r["batch"] < 16 and r["latency_ms"] < 100


def test_the_laws_and_the_models_miss_on_the_h100_reference():
    """4.6 on the H100 reference of 2026-11-23 (in git history: requests_onnx_*.csv): at 16 in
    flight 144.95 req/s, a mean latency of 109.15 ms, a mean `infer` of 5.136 ms (2.081 ms one
    request at a time); the model's line printed 30.9 ms. The lock was busy 74 % of the time
    while requests waited for it: they waited for something the model does not have."""
    laws = queueing.laws(144.95, 109.15, 5.136)
    assert laws["busy_U"] == pytest.approx(0.744, abs=0.001)
    # the 16 senders, as Little's law says
    assert laws["in_flight_N"] == pytest.approx(15.8, abs=0.05)
    said = queueing.model_miss(30.9, 109.15, laws["busy_U"], 2.081, 5.136)
    assert "(3.53x)" in said and "more than ±30% off" in said
    assert "busy only 74% of the time" in said and "grew 2.5x under load" in said
    assert "within ±30%" in queueing.model_miss(100, 120, 0.95, 2.0, 2.1)


def test_a_closed_loop_busy_81_percent_waited_for_the_interpreter_not_a_steep_queue():
    """Notebook 4's 4.6 on the H100 (2026-11-26: the lock busy 81 %, 9 requests waiting for it):
    the reading names what they waited for; a steep wait near saturation is an open loop's."""
    said = queueing.model_miss(28.9, 46.7, 0.81, 1.8, 2.39)
    assert "busy only 81% of the time (U = X·S) while requests waited" in said
    assert "the interpreter" in said and "steeply" not in said
    steep = queueing.model_miss(4.7, 25.5, 0.95, 2.2, 4.5, open_loop=True)
    assert "busy 95% of the time (U = X·S), where the model's wait grows steeply" in steep
    saturated = queueing.model_miss(100, 140, 1.0, 6.0, 8.5)  # one instance, 16 in flight
    assert "busy only" not in saturated and "grew 1.4x under load" in saturated
