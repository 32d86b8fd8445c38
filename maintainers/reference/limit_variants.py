"""Which PyTorch path runs the food-11 MobileNetV2 fastest on this GPU, and does it keep the
classes?

    python3 maintainers/reference/limit_variants.py OUT.json \
        [--batches 1,16,64,128,256] [--seconds 2]

A maintainers' experiment behind notebook 7's limit (issue 27): the raw limit must be the best any
runtime of the lab does, and the tuned Triton model should serve that runtime. Each variant is
timed on a batch already on the GPU (CUDA events around back-to-back replays), and its top class is
compared with eager fp32 on 256 seeded random inputs. Variants, cheapest to build first:
  graph               fp16 channels_last, forward pass captured as a CUDA graph (TunedClassifier)
  graph+bench         the same with cudnn.benchmark (cuDNN times its algorithms per shape)
  graph+bench+fold    the same with BatchNorm folded into the convolutions (torch.fx fuse)
  compile+graph       torch.compile (inductor, static shapes) of the folded model, then our own
                      CUDA graph per batch size
  compile-dynamic+graph  the same compiled once for every batch size (what TunedClassifier does)
  compile-ro          torch.compile(mode="reduce-overhead"): inductor with its own CUDA graphs
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from servelab.paths import MODEL_PTH  # noqa: E402
from servelab.serving.runtimes import TorchClassifier  # noqa: E402

DEVICE = "cuda:0"


def timed(step, batch: int, seconds: float) -> float:
    """Images per second of back-to-back step() calls, timed with CUDA events."""
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    done, wall = 0, time.perf_counter()
    start.record()
    while time.perf_counter() - wall < seconds:
        for _ in range(10):
            step()
        done += 10
    end.record()
    torch.cuda.synchronize()
    return done * batch / (start.elapsed_time(end) / 1000)


def graphed(forward, batch: int):
    """(replay, static input) of forward captured as one CUDA graph for this batch size."""
    static_in = torch.randn(batch, 3, 224, 224, device=DEVICE).half()
    static_in = static_in.contiguous(memory_format=torch.channels_last)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            forward(static_in)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = forward(static_in)
    return graph.replay, static_in, static_out


def fp16_model(fold: bool):
    model = TorchClassifier(MODEL_PTH, device=DEVICE).model.eval()
    if fold:
        from torch.fx.experimental.optimization import fuse

        model = fuse(model)  # eval-mode Conv+BatchNorm pairs become one convolution
    return model.half().to(memory_format=torch.channels_last)


def top_classes(forward, x32: torch.Tensor) -> torch.Tensor:
    x = x32.half().contiguous(memory_format=torch.channels_last)
    return forward(x).float().argmax(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--batches", default="1,16,64,128,256")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--compile-batches", default="64,128,256")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    compile_batches = [int(b) for b in args.compile_batches.split(",")]
    rows, notes = [], {}

    def add(variant, batch, rate, build_s=None):
        rows.append(
            {"variant": variant, "batch": batch, "images_per_s": round(rate, 1), "build_s": build_s}
        )
        print(
            f"{variant:22s} batch {batch:4d}: {rate:10.1f} images/s"
            + (f"  (built in {build_s:.0f} s)" if build_s else ""),
            flush=True,
        )
        Path(args.out).write_text(json.dumps({"rows": rows, "notes": notes}, indent=2))

    print(torch.__version__, torch.cuda.get_device_name(0), flush=True)
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    x32 = torch.randn(256, 3, 224, 224, device=DEVICE, generator=gen)
    with torch.inference_mode():
        reference = TorchClassifier(MODEL_PTH, device=DEVICE).model.eval()
        ref_logits = reference(x32).float()
        ref_top = ref_logits.argmax(1)
        top2 = ref_logits.topk(2, dim=1).values
        margin = top2[:, 0] - top2[:, 1]
        for batch in batches:
            xb = x32[:batch].clone()
            add("eager fp32", batch, timed(lambda: reference(xb), batch, args.seconds))
        reference = None

        def agreement(name, forward):
            top = top_classes(forward, x32)
            same = int((top == ref_top).sum())
            notes[name] = {
                "same_top_class": f"{same}/256",
                "differing_margins": [round(float(m), 4) for m in margin[top != ref_top].tolist()],
            }
            print(f"{name}: top class as eager fp32 on {same}/256 inputs", flush=True)

        for variant, bench, fold in (
            ("graph", False, False),
            ("graph+bench", True, False),
            ("graph+bench+fold", True, True),
        ):
            torch.backends.cudnn.benchmark = bench
            model = fp16_model(fold)
            agreement(variant, model)
            for batch in batches:
                replay, _, _ = graphed(model, batch)
                add(variant, batch, timed(replay, batch, args.seconds))
        torch.backends.cudnn.benchmark = True
        model = fp16_model(fold=True)
        compiled = torch.compile(model, dynamic=False)
        for batch in compile_batches:
            start = time.perf_counter()
            try:
                replay, _, _ = graphed(compiled, batch)
            except Exception as exc:  # noqa: BLE001 - record why, keep going
                notes[f"compile+graph b{batch}"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                print(notes[f"compile+graph b{batch}"], flush=True)
                break
            add(
                "compile+graph",
                batch,
                timed(replay, batch, args.seconds),
                time.perf_counter() - start,
            )
        agreement("compile+graph", compiled)
        dyn = torch.compile(fp16_model(fold=True), dynamic=True)
        start = time.perf_counter()
        for batch in compile_batches:
            replay, _, _ = graphed(dyn, batch)
            add(
                "compile-dynamic+graph",
                batch,
                timed(replay, batch, args.seconds),
                time.perf_counter() - start,
            )
            start = time.perf_counter()
        agreement("compile-dynamic+graph", dyn)
        ro = torch.compile(fp16_model(fold=False), mode="reduce-overhead", dynamic=False)
        for batch in compile_batches[-2:]:
            x = x32[:batch].half().contiguous(memory_format=torch.channels_last)
            start = time.perf_counter()
            for _ in range(3):
                ro(x)
            torch.cuda.synchronize()
            add(
                "compile-ro",
                batch,
                timed(lambda: ro(x), batch, args.seconds),
                time.perf_counter() - start,
            )


if __name__ == "__main__":
    main()
