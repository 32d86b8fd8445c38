#!/usr/bin/env python3
"""How close does the served model get to what the GPU can do with it?

1. The limit: the raw model's best batched throughput on this GPU, input already on the GPU:
   PyTorch eager fp32, then the fastest path available here (fp16 + channels_last, replayed as a
   CUDA graph), at several batch sizes.
2. Served: the lab's best configuration with batch-1 clients: perf_analyzer sends one image per
   request to `food_classifier` (the Python-backend model, base64 JPEG in, label out) with
   several instance counts and dynamic batching; the best inferences/s is kept.
Prints served/limit as a ratio and writes limit.json (with --out).

    python scripts/gpu_limit.py --triton http://127.0.0.1:8000 --out DIR
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from servelab import perf, triton_config
from servelab.paths import MODEL_PTH, PERF_INPUT_JSON


def images_per_second(model, batch: int, half: bool, graph: bool, seconds: float = 2.0) -> float:
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    if half:
        model, x = model.half().to(memory_format=torch.channels_last), x.half().to(memory_format=torch.channels_last)
    with torch.inference_mode():
        for _ in range(5):
            model(x)
        torch.cuda.synchronize()
        step = (lambda: model(x))
        if graph:
            g = torch.cuda.CUDAGraph()
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    model(x)
            torch.cuda.current_stream().wait_stream(stream)
            with torch.cuda.graph(g):
                model(x)
            step = g.replay
        iters, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(10):
                step()
            iters += 10
            torch.cuda.synchronize()
        return iters * batch / (time.perf_counter() - start)


def raw_limit(batches=(1, 16, 64, 128, 256)) -> list[dict]:
    rows = []
    for name, half, graph in (("eager fp32", False, False), ("fp16 channels_last + CUDA graph", True, True)):
        for batch in batches:
            model = torch.load(MODEL_PTH, map_location="cuda", weights_only=False).eval()
            rate = images_per_second(model, batch, half, graph)
            rows.append({"path": name, "batch": batch, "images_per_s": round(rate, 1)})
            print(f"  raw {name:32s} batch {batch:4d}: {rate:9.1f} images/s", flush=True)
    return rows


def served_best(triton: str, out: Path, gpus: list[int], concurrency: int = 64) -> list[dict]:
    rows = []
    for instances in (2, 4, 8):
        result = triton_config.update_model("food_classifier", url=triton, instances=instances, kind="gpu", gpus=gpus,
                                            preferred_batch_sizes=[8, 16], max_queue_delay_us=500, verbose=False)
        if not result.ok:
            print(f"  {instances} instances/GPU: {result}")
            continue
        try:
            r = perf.measure("food_classifier", url=triton, concurrency=concurrency, input_data=PERF_INPUT_JSON,
                             measurement_interval_ms=4000, stability_percentage=25, verbose=False,
                             csv_path=out / f"served_{instances}inst.csv")
        except perf.PerfAnalyzerError as exc:
            print(f"  {instances} instances/GPU: perf_analyzer failed: {str(exc)[:300]}")
            continue
        row = r.row
        rows.append({"config": f"food_classifier, {instances} inst/GPU x {len(gpus)} GPU, dyn. batching [8,16] 500us, "
                               f"c{concurrency}, batch-1 clients",
                     "infer_per_s": round(row["throughput_infer_s"], 1), "p99_ms": round(row["p99_ms"], 1),
                     "avg_batch": row.get("avg_batch_size"), "gpu_util_pct": row.get("util_mean_pct"),
                     "command": r.shell})
        print(f"  served {instances} inst/GPU: {row['throughput_infer_s']:.1f} infer/s, p99 {row['p99_ms']:.1f} ms, "
              f"avg batch {row.get('avg_batch_size')}", flush=True)
    triton_config.update_model("food_classifier", url=triton, instances=1, kind="gpu", gpus=gpus[:1],
                               dynamic_batching=False, verbose=False)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triton", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no GPU: the limit is a GPU measurement")
    args.out.mkdir(parents=True, exist_ok=True)
    gpus = list(range(torch.cuda.device_count()))
    print(f"GPU: {torch.cuda.get_device_name(0)} x {len(gpus)}; torch {torch.__version__}")
    raw = raw_limit()
    served = served_best(args.triton, args.out, gpus)
    limit = max(raw, key=lambda r: r["images_per_s"])
    eager = max((r for r in raw if r["path"] == "eager fp32"), key=lambda r: r["images_per_s"])
    best = max(served, key=lambda r: r["infer_per_s"]) if served else None
    result = {"gpu": torch.cuda.get_device_name(0), "gpus": len(gpus), "torch": torch.__version__, "raw": raw,
              "served": served, "limit": limit, "eager_limit": eager, "best_served": best}
    if best:
        result["served_over_limit"] = best["infer_per_s"] / limit["images_per_s"]
        result["served_over_eager_limit"] = best["infer_per_s"] / eager["images_per_s"]
        print(f"\nserved/limit = {best['infer_per_s']:.0f} / {limit['images_per_s']:.0f} = "
              f"{result['served_over_limit']:.3f}  (limit: {limit['path']}, batch {limit['batch']})")
        print(f"served/eager-fp32 limit = {best['infer_per_s']:.0f} / {eager['images_per_s']:.0f} = "
              f"{result['served_over_eager_limit']:.3f}")
    (args.out / "limit.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
