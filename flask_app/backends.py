"""Where the Flask UI sends an uploaded image: its model server, FastAPI or Triton, one small
class each. The setting keeps its name, FLASK_BACKEND:

FLASK_BACKEND=fastapi  -> FastAPI service at FASTAPI_SERVER_URL (PyTorch or ONNX, same API)
FLASK_BACKEND=triton   -> Triton at TRITON_SERVER_URL, model FOOD11_MODEL_NAME:
    a model with a string input (food_classifier) gets the encoded image;
    a model with a tensor input (food_classifier_onnx) gets pixels pre-processed here, and
    the logits are post-processed here, with the same shared module the services use.
Unset FLASK_BACKEND: Triton if only TRITON_SERVER_URL is set, else FastAPI.
"""

from __future__ import annotations

import base64
import json
import os

import numpy as np
import requests

from servelab import food11
from servelab.serving import triton_clients, triton_guard


class ModelServerError(RuntimeError):
    """Something a person can act on: the message says which model server and what went wrong."""

    status = 502  # the model server failed (the page's answer)


class RefusedRequest(ModelServerError):
    """A request this page will not send: one known to crash the model server (Triton 2.51)."""

    status = 400


def _unreachable(what: str, url: str, exc: Exception) -> ModelServerError:
    kind = "timed out" if isinstance(exc, (requests.Timeout, TimeoutError)) else "is not reachable"
    return ModelServerError(
        f"The {what} at {url} {kind} ({type(exc).__name__}). Start it (make up, or "
        "docker compose up) and try again; this page recovers on its own once it answers."
    )


def _health_problem(what: str, url: str, checks: list[str], timeout: float) -> str:
    for check in checks:
        try:
            resp = requests.get(check, timeout=timeout)
        except requests.RequestException as exc:
            return str(_unreachable(what, url, exc))
        if resp.status_code != 200:
            return f"The {what} at {url} is not ready ({check} answered HTTP {resp.status_code})."
    return ""


class FastAPIServer:
    def __init__(self, url: str):
        self.url = url.rstrip("/")
        self.name = f"FastAPI service ({self.url})"

    def health_problem(self, timeout: float) -> str:
        """'' while the service answers its /health with 200, else what is wrong, in words."""
        health = [f"{self.url}/health"]
        return _health_problem("FastAPI inference service", self.url, health, timeout)

    def weights(self) -> str:
        try:
            return requests.get(f"{self.url}/health", timeout=2).json().get("weights", "unknown")
        except (requests.RequestException, ValueError):
            return "unknown"

    def predict(self, image: bytes, pixels: np.ndarray | None = None) -> tuple[str, float]:
        body = {"image": base64.b64encode(image).decode("ascii")}
        try:
            resp = requests.post(f"{self.url}/predict", json=body, timeout=60)
        except requests.RequestException as exc:
            raise _unreachable("FastAPI inference service", self.url, exc) from None
        if resp.status_code != 200:
            try:
                detail = resp.json().get("detail", resp.text)
            except ValueError:
                detail = resp.text[:300]
            raise ModelServerError(
                f"The FastAPI service answered HTTP {resp.status_code}: {detail}"
            )
        data = resp.json()
        return data["prediction"], float(data["probability"])


class TritonServer:
    """Triton through its own client library, the request shaped by the model's first input:
    INPUT_IMAGE (food_classifier) gets the encoded file and decodes it itself; IMAGE_BYTES (the
    ensemble of notebook 8) gets the raw file and pre-processes it on the server; input (the ONNX
    model) gets the tensor pre-processed here (pre- and post-processing with servelab.food11)."""

    def __init__(self, url: str, model: str):
        self.url, self.model = url.rstrip("/"), model
        self.name = f"Triton model '{model}' ({self.url})"

    def health_problem(self, timeout: float) -> str:
        """'' while Triton and this model answer ready, else what is wrong, in words."""
        urls = [f"{self.url}/v2/health/ready", f"{self.url}/v2/models/{self.model}/ready"]
        return _health_problem(f"Triton server (model '{self.model}')", self.url, urls, timeout)

    def weights(self) -> str:
        try:
            config = triton_clients.for_this_thread(self.url).get_model_config(self.model)
            return config.get("parameters", {}).get("weights", {}).get("string_value", "unknown")
        except Exception:  # noqa: BLE001 - the page shows 'unknown' whatever went wrong
            return "unknown"

    def predict(self, image: bytes, pixels: np.ndarray | None = None) -> tuple[str, float]:
        """`pixels`: the image already pre-processed (food11.tensor_from_bytes), if the caller
        has it; decoded here otherwise."""
        import tritonclient.http as httpclient
        from tritonclient.utils import InferenceServerException

        client = triton_clients.for_this_thread(self.url)
        try:
            metadata = client.get_model_metadata(self.model)
            first_input = metadata["inputs"][0]["name"]
            infer = self._guarded(client, metadata)
            if first_input == "IMAGE_BYTES":  # the ensemble: the file as it came, nothing else
                raw = httpclient.InferInput("IMAGE_BYTES", [1, 1], "BYTES")
                raw.set_data_from_numpy(np.array([[image]], dtype=np.object_))
                result = infer([raw], [httpclient.InferRequestedOutput("LOGITS")])
                return food11.top_class(result.as_numpy("LOGITS")[0])
            if first_input == "INPUT_IMAGE":
                encoded = httpclient.InferInput(
                    "INPUT_IMAGE", [1, 1], "BYTES"
                )  # the model decodes it
                encoded.set_data_from_numpy(np.array([[base64.b64encode(image)]], dtype=np.object_))
                result = infer(
                    [encoded],
                    [
                        httpclient.InferRequestedOutput("FOOD_LABEL"),
                        httpclient.InferRequestedOutput("PROBABILITY"),
                    ],
                )
                return result.as_numpy("FOOD_LABEL")[0][0].decode(), float(
                    result.as_numpy("PROBABILITY")[0][0]
                )
            if pixels is None:
                pixels = food11.tensor_from_bytes(image)
            batch = pixels[None]  # pre-processing in Flask
            tensor = httpclient.InferInput("input", list(batch.shape), "FP32")
            tensor.set_data_from_numpy(batch)
            result = infer([tensor], [httpclient.InferRequestedOutput("output")])
            return food11.top_class(result.as_numpy("output")[0])  # post-processing in Flask
        except InferenceServerException as exc:  # Triton answered, with an error
            raise ModelServerError(f"Triton answered with an error: {exc.message()}") from None
        except (ConnectionError, OSError) as exc:
            raise _unreachable("Triton server", self.url, exc) from None

    def _guarded(self, client, metadata: dict):
        """client.infer for this model, asking triton_guard first: a request known to crash
        Triton 2.51 is refused here (RefusedRequest, a 400), never sent."""
        datatypes = {o["name"]: o["datatype"] for o in metadata.get("outputs", [])}

        def infer(inputs, outputs):
            header = {
                "inputs": [i._get_tensor() for i in inputs],
                "outputs": [o._get_tensor() for o in outputs],
            }
            why = triton_guard.refusal(json.dumps(header).encode(), header["outputs"], datatypes)
            if why:
                raise RefusedRequest(f"Not sent to {self.name}: {why}")
            return client.infer(self.model, inputs, outputs=outputs)

        return infer


def from_env(env=os.environ):
    choice = env.get("FLASK_BACKEND") or (
        "triton"
        if env.get("TRITON_SERVER_URL") and not env.get("FASTAPI_SERVER_URL")
        else "fastapi"
    )
    if choice == "triton":
        return TritonServer(
            env.get("TRITON_SERVER_URL", "http://triton_server:8000"),
            env.get("FOOD11_MODEL_NAME", "food_classifier"),
        )
    if choice == "fastapi":
        return FastAPIServer(env.get("FASTAPI_SERVER_URL", "http://fastapi_server:8000"))
    raise ValueError(f"FLASK_BACKEND must be 'fastapi' or 'triton', not {choice!r}")
