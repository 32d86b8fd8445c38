"""Notebook 7's library parts, on a CPU and without a server: the limit's table and its skipped
runtimes (compile needs compute capability 7.0), the transport decided on repeated runs, the
laws and served/limit of a run, the record the GPU reference's stability part reads, and the
config a best run is put back with (servelab.hardware, claims.choose, exercises on parameters)."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from servelab import claims, exercises, hardware, perf
from servelab.exercises import config_edits
from servelab.paths import REPO_ROOT, STAGING
from servelab.perf import output as perf_output
from servelab.serving import raw_limit, tuned_runtime
from servelab.triton import config_text, triton_stats

REFERENCE = REPO_ROOT / "docs" / "results" / "h100" / "07_how_close_to_the_hardware"
RAW = {
    "device_name": "NVIDIA H100 80GB HBM3",
    "compute_capability": "9.0",
    "rows": [
        {"path": "eager fp32", "batch": 1, "images_per_s": 150.0},
        {"path": "eager fp32", "batch": 64, "images_per_s": 11500.0},
        {"path": raw_limit.COMPILED, "batch": 1, "images_per_s": 2000.0},
        {"path": raw_limit.COMPILED, "batch": 64, "images_per_s": 44000.0},
    ],
    "per_runtime": {
        "eager fp32": {"path": "eager fp32", "batch": 64, "images_per_s": 11500.0},
        raw_limit.COMPILED: {"path": raw_limit.COMPILED, "batch": 64, "images_per_s": 44000.0},
    },
    "same_classes": {
        raw_limit.COMPILED: {"summary": "top class as eager fp32 on 256/256 inputs"},
        "fp16 channels_last + CUDA graph": {"summary": "NOT every one", "keeps_classes": False},
    },
    "skipped": {"onnxruntime fp32": "no CUDA provider"},
    "limit": {"path": raw_limit.COMPILED, "batch": 64, "images_per_s": 44000.0},
    "eager_limit": {"path": "eager fp32", "batch": 64, "images_per_s": 11500.0},
}
CSV = (
    "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,"
    "Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,p50 latency,"
    "p90 latency,p95 latency,p99 latency,Avg latency\n"
    "1024,28000,100,2000,5800,2300,9700,1900,10,30000,45000,50000,54000,36000\n"
)


def run(
    throughput: float,
    command: str = "perf_analyzer -m m",
    batch: float = 50.0,
    name: str = "7.6 a",
    instances: int = 1,
):
    result = perf.Run(name, perf.Line.read(command), [], "", 1.0, perf_output.parse_csv(CSV))
    result.table["throughput_infer_s"] = throughput
    result.extra.update({"avg_batch_size": batch, "command": command})
    result.served_config = {"instance_group": [{"count": instances, "kind": "KIND_GPU"}]}
    return result


def test_compile_needs_compute_capability_7():
    assert tuned_runtime.compile_blocker((9, 0)) == ""
    assert tuned_runtime.compile_blocker((7, 0)) == ""
    p100 = tuned_runtime.compile_blocker((6, 0))
    assert "6.0" in p100 and "7.0" in p100 and "Triton kernels" in p100 and "P100" in p100
    assert "no GPU" in tuned_runtime.compile_blocker(None)


def test_runtime_table_lists_skipped_and_left_out_runtimes():
    table = hardware.runtime_table(RAW).set_index("runtime")
    assert table.loc[raw_limit.COMPILED, "x_eager_fp32"] == pytest.approx(44000 / 11500, 0.01)
    assert table.loc["eager fp32", "answers"] == "the reference"
    assert table.loc["fp16 channels_last + CUDA graph", "answers"].startswith("left out")
    assert table.loc["onnxruntime fp32", "answers"] == "skipped: no CUDA provider"


def test_agreement_is_the_share_of_inputs_with_fp32s_class():
    rng = np.random.default_rng(0)
    reference = rng.standard_normal((100, 11)).astype(np.float32)
    close = reference + 0.001 * rng.standard_normal((100, 11)).astype(np.float32)
    check = raw_limit.agreement(reference, close)
    assert check["keeps_classes"] and check["same_top_class"] >= 95
    assert check["decided_clearly"] > 90 and check["max_abs_diff"] < 0.01
    assert "of their spread" in check["summary"]
    wrong = raw_limit.agreement(reference, rng.standard_normal((100, 11)))
    assert not wrong["keeps_classes"] and "NOT 95%" in wrong["summary"]


def test_choose_decides_on_repeated_runs_and_says_when_it_cannot():
    claims.RESULTS.clear()
    clear = {"A": [100, 105, 103], "B": [90, 95, 94]}
    assert claims.choose("t", clear, tie_order=["B", "A"]) == "A"
    assert [r["verdict"] for r in claims.RESULTS] == [claims.HOLDS]
    claims.RESULTS.clear()
    tied = {"HTTP": [100, 95, 99], "gRPC": [101, 97, 96], "shm": [98, 99, 92]}
    assert claims.choose("t", tied, tie_order=["shm", "gRPC", "HTTP"]) == "shm"
    assert {r["verdict"] for r in claims.RESULTS} == {claims.INCONCLUSIVE}
    claims.RESULTS.clear()


def test_parameters_are_checked_by_their_key():
    text = 'parameters { key: "compile" value { string_value: "on" } }'
    needs = {"parameters.compile.string_value": "on"}
    assert config_edits.config_fragment(text, "7.7", "compile on", needs) == text
    with pytest.raises(exercises.NotYet, match="also sets `parameters.precision.string_value`"):
        config_edits.config_fragment(text.replace("compile", "precision"), "7.7", "x", needs)


def test_summary_laws_and_the_record_of_the_best_run(tmp_path):
    config = (STAGING / "food_classifier_tuned" / "config.pbtxt").read_text()
    eight = config_text.replace_fields(
        config, "instance_group [ { count: 8, kind: KIND_GPU, gpus: [ 0 ] } ]"
    )
    assert hardware.instances(config) == 1 and hardware.instances(eight) == 8
    runs = {
        "7.2 start": run(1000.0, batch=16, name="7.2 start"),
        "7.6 best": run(28000.0, name="7.6 best", instances=8),
    }
    assert hardware.instances(runs["7.6 best"].served_config) == 8  # as Triton served it
    table = hardware.summary(runs.values(), RAW["limit"])
    best = table.set_index("run").loc["7.6 best"]
    assert best["served_over_limit"] == pytest.approx(28000 / 44000)
    assert best["in_flight_N"] == pytest.approx(28000 * 0.036)  # X·R
    assert best["instance_busy_U"] == pytest.approx(28000 / 50 * 0.0139 / 8)  # X_exec·S / n
    assert "= 1008 requests in flight" in hardware.laws_worked_out(runs["7.6 best"].row, 8)
    assert "0.97" in hardware.laws_worked_out(runs["7.6 best"].row, 8)
    assert "13.90 ms" in hardware.time_split(runs["7.6 best"].row, RAW)
    record = hardware.record(
        tmp_path / "served_over_limit.json",
        RAW,
        runs["7.6 best"],
        eight,
        [runs["7.6 best"], run(27000.0)],
        {"chosen": "gRPC + shared memory"},
    )
    assert json.loads((tmp_path / "served_over_limit.json").read_text()) == record
    assert record["best_config"] == eight and record["command"] == "perf_analyzer -m m"
    assert record["repeats_served_over_limit"] == pytest.approx([28000 / 44000, 27000 / 44000])
    assert "served/limit over 2 runs: median 0.625" in hardware.spread_line(
        record["repeats_served_over_limit"], "runs"
    )


def test_sweep_table_reads_each_configuration():
    fragment = (
        "instance_group [ { count: 4, kind: KIND_GPU, gpus: [ 0 ] } ]\n"
        "max_batch_size: 64\n"
        "dynamic_batching { max_queue_delay_microseconds: 500 }"
    )
    table = hardware.sweep_table([(fragment, run(20000.0))])
    assert table.iloc[0][["instances", "max_batch", "delay_us", "clients"]].tolist() == [
        4,
        64,
        500,
        1024,
    ]
    assert isinstance(table, pd.DataFrame)


def test_a_whole_config_put_back_with_edit_is_the_same_config():
    """7.8 puts the best run's config.pbtxt back with triton_config.edit(model, its full text)."""
    staged = (STAGING / "food_classifier_tuned" / "config.pbtxt").read_text()
    best = config_text.replace_fields(
        staged,
        "instance_group [ { count: 8, kind: KIND_GPU, gpus: [ 0 ] } ]\nmax_batch_size: 64\n"
        'parameters { key: "compile" value { string_value: "on" } }',
    )
    later = config_text.replace_fields(staged, "max_batch_size: 8")
    back = config_text.replace_fields(later, best)
    assert config_text.parse_config(back) == config_text.parse_config(best)


def test_execution_time_is_per_execution_not_per_request():
    """Triton gives each request of a batch the batch's compute times: their mean over requests
    weighs large batches more; batch_stats count executions."""
    before = {"inference_count": 0, "execution_count": 0, "batch_stats": []}
    after = {
        "inference_count": 11,
        "execution_count": 2,
        "inference_stats": {
            "success": {"count": 11, "ns": 0},
            "compute_infer": {"count": 11, "ns": 10 * 10_000_000 + 1 * 1_000_000},
        },
        "batch_stats": [
            {"batch_size": 1, "compute_infer": {"count": 1, "ns": 1_000_000}},
            {"batch_size": 10, "compute_infer": {"count": 1, "ns": 10_000_000}},
        ],
    }
    delta = triton_stats.stats_delta(before, after)
    assert delta["execution_ms_avg"] == pytest.approx(5.5)  # (1 + 10) ms / 2 executions
    assert delta["compute_infer_ms_avg"] == pytest.approx(101 / 11)  # per request: 9.2 ms
    row = {**run(1.0).row, "execution_ms": 5.5}
    assert hardware.execution_ms(row) == 5.5
    assert hardware.execution_ms({**row, "execution_ms": 0}) == pytest.approx(13.9)


def test_time_per_execution_is_tritons_not_the_request_weighted_mean():
    """The H100 reference's best run (2026-11-24, 7.7): perf_analyzer's per-request parts add up
    to 13.08 ms, but a request in a batch of 60 counts its batch's time once for each of the 60;
    Triton's batch statistics give 11.33 ms per execution, 9.1x the raw compiled model's 1.24 ms
    for a batch of 47, and each of the 8 instances busy 0.87 of the time."""
    folder = REFERENCE / "results" / "hardware"
    summary = pd.read_csv(folder / "summary.csv").set_index("run")
    row = summary.loc["7.7 compiled, 8 inst, max batch 64, delay 500 us, c1024"].to_dict()
    record = json.loads((folder / "served_over_limit.json").read_text())
    raw = {
        "limit": record["limit"],
        "rows": pd.read_csv(folder / "raw_limit.csv").to_dict("records"),
    }
    split = hardware.time_split(row, raw)
    assert "= 11.33 ms (per request, weighted by batch size: 13.08 ms)" in split
    assert "takes 9.1x the raw model's time" in split
    assert "/ 8 = 0.87 " in hardware.laws_worked_out(row, 8)


def test_the_answer_key_quotes_the_per_execution_laws_of_the_best_run():
    """Notebook 7's hand-in answer 1 quotes the laws of the 7.7 row as hardware.laws_worked_out
    prints them and the 9.1x of time_split, not the request-weighted 13.1 ms."""
    folder = REFERENCE / "results" / "hardware"
    summary = pd.read_csv(folder / "summary.csv").set_index("run")
    row = summary.loc["7.7 compiled, 8 inst, max batch 64, delay 500 us, c1024"].to_dict()
    key = " ".join((REPO_ROOT / "docs" / "answer_key.md").read_text().split())
    law = hardware.laws_worked_out(row, 8).splitlines()[1]
    executions, ms, u = re.search(
        r"= (\d+) executions/s × ([\d.]+) ms / 8 = ([\d.]+)", law
    ).groups()
    assert f"U = {executions} executions/s × {ms} ms / 8 instances = {u}" in key
    assert f"{ms} ms per execution (9.1x" in key
