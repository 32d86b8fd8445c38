"""Figures of notebook 9 (Ray Serve) on its CPU page (docs/results/cpu/09_ray_serve_cluster/), and
of 9.6's three-way comparison on the 2-core CPU (docs/results/cpu/three_way/) and on one H200
(docs/results/h200/three_way/: its figures from three_way.json, what the page's report computed
from its files)."""

from __future__ import annotations

import pandas as pd

from maintainers.figures.core import figure
from maintainers.figures.pages import page

CPU = ("cpu", "09_ray_serve_cluster")
THREE_WAY = ("cpu", "three_way")
H200_THREE_WAY = ("h200", "three_way")


def rows() -> pd.DataFrame:
    return page(*CPU).csv("summary.csv", index="run")


def claim(start: str) -> pd.Series:
    claims = page(*CPU).csv("claims.csv", index="claim")
    return claims.loc[next(c for c in claims.index if c.startswith(start))]


def numbers(start: str) -> dict[str, str]:
    """A claim's `numbers` column ("a = 1, b = 2") as {a: "1", b: "2"}."""
    said = str(claim(start)["numbers"])
    return dict(part.split(" = ", 1) for part in said.split(", ") if " = " in part)


@figure("cpu_9_day")
def day() -> str:
    return page(*CPU).json("run.json")["before"]["time"][:10]


@figure("cpu_9_minutes")
def minutes() -> str:
    return f"{page(*CPU).json('run.json')['notebook_s'] / 60:.1f} min"


@figure("cpu_9_load")
def load() -> str:
    run = page(*CPU).json("run.json")
    before, after = (run[k]["load_average_1_5_15"][0] for k in ("before", "after"))
    return f"load average {before:g} at the start, {after:g} at the end"


@figure("cpu_9.1_sequential")
def sequential_91() -> str:
    one = rows().loc["9.1 sequential"]
    return (
        f"{one.median_ms:.1f} ms (median), the model's `infer` {one.infer_median_ms:.1f} ms of it"
    )


@figure("cpu_9.1_capacity")
def capacity_91() -> str:
    one, two = (rows().loc[f"9.1 capacity, {n} at once"] for n in (1, 2))
    return (
        f"{one.throughput_rps:.2f}/s taking 1 at once (`busy_U` {one.lock_busy_U:.2f}) and "
        f"{two.throughput_rps:.2f}/s taking 2 ({two.lock_busy_U:.2f})"
    )


@figure("cpu_9.2_replicas")
def replicas_92() -> str:
    runs = [rows().loc[f"9.2 {n} replicas"] for n in (1, 2, 4)]
    served = ", ".join(f"{r.throughput_rps:.2f}" for r in runs[:-1])
    p95 = ", ".join(f"{r.p95_ms:,.0f}" for r in runs[:-1])
    return (
        f"{served} and {runs[-1].throughput_rps:.2f} requests/s (p95 {p95} and "
        f"{runs[-1].p95_ms:,.0f} ms) at {runs[0].request_rate:.1f}/s offered"
    )


@figure("cpu_9.2_four_over_two")
def four_over_two() -> str:
    return f"{float(claim('9.2: four replicas')['value']):.2f}"


def _step() -> tuple[float, float, float, float]:
    """(step up, step down, a second replica STARTING, two RUNNING), seconds into 9.3's run."""
    windows = page(*CPU).csv("autoscaling_windows.csv")  # one row per second, t_s its end
    base = windows.offered_per_s.head(10).median()
    ahead = windows.offered_per_s[::-1].rolling(3).min()[::-1]  # the least of the next three
    up = float(windows.t_s[ahead > 2 * base].iloc[0]) - 1  # the first second of the step
    down = up + float(numbers("9.3: p95 came back")["step_s"])
    replicas = page(*CPU).csv("autoscaling_replicas.csv")
    starting = float(replicas.t_s[replicas.STARTING > 0].iloc[0])
    running = float(replicas.t_s[replicas.RUNNING >= 2].iloc[0])
    return up, down, starting, running


@figure("cpu_9.3_start")
def start_93() -> str:
    up, down, starting, running = _step()
    return (
        f"a second replica STARTING {starting - up:.1f} s after the step up, running "
        f"{running - starting:.1f} s later, {running - down:.1f} s after the step had ended"
    )


@figure("cpu_9.3_p95")
def p95_93() -> str:
    windows = page(*CPU).csv("autoscaling_windows.csv")
    budget = float(numbers("9.3: p95 came back")["budget_ms"])
    never = float(claim("9.3: p95 came back")["value"]) == float("inf")
    when = "never while the step lasted" if never else "within the step"
    return f"{when} (p95 up to {windows.p95_ms.max() / 1000:.1f} s, budget {budget:.0f} ms)"


@figure("cpu_9.4_crash")
def crash_94() -> str:
    failed = numbers("9.4: every failed")
    sent = int(rows().loc["9.4 crash"].requests)
    slowest = float(numbers("9.4: no request hung")["slowest ms"]) / 1000
    again = numbers("9.4: Ray replaced")["seconds after the kill"]
    return (
        f"{failed['failed']} of {sent} requests failed, each an HTTP "
        f"{failed['statuses'].strip('{}').split(':')[0]}; the slowest answer took {slowest:.1f} s; "
        f"two replicas ran again {again} s after the kill"
    )


@figure("cpu_9.5_sequential")
def sequential_95() -> str:
    ray, triton = (rows().loc[f"9.5 {w} sequential"] for w in ("ray", "triton"))
    return f"{ray.median_ms:.1f} ms against Triton's {triton.median_ms:.1f} ms (median)"


@figure("cpu_9.5_rate")
def rate_95() -> str:
    triton = rows().loc[next(r for r in rows().index if r.startswith("9.5 triton ") and "/s" in r)]
    ray = rows().loc["9.2 2 replicas"]
    return f"p95 {triton.p95_ms:.1f} ms against {ray.p95_ms:,.0f} ms for Ray's two replicas"


@figure("cpu_9.6_one_at_a_time")
def one_at_a_time_96() -> str:
    """Where one request's mean time goes, one at a time, on the three-way page."""
    ways = page(*THREE_WAY).csv("sequential.csv", index="way")
    said = []
    for way, name in (("fastapi", "FastAPI"), ("triton_onnx", "Triton (ONNX)"), ("ray", "Ray")):
        w = ways.loc[way]
        said.append(f"{name} {w.model_ms:.1f} of {w.latency_mean_ms:.1f} ms")
    return ", ".join(said)


def _h200() -> dict:
    return page(*H200_THREE_WAY).json("three_way.json")


def _rate(x: float) -> str:
    return f"{x:,.0f}/s"


def _bracket(g: dict) -> str:
    if g["lo"] is None:
        return f"{g['ratio']:.2f} (at most {g['hi']:.2f})"
    hi = "open" if g["hi"] is None else f"{g['hi']:.2f}"
    return f"{g['ratio']:.2f} (between {g['lo']:.2f} and {hi})"


@figure("h200_9.6_day")
def h200_day() -> str:
    return _h200()["setup"]["machine"]["started"][:10]


@figure("h200_9.6_held")
def h200_held() -> str:
    """The highest rate each way held within the objective; a way whose next step measured the
    load generator is given as "at least"."""
    at = _h200()["at_objective"]

    def held(way: str) -> str:
        o = at[way]
        least = "at least " if o["next_verdict"] == "generator late" else ""
        return f"{least}{_rate(o['held_rps'])}"

    ray = (
        f"Ray Serve {held('ray')} with `@serve.batch` or without"
        if at["ray"]["held_rps"] == at["ray_batch"]["held_rps"]
        else f"Ray Serve {held('ray')}, with `@serve.batch` {held('ray_batch')}"
    )
    return (
        f"Triton with notebook 7's best configuration {held('triton')}, Triton's ONNX Runtime "
        f"model {held('triton_onnx_batch')} with dynamic batching and {held('triton_onnx')} "
        f"without, FastAPI {held('fastapi')}, {ray}"
    )


@figure("h200_9.6_objective")
def h200_objective() -> str:
    return f"{_h200()['setup']['setting']['objective_ms']:g} ms"


@figure("h200_9.6_batching")
def h200_batching() -> str:
    gain = _h200()["batch_gain"]
    return (
        f"{_bracket(gain['triton_onnx_batch'])} for Triton's ONNX Runtime model and "
        f"{_bracket(gain['ray_batch'])} for Ray Serve"
    )


@figure("h200_9.6_fixed")
def h200_fixed() -> str:
    f = _h200()
    p95 = {r["way"]: r["p95_ms"] for r in f["fixed_pooled"]}
    return (
        f"Triton {p95['triton']:.1f} ms, its ONNX Runtime model {p95['triton_onnx']:.1f} "
        f"({p95['triton_onnx_batch']:.1f} with dynamic batching), FastAPI {p95['fastapi']:.1f}, "
        f"Ray Serve {p95['ray']:,.0f} ({p95['ray_batch']:,.0f} with `@serve.batch`), at "
        f"{f['setup']['setting']['fixed_rps']:g}/s"
    )


@figure("h200_9.6_fastapi_over_triton")
def h200_fastapi_over_triton() -> str:
    r = _h200()["latency_ratios"]["fastapi / triton"]["p95"]
    return f"{r['ratio']:.2f} [{r['lo']:.2f}, {r['hi']:.2f}]"


@figure("h200_9.6_ray_fixed")
def h200_ray_fixed() -> str:
    """What Ray served per fixed-rate round, of what was offered, and @serve.batch's batches."""
    rounds = page(*H200_THREE_WAY).csv("fixed.csv")

    def span(way: str) -> str:
        served = rounds[rounds.way == way].served_rps
        return f"{served.min():.0f}–{served.max():.0f}/s"

    offered = rounds.offered_rps
    batch = rounds[rounds.way == "ray_batch"].mean_batch.mean()
    return (
        f"{span('ray')} without `@serve.batch` and {span('ray_batch')} with it, of "
        f"{offered.min():.0f}–{offered.max():.0f}/s offered, in batches of {batch:.2f} on average"
    )


@figure("h200_9.6_best_line")
def h200_best_line() -> str:
    line = _h200()["perf"]["best_line"]
    return f"{line['infer_s']:,.0f} infer/s, p95 {line['p95_ms']:.1f} ms"


@figure("h200_9.6_one_at_a_time")
def h200_one_at_a_time() -> str:
    ways = {r["way"]: r for r in _h200()["sequential"]}
    said = []
    for way, name in (
        ("triton", "Triton (notebook 7's)"),
        ("fastapi", "FastAPI"),
        ("triton_onnx", "Triton (ONNX)"),
        ("ray", "Ray"),
    ):
        w = ways[way]
        said.append(f"{name} {w['model_ms']:.1f} of {w['latency_mean_ms']:.1f} ms")
    return ", ".join(said)


@figure("h200_9.6_generator")
def h200_generator() -> str:
    """Why Triton's ladder stopped at the load generator: its CPU per request (at the fixed rate)
    at the rate it could not offer, in cores of the machine."""
    f = _h200()
    per_request = f["generator_cpu_ms_per_request"]["triton"]
    rate = f["at_objective"]["triton"]["next_rps"]
    return (
        f"{per_request:.2f} ms of CPU per request (at the fixed rate): at {_rate(rate)} about "
        f"{per_request * rate / 1000:.1f} of the {f['setup']['machine']['cores']} cores"
    )


@figure("h200_9.6_batching_cost")
def h200_batching_cost() -> str:
    """Dynamic batching's cost in p95 at the low fixed rate, Triton's ONNX model against none."""
    r = _h200()["latency_ratios"]["triton_onnx_batch / triton_onnx"]["p95"]
    return f"{r['ratio']:.2f}x [{r['lo']:.2f}, {r['hi']:.2f}]"
