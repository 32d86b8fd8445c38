"""The answer key of the exercises of notebooks 3 to 8: what each step's answer sets, in plain.

Introduced in notebook 3. This file is the solved edition's and the tests'; the class edition has
in its place the same key sealed as salted digests (`make class-edition`, labstack/class_edition.py:
servelab/exercises/key.py compares through either), so what students receive checks every answer
without holding one. The table of steps (steps.py) says what each step is and which check reads
it; here is only what the answer must say, field by field:

    a perf_analyzer line   {flag: value} (None: the flag alone), perf_analyzer's default
                           written out or left out alike
    a curl line            {"url": the URL}
    config.pbtxt           {dotted field: value}; "instance_group": where Triton puts the
                           instances (Every: `count` on every GPU, OnFirst: on GPU 0 alone)
    a call as written      {"call.method": ..., "call.args": [...], "call.keyword.<name>": True}

A value may name the notebook's values ("{HOST}"): an answer meets it by being that value.
"""

from __future__ import annotations

from servelab.exercises.step_needs import AnyOrder, Every, OnFirst

FOOD, ONNX = "food_classifier", "food_classifier_onnx"
_61 = {"-m": FOOD, "-u": "{HOST}", "--input-data": "{PERF_INPUT}"}  # the Python-backend model
_64 = {"-m": ONNX, "-u": "{HOST}", "--shape": "input:3,224,224"}  # the ONNX model's tensor
_RATE = {**_64, "--async": None}  # an open loop: as many in flight as the schedule needs
_73 = {
    "-m": "{MODEL}",
    "-u": "{HOST}",
    "--concurrency-range": "{CLIENTS}",
    "--async": None,
    "--shape": "input:224,224,3",
}
_GRPC = {**_73, "-u": "{GRPC_HOST}", "-i": "grpc"}


def _all_of_63a_on_gpu0(n_gpus: int) -> int:
    """6.3d: 6.3a's instances (two per GPU) all on GPU 0, judged for the class's two GPUs (or
    all of a larger node's)."""
    return 2 * max(n_gpus, 2)


NEEDS: dict[str, dict] = {
    # notebook 3
    "3.1": {"url": "{FASTAPI}/health"},
    # notebook 5
    "5.1": {"call.method": "get_model_config", "call.args": [FOOD]},
    "5.3": {"url": "{TRITON}/v2/models/food_classifier/stats"},
    # notebook 6
    "6.1a": {**_61, "--concurrency-range": 1},
    "6.1b": {**_61, "--concurrency-range": 8},
    "6.1c": {**_61, "--concurrency-range": 16},
    "6.1d": {"url": "{TRITON}/v2/models/food_classifier/versions/1/stats"},
    "6.2": {**_61, "-b": 16, "--concurrency-range": 1},
    "6.3a": {"instance_group": Every(2)},
    "6.3b": {"call.method": "load_model", "call.args": [FOOD], "call.keyword.headers": True},
    "6.3c": {**_61, "--concurrency-range": 8},
    "6.3d": {"instance_group": OnFirst(_all_of_63a_on_gpu0)},
    "6.3f": {"instance_group": Every(4)},
    "6.4a": {**_64, "--concurrency-range": 1},
    "6.4b": {"instance_group": Every(2)},
    "6.4c": {**_64, "--concurrency-range": 8, "--request-count": 100},
    "6.4d": {**_64, "--concurrency-range": 8},
    "6.4e": {**_64, "--concurrency-range": 16},
    "6.6a": {"instance_group": OnFirst(1)},
    "6.6b": {**_64, "--concurrency-range": 4},
    "6.6c": {**_RATE, "--request-rate-range": "{RATE}", "--request-distribution": "constant"},
    "6.6d": {**_RATE, "--request-rate-range": "{RATE}", "--request-distribution": "poisson"},
    "6.6e": {
        "dynamic_batching.preferred_batch_size": AnyOrder([4, 6, 8]),
        "dynamic_batching.max_queue_delay_microseconds": 100,
    },
    "6.6f": {**_64, "-b": 8, "--concurrency-range": 1},
    # notebook 7
    "7.2": {**_73, "--shape": "input:3,224,224"},
    "7.3a": {"input.name": "input", "input.data_type": "TYPE_UINT8", "input.dims": [224, 224, 3]},
    "7.3b": _73,
    "7.4a": _GRPC,
    "7.4c": {**_GRPC, "--shared-memory": "system"},
    "7.5a": {"parameters.precision.string_value": "fp16"},
    "7.5b": {"parameters.cuda_graphs.string_value": "on"},
    "7.6": {  # at each setting of the sweep: its instances, max batch and delay
        "instance_group": OnFirst("{INSTANCES}"),
        "max_batch_size": "{MAX_BATCH}",
        "dynamic_batching.max_queue_delay_microseconds": "{DELAY}",
    },
    "7.7": {"parameters.compile.string_value": "on"},
    # notebook 8: the block's steps (exercises.step_mapping then checks how they chain)
    "8.1": {"ensemble_scheduling": None},
}
