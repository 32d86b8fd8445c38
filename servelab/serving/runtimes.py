"""The two model runtimes the lab compares: PyTorch eager and ONNX Runtime.

Both take a float32 batch [N, 3, 224, 224] and return logits [N, 11], so the FastAPI services and
the Triton Python-backend models share everything but this class.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from servelab.paths import MODEL_ONNX, MODEL_PTH


def cpu_cores() -> int:
    """Cores this process may run on (a container or taskset may allow fewer than the machine
    has)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def thread_budget(instances: int = 1, setting: str | int | None = None) -> int:
    """Threads one model instance may use for its arithmetic: `setting` if it is a number, else
    ("auto" or nothing) the cores divided by the instances that share them, at least 1. Without
    a budget, every instance starts a thread per core: two instances on two cores then fight over
    them and serve less than one (measured: 43 -> 3 inferences/s on the 2-core machine)."""
    if setting not in (None, "", "auto"):
        return max(1, int(setting))
    return max(1, cpu_cores() // max(1, instances))


def triton_thread_budget(args: dict) -> tuple[int, str]:
    """The thread budget of a Triton Python-backend instance, from its model config: the
    `cpu_threads` parameter, else cores / (instances of this model on this machine)."""
    import json

    config = json.loads(args["model_config"])
    setting = config.get("parameters", {}).get("cpu_threads", {}).get("string_value")
    instances = 0
    for group in config.get("instance_group") or [{"count": 1}]:
        per_device = len(group.get("gpus") or []) or (
            _visible_gpus() if group.get("kind") == "KIND_GPU" else 1
        )
        instances += int(group.get("count", 1)) * max(1, per_device)
    threads = thread_budget(instances, setting)
    why = (
        f"cpu_threads: {setting}"
        if setting not in (None, "", "auto")
        else f"{cpu_cores()} cores / {instances} instance(s)"
    )
    return threads, why


def _visible_gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except ImportError:
        return 1


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

    def __init__(
        self, path: Path | str = MODEL_PTH, device: str | None = None, threads: int | None = None
    ):
        import torch

        if threads:  # this process's share of the cores (thread_budget)
            torch.set_num_threads(threads)
            try:
                torch.set_num_interop_threads(1)
            except RuntimeError:  # only possible before the first parallel work of the process
                pass
        self.threads = torch.get_num_threads()

        gpu = _gpu_index(device)
        self.device = torch.device("cpu" if gpu is None else f"cuda:{gpu}")
        try:
            model = torch.load(path, map_location=self.device, weights_only=False)
        except Exception:
            # A whole-model pickle from a newer torch/torchvision than this one (the GPU images
            # pin an older pair): rebuild the architecture and load the plain state_dict saved
            # beside it.
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
    """An ONNX Runtime session on model.onnx. With `batch_sizes` (a batching server's sizes,
    shape_buckets.bucket_sizes) and the CUDA provider, one session per size instead, each batch
    padded to the nearest: the CUDA provider rebuilds its convolution plans whenever a session's
    batch size changes (serving/shape_buckets.py says why and how much). On the CPU provider one
    session serves every size, as there is nothing to rebuild."""

    name = "onnx"

    def __init__(
        self,
        path: Path | str = MODEL_ONNX,
        device: str | None = None,
        threads: int | None = None,
        batch_sizes: list[int] | None = None,
    ):
        import onnxruntime as ort

        options = ort.SessionOptions()
        if threads:  # this process's share of the cores (thread_budget)
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        self.threads = threads or cpu_cores()
        gpu = _gpu_index(device)
        available = ort.get_available_providers()
        if gpu is not None and "CUDAExecutionProvider" in available:
            _load_cuda_libraries()
            providers = [("CUDAExecutionProvider", {"device_id": gpu}), "CPUExecutionProvider"]
        else:
            providers = ["CPUExecutionProvider"]

        def new_session():
            return ort.InferenceSession(str(path), sess_options=options, providers=providers)

        self.session = new_session()
        self.device = self.session.get_providers()[0]
        self.buckets = None  # shape_buckets.BucketedSessions where the provider needs them
        if batch_sizes and self.device == "CUDAExecutionProvider":
            from servelab.serving.shape_buckets import BucketedSessions

            self.buckets = BucketedSessions(new_session, batch_sizes)

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        if self.buckets is not None:
            return self.buckets(batch)
        x = np.ascontiguousarray(batch, dtype=np.float32)
        return self.session.run(["output"], {"input": x})[0]


def _load_cuda_libraries() -> None:
    """ONNX Runtime's CUDA provider needs the CUDA and cuDNN libraries in the process; the PyTorch
    CUDA wheels bring them, and importing torch loads them (else ONNX Runtime searches the
    system)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        pass


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
    value = {runtime: key for key, runtime in FASTAPI_BACKENDS.items()}.get(value, value)
    if value not in FASTAPI_BACKENDS:
        raise ValueError(f"FASTAPI_BACKEND must be 'pt' (PyTorch) or 'onnx', not {value!r}")
    return value
