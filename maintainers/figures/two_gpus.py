"""Figures of notebook 6 on two GPUs (docs/results/h200x2/06_triton_benchmarks/): its summary
rows and claims, the decisions it printed, the `placement` part beside it, and Triton's log."""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime

import pandas as pd

from maintainers.figures.core import figure
from maintainers.figures.pages import page
from servelab.triton import gpu_scaling

H200X2 = ("h200x2", "06_triton_benchmarks")


def _page():
    return page(*H200X2)


def _row(run: str) -> pd.Series:
    return _page().summary("triton").loc[run]


def _claim(start: str, part: str = "triton") -> pd.Series:
    table = _page().csv(f"results/{part}/claims.csv").fillna("")
    return table[table["claim"].str.startswith(start)].iloc[0]


def _capacity() -> float:
    return _page().csv("results/triton/perf_6.6_capacity_c4.csv")["Inferences/Second"][0]


@figure("h200x2_6_day")
def day() -> str:
    return _page().day("triton")


@figure("h200x2_6_verdicts")
def verdicts() -> str:
    counts = Counter(_page().csv("results/triton/claims.csv")["verdict"])
    rest = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()) if v != "holds")
    return f"{counts['holds']} of {sum(counts.values())} claims hold" + (
        f", {rest}" if rest else ""
    )


@figure("h200x2_6.1_gpus")
def one_instance_gpus() -> str:
    said = [_claim(f"6.1: one instance leaves every GPU underused (GPU {i} of 2") for i in (0, 1)]
    return f"GPU 0 {said[0]['value']:.1f} % and GPU 1 {said[1]['value']:.1f} %"


@figure("h200x2_6.3_throughputs")
def throughputs_63() -> str:
    x = [_row(r).throughput_infer_s for r in ("6.1 c8", "6.3 2 inst c8", "6.3 4 inst c8")]
    return f"{x[0]:.0f}, {x[1]:.0f}, {x[2]:.0f}/s at 1, 2, 4 per GPU (1, 4 and 8 instances)"


@figure("h200x2_6.3_second_gpu")
def second_gpu() -> str:
    one, two = (_row(r).throughput_infer_s for r in ("6.3 all on GPU 0 c8", "6.3 2 inst c8"))
    said = _claim("6.3: a second GPU buys this model little")
    return (
        f"{one:.0f}/s all on GPU 0 against {two:.0f}/s spread, {said['value']:.2f}x "
        f"{said['interval']}: {said['verdict']} against at most 1.15x"
    )


def _laws() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The utilisation law per GPU: the four instances all on GPU 0, and two per GPU."""
    on_one = gpu_scaling.laws_per_gpu(_row("6.3 all on GPU 0 c8").to_dict(), {"GPU 0": 4}, 2)
    spread = {"GPU 0": 2, "GPU 1": 2}
    return on_one, gpu_scaling.laws_per_gpu(_row("6.3 2 inst c8").to_dict(), spread, 2)


@figure("h200x2_6.3_gpu_share")
def gpu_share() -> str:
    on_one, spread = _laws()
    g = on_one.loc["GPU 0"]
    shares = spread["gpu_share_of_execution"].tolist()
    return (
        f"GPU 0 busy {g.util_pct:.0f} % with all four, {g.gpu_ms_per_execution:.2f} ms of each "
        f"{g.execution_ms:.2f} ms execution ({g.gpu_share_of_execution:.2f}); spread, each GPU "
        f"{spread['util_pct'].min():.0f}–{spread['util_pct'].max():.0f} % busy, a share of "
        f"{min(shares):.2f}–{max(shares):.2f}"
    )


@figure("h200x2_6.4_two")
def onnx_two() -> str:
    c8, c16 = _row("6.4 onnx 2 inst c8"), _row("6.4 onnx 2 inst c16")
    return (
        f"{c8.throughput_infer_s:,.0f}/s at 8 in flight and {c16.throughput_infer_s:,.0f}/s at "
        f"16, GPU 0 and GPU 1 {c16.gpu0_util_pct:.0f} and {c16.gpu1_util_pct:.0f} % busy"
    )


@figure("h200x2_6.6_capacity")
def capacity() -> str:
    rates = [int(f * _capacity()) for f in (0.6, 1.0, 1.4)]
    return f"{_capacity():.0f}/s, so rates of {rates[0]}, {rates[1]} and {rates[2]}/s"


@figure("h200x2_6.6_gain")
def batching_gain() -> str:
    return f"{_claim('6.6: at 140% of capacity, batching')['value']:.0f}x"


@figure("h200x2_6_decisions")
def decisions() -> str:
    chose = _page().csv("results/triton/decisions.csv").set_index("step")["choice"]
    return (
        f'{chose["6.3g"]} per GPU to deploy (6.3g), the bottleneck `"{chose["6.3h"]}"` (6.3h), '
        f'`"{chose["6.6h"]}"` to deploy (6.6h)'
    )


def _placements() -> list[dict]:
    return _page().json("results/placement/placement.json")["placements"]


@figure("h200x2_placement_verdicts")
def placement_verdicts() -> str:
    said = _page().csv("results/placement/claims.csv")
    placed = said[said["claim"].str.contains("every instance runs on the GPU")]
    held = (placed["verdict"] == "holds").sum()
    wrong = placed[placed["verdict"] != "holds"]
    first = wrong.iloc[0]["claim"].split(", ", 1)[1].split(":")[0] if len(wrong) else ""
    return f"{held} of {len(placed)} hold" + (
        f"; after {first}: {wrong.iloc[0]['numbers']}" if len(wrong) else ""
    )


@figure("h200x2_placement_kept")
def placement_kept() -> str:
    """The instance of the last form whose process was already there in the form before."""
    before, last = _placements()[-2:]
    earlier = {i["pid"]: i for i in before["instances"]}
    kept = [i for i in last["instances"] if i["pid"] in earlier]
    return ", ".join(
        f"{i['instance']} (pid {i['pid']}, on {i['runs_on']}, {i['gpu_memory_mib']:.0f} MiB)"
        for i in kept
    )


def _reloads() -> list[tuple[float, float]]:
    """Per reload of food_classifier in notebook 6's Triton log: (seconds from the load's start
    to the new model's READY, seconds from that READY to the old model's end; negative where the
    old one ended first)."""
    stamp = re.compile(r"^I(\d{4} \d\d:\d\d:\d\d\.\d+) \d+ model_lifecycle\.cc:\d+\] \"(.*)\"$")
    found, start, ready = [], None, None
    for line in _page().log("service_triton_triton.log").splitlines():
        m = stamp.match(line)
        if not m or "food_classifier'" not in m[2] and "food_classifier:" not in m[2]:
            continue
        t = datetime.strptime(m[1], "%m%d %H:%M:%S.%f").timestamp()
        if m[2].startswith("loading:"):
            start, ready = t, None
        elif m[2].startswith("successfully loaded") and start is not None:
            ready = t
        elif m[2].startswith("successfully unloaded") and start is not None:
            found.append((ready - start if ready else float("nan"), t - ready if ready else -1))
            start = None
    return found


@figure("h200x2_6_old_outlived")
def old_outlived() -> str:
    reloads = _reloads()
    late = [after for _, after in reloads if after > 0]
    return (
        f"after {len(late)} of {len(reloads)} reloads, {min(late):.1f} to {max(late):.1f} s "
        "after the new model was READY"
    )


@figure("h200x2_6.3_prediction")
def prediction_63() -> str:
    """6.3's prediction, all on GPU 0 over spread (throughput), as the run measured it."""
    table = _page().csv("results/triton/predictions.csv").set_index("prediction")
    return table.loc["6.3 all on GPU 0 / spread over the GPUs (throughput, x)", "measured"]
