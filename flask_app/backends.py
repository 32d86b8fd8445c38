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
    """Triton through its own client library, the request shaped by the model's metadata: its
    one input gets the file as the model takes it (FILE_AS: food_classifier's INPUT_IMAGE
    decodes base64 itself, notebook 8's ensemble takes IMAGE_BYTES raw and pre-processes it on
    the server), or the tensor pre-processed here (the ONNX model's input); every output the
    model has comes back, and the answer is read from their datatypes (pre- and post-processing
    with servelab.food11). Notebook 5's exercise is the hand-written request; this is not it."""

    # how a model whose one input is BYTES takes the file, by that input's name
    FILE_AS = {"INPUT_IMAGE": base64.b64encode, "IMAGE_BYTES": bytes}

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
        has it; decoded here otherwise (for a model that takes a tensor)."""
        from tritonclient.utils import InferenceServerException

        client = triton_clients.for_this_thread(self.url)
        try:
            metadata = client.get_model_metadata(self.model)
            first = metadata["inputs"][0]
            if first["datatype"] == "BYTES":  # the file, as the model takes it
                value = np.array([[self.FILE_AS.get(first["name"], bytes)(image)]], np.object_)
            else:  # a tensor: pre-processing in Flask
                value = (food11.tensor_from_bytes(image) if pixels is None else pixels)[None]
            outputs = self._guarded(client, metadata)(first["name"], value)
        except InferenceServerException as exc:  # Triton answered, with an error
            raise ModelServerError(f"Triton answered with an error: {exc.message()}") from None
        except (ConnectionError, OSError) as exc:
            raise _unreachable("Triton server", self.url, exc) from None
        return _answer(outputs)

    def _guarded(self, client, metadata: dict):
        """A request of one input to this model asking for every output, through client.infer
        after triton_guard: one known to crash Triton 2.51 is refused here (RefusedRequest, a
        400), never sent. Returns {output's datatype and name: array}."""
        import tritonclient.http as httpclient
        from tritonclient.utils import np_to_triton_dtype

        wanted = [(o["datatype"], o["name"]) for o in metadata.get("outputs", [])]

        def infer(name: str, value: np.ndarray) -> dict:
            datatype = "BYTES" if value.dtype == np.object_ else np_to_triton_dtype(value.dtype)
            tensor = httpclient.InferInput(name, list(value.shape), datatype)
            tensor.set_data_from_numpy(value)
            outputs = [httpclient.InferRequestedOutput(n) for _, n in wanted]
            header = {
                "inputs": [tensor._get_tensor()],
                "outputs": [o._get_tensor() for o in outputs],
            }
            why = triton_guard.refusal(
                json.dumps(header).encode(), header["outputs"], dict((n, t) for t, n in wanted)
            )
            if why:
                raise RefusedRequest(f"Not sent to {self.name}: {why}")
            result = client.infer(self.model, [tensor], outputs=outputs)
            return {(t, n): result.as_numpy(n) for t, n in wanted}

        return infer


def _answer(outputs: dict) -> tuple[str, float]:
    """(class, probability) from a model's outputs: a class name (BYTES) with its probability
    (the first other output), or logits (post-processing in Flask)."""
    names = [a for (datatype, _), a in outputs.items() if datatype == "BYTES"]
    numbers = [a for (datatype, _), a in outputs.items() if datatype != "BYTES"]
    if names:
        label = names[0].reshape(-1)[0]
        label = label.decode() if isinstance(label, bytes) else str(label)
        return label, float(numbers[0].reshape(-1)[0])
    return food11.top_class(numbers[0][0])


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
