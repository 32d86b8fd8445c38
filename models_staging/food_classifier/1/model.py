"""Triton Python-backend model: Food-11 classifier (PyTorch MobileNetV2).

Input  INPUT_IMAGE  BYTES [batch, 1]  a base64-encoded JPEG, PNG or WebP file
Output FOOD_LABEL   BYTES [batch, 1]  one of the 11 class names
       PROBABILITY  FP32  [batch, 1]  softmax probability of that class

Triton calls execute() with a list of requests (several when the dynamic batcher combined them,
and a request may itself hold several images). Every image of every request is decoded here,
then ONE forward pass runs on the stacked batch. A request with an unreadable image gets an
error response of its own; the other requests in the same call are answered normally.

The pre/post-processing and the model runtime come from the lab's `servelab` package (the
same code the FastAPI services run): in local mode the launcher puts the repository root on
PYTHONPATH, in the Docker image servelab is pip-installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils

try:
    from servelab import food11
    from servelab.serving.gpu_report import Report
    from servelab.serving.runtimes import (
        TorchClassifier,
        triton_instance_device,
        triton_thread_budget,
    )
except ImportError as exc:  # pragma: no cover - only when the environment is wrong
    raise ImportError(
        "food_classifier needs the lab's 'servelab' package: put the repository root on PYTHONPATH "
        "(local mode does this) or pip-install it in the Triton image"
    ) from exc

WEIGHTS = "food11.pth"


def client_error(message: str):
    """An error the client must fix: INVALID_ARG, which Triton's HTTP endpoint answers with 400."""
    code = getattr(pb_utils.TritonError, "INVALID_ARG", None)
    return pb_utils.TritonError(message) if code is None else pb_utils.TritonError(message, code)


class TritonPythonModel:
    def initialize(self, args):
        self.logger = pb_utils.Logger
        self.model_name = args["model_name"]
        config = json.loads(args["model_config"])
        self.max_batch_size = int(config.get("max_batch_size", 0))
        self.device = triton_instance_device(args)
        weights = Path(__file__).resolve().parent / WEIGHTS
        if not weights.is_file():
            raise FileNotFoundError(
                f"{weights} is missing: copy {WEIGHTS} into the version folder "
                "(python -m servelab.triton.model_repository does it)"
            )
        # each instance runs in its own process: its share of the cores, not a thread per core
        threads, why = triton_thread_budget(args)
        self.classifier = TorchClassifier(weights, device=self.device, threads=threads)
        self.logger.log_info(
            f"{self.model_name}: instance {args.get('model_instance_name')} loaded "
            f"{weights.name} on {self.classifier.device}, {self.classifier.threads} CPU "
            f"thread(s) ({why})"
        )
        # where this instance runs, in Triton's metrics (servelab/serving/gpu_report.py)
        self.where = Report(pb_utils, args, self.classifier.device)

    def _decode(self, request) -> list[np.ndarray]:
        """All images of one request as [3, 224, 224] arrays; food11.BadInput if any is unusable."""
        values = pb_utils.get_input_tensor_by_name(request, "INPUT_IMAGE").as_numpy().reshape(-1)
        images = []
        budget = food11.request_budget()  # the CPU all its images may cost together
        for value in values:
            if len(value) > food11.MAX_BASE64_TEXT:  # by its length, before any copy of it
                raise food11.BadInput(
                    f"INPUT_IMAGE holds {len(value):,} bytes: the base64 text of an image of at "
                    f"most {food11.MAX_IMAGE_BYTES // 2**20} MiB is at most "
                    f"{food11.MAX_BASE64_TEXT:,}."
                )
            if isinstance(value, (bytes, bytearray, np.bytes_)):
                try:
                    value = bytes(value).decode("ascii")
                except UnicodeDecodeError:
                    raise food11.BadInput(
                        "INPUT_IMAGE must be base64 text (ASCII); got binary data. "
                        "Send base64.b64encode(file_bytes)."
                    ) from None
            images.append(food11.tensor_from_base64(str(value), budget))
        return images

    def execute(self, requests):
        responses: list = [None] * len(requests)
        images: list[np.ndarray] = []
        spans: list[tuple[int, int, int]] = []  # (request index, first image, image count)
        for i, request in enumerate(requests):
            try:
                decoded = self._decode(request)
            except food11.BadInput as exc:
                responses[i] = pb_utils.InferenceResponse(error=client_error(str(exc)))
                continue
            except Exception as exc:  # never let one odd request take the model down
                responses[i] = pb_utils.InferenceResponse(
                    error=client_error(f"could not read INPUT_IMAGE: {type(exc).__name__}: {exc}")
                )
                continue
            spans.append((i, len(images), len(decoded)))
            images.extend(decoded)

        if images:
            try:
                logits = self.classifier(np.stack(images))  # ONE forward pass for the whole call
            except Exception as exc:
                message = f"inference failed: {type(exc).__name__}: {exc}"
                self.logger.log_error(f"{self.model_name}: {message}")
                for i, _, _ in spans:
                    responses[i] = pb_utils.InferenceResponse(error=pb_utils.TritonError(message))
                return responses
            for i, start, count in spans:
                labels, probs = [], []
                for row in logits[start : start + count]:
                    label, prob = food11.top_class(row)
                    labels.append([label.encode()])
                    probs.append([prob])
                responses[i] = pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("FOOD_LABEL", np.array(labels, dtype=np.object_)),
                        pb_utils.Tensor("PROBABILITY", np.array(probs, dtype=np.float32)),
                    ]
                )
        return responses

    def finalize(self):
        self.classifier = self.where = None
