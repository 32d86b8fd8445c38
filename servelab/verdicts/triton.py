"""Notebook 6's verdicts, each claim judged on your own runs, handed over as the notebook holds
them (perf.Run objects), with your predictions (claims.Prediction) beside them: per GPU, each GPU
on its own, so "every GPU" means each of them; one call per step's claims, in the order the
verdict cells print them. The notebook names the step (`step`, "6.1"): its number heads each
claim in claims.csv.

Introduced in notebook 6.
"""

from __future__ import annotations

import os
import re

import requests

from servelab import claims
from servelab.claims import Prediction
from servelab.exercises import step_needs
from servelab.paths import TEST_IMAGES
from servelab.perf.output import DELAYED_LIMIT_PCT
from servelab.triton import gpu_scaling, triton_config


def busiest_gpu_pct(row: dict) -> float | None:
    """The highest per-GPU utilisation of a run's row (None without GPU readings)."""
    values = [
        v for k, v in row.items() if k.startswith("gpu") and k.endswith("_util_pct") and v == v
    ]
    return max(values) if values else None


def gpu_util_columns(row: dict, n_gpus: int) -> list[str]:
    """The per-GPU utilisation columns a run's row should have on a server with n_gpus GPUs
    (gpu0_util_pct, gpu1_util_pct, ...), in GPU order; ValueError when the row lacks one (the
    metrics did not report that GPU during the run)."""
    columns = [f"gpu{i}_util_pct" for i in range(n_gpus)]
    missing = [c for c in columns if c not in row or row[c] != row[c]]
    if missing:
        raise ValueError(f"no {', '.join(missing)} in this run's row: Triton did not report it")
    return columns


def claim_each_gpu(check, claim: str, run, n_gpus: int, threshold: float) -> list[str]:
    """Decide a claim about utilisation on each GPU of the server on its own (check is
    claims.at_least or claims.at_most, run a perf run whose row has gpuN_util_pct), so "every
    GPU" means each of them, however many there are; on a server without GPU (or whose metrics
    do not report one) the claim is not checkable, and says why."""
    if n_gpus <= 0:
        cpu = run.row.get("cpu_util_pct")
        seen = (
            f"; the CPU (all cores) was {cpu:.0f}% busy" if cpu == cpu and cpu is not None else ""
        )
        return [claims.not_checkable(claim, f"this server has no GPU{seen}")]
    try:
        columns = gpu_util_columns(run.row, n_gpus)
    except ValueError as exc:
        return [claims.not_checkable(claim, str(exc))]
    return [
        check(f"{claim} (GPU {i} of {n_gpus}, mean %)", run.measured(column), threshold)
        for i, column in enumerate(columns)
    ]


# ---------------------------------------------------------------- the steps' claims


def queue_grows_with_load(step: str, c8, c16, n_gpus: int, predicted: Prediction) -> None:
    """6.1: the queue at 16 in flight (run c16) against 8 (c8): about linear, 1.4 to 3.2 times,
    your prediction beside it; one instance leaves every GPU underused."""
    q8 = c8.measured("server_queue_ms")
    q16 = c16.measured("server_queue_ms")
    claims.compare_prediction(predicted, q16)
    claims.between(
        f"{step}: queue delay grows about linearly with what is in flight (queue c16 / c8)",
        q16 / q8,
        1.4,
        3.2,
    )
    claim_each_gpu(
        claims.at_most, f"{step}: one instance leaves every GPU underused", c16, n_gpus, 70
    )


def a_batch_costs_less(step: str, b16, c1, predicted: Prediction) -> None:
    """6.2: one execution of 16 images (run b16) against one of a single image (c1), your
    prediction beside it."""
    ratio = b16.measured("execution_ms") / c1.measured("execution_ms")
    claims.compare_prediction(predicted, ratio)
    claims.at_most(
        f"{step}: a batch of 16 costs less than 16 images one by one (execution time, x)", ratio, 16
    )


def more_instances(step: str, one, two, four, n_gpus: int) -> None:
    """6.3: what 2 and 4 instances per device (the runs `two`, `four`) serve against `one`; on a
    GPU node, more than one, and every GPU at work; on a CPU, little more with 4."""
    t1, t2, t4 = (run.throughput for run in (one, two, four))
    claims.at_least(
        f"{step}: two instances per device serve at least 80% of one's throughput", t2 / t1, 0.8
    )
    if not n_gpus:
        claims.at_most(
            f"{step}: four instances on {os.cpu_count()} cores add little over the better of one "
            "and two",
            t4 / max(t1, t2, key=lambda m: m.value),
            1.15,
        )
        return
    claims.at_least(
        f"{step}: on a GPU node, two instances per GPU serve more than one", t2 / t1, 1.0
    )
    every = f"{step}: with 4 instances on it, every GPU works"
    claim_each_gpu(claims.at_least, every, four, n_gpus, 10)


def onnx_serves_faster(step: str, onnx_c1, python_c1, c8, c16, n_gpus: int, provider: str) -> None:
    """6.4: the ONNX model against the Python-backend one at 1 in flight; requests still queue
    with two instances at 16 in flight (c16 against c8); every GPU busy more than half the time
    where the server ran the model on the GPU (`provider`, triton_stats.onnx_provider)."""
    speedup = onnx_c1.throughput / python_c1.throughput
    claims.at_least(
        f"{step}: the ONNX model serves faster than the Python-backend model at c1", speedup, 1.0
    )
    claims.at_least(
        f"{step}: with 2 instances per device, requests still queue at 16 in flight "
        "(queue c16 / c8)",
        c16.measured("server_queue_ms") / c8.measured("server_queue_ms"),
        1.0,
    )
    served = triton_config.served_config("food_classifier_onnx", when=f"{step} backend")
    ran = (
        "Triton's onnxruntime backend"
        if served.get("backend") == "onnxruntime"
        else "local mode's stand-in (a Python-backend model running ONNX Runtime)"
    )
    print(f"the server ran food_classifier_onnx on {ran}, with {provider}")
    busy = f"{step}: every GPU is busy more than half the time"
    if provider == "CUDAExecutionProvider" or not n_gpus:
        claim_each_gpu(claims.at_least, busy, c16, n_gpus, 50)
    else:
        claims.not_checkable(busy, f"the server ran the ONNX model with {provider}, not on a GPU")


def poisson_queues_more(step: str, poisson, constant) -> None:
    """6.6: at the same mean rate, Poisson arrivals against evenly spaced ones; both runs the
    open-loop load they claim (few requests sent late)."""
    queues = poisson.measured("server_queue_ms") / constant.measured("server_queue_ms")
    claims.at_least(
        f"{step}: Poisson arrivals queue more than evenly spaced ones at the same mean rate",
        queues,
        1,
    )
    claims.at_most(
        f"{step}: both runs were the open-loop load they claim (% of requests sent late)",
        max(poisson.row["delayed_pct"], constant.row["delayed_pct"]),
        DELAYED_LIMIT_PCT,
    )


def batches_form_under_load(step: str, top, light, sweep, predicted: Prediction) -> None:
    """6.6's sweep: batches of more than one at the top rate (`top`, with batching), none to
    speak of at 60 % (`light`); every rate run the open-loop load it claims; your prediction of
    the top rate's latency beside it."""
    claims.at_least(
        f"{step}: with dynamic batching the model ran batches of more than one request (top rate)",
        top.row["avg_batch_size"],
        1.05,
    )
    claims.at_most(
        f"{step}: every rate run was the open-loop load it claims (% of requests sent late)",
        float(sweep["delayed_pct"].max()),
        DELAYED_LIMIT_PCT,
    )
    claims.compare_prediction(predicted, top.measured("avg_latency_ms"))
    claims.at_most(
        f"{step}: at 60% load requests rarely wait, so batches stay small (mean batch)",
        light.row["avg_batch_size"],
        1.5,
    )


def batching_keeps_latency_down(
    step: str, with_b, without, rate: float, busy_ms: float, lift: dict
) -> None:
    """6.6 at 140 % of capacity (`rate`): mean latency without batching against with it, judged
    only where the run shows the lesson's premises: the model's cores are its own (a GPU runs it,
    or 8 cores and more), batches lift capacity (lift: {"b8_x": a batch of 8 / one image,
    "capacity_x": the capacity with batches of 8 / without, "provider": where ONNX ran}), and the
    run without batching did overload the instance."""
    premises = {
        f"{os.cpu_count()} cores: perf_analyzer and the batches share the model's cores": (
            lift["provider"] == "CUDAExecutionProvider" or (os.cpu_count() or 1) >= 8
        ),
        f"a batch of 8 costs {lift['b8_x']:.1f}x one image: "
        f"batching lifts capacity {lift['capacity_x']:.1f}x": lift["capacity_x"] >= 1.6,
        "without batching the instance kept up: this run did not overload it": (
            without.row["throughput_infer_s"] < 0.9 * rate
            or without.row["avg_latency_ms"] > 5 * busy_ms
        ),
    }
    claims.given(
        premises,
        claims.at_least,
        f"{step}: at 140% of capacity, batching keeps mean latency far below none",
        without.measured("avg_latency_ms") / with_b.measured("avg_latency_ms"),
        2,
    )


def second_gpu_buys(step: str, on_one, on_two, n_gpus: int) -> str:
    """The claim of what a second GPU buys this model: the same instances all on GPU 0 (run
    `on_one`, None where it was not run) against spread over two GPUs (run `on_two`), at the same
    load. Where one GPU's
    share of an execution is small, the instances' own work (the Python backend's stubs, on the
    CPU's cores) is the limit, and the second GPU adds little; the claim says so with the
    numbers why: GPU 0's utilisation with all of them, and its share of an execution."""
    claim = (
        f"{step}: a second GPU buys this model little: the same instances serve at most 1.15x "
        "as much over two GPUs as on one (throughput, two / one)"
    )
    if n_gpus < 2 or on_one is None or on_two is None:
        return claims.not_checkable(claim, f"this server has {n_gpus} GPU(s): it needs two")
    one = on_one
    placed = {"GPU 0": int(one.row.get("instances") or 1)}
    laws = gpu_scaling.laws_per_gpu(one.row, placed, n_gpus)
    return claims.at_most(
        claim,
        on_two.throughput / one.throughput,
        1.15,
        numbers={
            "GPU 0 busy with them all (%)": float(laws.loc["GPU 0", "util_pct"]),
            "GPU 0's share of an execution": float(laws.loc["GPU 0", "gpu_share_of_execution"]),
            "instances busy (busy_U)": float(one.row.get("busy_U", float("nan"))),
        },
        note="the stubs' CPU work, not the GPU, limits the Python-backend model",
    )


def flask_names_the_same_class(step: str, flask_url: str, triton_url: str) -> str:
    """6.5: a photo uploaded to the Flask page (pre-processing in Flask, the ONNX model on
    Triton) gets the class the Python-backend model gives the same photo."""
    photo = sorted(TEST_IMAGES.glob("*.jpg"))[0]
    with open(photo, "rb") as f:
        page = requests.post(f"{flask_url}/predict", files={"file": (photo.name, f)}, timeout=60)
    shown = re.search(r'class="label">([^<]+)<', page.text)
    flask_label = shown[1] if shown else None
    direct, _ = step_needs.infer_one(triton_url, "food_classifier", photo)
    print(
        f"Flask page (ONNX model, pre/post-processing in Flask): {flask_label}, {page.status_code}"
    )
    return claims.fact(
        f"{step}: Flask with the ONNX model shows the same class as the Python-backend model",
        page.status_code == 200 and flask_label == direct,
        {"flask_onnx": flask_label, "python_backend": direct},
    )
