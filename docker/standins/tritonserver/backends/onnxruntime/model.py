"""STAND-IN for Triton's onnxruntime backend, as a Python-based backend (docker/standins/README.md).

NVIDIA's image runs models whose config says `backend: "onnxruntime"` with a C++ backend. The
stand-in image has only the Python backend, and Triton then looks for this file
(/opt/tritonserver/backends/onnxruntime/model.py): it serves the model's <version>/model.onnx
with ONNX Runtime on the CPU, one session run per execute() over the stacked requests, for every
input and output the config names. The per-request Python overhead it adds is not in the real
backend; timings of ONNX models on a stand-in are not the real backend's.
"""

from __future__ import annotations

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        import onnxruntime as ort

        config = json.loads(args["model_config"])
        path = os.path.join(
            args["model_repository"],
            args["model_version"],
            config.get("default_model_filename") or "model.onnx",
        )
        self.session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        self.inputs = [i["name"] for i in config["input"]]
        self.outputs = [o["name"] for o in config["output"]]
        pb_utils.Logger.log_warn(
            f"{args['model_name']}: STAND-IN onnxruntime backend (Python-based, CPU, "
            f"onnxruntime {ort.__version__}); the real image runs Triton's C++ onnxruntime backend"
        )

    def execute(self, requests):
        feeds, sizes = {name: [] for name in self.inputs}, []
        for request in requests:
            for name in self.inputs:
                feeds[name].append(pb_utils.get_input_tensor_by_name(request, name).as_numpy())
            sizes.append(len(feeds[self.inputs[0]][-1]))
        try:
            results = self.session.run(
                self.outputs, {k: np.concatenate(v) for k, v in feeds.items()}
            )
        except Exception as exc:  # a clear error to every client, and the model keeps serving
            error = pb_utils.TritonError(f"onnxruntime stand-in: {type(exc).__name__}: {exc}")
            return [pb_utils.InferenceResponse(error=error) for _ in requests]
        responses, start = [], 0
        for size in sizes:
            tensors = [
                pb_utils.Tensor(name, np.ascontiguousarray(out[start : start + size]))
                for name, out in zip(self.outputs, results)
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
            start += size
        return responses
