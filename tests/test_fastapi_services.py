"""Both FastAPI services as real uvicorn processes: the API contract, bad input, and that they keep
serving."""

import base64

import numpy as np
import pytest
import requests

from servelab import food11
from servelab.serving.runtimes import RUNTIMES

pytestmark = pytest.mark.slow  # real uvicorn processes


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_health_says_ready_runtime_and_weights(fastapi_servers, runtime):
    body = requests.get(f"{fastapi_servers[runtime]}/health", timeout=5).json()
    assert (
        body["status"] == "ready" and body["runtime"] == runtime and body["weights"] == "untrained"
    )


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_predict_returns_a_class_and_the_softmax_probability(fastapi_servers, runtime, test_images):
    model = RUNTIMES[runtime](device="cpu")
    for path in test_images:
        resp = requests.post(
            f"{fastapi_servers[runtime]}/predict",
            json={"image": base64.b64encode(path.read_bytes()).decode()},
            timeout=60,
        )
        assert resp.status_code == 200, resp.text
        body = resp.json()
        expected_label, expected_prob = food11.top_class(
            model(food11.tensor_from_bytes(path.read_bytes())[None])[0]
        )
        assert body["prediction"] == expected_label and body["prediction"] in food11.CLASSES
        assert (
            body["probability"] == pytest.approx(expected_prob, abs=1e-4)
            and 0 < body["probability"] <= 1
        )
        timing = resp.headers["Server-Timing"]
        assert "infer;dur=" in timing and "queue;dur=" in timing


def test_both_runtimes_give_the_same_answer(fastapi_servers, test_images):
    for path in test_images:
        body = {"image": base64.b64encode(path.read_bytes()).decode()}
        answers = [
            requests.post(f"{fastapi_servers[b]}/predict", json=body, timeout=60).json()
            for b in RUNTIMES
        ]
        assert answers[0]["prediction"] == answers[1]["prediction"]
        assert answers[0]["probability"] == pytest.approx(answers[1]["probability"], abs=1e-3)


BAD_BODIES = [
    ("not base64", {"image": "***not base64***"}, 400, "base64"),
    ("not an image", {"image": base64.b64encode(b"just some text").decode()}, 415, "not an image"),
    ("empty", {"image": ""}, 400, "empty"),
    ("missing field", {"picture": "abc"}, 422, '{"image"'),
    ("wrong type", {"image": 12345}, 422, '{"image"'),
    ("huge", {"image": "A" * (12 * 1024 * 1024)}, 413, "at most"),
]


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("name, body, status, words", BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_bad_input_gets_a_clear_4xx_and_the_service_keeps_serving(
    fastapi_servers, runtime, name, body, status, words, image_b64
):
    url = fastapi_servers[runtime]
    resp = requests.post(f"{url}/predict", json=body, timeout=60)
    assert resp.status_code == status, resp.text
    assert words in resp.json()["detail"]
    assert requests.post(f"{url}/predict", json={"image": image_b64}, timeout=60).status_code == 200


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_non_json_body_and_huge_pixel_count(fastapi_servers, runtime):
    import io

    from PIL import Image

    url = fastapi_servers[runtime]
    resp = requests.post(
        f"{url}/predict",
        data=b"\x00\x01 not json",
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert resp.status_code == 422 and "JSON body" in resp.json()["detail"]
    buf = io.BytesIO()
    Image.new("L", (10000, 5000)).save(buf, "PNG")  # 50 Mpx decompression bomb, tiny file
    resp = requests.post(
        f"{url}/predict", json={"image": base64.b64encode(buf.getvalue()).decode()}, timeout=30
    )
    assert resp.status_code == 413 and "pixels" in resp.json()["detail"]


def test_swagger_docs_with_a_working_example(fastapi_servers):
    url = fastapi_servers["onnx"]
    assert "swagger" in requests.get(f"{url}/docs", timeout=10).text.lower()
    schema = requests.get(f"{url}/openapi.json", timeout=10).json()["components"]["schemas"][
        "PredictRequest"
    ]
    example = schema["properties"]["image"]["examples"][0]
    resp = requests.post(f"{url}/predict", json={"image": example}, timeout=30)
    assert resp.status_code == 200 and resp.json()["prediction"] in food11.CLASSES


def test_concurrent_requests_queue_behind_one_model(fastapi_servers, image_b64):
    """The service runs one request at a time: with 8 concurrent senders most time is queue, not
    infer."""
    from servelab import loadgen

    row = loadgen.summarize(
        loadgen.run(
            f"{fastapi_servers['onnx']}/predict",
            {"image": image_b64},
            n=48,
            concurrency=8,
            progress=False,
        )
    )
    assert row["errors"] == 0
    assert row["queue_median_ms"] > row["infer_median_ms"]
    assert np.isfinite(row["throughput_rps"]) and row["throughput_rps"] > 0
