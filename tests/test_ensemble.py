"""The ensemble (notebook 8) on the real Triton 2.51 of local mode: raw JPEG bytes in, classes out.

One server for the module (the lab's repository plus preprocess and food_classifier_ensemble,
placed without its step mapping, which is then written and loaded with triton_config.edit as
notebook 8's exercise has the student do). Checked: the step mapping Triton loaded,
the same top class as the direct path (client-side pre-processing + food_classifier_onnx) on
every test image, a bad file is the client's error, and a perf_analyzer run sending raw JPEG
bytes gets the direct path's logits in every response (perf_analyzer's own validation_data
check) and per-step statistics read from each composing model.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from triton_helpers import infer, start_local_triton
from tritonclient.utils import InferenceServerException

from maintainers.reliability import corpus
from servelab import ensemble, exercises, food11, perf
from servelab.paths import STAGING
from servelab.triton import triton_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def triton(built_artifacts, tmp_path_factory):
    server = start_local_triton(tmp_path_factory.mktemp("triton_ensemble"), timeout=90)
    try:
        ensemble.place(server.repo, mode="local", kind="cpu", steps=False, verbose=False)
        staged = (STAGING / ensemble.ENSEMBLE / "config.pbtxt").read_text()
        block = staged[staged.index("ensemble_scheduling {") :]
        mapping = exercises.step_mapping(block, "8.1")
        result = triton_config.edit(ensemble.ENSEMBLE, mapping, repo=server.repo, url=server.url)
        assert result.ok, result.error
        print(f"ensemble loaded in {result.seconds:.1f} s")
        yield server
    finally:
        server.stop()


def test_ensemble_is_served_with_its_step_mapping(triton):
    steps = ensemble.served_steps(triton.url)
    assert [s["model_name"] for s in steps] == list(ensemble.STEPS)
    assert steps[0]["output_map"]["IMAGE_TENSOR"] == steps[1]["input_map"]["input"]
    assert steps[1]["output_map"]["output"] == ensemble.OUTPUT
    for model in (ensemble.ENSEMBLE, *ensemble.STEPS):
        assert triton_config.model_ready(model, triton.url), model


def test_same_classes_as_the_direct_path(triton, test_images):
    logits = ensemble.infer_bytes([p.read_bytes() for p in test_images], triton.url)
    tensors = np.stack([food11.tensor_from_bytes(p.read_bytes()) for p in test_images])
    direct = infer(triton.url, "food_classifier_onnx", {"input": tensors}, ["output"])["output"]
    assert logits.shape == direct.shape == (len(test_images), len(food11.CLASSES))
    assert [food11.top_class(r)[0] for r in logits] == [food11.top_class(r)[0] for r in direct]
    # the same pre-processing ran (food11.tensor_from_bytes), only on the other side of the wire
    assert np.abs(logits - direct).max() <= 1e-4 * float(direct.max() - direct.min()) + 1e-5
    assert [c for c, _ in ensemble.classify(test_images[:2], triton.url)] == [
        food11.top_class(r)[0] for r in direct[:2]
    ]


def test_unreadable_file_is_the_clients_error(triton, test_images):
    with pytest.raises(InferenceServerException) as err:
        ensemble.infer_bytes([b"GIF89a not a photo"], triton.url)
    assert err.value.status() == "400" and "GIF" in str(err.value)
    assert triton_config.model_ready(ensemble.ENSEMBLE, triton.url)
    assert ensemble.infer_bytes([test_images[0].read_bytes()], triton.url).shape == (1, 11)


@pytest.mark.parametrize("kind", ["scan bomb", "D3"])
def test_a_request_of_sixteen_scan_bombs_is_refused_soon_and_the_ensemble_serves(
    triton, test_images, kind
):
    """Issue 35: one request of 16 scan bombs blocked the ensemble for 62 s while Triton said it
    was ready; issue 52's D3 (a reserved marker hiding 2,000 scans): 16 copies cost 14.7 s.
    preprocess refuses the first from its structure (servelab.decode_budget)."""
    bomb = corpus.jpeg_scan_bomb(2000, 5000) if kind == "scan bomb" else None
    bomb = bomb or corpus.jpeg_restart_hidden_scans()
    start = time.monotonic()
    with pytest.raises(InferenceServerException) as err:
        ensemble.infer_bytes([bomb] * 16, triton.url)
    took = time.monotonic() - start
    print(f"16 scan bombs refused after {took:.2f} s: {err.value}")
    assert err.value.status() == "400" and "JPEG scans" in str(err.value)
    assert took < 10
    start = time.monotonic()
    assert ensemble.infer_bytes([test_images[0].read_bytes()], triton.url).shape == (1, 11)
    assert time.monotonic() - start < 10


def test_perf_analyzer_sends_raw_jpegs_and_each_step_reports(triton, test_images, tmp_path):
    jpegs = [p for p in test_images if p.suffix == ".jpg"]
    # perf_analyzer checks every response against the direct path's logits (validation_data)
    expected = ensemble.direct_logits(jpegs, triton.url)
    inputs = ensemble.write_perf_inputs(jpegs, tmp_path, expected=expected)
    host = triton.url.split("://")[-1]
    line = (
        f"perf_analyzer -m {ensemble.ENSEMBLE} -u {host} --input-data {inputs['ensemble']} "
        "--concurrency-range 2 --request-count 60"
    )
    run = ensemble.measure(line, "ensemble c2", out=tmp_path, timeout=120, verbose=False)
    assert run.row["throughput_infer_s"] > 0 and run.row["command"] == line
    assert "Composing models" in run.output  # perf_analyzer itself reports an ensemble's steps
    table = run.steps.set_index("model")
    assert set(table.index) == {ensemble.ENSEMBLE, *ensemble.STEPS}
    done = table.loc[ensemble.ENSEMBLE, "requests"]
    assert done >= 60 and (table["failures"] == 0).all()
    for step in ensemble.STEPS:
        # every request went through every step, and each step measured its own time
        assert table.loc[step, "requests"] == done
        assert table.loc[step, "compute_ms"] > 0 and table.loc[step, "queue_ms"] >= 0
        assert run.row[f"{step}_compute_ms"] == table.loc[step, "compute_ms"]
    assert f"{ensemble.ENSEMBLE}_queue_ms" not in run.row  # the sum of its steps: not a stage
    # the ensemble's own compute is its steps' compute, summed by Triton
    steps_infer = table.loc[list(ensemble.STEPS), "compute_infer_ms"].sum()
    assert table.loc[ensemble.ENSEMBLE, "compute_infer_ms"] == pytest.approx(steps_infer, rel=0.1)


def test_perf_analyzer_validation_catches_a_wrong_answer(triton, test_images, tmp_path):
    """The check above is live: with other expected logits perf_analyzer fails the run."""
    jpegs = [p for p in test_images if p.suffix == ".jpg"]
    wrong = [np.zeros(len(food11.CLASSES), np.float32) for _ in jpegs]
    inputs = ensemble.write_perf_inputs(jpegs, tmp_path, expected=wrong)
    line = (
        f"perf_analyzer -m {ensemble.ENSEMBLE} -u {triton.url.split('://')[-1]} "
        f"--input-data {inputs['ensemble']} --concurrency-range 1 --request-count 5"
    )
    with pytest.raises(perf.PerfAnalyzerError, match="doesn't match expected output"):
        perf.run_line(line, "wrong", out=tmp_path, timeout=60, verbose=False)


def test_more_preprocess_instances_through_a_config_edit(triton, test_images):
    """Notebook 8's lever: instances of one step only, by a config.pbtxt fragment and a reload;
    the ensemble keeps answering and the classifier keeps its one instance."""
    fragment = "instance_group [ { count: 2, kind: KIND_CPU } ]"
    try:
        result = triton_config.edit("preprocess", fragment, repo=triton.repo, url=triton.url)
        assert result.ok, result.error
        assert result.served["instance_group"][0]["count"] == 2
        served = triton_config.served_config("food_classifier_onnx", triton.url)
        assert served["instance_group"][0]["count"] == 1
        assert ensemble.infer_bytes([test_images[0].read_bytes()], triton.url).shape == (1, 11)
    finally:
        back = fragment.replace("count: 2", "count: 1")
        triton_config.edit("preprocess", back, repo=triton.repo, url=triton.url, verbose=False)


def test_the_flask_ui_sends_the_raw_file_to_the_ensemble(triton, test_images, start_service):
    """FOOD11_MODEL_NAME=food_classifier_ensemble: Flask forwards the upload as it came, the
    server pre-processes it, and the page shows the class the direct path gives."""
    import requests

    from labstack import launcher

    env = {
        "FLASK_BACKEND": "triton",
        "TRITON_SERVER_URL": triton.url,
        "FOOD11_MODEL_NAME": ensemble.ENSEMBLE,
    }
    flask = start_service(launcher.flask_service(launcher.free_port(), env))
    image = test_images[0].read_bytes()
    page = requests.post(
        f"{flask.url}/predict", files={"file": ("a.jpg", image, "image/jpeg")}, timeout=120
    )
    tensor = food11.tensor_from_bytes(image)[None]
    direct = infer(triton.url, "food_classifier_onnx", {"input": tensor}, ["output"])["output"][0]
    assert page.status_code == 200 and f">{food11.top_class(direct)[0]}<" in page.text
