"""Triton (local mode, CPU, both models) under bad input, bounded soak and faults: one server for
the module.

Bad input: wrong datatype, wrong shape, empty string, batch larger than max_batch_size, malformed
requests and generated headers -> an error response with Triton's message, never a crash; both
models still answer. Triton's HTTP frontend answers 500 "Unable to parse ..." to JSON it cannot
parse: counted apart (Triton core 500), and the server must keep serving after them.
Soak: 4 clients per model for SOAK_SECONDS, zero failures, bounded RSS of tritonserver + stubs.
Faults: configs Triton refuses (reload helper, broken config.pbtxt, repository API) while the
loaded version keeps serving; killing tritonserver mid-perf_analyzer ends in PerfAnalyzerError.
The kill runs last (it ends the server).
"""

import os

import pytest

from labstack import launcher
from maintainers.reliability import common, faults_triton, fuzz_triton, procs, soak

SECONDS = float(os.environ.get("SOAK_SECONDS", 8))
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300 + 4 * SECONDS)]
MODELS = fuzz_triton.MODELS


@pytest.fixture(scope="module")
def triton(built_artifacts, tmp_path_factory):
    server = procs.start_triton(tmp_path_factory.mktemp("reliability-triton"))
    try:
        yield server
    finally:
        server.stop()


def test_triton_listens_on_loopback_only(triton):
    if launcher.BIND != "127.0.0.1":
        pytest.skip("LAB_BIND_HOST is set in this environment")
    for key in ("port", "grpc_port", "metrics_port"):
        assert procs.listen_addresses(triton.record[key]) == {"127.0.0.1"}, key


def test_bad_requests_get_triton_errors_and_both_models_keep_serving(triton, image_b64):
    tallies = fuzz_triton.fuzz_triton(triton, image_b64, generated=25)
    for model in MODELS:
        tally = tallies[model]
        print(tally.target, tally.cases, dict(tally.counts), dict(tally.statuses))
        assert (
            tally.cases >= 12 + 25
            and tally.counts["accepted"] >= 1
            and tally.counts["rejected"] >= 10
        )
        assert tally.problems == 0 and tally.counts["unclear"] == 0, tally.examples
        assert tally.still_serving
        # every 500 seen (all of them, not only the examples kept) is Triton's JSON parser, with its
        # message
        assert all(
            d.startswith("HTTP 500: Unable to parse")
            for v, d in tally.reasons
            if v == common.TRITON_CORE_500
        )
    img, onnx = (tallies[m].messages for m in MODELS)
    assert "batch-size must be <= 16" in img["batch 17 > max_batch_size 16"]
    assert "expects 'BYTES'" in img["wrong datatype (FP32 for BYTES)"]
    assert img["empty string"].startswith("HTTP 400") and "empty" in img["empty string"]
    bomb = img[
        "decompression bomb (400 Mpx PNG)"
    ]  # our decoding's 413 message, through the Python backend
    assert bomb.startswith("HTTP 400") and "at most 40,000,000 pixels" in bomb
    assert "expects 'FP32'" in onnx["wrong datatype FP64"]
    # the check above is not vacuous: a body Triton cannot parse does reach that verdict
    assert onnx["malformed JSON ('inputs' is a string)"].startswith("HTTP 500: Unable to parse")
    assert onnx["good request"].startswith("HTTP 200")


@pytest.mark.parametrize("model", MODELS)
def test_triton_soak(triton, image_b64, model):
    row = soak.soak(
        f"Triton {model}", soak.triton_sender(triton.url, model, image_b64), SECONDS, 4, triton.pid
    )
    print(row)
    assert row["processes"] >= 3  # tritonserver + one Python-backend stub per model
    # throughput depends on what else the shared CPU runs; the soak's contract is zero failures
    assert row["requests"] >= 4 and row["errors"] == 0, row["error_examples"]
    assert row["rss_growth_mib"] <= common.RSS_GROWTH_LIMIT_MIB


def test_refused_configs_are_reported_and_the_loaded_version_keeps_serving(triton, image_b64):
    rows = faults_triton.broken_configs(triton, image_b64)
    for row in rows:
        print(row)
        assert row["passed"], row
    # Triton's own reason (its HTTP answer only says "failed to poll"; its log names the broken
    # rule)
    assert len(rows) == 3 and "preferred size must be <= max batch size" in rows[0]["observed"], (
        rows[0]
    )
    assert "no_such_backend" in rows[2]["observed"]


def test_killing_tritonserver_mid_benchmark_is_reported_not_hung(triton, tmp_path):
    row = faults_triton.killed_mid_benchmark(triton, tmp_path)
    print(row)
    assert row["passed"], row
    assert "PerfAnalyzerError" in row["observed"] and row["seconds"] < 90
