"""The food classifier as a Ray Serve deployment: what runs inside each replica (notebook 9).

Each replica is a Ray actor holding one ONNX Runtime session on model.onnx with one thread (its
share of a node's cores). It takes what Triton's food_classifier_onnx takes, one image as
3x224x224 float32 values, here as the raw bytes of an HTTP body (602,112 bytes), and answers the
class with a Server-Timing header (`infer`: the model's run, ms), as the FastAPI service does.
Ray Serve does the rest: its proxy takes the HTTP request, its router picks a replica with room
(`max_ongoing_requests`), its controller starts, health-checks and replaces replicas and, with an
`autoscaling_config`, adds and removes them from the number of requests in the system.

BatchedFoodClassifier is the same with Ray Serve's own batching (`@serve.batch`): requests that
reach a replica within `batch_wait_timeout_s` of the first, up to `max_batch_size`, run as one
batch, as Triton's dynamic batcher does (the three-way comparison sets both as Triton's
max_batch_size and max_queue_delay_microseconds; servelab/three_way.py). A replica takes
`max_ongoing_requests` at once, which must be at least max_batch_size for a batch to fill. It
runs each batch in a thread, so the next one gathers while a batch runs (Triton's batcher does
the same), with one ONNX Runtime session per batch size on the GPU (shape_buckets: the CUDA
provider would otherwise rebuild its plans at every new size).

The model file is read from this repository's artifacts/ on whichever node runs the replica: on a
second Chameleon node, the repository is cloned and `make ray-node` run there too (notebook 2,
its optional section 5).
"""

from __future__ import annotations

import asyncio
import time

import numpy as np
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

from servelab import food11
from servelab.paths import MODEL_ONNX
from servelab.serving.runtimes import OnnxClassifier
from servelab.serving.shape_buckets import bucket_sizes

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


def _image(body: bytes) -> np.ndarray | JSONResponse:
    if len(body) != IMAGE_BYTES:
        detail = f"expected {IMAGE_BYTES} bytes (float32 {IMAGE_SHAPE}), got {len(body)}"
        return JSONResponse({"detail": detail}, status_code=400)
    return np.frombuffer(body, dtype=np.float32).reshape(IMAGE_SHAPE)


MAX_BATCH, WAIT_S = 16, 0.0005  # the decorator's; each deployment sets its own at start


@serve.deployment(ray_actor_options={"num_cpus": 0.5}, request_router_config=ROUTER)
class BatchedFoodClassifier:
    """One replica: one ONNX Runtime session per batch size, requests batched by Ray Serve."""

    def __init__(
        self,
        model_path: str = str(MODEL_ONNX),
        threads: int = 1,
        max_batch_size: int = MAX_BATCH,
        batch_wait_timeout_s: float = WAIT_S,
    ):
        import ray

        device = "cuda:0" if ray.get_gpu_ids() else None
        sizes = bucket_sizes(max_batch_size)
        self.model = OnnxClassifier(model_path, device=device, threads=threads, batch_sizes=sizes)
        self.node = ray.get_runtime_context().get_node_id()
        self.infer.set_max_batch_size(max_batch_size)
        self.infer.set_batch_wait_timeout_s(batch_wait_timeout_s)

    @serve.batch(max_batch_size=MAX_BATCH, batch_wait_timeout_s=WAIT_S)
    async def infer(self, images: list[np.ndarray]) -> list[tuple]:
        start = time.perf_counter()
        logits = await asyncio.to_thread(self.model, np.concatenate(images))
        done = time.perf_counter()
        return [(row, start, done, len(images)) for row in logits]

    async def __call__(self, request: Request) -> JSONResponse:
        image = _image(await request.body())
        if isinstance(image, JSONResponse):
            return image
        arrived = time.perf_counter()
        logits, start, done, size = await self.infer(image)
        label, probability = food11.top_class(logits)
        # queue: waiting for its batch to start; infer: the batch's run; batch: how many requests
        # it held (a count, in Server-Timing's number field)
        timing = (
            f"queue;dur={(start - arrived) * 1000:.3f}, infer;dur={(done - start) * 1000:.3f}, "
            f"batch;dur={size}"
        )
        return JSONResponse(
            {"label": label, "probability": probability, "node": self.node[:8]},
            headers={"Server-Timing": timing},
        )


app = FoodClassifier.bind()
