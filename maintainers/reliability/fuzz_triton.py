"""Bad requests against both Triton models (KServe v2 over HTTP): wrong datatype, wrong shape, empty
string, batch larger than max_batch_size, malformed bodies, plus Hypothesis-generated headers.

Triton answers with its own error responses. Where its HTTP frontend cannot parse the JSON body
(e.g. 'data' whose element count does not match 'shape', 'inputs' that is not an array) it answers
HTTP 500 "Unable to parse ...": Triton's code (src/http_server.cc returns
TRITONSERVER_ERROR_INTERNAL there), reached before any model runs. Those cases get their own
verdict, TRITON_CORE_500, so they are neither hidden among the 4xx nor counted as a crash of our
services; after them the server must still answer a good request for both models.
"""

from __future__ import annotations

import base64
import json
import struct
import time

import numpy as np
import requests

from maintainers.reliability.common import (
    HTTP_TIMEOUT,
    TRITON_CORE_500,
    Tally,
    hypothesis_run,
    record,
)
from maintainers.reliability.corpus import corpus_file, seed_images
from servelab import food11
from servelab.serving import triton_clients
from servelab.triton.triton_config import model_ready

MODELS = ("food_classifier", "food_classifier_onnx")
INPUT = {"food_classifier": "INPUT_IMAGE", "food_classifier_onnx": "input"}


def infer_raw(
    url: str,
    model: str,
    header: dict,
    blobs: list[bytes] = (),
    version: str = "",
    header_length: int | None = None,
    timeout: float = HTTP_TIMEOUT,
) -> requests.Response:
    """One raw KServe-v2 infer request: a JSON header (+ binary blobs), any shape or datatype."""
    path = f"{url}/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
    head = json.dumps(header).encode()
    if not blobs and header_length is None:
        return requests.post(
            path, data=head, headers={"Content-Type": "application/json"}, timeout=timeout
        )
    return requests.post(
        path,
        data=head + b"".join(blobs),
        timeout=timeout,
        headers={
            "Inference-Header-Content-Length": str(header_length or len(head)),
            "Content-Type": "application/octet-stream",
        },
    )


def error_of(resp) -> str:
    try:
        return str(resp.json().get("error", ""))
    except (ValueError, AttributeError):
        return resp.text[:300]


def _bin_input(name: str, shape, datatype: str, blob: bytes) -> dict:
    return {
        "name": name,
        "shape": list(shape),
        "datatype": datatype,
        "parameters": {"binary_data_size": len(blob)},
    }


def cases(good_b64: str) -> list[tuple[str, str, dict]]:
    """(model, case name, infer_raw keyword arguments). Each model's last case is a good request."""
    img, onnx = MODELS
    outs_img = [{"name": "FOOD_LABEL"}, {"name": "PROBABILITY"}]
    pixels = np.zeros((1, 3, 224, 224), np.float32)
    bomb = base64.b64encode(corpus_file("PNG 20000x20000")).decode()
    trunc = base64.b64encode(seed_images()[0][:100]).decode()
    binary = struct.pack("<I", 3) + b"\xff\xfe\x00"  # one BYTES element, length-prefixed

    def bytes_in(values, shape=None):
        return {
            "inputs": [
                {
                    "name": "INPUT_IMAGE",
                    "shape": shape or [len(values), 1],
                    "datatype": "BYTES",
                    "data": values,
                }
            ],
            "outputs": outs_img,
        }

    def fp(arr: np.ndarray, dtype="FP32", name="input", shape=None):
        blob = arr.tobytes()
        return {
            "header": {
                "inputs": [_bin_input(name, shape or arr.shape, dtype, blob)],
                "outputs": [{"name": "output", "parameters": {"binary_data": False}}],
            },
            "blobs": [blob],
        }

    return [
        (
            img,
            "wrong datatype (FP32 for BYTES)",
            {
                "header": {
                    "inputs": [
                        {"name": "INPUT_IMAGE", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}
                    ]
                }
            },
        ),
        (img, "wrong shape [1, 2]", {"header": bytes_in([good_b64, good_b64], [1, 2])}),
        (img, "shape without batch dim [1]", {"header": bytes_in([good_b64], [1])}),
        (img, "empty string", {"header": bytes_in([""])}),
        (img, "not base64", {"header": bytes_in(["this is not base64!"])}),
        (img, "base64 of text", {"header": bytes_in([base64.b64encode(b"hello world").decode()])}),
        (img, "truncated JPEG", {"header": bytes_in([trunc])}),
        (img, "decompression bomb (400 Mpx PNG)", {"header": bytes_in([bomb])}),
        (
            img,
            "binary (non-ASCII) bytes",
            {
                "header": {"inputs": [_bin_input("INPUT_IMAGE", [1, 1], "BYTES", binary)]},
                "blobs": [binary],
            },
        ),
        (img, "batch 17 > max_batch_size 16", {"header": bytes_in([good_b64] * 17)}),
        (img, "batch 0", {"header": bytes_in([], [0, 1])}),
        (img, "element count != shape", {"header": bytes_in([good_b64], [2, 1])}),
        (
            img,
            "wrong input name",
            {
                "header": {
                    "inputs": [
                        {"name": "IMAGE", "shape": [1, 1], "datatype": "BYTES", "data": [good_b64]}
                    ]
                }
            },
        ),
        (img, "no inputs", {"header": {"inputs": []}}),
        (
            img,
            "unknown output",
            {"header": {**bytes_in([good_b64]), "outputs": [{"name": "LOGITS"}]}},
        ),
        (img, "version 7 (not in repository)", {"header": bytes_in([good_b64]), "version": "7"}),
        (
            img,
            "header length larger than body",
            {"header": bytes_in([good_b64]), "header_length": 10**6, "blobs": [b""]},
        ),
        (img, "good request", {"header": bytes_in([good_b64])}),
        (onnx, "wrong datatype FP64", fp(pixels.astype(np.float64), "FP64")),
        (onnx, "wrong datatype INT64", fp(pixels.astype(np.int64), "INT64")),
        (
            onnx,
            "wrong datatype BYTES",
            {
                "header": {
                    "inputs": [
                        {"name": "input", "shape": [1, 1], "datatype": "BYTES", "data": ["abc"]}
                    ]
                }
            },
        ),
        (onnx, "wrong shape [1,3,224,223]", fp(np.zeros((1, 3, 224, 223), np.float32))),
        (onnx, "missing dim [1,3,224]", fp(np.zeros((1, 3, 224), np.float32))),
        (onnx, "batch 17 > max_batch_size 16", fp(np.zeros((17, 3, 224, 224), np.float32))),
        (onnx, "batch 0", fp(np.zeros((0, 3, 224, 224), np.float32))),
        (
            onnx,
            "fewer bytes than the shape needs",
            fp(np.zeros((1, 3, 224, 100), np.float32), shape=[1, 3, 224, 224]),
        ),
        (
            onnx,
            "JSON data, wrong element count",
            {
                "header": {
                    "inputs": [
                        {
                            "name": "input",
                            "shape": [1, 3, 224, 224],
                            "datatype": "FP32",
                            "data": [0.0] * 10,
                        }
                    ]
                }
            },
        ),
        (onnx, "wrong input name", fp(pixels, name="pixels")),
        (onnx, "malformed JSON ('inputs' is a string)", {"header": {"inputs": "nope"}}),
        (
            onnx,
            "NaN pixels (answered: garbage in, garbage out)",
            fp(np.full((1, 3, 224, 224), np.nan, np.float32)),
        ),
        (onnx, "good request", fp(pixels)),
    ]


def generated_headers(model: str):
    """Hypothesis strategy: one-input JSON requests with random name, datatype, shape and data."""
    from hypothesis import strategies as st

    scalars = st.one_of(
        st.text(max_size=12),
        st.integers(-5, 300),
        st.booleans(),
        st.floats(allow_nan=False, allow_infinity=False, width=32),
    )

    @st.composite
    def header(draw):
        inp = {
            "name": draw(st.one_of(st.just(INPUT[model]), st.text(max_size=8))),
            "datatype": draw(
                st.sampled_from(
                    ["BYTES", "FP32", "FP64", "INT64", "UINT8", "FP16", "BOOL", "NOPE", ""]
                )
            ),
            "shape": draw(st.lists(st.integers(-2, 20), max_size=5)),
        }
        data = draw(st.one_of(st.none(), st.lists(scalars, max_size=8)))
        if data is not None:
            inp["data"] = data
        return {"inputs": [inp]}

    return header()


def verdict(resp) -> tuple[str, str]:
    """Any non-2xx answer of Triton with an 'error' message is a rejection; a 500 is one only
    when it is the HTTP frontend's JSON parser ("Unable to parse ..."), and then it gets its own
    verdict."""
    if resp.status_code < 300:
        return "accepted", ""
    message = error_of(resp).strip()
    if not message:
        return (
            "server error" if resp.status_code >= 500 else "unclear"
        ), f"{resp.status_code} without an 'error' message: {resp.text[:200]}"
    if resp.status_code >= 500:
        if message.startswith("Unable to parse"):
            return TRITON_CORE_500, f"HTTP {resp.status_code}: {message}"
        return "server error", f"HTTP {resp.status_code}: {message}"
    return "rejected", ""


def good_request(model: str, good_b64: str):
    """ask(client) -> True when `model` answers a good request (the real image) through tritonclient
    with a Food-11 label / 11 logits. The image is prepared once, not per request."""
    import tritonclient.http as httpclient

    if model == "food_classifier":
        name, data, datatype = (
            "INPUT_IMAGE",
            np.array([[good_b64.encode()]], dtype=np.object_),
            "BYTES",
        )
    else:
        name, data, datatype = "input", food11.tensor_from_base64(good_b64)[None], "FP32"

    def ask(client) -> bool:
        tensor = httpclient.InferInput(name, list(data.shape), datatype)
        tensor.set_data_from_numpy(data)
        result = client.infer(model, [tensor])
        if model == "food_classifier":
            return result.as_numpy("FOOD_LABEL")[0][0].decode() in food11.CLASSES
        return result.as_numpy("output").shape == (1, len(food11.CLASSES))

    return ask


def answers_good_request(url: str, model: str, good_b64: str) -> bool:
    """The model still serves: a Food-11 label / 11 logits for a real image."""
    from tritonclient.utils import InferenceServerException

    try:
        return good_request(model, good_b64)(triton_clients.for_this_thread(url))
    except (InferenceServerException, OSError):
        return False


def fuzz_triton(proc, good_b64: str, generated: int = 40, seed: int = 0) -> dict[str, Tally]:
    """The hand-made cases, then `generated` Hypothesis headers per model; one Tally per model whose
    messages hold Triton's answer to every hand-made case."""
    tallies = {m: Tally(f"Triton {m}") for m in MODELS}
    ready_before = {m: model_ready(m, proc.url) for m in MODELS}
    for model, name, kwargs in cases(good_b64):
        tally = tallies[model]
        start = time.perf_counter()

        def judge(resp, tally=tally, name=name):
            tally.messages[name] = f"HTTP {resp.status_code}: " + (error_of(resp) or "(answered)")
            return verdict(resp)

        record(tally, proc, name, lambda: infer_raw(proc.url, model, **kwargs), judge)
        tally.seconds += time.perf_counter() - start
    for model, tally in tallies.items():
        start = time.perf_counter()
        hypothesis_run(
            generated_headers(model),
            lambda header: record(
                tally,
                proc,
                f"generated {json.dumps(header)[:120]}",
                lambda: infer_raw(proc.url, model, header),
                verdict,
            ),
            generated,
            seed,
        )
        tally.still_serving = (
            ready_before[model] and proc.alive() and answers_good_request(proc.url, model, good_b64)
        )
        tally.seconds += time.perf_counter() - start
    return tallies
