"""Notebook 6 over 0, 1, 2 or 4 GPUs without a server: where Triton puts a config's instances
(instances.placement), the fragment that puts them on every GPU (instance_group) and what an
exercise demands of it (exercises.on_every_gpu), per-GPU claims (verdicts.claim_each_gpu), and
the laws and model readings each row carries (queueing.laws, model_miss, step_table)."""

import pandas as pd
import pytest

from servelab import claims, exercises, queueing
from servelab.exercises import NotYet, config_edits
from servelab.perf import step_table
from servelab.triton import config_text, instances, triton_stats
from servelab.verdicts import triton as verdicts


@pytest.mark.parametrize("n_gpus", [1, 2, 4])
def test_instances_on_every_gpu(n_gpus):
    text = instances.instance_group(2, n_gpus)
    config_text.parse_config(text)  # Triton's own schema
    assert instances.placement(text, n_gpus) == {f"GPU {i}": 2 for i in range(n_gpus)}
    assert instances.instance_count(text, n_gpus) == 2 * n_gpus
    # without a gpus list, KIND_GPU means every GPU the server sees; with one, those listed
    bare = "instance_group [ { count: 4, kind: KIND_GPU } ]"
    assert instances.instance_count(bare, n_gpus) == 4 * n_gpus
    first = "instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 0 ] } ]"
    assert instances.placement(first, n_gpus) == {"GPU 0": 1}
    # no instance_group at all: one instance per GPU
    assert instances.instance_count('name: "m"', n_gpus) == n_gpus


def test_placement_without_gpu_and_with_a_gpu_too_many():
    assert instances.instance_group(2, 0) == "instance_group [ { count: 2, kind: KIND_CPU } ]"
    assert instances.placement(instances.instance_group(2, 0), 0) == {"CPU": 2}
    assert instances.placement('name: "m"', 0) == {"CPU": 1}
    with pytest.raises(ValueError, match="needs a GPU"):
        instances.placement("instance_group [ { count: 1, kind: KIND_GPU } ]", 0)
    with pytest.raises(ValueError, match=r"lists GPU 1, but the server has 1 GPU"):
        instances.placement(instances.instance_group(2, 2), 1)
    # two groups add up; the served config's JSON reads the same as the text
    two = (
        "instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 0 ] }, { count: 2, kind: KIND_CPU } ]"
    )
    assert instances.placement(two, 2) == {"GPU 0": 1, "CPU": 2}
    served = {"instance_group": [{"name": "m_0", "kind": "KIND_GPU", "count": 2, "gpus": [0, 1]}]}
    assert instances.placement(served, 2) == {"GPU 0": 2, "GPU 1": 2}


@pytest.mark.parametrize("n_gpus", [0, 1, 2, 4])
def test_an_exercise_asks_for_every_gpu_of_the_server(n_gpus):
    needs = exercises.on_every_gpu(2, n_gpus)
    text = instances.instance_group(2, n_gpus)
    assert config_edits.config_fragment(text, "6.3", "two on every GPU", needs) == text
    if n_gpus:
        one_gpu = "instance_group [ { count: 2, kind: KIND_GPU, gpus: [ 0 ] } ]"
        if n_gpus > 1:
            with pytest.raises(NotYet, match=r"puts 2 on GPU 0, not where the step puts them"):
                config_edits.config_fragment(one_gpu, "6.3", "two on every GPU", needs)
    else:  # no GPU: the count decides (the lab writes KIND_GPU as KIND_CPU)
        gpu = "instance_group [ { count: 2, kind: KIND_GPU, gpus: [ 0, 1 ] } ]"
        assert config_edits.config_fragment(gpu, "6.3", "two", needs) == gpu


class FakeRun:
    def __init__(self, row):
        self.row = row

    def measured(self, column):
        return claims.Measured(self.row[column], self.row[column] - 1, self.row[column] + 1)


@pytest.mark.parametrize("n_gpus", [0, 1, 2, 4])
def test_a_claim_about_every_gpu_is_decided_on_each(n_gpus, capsys):
    claims.RESULTS.clear()
    row = {f"gpu{i}_util_pct": 60.0 if i else 30.0 for i in range(n_gpus)} | {"cpu_util_pct": 80.0}
    said = verdicts.claim_each_gpu(claims.at_least, "every GPU is busy", FakeRun(row), n_gpus, 50)
    if n_gpus == 0:
        assert said == [claims.NOT_CHECKED]
        assert "no GPU; the CPU (all cores) was 80% busy" in claims.RESULTS[-1]["note"]
    else:  # GPU 0 at 30 %, the others at 60 %
        assert said == [claims.FAILS] + [claims.HOLDS] * (n_gpus - 1)
        assert [r["claim"] for r in claims.RESULTS][-1].endswith(
            f"(GPU {n_gpus - 1} of {n_gpus}, mean %)"
        )
    missing = verdicts.claim_each_gpu(claims.at_least, "c", FakeRun({}), 2, 50)
    assert (
        missing == [claims.NOT_CHECKED] and "Triton did not report it" in claims.RESULTS[-1]["note"]
    )
    claims.RESULTS.clear()


def test_a_claim_is_decided_only_on_its_premises():
    claims.RESULTS.clear()
    assert claims.given({"the run did not overload it": False}, claims.at_least, "c", 3, 2) == (
        claims.NOT_CHECKED
    )
    assert claims.RESULTS[-1]["note"] == "the run did not overload it"
    assert claims.given({"x": True}, claims.at_least, "c", 3, 2) == claims.HOLDS
    claims.RESULTS.clear()


def test_the_laws_of_a_triton_row_on_the_h100_reference():
    """6.1 c8 on the H100 (the reference run of 2026-11-23, in git history): 94.86 infer/s, 84.0 ms
    mean latency, 72.97 ms queued, 10.48 ms per execution, one instance: busy 99 % of the time,
    8 in flight (the concurrency, as Little's law says), 6.9 of them waiting."""
    laws = queueing.laws(94.86, 84.0, 10.48, 72.97)
    assert laws["busy_U"] == pytest.approx(0.994, abs=0.001)
    assert laws["in_flight_N"] == pytest.approx(7.97, abs=0.01)
    assert laws["waiting_N"] == pytest.approx(6.92, abs=0.01)
    # 6.2 b16: 189.6 images/s in requests of 16 (one execution each, 81.9 ms): 11.85 requests/s
    b16 = queueing.laws(189.58, 83.88, 81.94, 0.08, batch=16, client_batch=16)
    assert b16["busy_U"] == pytest.approx(0.971, abs=0.001) and b16["in_flight_N"] == pytest.approx(
        0.994, abs=0.001
    )
    # 6.3, 4 instances: each busy as much as one was, the work spread over four
    four = queueing.laws(322.91, 24.72, 12.33, 11.83, instances=4)
    assert four["busy_U"] == pytest.approx(0.995, abs=0.001)


def test_model_readings_of_open_loop_runs():
    """6.6 on the H100: evenly spaced at 185/s measured 9.03 ms (p50 3.85, p99 65.7) where the
    model gives 4.2 ms: the tail, not the mean utilisation (58 %), is what broke it."""
    said = queueing.model_miss(4.21, 9.03, 0.58, 3.23, 3.13, open_loop=True, tail=65.7 / 3.85)
    assert "more than ±30% off" in said and "p99 is 17.1x its median" in said
    assert (
        "busy only" not in said
    )  # in an open loop, waiting at a station not always busy is normal
    saturated = queueing.model_miss(float("inf"), 1771.9, 0.99, 3.23, 3.67, open_loop=True)
    assert "saturates" in saturated and "the queue grew" in saturated
    busy = queueing.model_miss(10, 20, 0.92, 3.0, 3.1, open_loop=True)
    assert "busy 92% of the time" in busy


class Run:
    def __init__(self, name, **row):
        self.name, self.row = name, row


def test_a_steps_table_shows_the_laws_and_the_models_line(capsys):
    row = dict(
        concurrency=8.0,
        throughput_infer_s=94.86,
        avg_latency_ms=84.0,
        p50_ms=84.3,
        p99_ms=165.3,
        server_queue_ms=72.97,
        execution_ms=10.48,
        avg_batch_size=1.0,
        instances=1,
        busy_U=0.994,
        in_flight_N=7.97,
        waiting_N=6.92,
        delayed_pct=0.0,
        gpu0_util_pct=6.2,
        command="perf_analyzer ...",
    )
    runs = [Run("6.1 c8", **row), Run("6.1 c16", **{**row, "concurrency": 16.0})]
    frame = step_table.table(runs[:1])
    assert list(frame.index) == ["6.1 c8"] and "command" not in frame
    assert {"busy_U", "in_flight_N", "waiting_N", "gpu0_util_pct"} <= set(frame)
    assert "request_rate" not in frame  # a closed-loop step shows its concurrency only
    modelled = step_table.against_model(step_table.table(runs), [98.4, 197.0])
    assert modelled["measured_over_model"].tolist() == [0.85, 0.43]
    step_table.model_readings(modelled, 12.3)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("6.1 c8: the model says 98.4 ms") and "within ±30%" in out[0]
    assert out[1].startswith("6.1 c16:") and "more than ±30% off" in out[1]
    assert isinstance(modelled, pd.DataFrame)


def test_utilisation_over_time_keeps_each_gpu_apart():
    sampler = triton_stats.Sampler("http://unused")
    # each GPU by the index its instances report for its uuid (servelab/triton/gpu_names.py)
    named = {"GPU-a": 1, "GPU-b": 0}
    reading = {"t_s": 0.0, "gpus": {"GPU-a": 1.0, "GPU-b": 0.25}, "cpu": 0.3, "cuda_devices": named}
    sampler.readings = [reading]
    assert sampler.over_time() == [{"t_s": 0.0, "gpu0_util_pct": 25.0, "gpu1_util_pct": 100.0}]
    sampler.readings = [{"t_s": 0.5, "gpus": {}, "cpu": 0.3}]
    assert sampler.over_time() == [{"t_s": 0.5, "cpu_util_pct": 30.0}]


def test_execution_time_comes_from_the_batches():
    """Per request, Triton counts a batch's whole time for each request in it; per execution, the
    batch_stats say what one execution took."""
    before = {"execution_count": 0, "inference_count": 0, "batch_stats": []}
    after = {
        "execution_count": 3,
        "inference_count": 9,
        "inference_stats": {
            "success": {"count": 9, "ns": 0},
            "compute_infer": {"count": 9, "ns": 9 * 8_000_000},
        },
        "batch_stats": [
            {"batch_size": 1, "compute_infer": {"count": 1, "ns": 2_000_000}},
            {
                "batch_size": 4,
                "compute_infer": {"count": 2, "ns": 16_000_000},
                "compute_input": {"count": 2, "ns": 1_000_000},
            },
        ],
    }
    delta = triton_stats.stats_delta(before, after)
    assert delta["execution_ms_avg"] == pytest.approx(19 / 3)
    assert delta["compute_infer_ms_avg"] == pytest.approx(8.0)  # the per-request view


def test_a_runs_row_says_how_busy_the_cores_were_on_a_gpu_node_too():
    """6.3h asks which resource limited four instances per GPU: the Python backend's stubs decode
    on the cores, so the row keeps the CPU's utilisation beside each GPU's (the figure over time
    shows the GPUs)."""
    sampler = triton_stats.Sampler("http://unused")
    named = {"GPU-a": 1, "GPU-b": 0}
    sampler.readings = [
        {"t_s": t, "gpus": {"GPU-a": 0.5, "GPU-b": 0.25}, "cpu": c, "cuda_devices": named}
        for t, c in ((0.0, 0.9), (0.5, 0.7))
    ]
    assert sampler.summary() == {
        "util_samples": 2,
        "gpu0_util_pct": 25.0,
        "gpu1_util_pct": 50.0,
        "cpu_util_pct": 80.0,
    }
    assert all("cpu_util_pct" not in row for row in sampler.over_time())
