"""The runtime behind notebook 7's `food_classifier_tuned`, and the raw limit it is compared with.

One PyTorch forward pass over a batch, with the tricks notebook 7 turns on one at a time:

- input "fp32_nchw": normalised float32 [N, 3, 224, 224] (the ONNX model's input), or
  "uint8_nhwc": raw pixels uint8 [N, 224, 224, 3], 4x fewer bytes on the wire; the
  normalisation runs on the model's device.
- precision "fp16" (GPU only): half-precision weights and activations in channels_last layout
  (the layout the GPU's tensor-core convolutions want; uint8 NHWC pixels already are).
- cuda_graphs (GPU only): the forward pass of each batch-size bucket (1, 2, 4, 8, ..., max, or
  with graph_step every multiple of it: buckets()) is captured once as a CUDA graph and
  replayed; a batch is padded up to its bucket.
  MobileNetV2 launches ~150 small kernels per pass, so launching them costs as much as running
  them at small batches; a replay launches them all at once.
- compiled (GPU only): BatchNorm folded into the convolutions, then torch.compile (inductor's
  fused kernels), compiled once for every batch size; with cuda_graphs each bucket replays the
  compiled pass. The fastest path the lab has on a GPU, and the slowest to load. It needs
  compute capability 7.0 or newer (compile_blocker says why not on an older GPU, e.g. the P100).

`run(parts)` takes the requests' arrays as they come from Triton and stacks them straight into
a pinned host buffer (one copy), so the copy to the GPU is one asynchronous transfer.
`run_on_device(tensors)` takes them already on the GPU (Triton's CUDA shared memory, handed over
through DLPack) and stacks them there: no copy through the host at all.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from servelab import food11
from servelab.paths import MODEL_PTH
from servelab.serving.runtimes import TorchClassifier

INPUT_FORMATS = {
    "fp32_nchw": (np.float32, (3, food11.INPUT_SIZE, food11.INPUT_SIZE)),
    "uint8_nhwc": (np.uint8, (food11.INPUT_SIZE, food11.INPUT_SIZE, 3)),
}


# inductor writes its fused kernels in Triton (the kernel language); PyTorch refuses to compile
# them for older GPUs ("Triton only supports devices of CUDA Capability >= 7.0")
COMPILE_MIN_CAPABILITY = (7, 0)


def compile_blocker(capability: tuple[int, int] | None) -> str:
    """Why torch.compile cannot serve on a GPU of this compute capability ('' when it can): its
    backend, inductor, generates Triton kernels, and Triton compiles them only for compute
    capability 7.0 (Volta, 2017) and newer. The class's P100 is 6.0."""
    if capability is None:
        return "no GPU: torch.compile's CUDA graphs and Triton kernels need one"
    if tuple(capability) < COMPILE_MIN_CAPABILITY:
        major, minor = capability
        return (
            f"this GPU is compute capability {major}.{minor}: torch.compile's inductor generates "
            "Triton kernels, which need 7.0 or newer (Volta and later; not a P100, which is 6.0)"
        )
    return ""


def buckets(max_batch: int, step: int = 0) -> list[int]:
    """Batch sizes that get a CUDA graph; a batch is padded up to the nearest.

    step 0: 1, 2, 4, 8, ... and max (a batch is padded at most 2x). Few buckets keep a reload
    short: each new batch shape costs cuDNN ~2 s of plan building at capture (seen on the H100: a
    model with 16 buckets took ~40 s to load, with 8 ~25 s). The price is padded work: under load
    the batcher hands an instance batches of whatever is queued (45-47 on the H100 at 8 x 64),
    and a batch of 46 runs the graph of 64, 28 % of its images padding.
    step k: the powers of two below k, then every multiple of k up to max (at most k - 1 images
    of padding); step 1: every size, no padding at all.
    """
    if step < 0:
        raise ValueError(f"step must be 0 (powers of two) or a positive size, not {step}")
    sizes, power = {max_batch}, 1
    while power < max_batch and (not step or power < step):
        sizes.add(power)
        power *= 2
    if step:
        sizes.update(range(step, max_batch, step))
    return sorted(sizes)


class TunedClassifier:
    def __init__(
        self,
        weights: Path | str = MODEL_PTH,
        device: str = "cpu",
        input_format: str = "fp32_nchw",
        precision: str = "fp32",
        cuda_graphs: bool = False,
        max_batch: int = 16,
        graph_sizes: list[int] | None = None,
        threads: int | None = None,
        compiled: bool = False,
        graph_step: int = 0,
        direct_inputs: bool = False,
    ):
        import torch

        if input_format not in INPUT_FORMATS:
            raise ValueError(
                f"input_format must be one of {sorted(INPUT_FORMATS)}, not {input_format!r}"
            )
        if precision not in ("fp32", "fp16"):
            raise ValueError(f"precision must be 'fp32' or 'fp16', not {precision!r}")
        self._torch = torch
        self.device = torch.device(device)
        on_gpu = self.device.type == "cuda"
        if not on_gpu and (precision == "fp16" or cuda_graphs or compiled):
            raise ValueError("fp16, CUDA graphs and compile need a GPU instance (KIND_GPU)")
        if compiled and compile_blocker(torch.cuda.get_device_capability(self.device)):
            raise ValueError(
                "compile: on cannot load here: "
                + compile_blocker(torch.cuda.get_device_capability(self.device))
            )
        self.input_format, self.precision, self.max_batch = input_format, precision, int(max_batch)
        self.dtype = torch.float16 if precision == "fp16" else torch.float32
        model = TorchClassifier(weights, device=str(self.device), threads=threads).model.eval()
        if compiled:
            from torch.fx.experimental.optimization import fuse

            model = fuse(model)  # eval-mode Conv + BatchNorm pairs become one convolution
        if precision == "fp16":
            model = model.half().to(memory_format=torch.channels_last)
        self.compiled = compiled
        # one compilation for every batch size (dynamic); each CUDA graph then replays it
        self.model = torch.compile(model, dynamic=True) if compiled else model
        # uint8 pixels -> normalised input in one multiply-add: x * scale + shift
        mean = torch.tensor(food11.MEAN, device=self.device).view(1, 3, 1, 1)
        std = torch.tensor(food11.STD, device=self.device).view(1, 3, 1, 1)
        self._scale = (1.0 / (255.0 * std)).to(self.dtype)
        self._shift = (-mean / std).to(self.dtype)
        np_dtype, shape = INPUT_FORMATS[input_format]
        self.item_shape = shape
        # the stacked batch lives here: pinned memory on a GPU machine (fast, asynchronous copies)
        host = torch.empty(
            (self.max_batch, *shape),
            dtype=torch.from_numpy(np.empty(0, np_dtype)).dtype,
            pin_memory=on_gpu,
        )
        self._host, self._host_np = host, host.numpy()
        self._graphs: dict[int, tuple] = {}
        if cuda_graphs:
            self._capture(graph_sizes or buckets(self.max_batch, graph_step))
        # inputs copied to the GPU straight from the backend's shared memory (pinned_shm)
        self._direct, self.direct_batches = None, 0
        if direct_inputs:
            if not self._graphs:
                raise ValueError(
                    "direct_inputs needs cuda_graphs: its copies go to a graph's input"
                )
            from servelab.serving.pinned_shm import DirectCopier

            self._direct = DirectCopier()

    def describe(self) -> str:
        graphs = (
            f"CUDA graphs for batch sizes {sorted(self._graphs)}"
            if self._graphs
            else "no CUDA graphs"
        )
        return (
            f"{self.input_format} input, {self.precision}"
            f"{' channels_last' if self.precision == 'fp16' else ''}"
            f"{', torch.compile (BatchNorm folded)' if self.compiled else ''}, {graphs}, "
            f"{'inputs copied from shared memory directly, ' if self._direct else ''}"
            f"on {self.device}"
        )

    def forward(self, x):
        """x on the model's device, in input_format -> logits float32 [N, 11] (on the device)."""
        if self.input_format == "uint8_nhwc":
            x = x.permute(0, 3, 1, 2).to(self.dtype)  # NCHW view with channels_last strides
            x = x * self._scale + self._shift
            if (
                self.precision != "fp16"
            ):  # an fp32 model is laid out NCHW: on a CPU, ~20% faster fed the same
                x = x.contiguous()
        else:
            x = x.to(self.dtype)
            if self.precision == "fp16":
                x = x.contiguous(memory_format=self._torch.channels_last)
        return self.model(x).float()

    def _capture(self, sizes: list[int]) -> None:
        torch = self._torch
        pool = torch.cuda.graph_pool_handle()  # one memory pool: graphs replay one at a time
        side = torch.cuda.Stream(self.device)
        with torch.inference_mode():
            for size in sorted(sizes, reverse=True):
                static_in = torch.zeros(
                    (size, *self.item_shape), dtype=self._host.dtype, device=self.device
                )
                side.wait_stream(torch.cuda.current_stream(self.device))
                with torch.cuda.stream(side):
                    for _ in range(2):  # warm-up outside the graph (cuDNN picks its kernels here)
                        self.forward(static_in)
                torch.cuda.current_stream(self.device).wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool):
                    static_out = self.forward(static_in)
                self._graphs[size] = (graph, static_in, static_out)
        torch.cuda.synchronize(self.device)

    def replay(self, size: int) -> None:
        """One replay of the graph captured for `size`, on whatever its input buffer holds (raw
        timing)."""
        self._graphs[size][0].replay()

    def graph_input(self, size: int):
        """The device buffer the graph for `size` reads its batch from."""
        return self._graphs[size][1]

    def run(self, parts: list[np.ndarray], clock=None) -> np.ndarray:
        """The requests' arrays ([n_i, *item_shape] each) -> logits [sum n_i, 11] as numpy
        float32. `clock` (a stub_profile.StubClock, or None) is told where the time went: the
        stacking into pinned memory, or with direct_inputs the copies issued straight from
        shared memory ("stage"), then the copy, the graph and the wait ("device")."""
        torch = self._torch
        n = sum(len(p) for p in parts)
        if n > self.max_batch:
            raise ValueError(f"batch of {n} is larger than max_batch {self.max_batch}")
        with torch.inference_mode():
            if self.device.type == "cuda" and self._graphs:
                return self._run_graph(parts, n, clock)
            self._stage(parts, n)
            if clock is not None:
                clock.mark("stage")
            if self.device.type != "cuda":
                logits = self.forward(self._host[:n]).numpy()
            else:
                x = self._host[:n].to(self.device, non_blocking=True)
                logits = self.forward(x).cpu().numpy()
            if clock is not None:
                clock.mark("device", padded=n)
            return logits

    def direct_refusals(self) -> list[str]:
        """Why inputs were not copied straight from shared memory (the first few reasons)."""
        return list(self._direct.regions.reasons) if self._direct else []

    def _stage(self, parts: list[np.ndarray], n: int) -> None:
        staged = self._host_np[:n]
        np.concatenate(parts, out=staged) if len(parts) > 1 else np.copyto(staged, parts[0])

    def _run_graph(self, parts: list[np.ndarray], n: int, clock) -> np.ndarray:
        size = min(s for s in self._graphs if s >= n)
        graph, static_in, static_out = self._graphs[size]
        events = clock.gpu_events() if clock is not None else None
        stream = self._torch.cuda.current_stream(self.device)
        if events:
            events[0].record()
        direct = self._direct is not None and self._direct.copy(
            parts, static_in.data_ptr(), stream.cuda_stream
        )
        if direct:
            self.direct_batches += 1
        else:
            self._stage(parts, n)
            static_in[:n].copy_(self._host[:n], non_blocking=True)
        if clock is not None:
            clock.mark("stage")
        if events:
            events[1].record()
        graph.replay()
        if events:
            events[2].record()
        logits = static_out[:n].cpu().numpy()
        if clock is not None:
            clock.mark("device", padded=size, events=events)
        return logits

    def run_on_device(self, tensors: list) -> np.ndarray:
        """The requests' tensors, already on this GPU -> logits [sum n_i, 11] as numpy float32."""
        torch = self._torch
        n = sum(len(t) for t in tensors)
        if n > self.max_batch:
            raise ValueError(f"batch of {n} is larger than max_batch {self.max_batch}")
        with torch.inference_mode():
            if self._graphs:
                size = min(s for s in self._graphs if s >= n)
                graph, static_in, static_out = self._graphs[size]
                if len(tensors) > 1:
                    torch.cat(tensors, out=static_in[:n])
                else:
                    static_in[:n].copy_(tensors[0])
                graph.replay()
                return static_out[:n].cpu().numpy()
            x = torch.cat(tensors) if len(tensors) > 1 else tensors[0]
            return self.forward(x).cpu().numpy()

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        return self.run([batch])
