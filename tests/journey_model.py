"""The journey test's stand-in for a model running on the class's GPU (tests/journey_node.py puts
it in the CPU Triton's repository as each model's model.py): an execution takes what one took on
the GPU reference, about 9 ms whatever its batch, and answers with the outputs its config names,
so perf_analyzer, Triton's statistics and the lab's checks see a model of the node's speed on any
CPU, however busy (the journey is about what passes between the passes, not about the model)."""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils

EXECUTION_S = 0.009  # food_classifier's execution on the H100 reference (docs/results/h100)
NUMPY = {"TYPE_FP32": np.float32, "TYPE_INT64": np.int64, "TYPE_STRING": np.object_}


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.inputs = [i["name"] for i in config["input"]]
        self.outputs = [(o["name"], o["data_type"], o["dims"]) for o in config["output"]]

    def execute(self, requests):
        time.sleep(EXECUTION_S)
        responses = []
        for request in requests:
            batch = pb_utils.get_input_tensor_by_name(request, self.inputs[0]).as_numpy().shape[0]
            tensors = [
                pb_utils.Tensor(name, _value(kind, [batch, *dims]))
                for name, kind, dims in self.outputs
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses


def _value(kind: str, shape: list[int]) -> np.ndarray:
    if kind == "TYPE_STRING":
        return np.full(shape, b"Bread", dtype=np.object_)
    return np.full(shape, 1 / 11, dtype=NUMPY[kind])
