"""The two model runtimes the lab compares: PyTorch eager and ONNX Runtime.

Both take a float32 batch [N, 3, 224, 224] and return logits [N, 11], so the FastAPI services and
the Triton Python-backend models share everything but this class.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from servelab.paths import MODEL_ONNX, MODEL_PTH


def _gpu_index(device: str | None) -> int | None:
    """'cuda', 'cuda:1', 'cpu' or None (auto) -> GPU index or None for CPU."""
    if device is None:
        device = os.environ.get("FOOD11_DEVICE", "auto")
    if device == "cpu":
        return None
    if device.startswith("cuda"):
        return int(device.split(":")[1]) if ":" in device else 0
    return 0 if _cuda_available() else None


def _cuda_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        import onnxruntime as ort
        return "CUDAExecutionProvider" in ort.get_available_providers()


class TorchClassifier:
    name = "pytorch"

    def __init__(self, path: Path | str = MODEL_PTH, device: str | None = None):
        import torch

        gpu = _gpu_index(device)
        self.device = torch.device("cpu" if gpu is None else f"cuda:{gpu}")
        try:
            model = torch.load(path, map_location=self.device, weights_only=False)
        except Exception:
            # A whole-model pickle from a newer torch/torchvision than this one (the GPU images pin an
            # older pair): rebuild the architecture and load the plain state_dict saved beside it.
            state = Path(path).with_name("food11_state_dict.pth")
            if not state.is_file():
                raise
            from servelab.food11 import new_model
            model = new_model()
            model.load_state_dict(torch.load(state, map_location=self.device, weights_only=True))
        self.model = model.to(self.device).eval()
        self._torch = torch

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        torch = self._torch
        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(batch, dtype=np.float32)).to(self.device)
            return self.model(x).float().cpu().numpy()


class OnnxClassifier:
    name = "onnx"

    def __init__(self, path: Path | str = MODEL_ONNX, device: str | None = None):
        import onnxruntime as ort

        gpu = _gpu_index(device)
        available = ort.get_available_providers()
        if gpu is not None and "CUDAExecutionProvider" in available:
            providers = [("CUDAExecutionProvider", {"device_id": gpu}), "CPUExecutionProvider"]
        else:
            providers = ["CPUExecutionProvider"]
        self.session = ort.InferenceSession(str(path), providers=providers)
        self.device = self.session.get_providers()[0]

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(batch, dtype=np.float32)
        return self.session.run(["output"], {"input": x})[0]


def triton_instance_device(args: dict) -> str:
    """The device Triton gave a Python-backend model instance: 'cuda:N' for KIND_GPU, else 'cpu'."""
    if args.get("model_instance_kind", "CPU") == "GPU":
        return f"cuda:{int(args.get('model_instance_device_id', 0))}"
    return "cpu"


RUNTIMES = {"pytorch": TorchClassifier, "onnx": OnnxClassifier}
# FASTAPI_BACKEND values are the service folder suffixes (fastapi_pt/, fastapi_onnx/), in local
# mode and in Docker alike; "pytorch" is accepted too.
FASTAPI_BACKENDS = {"pt": "pytorch", "onnx": "onnx"}


def fastapi_backend(value: str) -> str:
    """'pt' | 'pytorch' | 'onnx' -> the FASTAPI_BACKEND value ('pt' or 'onnx')."""
    value = {"pytorch": "pt"}.get(value, value)
    if value not in FASTAPI_BACKENDS:
        raise ValueError(f"FASTAPI_BACKEND must be 'pt' (PyTorch) or 'onnx', not {value!r}")
    return value
