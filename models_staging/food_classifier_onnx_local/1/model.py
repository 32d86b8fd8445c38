"""LOCAL MODE ONLY: a Python-backend stand-in for Triton's onnxruntime backend.

The Triton server of local mode (from the nvidia-pytriton wheel) ships only the Python backend.
This model keeps the name and the interface of models_staging/food_classifier_onnx
(input `input` FP32 [batch, 3, 224, 224], output `output` FP32 [batch, 11]) and runs the same
model.onnx with ONNX Runtime (servelab.serving.runtimes.OnnxClassifier), one session run per
execute() call over the stacked requests. Its timings include the Python backend's per-request
overhead, which the real onnxruntime backend (Docker route) does not have.

On a GPU it keeps one session per batch size (powers of two up to max_batch_size, and every
dynamic_batching.preferred_batch_size) and pads each batch to the nearest: ONNX Runtime's CUDA
provider rebuilds its convolution plans whenever a session's batch size changes, which cost over
a second per batch under dynamic batching (servelab/serving/shape_buckets.py).

Where it runs is reported by the server itself: Triton's metrics endpoint carries
lab_onnx_execution_provider{model=..., provider=...} 1 for the provider each instance's session
uses (CUDAExecutionProvider or CPUExecutionProvider), so a notebook never has to guess from its
own ONNX Runtime.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils

try:
    from servelab.serving.gpu_report import Report
    from servelab.serving.runtimes import (
        OnnxClassifier,
        triton_instance_device,
        triton_thread_budget,
    )
    from servelab.serving.shape_buckets import bucket_sizes
except ImportError as exc:  # pragma: no cover - only when the environment is wrong
    raise ImportError(
        "food_classifier_onnx (local stand-in) needs the lab's 'servelab' package: put the "
        "repository root on PYTHONPATH (local mode does this)"
    ) from exc

WEIGHTS = "model.onnx"
PROVIDER_METRIC = "lab_onnx_execution_provider"


class TritonPythonModel:
    def initialize(self, args):
        self.logger = pb_utils.Logger
        self.model_name = args["model_name"]
        weights = Path(__file__).resolve().parent / WEIGHTS
        if not weights.is_file():
            raise FileNotFoundError(
                f"{weights} is missing: copy {WEIGHTS} into the version folder "
                "(python -m servelab.triton.model_repository does it)"
            )
        threads, why = triton_thread_budget(args)
        config = json.loads(args["model_config"])
        preferred = config.get("dynamic_batching", {}).get("preferred_batch_size", [])
        self.classifier = OnnxClassifier(
            weights,
            device=triton_instance_device(args),
            threads=threads,
            batch_sizes=bucket_sizes(max(1, int(config.get("max_batch_size", 1))), preferred),
        )
        buckets = self.classifier.buckets
        self.logger.log_warn(
            f"{self.model_name}: LOCAL STAND-IN for Triton's onnxruntime backend (that backend is "
            f"not in the pip-installed Triton): a Python-backend model running {weights.name} with "
            f"ONNX Runtime ({self.classifier.device}, {self.classifier.threads} thread(s): {why}"
            + (f"; one session per batch size {buckets.sizes}" if buckets else "")
            + "); same name and I/O as the real one, plus Python-backend overhead"
        )
        # the family must outlive its metric: both are kept until finalize()
        self._provider_family = pb_utils.MetricFamily(
            name=PROVIDER_METRIC,
            description="1 for the ONNX Runtime execution provider this model's session uses",
            kind=pb_utils.MetricFamily.GAUGE,
        )
        self._provider = self._provider_family.Metric(
            labels={"model": self.model_name, "provider": self.classifier.device}
        )
        self._provider.set(1)
        # where this instance runs, in Triton's metrics (servelab/serving/gpu_report.py)
        on_gpu = self.classifier.device == "CUDAExecutionProvider"
        self.where = Report(pb_utils, args, triton_instance_device(args) if on_gpu else "cpu")

    def execute(self, requests):
        responses: list = [None] * len(requests)
        arrays, spans = [], []
        for i, request in enumerate(requests):
            x = pb_utils.get_input_tensor_by_name(request, "input").as_numpy()
            # Triton has already checked name, type and shape [n, 3, 224, 224] against config.pbtxt.
            spans.append((i, sum(len(a) for a in arrays), len(x)))
            arrays.append(x)
        try:
            logits = self.classifier(np.concatenate(arrays) if len(arrays) > 1 else arrays[0])
        except Exception as exc:
            message = f"inference failed: {type(exc).__name__}: {exc}"
            self.logger.log_error(f"{self.model_name}: {message}")
            return [
                pb_utils.InferenceResponse(error=pb_utils.TritonError(message)) for _ in requests
            ]
        for i, start, count in spans:
            out = np.ascontiguousarray(logits[start : start + count], dtype=np.float32)
            responses[i] = pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("output", out)]
            )
        return responses

    def finalize(self):
        self.classifier = self._provider = self.where = None
        self._provider_family = None
