"""Triton Python-backend model: preprocess (step 1 of food_classifier_ensemble).

Input  IMAGE_BYTES   BYTES [batch, 1]          the raw image file (JPEG, PNG or WebP), not base64
Output IMAGE_TENSOR  FP32  [batch, 3, 224, 224]  ImageNet-normalised, food_classifier_onnx's input

The decoding and normalising is servelab.food11.tensor_from_bytes: the same function the FastAPI
services, the Flask app and the food_classifier model call, so there is one pre-processing in
the lab, wherever it runs, and one decode budget (servelab.decode_budget). A request whose image
cannot be read, or costs too much to decode, gets an error response of its own (INVALID_ARG: HTTP
400); the other requests of the same execute() call are answered.
"""

from __future__ import annotations

import numpy as np
import triton_python_backend_utils as pb_utils

try:
    from servelab import food11
except ImportError as exc:  # pragma: no cover - only when the environment is wrong
    raise ImportError(
        "preprocess needs the lab's 'servelab' package: put the repository root on PYTHONPATH "
        "(local mode does this) or pip-install it in the Triton image"
    ) from exc


def client_error(message: str):
    """An error the client must fix: INVALID_ARG, which Triton's HTTP endpoint answers with 400."""
    code = getattr(pb_utils.TritonError, "INVALID_ARG", None)
    return pb_utils.TritonError(message) if code is None else pb_utils.TritonError(message, code)


class TritonPythonModel:
    def initialize(self, args):
        instance = args.get("model_instance_name")
        pb_utils.Logger.log_info(
            f"{args['model_name']}: instance {instance} ready (servelab.food11.tensor_from_bytes)"
        )

    @staticmethod
    def _tensors(request) -> np.ndarray:
        """All images of one request as one [n, 3, 224, 224] array (food11.BadInput if one is
        unusable or costs more to decode than servelab.decode_budget allows, alone or together
        with the other images of the request)."""
        values = pb_utils.get_input_tensor_by_name(request, "IMAGE_BYTES").as_numpy().reshape(-1)
        return food11.tensors_from_bytes(values)

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                tensor = self._tensors(request)
            except food11.BadInput as exc:
                responses.append(pb_utils.InferenceResponse(error=client_error(str(exc))))
                continue
            except Exception as exc:  # never let one odd request take the model down
                responses.append(
                    pb_utils.InferenceResponse(
                        error=client_error(
                            f"could not read IMAGE_BYTES: {type(exc).__name__}: {exc}"
                        )
                    )
                )
                continue
            responses.append(
                pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("IMAGE_TENSOR", tensor)])
            )
        return responses
