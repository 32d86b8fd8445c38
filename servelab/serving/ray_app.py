"""The food classifier as a Ray Serve deployment: what runs inside each replica (notebook 9).

Each replica is a Ray actor holding one ONNX Runtime session on model.onnx with one thread (its
share of a node's cores). It takes what Triton's food_classifier_onnx takes, one image as
3x224x224 float32 values, here as the raw bytes of an HTTP body (602,112 bytes), and answers the
class with a Server-Timing header (`infer`: the model's run, ms), as the FastAPI service does.
Ray Serve does the rest: its proxy takes the HTTP request, its router picks a replica with room
(`max_ongoing_requests`), its controller starts, health-checks and replaces replicas and, with an
`autoscaling_config`, adds and removes them from the number of requests in the system.

The model file is read from this repository's artifacts/ on whichever node runs the replica: on a
second Chameleon node, the repository is cloned and `make ray-node` run there too (notebook 2,
its optional section 5).
"""

from __future__ import annotations

import time

import numpy as np
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

from servelab import food11
from servelab.paths import MODEL_ONNX
from servelab.serving.runtimes import OnnxClassifier

IMAGE_SHAPE = (1, 3, food11.INPUT_SIZE, food11.INPUT_SIZE)
IMAGE_BYTES = int(np.prod(IMAGE_SHAPE)) * 4  # float32


# The router's backoff: a request waiting while every replica is full asks again after 25 ms,
# 50, 100, ... up to max_backoff_s, and only a request that wakes takes a freed slot. With Ray's
# 0.5 s, an overloaded replica served 4-5 requests/s on the 2-core development machine (2 slots
# per 0.5 s), where it serves 25-30 with 50 ms.
ROUTER = {"max_backoff_s": 0.05}


@serve.deployment(ray_actor_options={"num_cpus": 0.5}, request_router_config=ROUTER)
class FoodClassifier:
    """One replica: one ONNX Runtime session, one thread, one image per request."""

    def __init__(self, model_path: str = str(MODEL_ONNX), threads: int = 1):
        import ray

        # with ray_actor_options={"num_gpus": ...}, Ray gives this actor a GPU and shows it as
        # device 0 (CUDA_VISIBLE_DEVICES); without, the CPU
        device = "cuda:0" if ray.get_gpu_ids() else None
        self.model = OnnxClassifier(model_path, device=device, threads=threads)
        self.node = ray.get_runtime_context().get_node_id()

    async def __call__(self, request: Request) -> JSONResponse:
        body = await request.body()
        if len(body) != IMAGE_BYTES:
            detail = f"expected {IMAGE_BYTES} bytes (float32 {IMAGE_SHAPE}), got {len(body)}"
            return JSONResponse({"detail": detail}, status_code=400)
        start = time.perf_counter()
        logits = self.model(np.frombuffer(body, dtype=np.float32).reshape(IMAGE_SHAPE))
        infer_ms = (time.perf_counter() - start) * 1000
        label, probability = food11.top_class(logits[0])
        return JSONResponse(
            {"label": label, "probability": probability, "node": self.node[:8]},
            headers={"Server-Timing": f"infer;dur={infer_ms:.3f}"},
        )


app = FoodClassifier.bind()
