"""Triton Python-backend model: food_classifier_tuned (notebook 7, "how close to the hardware?").

Input  input   FP32 [batch, 3, 224, 224] (normalised)  or  UINT8 [batch, 224, 224, 3] (raw pixels)
Output output  FP32 [batch, 11]  logits

Which input, precision, CUDA graphs and compilation: read from config.pbtxt at load time (see its
header), so each of notebook 7's steps is a config change plus a reload. The work is in
servelab.serving.tuned_runtime.TunedClassifier; this file only moves tensors between Triton and
it, as cheaply as it can: the requests of one execute() call become one batch, and the logits are
split back per request. Inputs in host memory are stacked into one pinned buffer; inputs Triton
hands over on the GPU (CUDA shared memory with FORCE_CPU_ONLY_INPUT_TENSORS "no") are taken
through DLPack without a copy and stacked on the GPU.

Maintainers' parameters (maintainers/reference/execution_costs.py; notebook 7 does not set them):
graph_step (CUDA graphs for every multiple of it, tuned_runtime.buckets), direct_inputs (each
input copied to the GPU from the backend's shared memory, servelab/serving/pinned_shm.py) and
profile_dir (where each instance writes its phase clock, servelab/serving/stub_profile.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import triton_python_backend_utils as pb_utils
from torch.utils.dlpack import from_dlpack

try:
    from servelab.serving.runtimes import triton_instance_device, triton_thread_budget
    from servelab.serving.stub_profile import StubClock
    from servelab.serving.tuned_runtime import TunedClassifier
except ImportError as exc:  # pragma: no cover - only when the environment is wrong
    raise ImportError(
        "food_classifier_tuned needs the lab's 'servelab' package: put the repository root on "
        "PYTHONPATH "
        "(local mode does this) or pip-install it in the Triton image"
    ) from exc

WEIGHTS = "food11.pth"
FORMATS = {"TYPE_FP32": "fp32_nchw", "TYPE_UINT8": "uint8_nhwc"}


def _parameter(config: dict, key: str, default: str) -> str:
    return config.get("parameters", {}).get(key, {}).get("string_value", default).strip().lower()


def _host_array(tensor, in_place: bool = False):
    """A request's input as a numpy array (one on the GPU, in a mixed batch, comes back first).
    in_place: a view of the backend's shared memory through DLPack, where the stub keeps the
    request (as_numpy() gives a copy of it in the stub's heap, seen on the H100: 2026-11-27), so
    direct_inputs can copy it to the GPU from there."""
    if not tensor.is_cpu():
        return from_dlpack(tensor.to_dlpack()).cpu().numpy()
    if in_place:
        try:
            return from_dlpack(tensor.to_dlpack()).numpy()
        except Exception:  # noqa: BLE001 - a backend without CPU DLPack: the copy will do
            pass
    return tensor.as_numpy()


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        name = args["model_name"]
        data_type = config["input"][0]["data_type"]
        if data_type not in FORMATS:
            raise ValueError(
                f"{name}: input data_type must be TYPE_FP32 [3,224,224] or TYPE_UINT8 [224,224,3], "
                f"not {data_type}"
            )
        weights = Path(__file__).resolve().parent / WEIGHTS
        if not weights.is_file():
            raise FileNotFoundError(
                f"{weights} is missing: copy {WEIGHTS} into the version folder "
                "(python -m servelab.triton.model_repository does it)"
            )
        self.runtime = TunedClassifier(
            weights,
            device=triton_instance_device(args),
            input_format=FORMATS[data_type],
            precision=_parameter(config, "precision", "fp32"),
            cuda_graphs=_parameter(config, "cuda_graphs", "off") in ("on", "true", "yes", "1"),
            max_batch=max(1, int(config.get("max_batch_size", 0))),
            threads=triton_thread_budget(args)[0],
            compiled=_parameter(config, "compile", "off") in ("on", "true", "yes", "1"),
            graph_step=int(_parameter(config, "graph_step", "0") or 0),
            direct_inputs=_parameter(config, "direct_inputs", "off") in ("on", "true", "yes", "1"),
        )
        self.direct = _parameter(config, "direct_inputs", "off") in ("on", "true", "yes", "1")
        # maintainers' profile of where an execution's time goes (servelab.serving.stub_profile)
        folder = config.get("parameters", {}).get("profile_dir", {}).get("string_value", "")
        self.clock = None
        if folder.strip():
            import torch

            cuda = torch.cuda if self.runtime.device.type == "cuda" else None
            self.clock = StubClock(folder.strip(), args["model_instance_name"], cuda)
        pb_utils.Logger.log_info(
            f"{name}: instance {args.get('model_instance_name')}: {self.runtime.describe()}"
        )

    def execute(self, requests):
        clock = self.clock
        if clock is not None:
            clock.start()
        # Triton has checked name, type and shape of every input against config.pbtxt already.
        tensors = [pb_utils.get_input_tensor_by_name(r, "input") for r in requests]
        try:
            if any(t.is_cpu() for t in tensors):
                parts = [_host_array(t, self.direct) for t in tensors]
                if clock is not None:
                    clock.mark("inputs")
                logits = self.runtime.run(parts, clock)
            else:  # on the GPU already: no copy through the host
                parts = [from_dlpack(t.to_dlpack()) for t in tensors]
                if clock is not None:
                    clock.mark("inputs")
                logits = self.runtime.run_on_device(parts)
                if clock is not None:
                    clock.mark("device")
        except Exception as exc:
            message = f"inference failed: {type(exc).__name__}: {exc}"
            pb_utils.Logger.log_error(message)
            return [
                pb_utils.InferenceResponse(error=pb_utils.TritonError(message)) for _ in requests
            ]
        responses, start = [], 0
        for part in parts:
            out = logits[start : start + len(part)]
            start += len(part)
            responses.append(
                pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("output", out)])
            )
        if clock is not None:
            clock.mark("responses")
            clock.extra["direct_batches"] = self.runtime.direct_batches
            clock.extra["direct_refused"] = self.runtime.direct_refusals()
            clock.end(len(requests), start)
        return responses

    def finalize(self):
        self.runtime = None
