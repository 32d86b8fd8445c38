"""One ONNX Runtime session per batch size, each batch padded up to the nearest one.

Why: ONNX Runtime's CUDA provider (1.20 and later) rebuilds a convolution's cuDNN plan whenever
the input's shape differs from that session's previous call, also for a shape it has seen before.
On the H100 reference (onnxruntime-gpu 1.31.1, cuDNN 9.19) a batch of 16 after a batch of 10 took
1.3-1.6 s instead of 3.6 ms. A dynamic batcher changes the batch size nearly every execution, so
one session per model would pay that on nearly every batch. A session that only ever sees one
shape builds its plans once, at load; padding a batch of 5 to 8 costs far less than a rebuild.
TensorRT's optimisation profiles and Triton's `preferred_batch_size` answer the same problem.

    sizes = bucket_sizes(16, preferred=[4, 6, 8])    # [1, 2, 4, 6, 8, 16]
    run = BucketedSessions(make_session, sizes)      # make_session() -> a new InferenceSession
    logits = run(batch)                              # any batch size; larger ones in chunks

(labstack/batch_switch.py measures it against one session; docs/results/ has the numbers.)
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

import numpy as np


def bucket_sizes(max_batch: int, preferred: list[int] | tuple[int, ...] = ()) -> list[int]:
    """The batch sizes that get a session: powers of two up to `max_batch`, `max_batch` itself,
    and every preferred size (a dynamic batcher aims for those, so they run unpadded)."""
    if max_batch < 1:
        raise ValueError(f"max_batch must be at least 1, not {max_batch}")
    sizes = {max_batch, *(int(p) for p in preferred if 0 < int(p) <= max_batch)}
    power = 1
    while power < max_batch:
        sizes.add(power)
        power *= 2
    return sorted(sizes)


class BucketedSessions:
    """Sessions made by `make_session`, one per size in `sizes`, each warmed with its own shape
    (so its plans are built before the first request). A call pads the batch with zeros to the
    smallest size that holds it, runs that session and returns the real rows; a batch larger than
    the largest size runs in chunks of it. Rows do not mix in inference (batch norm uses its
    running statistics), so the padding changes no answer."""

    def __init__(
        self,
        make_session: Callable[[], object],
        sizes: list[int],
        input_name: str = "input",
        output_name: str = "output",
    ):
        self.sizes = sorted(set(sizes))
        self.input_name, self.output_name = input_name, output_name
        self.sessions = {size: make_session() for size in self.sizes}
        shape = self.sessions[self.sizes[0]].get_inputs()[0].shape[1:]
        self.item_shape = tuple(int(d) for d in shape)
        for size, session in self.sessions.items():
            self._run(session, np.zeros((size, *self.item_shape), dtype=np.float32))

    def _run(self, session, x: np.ndarray) -> np.ndarray:
        return session.run([self.output_name], {self.input_name: x})[0]

    def size_for(self, n: int) -> int:
        """The session size a batch of n runs in (the largest one for a chunk of a bigger batch)."""
        return self.sizes[min(bisect.bisect_left(self.sizes, n), len(self.sizes) - 1)]

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(batch, dtype=np.float32)
        largest = self.sizes[-1]
        if len(x) > largest:
            return np.concatenate([self(x[i : i + largest]) for i in range(0, len(x), largest)])
        size = self.size_for(len(x))
        if size > len(x):
            x = np.concatenate([x, np.zeros((size - len(x), *x.shape[1:]), dtype=np.float32)])
        return self._run(self.sessions[size], x)[: len(batch)]
