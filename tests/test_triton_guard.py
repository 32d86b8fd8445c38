"""The requests that crash Triton 2.51 are recognised (servelab.serving.triton_guard), and the
lab's code that forwards requests to Triton (the Flask page's Triton backend) refuses them with a
400 instead of sending them; Flask's /healthz names a model server that is down. Fast: no server
is started (tests/test_triton_crashes.py sends the same requests to a real Triton)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from flask_app import app as flask_module
from flask_app import backends
from labstack import launcher
from servelab.serving import triton_guard


def nested(depth: int) -> bytes:
    """A v2 inference request whose data nests `depth` levels (the crash: 50,000)."""
    data = "[" * depth + "]" * depth
    return f'{{"inputs":[{{"name":"input","datatype":"FP32","shape":[1],"data":{data}}}]}}'.encode()


def test_json_nested_absurdly_deep_is_refused_and_a_real_request_is_not():
    assert triton_guard.refusal(nested(50_000)).startswith("The request's JSON nests deeper")
    assert "flat list" in triton_guard.refusal(nested(triton_guard.MAX_JSON_DEPTH + 1))
    # a 4-D tensor written out nested, as JSON clients write one: depth 7
    image = {"name": "input", "datatype": "FP32", "shape": [1, 3, 4, 4]}
    image["data"] = np.zeros((1, 3, 4, 4)).tolist()
    body = json.dumps({"inputs": [image], "outputs": [{"name": "output"}]}).encode()
    assert triton_guard.json_depth(body) == 7 and triton_guard.refusal(body) == ""
    # brackets inside strings are text, not structure
    text = json.dumps({"inputs": [{"data": ["[[[[" * 100, '\\"[[[' * 50]}]}).encode()
    assert triton_guard.json_depth(text) == 4


def test_classification_is_refused_on_a_bytes_output_only():
    types = {"FOOD_LABEL": "BYTES", "PROBABILITY": "FP32"}
    asked = [{"name": "FOOD_LABEL", "parameters": {"classification": 3, "binary_data": True}}]
    why = triton_guard.refusal(outputs=asked, datatypes=types)
    assert "'classification'" in why and "FOOD_LABEL" in why and "BYTES" in why
    numeric = [{"name": "PROBABILITY", "parameters": {"classification": 1}}]
    assert triton_guard.refusal(outputs=numeric, datatypes=types) == ""
    assert triton_guard.refusal(outputs=[{"name": "FOOD_LABEL"}], datatypes=types) == ""


class _NeverSend:
    def infer(self, *args, **kwargs):
        raise AssertionError("the request reached Triton")


def test_flasks_triton_backend_refuses_them_before_sending(monkeypatch):
    """Flask builds its request from the model's metadata (every output as it is, never a
    classification): the guard still reads each request, and one it refuses is never sent."""
    server = backends.TritonServer("http://127.0.0.1:9", "food_classifier")
    metadata = {
        "inputs": [{"name": "INPUT_IMAGE", "datatype": "BYTES"}],
        "outputs": [
            {"name": "FOOD_LABEL", "datatype": "BYTES"},
            {"name": "PROBABILITY", "datatype": "FP32"},
        ],
    }
    infer = server._guarded(_NeverSend(), metadata)
    image = np.array([[b"aGVsbG8="]], dtype=np.object_)
    # the page's own request (both outputs as they are) passes the guard and is sent
    with pytest.raises(AssertionError, match="reached Triton"):
        infer("INPUT_IMAGE", image)
    seen = []

    def refuses(header, outputs, datatypes):
        seen.append(json.loads(header))
        return "asks for classification on a BYTES output"

    monkeypatch.setattr(backends.triton_guard, "refusal", refuses)
    with pytest.raises(backends.RefusedRequest) as refused:
        infer("INPUT_IMAGE", image)
    assert refused.value.status == 400 and "classification" in str(refused.value)
    assert [o["name"] for o in seen[0]["outputs"]] == ["FOOD_LABEL", "PROBABILITY"]


@pytest.mark.parametrize(
    "env, named",
    [
        ({"FLASK_BACKEND": "fastapi", "FASTAPI_SERVER_URL": "URL"}, "FastAPI inference service"),
        ({"FLASK_BACKEND": "triton", "TRITON_SERVER_URL": "URL"}, "Triton server"),
    ],
)
def test_healthz_says_degraded_and_names_the_model_server_when_it_is_down(monkeypatch, env, named):
    down = f"http://127.0.0.1:{launcher.free_port()}"  # nothing listens there
    for key, value in env.items():
        monkeypatch.setenv(key, down if value == "URL" else value)
    monkeypatch.setattr(flask_module, "_backend", {"checked": float("-inf"), "problem": ""})
    health = flask_module.app.test_client().get("/healthz")
    assert health.status_code == 503  # degraded: uploads would fail
    assert flask_module.app.test_client().get("/livez").status_code == 200  # the page serves
    body = health.get_json()
    assert body["status"] == "degraded" and down in body["model_server"], body
    assert f"{named}" in body["problem"] and "not reachable" in body["problem"], body
