"""servelab/three_way.py's parts without servers: what each way is sent (the same photo, the same
input values), a ladder step's verdict, the figure at the objective, the comparison by intervals,
notebook 7's configuration in its CPU form; and the open loop spread over processes against a
small local server (slow: it starts processes)."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pandas as pd
import pytest

from servelab import food11, three_way
from servelab.loadgen import spread
from servelab.paths import REPO_ROOT as REPO
from servelab.paths import test_photo

SETTING = three_way.SETTINGS["cpu"]


def _run(latencies, rate=10.0, seconds=10.0, late=0.0, errors=0) -> pd.DataFrame:
    """An open-loop run's rows as open_loop.run makes them."""
    n = len(latencies)
    df = pd.DataFrame(
        {
            "t_start": np.linspace(0, seconds, n, endpoint=False),
            "t_scheduled": np.linspace(0, seconds, n, endpoint=False),
            "latency_ms": latencies,
            "status": [200] * (n - errors) + [500] * errors,
            "late_ms": [late] * n,
        }
    )
    df.attrs.update(label="x", wall_s=seconds, request_rate=rate, late_limit_ms=10)
    return df


def test_each_way_gets_the_same_photo_as_it_takes_it():
    ways = three_way.ways(test_photo(), {n: f"http://h/{n}" for n in three_way.ORDER})
    assert list(ways) == list(three_way.ORDER)
    made = three_way.inputs(test_photo())
    # FastAPI: the JPEG file itself, base64 in JSON
    sent = json.loads(ways["fastapi"].body)["image"]
    assert base64.b64decode(sent) == test_photo().read_bytes()
    # Ray: the tensor the services make from that file (their one decoding path)
    tensor = food11.tensor_from_bytes(test_photo().read_bytes())
    assert np.array_equal(np.frombuffer(ways["ray"].body, np.float32).reshape(3, 224, 224), tensor)
    # Triton: its uint8 pixels, normalised as the model does, are Ray's values
    pixels = made["pixels"].astype(np.float32) / 255.0
    normalised = ((pixels - food11.MEAN) / food11.STD).transpose(2, 0, 1)
    assert np.allclose(normalised, tensor, atol=1e-5)
    json_size = int(ways["triton"].headers["Inference-Header-Content-Length"])
    assert ways["triton"].body[json_size:] == made["pixels"].tobytes()
    assert ways["triton_onnx"].body[-tensor.nbytes :] == tensor.tobytes()
    # batching or not, each pair is sent the same bytes, to its own model or route
    assert ways["triton_onnx_batch"].body == ways["triton_onnx"].body
    assert three_way.ONNX_BATCH_MODEL in ways["triton_onnx_batch"].url
    assert ways["ray_batch"].body == ways["ray"].body
    assert ways["ray_batch"].url.endswith("ray_batch")
    header = json.loads(ways["triton"].body[:json_size])
    assert header["inputs"][0]["shape"] == [1, 224, 224, 3]
    assert header["outputs"] == [{"name": "output", "parameters": {"binary_data": False}}]
    assert ways["triton"].label({"outputs": [{"data": [0.0] * 10 + [5.0]}]}) == food11.CLASSES[10]


@pytest.mark.parametrize(
    ("run", "verdict"),
    [
        (_run([50.0] * 100), "holds"),
        (_run([500.0] * 100), "fails"),
        (_run(list(np.r_[[50.0] * 94, [400.0] * 6])), "inconclusive"),
        (_run([50.0] * 100, late=50.0), "generator late"),
        (_run([50.0] * 100, errors=1), "fails"),
        (_run([50.0] * 50, rate=10.0), "fails"),  # served 5/s of 10: a queue that grows
        (_run([50.0] * 5, rate=0.5), "too few requests"),
    ],
)
def test_a_ladder_step_holds_only_when_its_p95_interval_is_under(run, verdict):
    row = three_way.step_row(run, 300.0)
    assert row["verdict"] == verdict, row


def test_the_figure_at_the_objective_is_the_last_rate_that_held_and_the_next():
    steps = [
        {"rate_rps": 1.0, "served_rps": 1.0, "verdict": "holds"},
        {"rate_rps": 1.5, "served_rps": 1.5, "verdict": "holds"},
        {"rate_rps": 2.2, "served_rps": 1.9, "verdict": "fails"},
    ]
    at = three_way.at_objective(steps, SETTING)
    assert (at["held_rps"], at["next_rps"], at["next_verdict"]) == (1.5, 2.2, "fails")
    assert at["limited_by"] == "the server"
    late = three_way.at_objective(steps[:2] + [{**steps[2], "verdict": "generator late"}], SETTING)
    assert late["limited_by"] == "the load generator"
    none = three_way.at_objective(steps[2:], SETTING)
    assert none["held_rps"] == 0.0


def test_a_ratio_of_rates_held_keeps_the_bracket_of_both_ladders():
    batched = {"held_rps": 3843.9, "next_rps": 5765.9}
    plain = {"held_rps": 759.3, "next_rps": 1138.9}
    r = three_way.rate_ratio(batched, plain)
    assert r["ratio"] == pytest.approx(3843.9 / 759.3)
    assert r["lo"] == pytest.approx(3843.9 / 1138.9) and r["hi"] == pytest.approx(5765.9 / 759.3)
    assert r["lo"] < r["ratio"] < r["hi"]
    # a ladder that reached its cap has no upper end; a way that held nothing, no ratio
    assert three_way.rate_ratio({**batched, "next_rps": None}, plain)["hi"] is None
    assert three_way.rate_ratio(batched, {"held_rps": 0.0, "next_rps": 100.0})["ratio"] is None
    # a next step where the load generator fell behind says nothing of the server's upper end
    late = {**batched, "next_verdict": "generator late"}
    assert three_way.rate_ratio(late, plain)["hi"] is None
    assert three_way.rate_ratio(plain, late)["lo"] is None
    assert three_way.rate_ratio(plain, late)["hi"] == pytest.approx(1138.9 / 3843.9)


def test_a_latency_ratio_has_the_interval_of_the_ratio_itself():
    rng = np.random.default_rng(1)
    a, b = rng.normal(20, 2, 2000), rng.normal(10, 1, 2000)
    for stat, q in (("median", 50), ("p95", 95)):
        r = three_way.latency_ratio(a, b, stat)
        assert r["ratio"] == pytest.approx(np.percentile(a, q) / np.percentile(b, q))
        assert r["lo"] < r["ratio"] < r["hi"] and 1.8 < r["lo"] and r["hi"] < 2.2
    same = three_way.latency_ratio(b, b, "median")
    assert same["lo"] < 1 < same["hi"]


def test_both_batchers_are_set_alike():
    """Triton's dynamic batcher and Ray's @serve.batch get the same largest batch and wait, the
    ONNX model's max_batch_size and notebook 7's delay (GPU) or its CPU sweep's."""
    from servelab.serving import ray_app

    gpu, cpu = three_way.BATCHING["gpu"], three_way.BATCHING["cpu"]
    assert gpu == {"max_batch_size": 16, "wait_us": 500}
    assert cpu["wait_us"] == three_way.CPU_FORM["delay_us"]
    best, _ = three_way.best_config()
    assert f"max_queue_delay_microseconds: {gpu['wait_us']}" in best
    assert three_way.batching_fragment("gpu") == (
        "dynamic_batching { max_queue_delay_microseconds: 500 }"
    )
    onnx = (REPO / "models_staging/food_classifier_onnx_local/config.pbtxt").read_text()
    assert f"max_batch_size: {gpu['max_batch_size']}" in onnx
    assert (ray_app.MAX_BATCH, ray_app.WAIT_S) == (gpu["max_batch_size"], gpu["wait_us"] / 1e6)
    # a request of an overloaded step is not waited for a minute
    assert three_way.request_timeout_s(50.0) == 5.0 and three_way.request_timeout_s(300.0) == 30.0


def test_a_step_says_how_large_its_batches_were():
    triton = _run([50.0] * 100)
    triton.attrs["triton"] = {"avg_batch_size": 3.5}
    assert three_way.step_row(triton, 300.0)["mean_batch"] == 3.5
    ray = _run([50.0] * 100)
    ray["server_batch_ms"] = [2.0] * 50 + [4.0] * 50
    assert three_way.step_row(ray, 300.0)["mean_batch"] == 3.0
    assert np.isnan(three_way.step_row(_run([50.0] * 100), 300.0)["mean_batch"])


def test_a_comparison_is_decided_only_by_intervals_apart():
    a = {"p95_ms": 10, "p95_lo_ms": 9, "p95_hi_ms": 11}
    b = {"p95_ms": 20, "p95_lo_ms": 12, "p95_hi_ms": 25}
    assert three_way.compare(a, b, "p95") == "lower"
    assert three_way.compare(b, a, "p95") == "higher"
    assert three_way.compare(a, {**b, "p95_lo_ms": 10.5}, "p95") == "inconclusive"


def test_notebook_7s_best_configuration_and_its_cpu_form():
    gpu, record = three_way.best_config()
    assert record == three_way.REFERENCE_BEST
    assert "count: 8, kind: KIND_GPU" in gpu and 'string_value: "fp16"' in gpu
    cpu = three_way.cpu_form(gpu)
    assert "instance_group [ { count: 1, kind: KIND_CPU } ]" in cpu
    assert "max_batch_size: 8\n" in cpu and "max_queue_delay_microseconds: 2000" in cpu
    for key, value in (("precision", "fp32"), ("cuda_graphs", "off"), ("compile", "off")):
        assert f'key: "{key}" value {{ string_value: "{value}" }}' in cpu
    assert "KIND_GPU" not in cpu and "fp16" not in cpu.split("#")[-1]


class _Answer(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        body = b'{"label": "Soup"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.slow
def test_an_open_loop_spread_over_processes_sends_the_sum_of_their_rates():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        with spread.Senders(2) as senders:
            assert len(senders.pids()) == 2
            df = senders.run(url, b"x" * 100, rate=40, seconds=3, label="spread")
    finally:
        server.shutdown()
    # two Poisson streams of 20/s from their own seeds: about 120 requests, none twice
    assert 80 <= len(df) <= 160, len(df)
    assert (df["status"] == 200).all()
    assert df["t_scheduled"].is_monotonic_increasing and df["t_scheduled"].nunique() == len(df)
    assert df.attrs["senders"] == 2 and df.attrs["request_rate"] == pytest.approx(len(df) / 3)
    assert df["t_start"].min() >= 0 and df["t_start"].max() <= 3.5


def _harness():
    import importlib.util

    path = REPO / "maintainers" / "reference" / "three_way.py"
    spec = importlib.util.spec_from_file_location("three_way_harness", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("gpu", "setting", "cpus"), [(True, "gpu", 32), (False, "cpu", 2)])
def test_ray_serves_both_deployments_alike_but_for_batching(monkeypatch, gpu, setting, cpus):
    """The harness's two Ray applications: the same replicas and share of the machine each (the
    GPU shared by all of them), notebook 9's max_ongoing_requests without batching, twice the
    batch with @serve.batch, its size and wait as Triton's dynamic batcher's."""
    from servelab import ray_serving

    deployed = []
    monkeypatch.setattr(ray_serving, "connect", lambda: "http://127.0.0.1:9/food")
    monkeypatch.setattr(
        ray_serving,
        "deploy",
        lambda d, app, route, init=None: deployed.append((d, app, route, init)),
    )
    apps = _harness()._ray_deploy(gpu, setting, cpus)
    assert [app for _, app, _, _ in deployed] == ["food", "food_batch"]
    assert apps["ray"]["url"] == "http://127.0.0.1:9/food"
    assert apps["ray_batch"]["url"] == "http://127.0.0.1:9/food_batch"
    plain, batched = (d for d, _, _, _ in deployed)
    assert plain.num_replicas == batched.num_replicas
    assert plain.ray_actor_options == batched.ray_actor_options
    replicas = plain.num_replicas
    assert 2 * replicas * plain.ray_actor_options["num_cpus"] <= cpus
    if gpu:
        assert 2 * replicas * plain.ray_actor_options["num_gpus"] <= 1.0
    else:
        assert "num_gpus" not in plain.ray_actor_options
    batching = three_way.BATCHING[setting]
    assert plain.max_ongoing_requests == 2
    assert batched.max_ongoing_requests == 2 * batching["max_batch_size"]
    init = deployed[1][3]
    assert init == {
        "max_batch_size": batching["max_batch_size"],
        "batch_wait_timeout_s": batching["wait_us"] / 1e6,
    }
    assert apps["ray_batch"]["batch"] == init and "batch" not in apps["ray"]


def test_fastapi_gets_a_worker_per_two_cores_on_the_gpu_machine(monkeypatch):
    harness = _harness()
    monkeypatch.setattr(harness.os, "cpu_count", lambda: 32)
    assert harness.fastapi_workers("gpu") == 16 and harness.fastapi_workers("cpu") == 1
