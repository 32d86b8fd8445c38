"""A queueing model beside the measurements: from the service time Triton reports, predict what
perf_analyzer should measure, before it does.

Introduced in notebook 4.

The server is one queueing station: the model's instances (`servers`), each running one
execution at a time, taking `service(b)` milliseconds for a batch of b requests. Every request
also spends `overhead_ms` outside that station (client, network, HTTP handling, the server's
own bookkeeping): a pure delay, no queue.

Closed loop (perf_analyzer --concurrency-range N: N requests always in flight) is solved by
mean-value analysis (MVA): exact for one server; several servers by Seidmann's approximation
(one server m times as fast, plus the remaining service time as a delay).

Open loop (--request-rate-range R: requests arrive at rate R whatever happens) uses the M/D/c
queue: Poisson arrivals, a constant service time, c servers; mean wait by the Allen-Cunneen
approximation (half of the M/M/c wait, exact for c = 1). Evenly spaced arrivals (constant rate)
wait for nothing until the station saturates.

Dynamic batching: an instance runs what is waiting as one batch, so the service time grows
slowly with the batch (`ServiceTime.fixed_ms + per_item_ms * b`) and the capacity grows with the
batch size: servers * B / service(B) requests per second at the largest batch B.

Every function returns milliseconds and requests per second; the model knows nothing about
the GPU, the cores or Python: where a measurement parts from it, the text of the notebook says why.

Two laws hold for any measured run, whatever the model assumes, and the lab shows them beside
every measured row: the utilisation law U = X·S (throughput × service time = how many servers are
busy on average) and Little's law N = X·R (throughput × latency = how many requests are in flight
on average). laws() computes both, for every row of the lab; model_miss() says where the
model's line misses a measurement by more than ±30 % and which of its assumptions the run broke.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ServiceTime:
    """Time of one execution of a batch of b requests: fixed_ms + per_item_ms * b."""

    fixed_ms: float
    per_item_ms: float = 0.0

    def __call__(self, batch: float) -> float:
        return self.fixed_ms + self.per_item_ms * batch

    @classmethod
    def from_two_batches(cls, b1: float, ms1: float, b2: float, ms2: float) -> ServiceTime:
        """The line through two measured executions (e.g. batch 1 and batch 16 of notebook 6)."""
        per_item = max(0.0, (ms2 - ms1) / (b2 - b1))
        return cls(fixed_ms=max(0.0, ms1 - per_item * b1), per_item_ms=per_item)


def closed_loop(
    clients: int, service_ms: float, overhead_ms: float = 0.0, servers: int = 1
) -> dict:
    """Throughput and latency with `clients` requests always in flight, no batching (MVA)."""
    per_server = service_ms / servers  # Seidmann: m servers as one server m times as fast ...
    extra = service_ms - per_server  # ... plus the rest of the service time as a delay
    queue_len = 0.0
    throughput = latency = 0.0
    for n in range(1, clients + 1):
        at_station = per_server * (1 + queue_len)
        latency = at_station + extra + overhead_ms
        throughput = n / latency  # requests per ms
        queue_len = throughput * at_station
    return {
        "clients": clients,
        "throughput_per_s": throughput * 1000,
        "latency_ms": latency,
        "queue_ms": max(0.0, latency - service_ms - overhead_ms),
    }


def closed_loop_batching(
    clients: int, service: ServiceTime, max_batch: int, overhead_ms: float = 0.0, servers: int = 1
) -> dict:
    """The same with dynamic batching: each instance runs what waits as one batch, up to max_batch.

    Fixed point: of the N clients, throughput x overhead are outside the server; the rest wait or
    run, spread over the instances, so a batch holds b = clamp(waiting / servers, 1, max_batch)
    and throughput = servers * b / service(b).
    """
    batch = 1.0
    for _ in range(200):
        throughput = servers * batch / service(batch)  # per ms
        waiting = max(1.0, clients - throughput * overhead_ms)
        new_batch = min(float(max_batch), max(1.0, waiting / servers))
        if abs(new_batch - batch) < 1e-6:
            break
        batch = 0.5 * batch + 0.5 * new_batch
    throughput = servers * batch / service(batch)
    latency = clients / throughput
    return {
        "clients": clients,
        "throughput_per_s": throughput * 1000,
        "latency_ms": latency,
        "batch": batch,
        "queue_ms": max(0.0, latency - service(batch) - overhead_ms),
    }


def _erlang_c(servers: int, load: float) -> float:
    """Probability that an arrival waits in an M/M/c queue (load = rate x service, in servers)."""
    if load >= servers:
        return 1.0
    term, total = 1.0, 1.0
    for k in range(1, servers):
        term *= load / k
        total += term
    last = term * load / servers / (1 - load / servers)
    return last / (total + last)


def _open(rate_per_s: float, utilisation: float, latency_ms: float, queue_ms: float, **more):
    """An open-loop model's answer; saturated where its mean latency is unbounded."""
    saturated = math.isinf(latency_ms)
    return {
        "rate_per_s": rate_per_s,
        "utilisation": utilisation,
        "saturated": saturated,
        "latency_ms": latency_ms,
        **more,
        "queue_ms": queue_ms,
    }


def open_loop(
    rate_per_s: float,
    service_ms: float,
    overhead_ms: float = 0.0,
    servers: int = 1,
    poisson: bool = True,
) -> dict:
    """Mean latency at a fixed arrival rate, no batching (M/D/c; D/D/c for evenly spaced
    arrivals)."""
    rate = rate_per_s / 1000.0  # per ms
    load = rate * service_ms  # busy servers, on average
    utilisation = load / servers
    if utilisation >= 1.0:
        return _open(rate_per_s, utilisation, math.inf, math.inf)
    wait = 0.0
    if poisson:
        mmc_wait = _erlang_c(servers, load) * service_ms / (servers - load)
        wait = mmc_wait / 2.0  # constant service: half the exponential wait
    return _open(rate_per_s, utilisation, service_ms + wait + overhead_ms, wait)


def open_loop_batching(
    rate_per_s: float,
    service: ServiceTime,
    max_batch: int,
    max_delay_ms: float,
    overhead_ms: float = 0.0,
    servers: int = 1,
) -> dict:
    """Mean latency at a fixed Poisson rate with dynamic batching.

    At light load batching rarely happens and the station behaves as without it (M/D/c at
    service(1)). Under heavy load an instance is never idle: it runs back to back, each batch
    taking what arrived during the one before, so b = rate x service(b) / servers, i.e.
    b = rate x fixed / (servers - rate x per_item); a request then waits on average half of the
    running batch, and at most max_delay_ms for company. The smaller of the two latencies is the
    model; past b = max_batch the station saturates.
    """
    rate = rate_per_s / 1000.0
    spare = servers - rate * service.per_item_ms
    busy_batch = rate * service.fixed_ms / spare if spare > 0 else math.inf
    if busy_batch > max_batch:
        utilisation = math.inf if spare <= 0 else busy_batch / max_batch
        return _open(rate_per_s, utilisation, math.inf, math.inf, batch=float(max_batch))
    batch = max(1.0, busy_batch)
    busy = 1.5 * service(batch) + 0.5 * min(max_delay_ms, service(batch)) + overhead_ms
    light = open_loop(rate_per_s, service(1), overhead_ms, servers)
    if light["latency_ms"] <= busy:
        return {**light, "batch": 1.0}
    utilisation = rate * service(batch) / (servers * batch)
    return _open(rate_per_s, utilisation, busy, busy - service(batch) - overhead_ms, batch=batch)


def saturation_rate(service: ServiceTime, servers: int = 1, max_batch: int = 1) -> float:
    """Requests per second one configuration can serve at most: servers x B / service(B)."""
    return servers * max_batch / service(max_batch) * 1000.0


def laws(
    throughput_per_s: float,
    latency_ms: float,
    execution_ms: float,
    queue_ms: float = 0.0,
    batch: float = 1.0,
    instances: int = 1,
    client_batch: int = 1,
) -> dict:
    """The utilisation law and Little's law for one measured run (means, not medians): the lab's
    one home for them, used by every row that shows them (loadgen, perf, hardware).

    throughput_per_s counts images (perf_analyzer's inferences/s); a request carries client_batch
    of them, an execution `batch` of them on average (dynamic batching or client batches; at
    least 1), and takes execution_ms. Per second there are throughput / batch executions, and
    busy_U = executions/s × execution time / instances (U = X·S per instance: the share of time
    each instance, or lock, ran something); in_flight_N = requests/s × mean latency (N = X·R:
    requests in flight on average); waiting_N = requests/s × mean queue time (those waiting).
    Plain arithmetic: pandas columns work as well as numbers."""
    requests_per_s = throughput_per_s / client_batch
    return {
        "instances": instances,
        "busy_U": throughput_per_s / batch * execution_ms / 1000.0 / instances,
        "in_flight_N": requests_per_s * latency_ms / 1000.0,
        "waiting_N": requests_per_s * queue_ms / 1000.0,
    }


def laws_line(row: dict) -> str:
    """The two laws of a row (with laws()'s columns) in words, as perf.run_line prints them."""
    return (
        f"laws: U = X·S = {row['busy_U']:.2f} (each of {row['instances']} instance(s) busy "
        f"{row['busy_U']:.0%} of the time, {row['execution_ms']:.3g} ms per execution); "
        f"N = X·R = {row['in_flight_N']:.1f} requests in flight, "
        f"{row['waiting_N']:.1f} of them waiting in Triton's queue"
    )


def model_miss(
    model_ms: float,
    measured_ms: float,
    utilisation: float,
    service_alone_ms: float,
    service_loaded_ms: float,
    servers: int = 1,
    tolerance: float = 0.3,
    open_loop: bool = False,
    tail: float | None = None,
) -> str:
    """One sentence on the model's line beside a measurement: within ±tolerance it holds; further
    off, which assumption the run broke, read from the laws: a station (lock, instance) busy less
    than 80 % of the time while requests waited means they waited for something the model does
    not have (the threadpool, the interpreter, shared cores); a service time that grew under load
    breaks the constant service time.

    open_loop: arrivals at a fixed rate (notebook 6's rate runs), where requests wait at a station
    not always busy by design (the model counts that wait), so the first reason does not apply;
    there the usual culprit is variance: `tail` (p99 / median latency) far above a constant
    service time's means a few requests took far longer than the rest, and everything arriving
    meanwhile waited behind them. At or above 80 % utilisation the model's wait is steep."""
    ratio = measured_ms / model_ms if model_ms else math.inf
    if math.isinf(model_ms):
        return (
            f"the model says this load saturates the station (its mean latency is unbounded), the "
            f"run measured {measured_ms:.3g} ms: as long as the run lasted, the queue grew."
        )
    said = f"the model says {model_ms:.3g} ms, the run measured {measured_ms:.3g} ms ({ratio:.2f}x)"
    if abs(ratio - 1) <= tolerance:
        return f"{said}: within ±{tolerance:.0%}, the model holds here."
    broken = _broken(ratio, utilisation / servers, open_loop, tail)
    broken += _grew(service_alone_ms, service_loaded_ms, tolerance)
    if not broken:
        broken.append("the service time varies, where the model keeps it constant")
    return f"{said}: more than ±{tolerance:.0%} off, because " + "; and ".join(broken) + "."


def _broken(ratio: float, busy: float, open_loop: bool, tail: float | None) -> list[str]:
    """The assumptions of the model that the laws of a run say it broke (model_miss's reasons),
    the service time apart. Near saturation only an open loop's wait is steep (M/D/1); a closed
    loop's station busy well under all the time while requests waited had them wait elsewhere."""
    broken = []
    if open_loop and busy >= 0.8:
        broken.append(
            f"each station was busy {busy:.0%} of the time (U = X·S), where the model's wait grows "
            "steeply with small errors in its service time"
        )
    if open_loop and ratio > 1 and tail is not None and tail > 3:
        broken.append(
            f"the latency's p99 is {tail:.1f}x its median: a few requests took far longer than "
            "the rest (stalls of the server's threads, or of the cores it shares with "
            "perf_analyzer), and in an open loop every request that arrives meanwhile waits "
            "behind them; the model's service time never varies"
        )
    if busy < 0.9 and ratio > 1 and not open_loop:
        broken.append(
            f"its station was busy only {busy:.0%} of the time (U = X·S) while requests waited: "
            "a request ready to run takes a free station at once, so these waited for something "
            "the model does not have, the threads and the interpreter (or cores) they share"
        )
    return broken


def _grew(alone_ms: float, loaded_ms: float, tolerance: float) -> list[str]:
    """The service time that grew under load, where the model keeps it constant (or nothing)."""
    grew = loaded_ms / alone_ms if alone_ms else math.inf
    if grew <= 1 + tolerance:
        return []
    return [
        f"the service time grew {grew:.1f}x under load ({alone_ms:.3g} ms alone, "
        f"{loaded_ms:.3g} ms loaded), where the model keeps it constant"
    ]
