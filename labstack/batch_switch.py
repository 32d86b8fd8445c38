"""Does a batch-size change stall the ONNX model? Mixed batch sizes against the same sizes grouped.

    python -m labstack.batch_switch runtime [--out FILE]   # ONNX Runtime in this process
    python -m labstack.batch_switch triton  [--out FILE]   # the served food_classifier_onnx

A dynamic batcher hands the model a different batch size nearly every time. ONNX Runtime's CUDA
provider (1.20 and later) rebuilds its convolution plans whenever a session's batch size differs
from its previous call: on the H100 reference that cost 1.3-1.6 s a batch instead of a few ms
(servelab/serving/shape_buckets.py has the fix the lab uses). Both modes send the same batch sizes
twice, one at a time: grouped (each size several times in a row, the first call of each group
untimed) and mixed (every call a different size from the one before), in alternating rounds so a
busy moment of the machine falls on both. The verdict: mixed costs at most MAX_RATIO times grouped
per call, else exit status 1.

- runtime: one InferenceSession per cuDNN search setting (EXHAUSTIVE, the default; HEURISTIC;
  DEFAULT), then the lab's OnnxClassifier as the Triton stand-in builds it (one session per
  batch size on the CUDA provider). The verdict is the lab's row. Maintainers, on the GPU machine.
- triton: requests of those batch sizes to the model Triton serves (TRITON_SERVER_URL); what the
  class's onnxruntime backend does on the class's GPU. Instructors, on the GPU node the day before
  class, in the Jupyter container (docs/instructors.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

MAX_RATIO = 2.0
MIXED = [16, 10, 1, 7, 13, 4, 16, 2, 9, 5, 12, 3]  # each size differs from the one before
SEARCHES = ("EXHAUSTIVE", "HEURISTIC", "DEFAULT")  # ONNX Runtime's cudnn_conv_algo_search


def measure(run, sizes: list[int], rounds: int, repeat: int = 2) -> dict:
    """Milliseconds per call of run(batch) for `sizes` mixed and grouped, over `rounds` rounds of
    each, alternating. Grouped: the same sizes as often (times `repeat`), sorted, each group's
    first call untimed (it is the switch)."""
    batches = {
        n: np.random.default_rng(n).random((n, 3, 224, 224), dtype=np.float32) for n in sizes
    }

    def timed(n: int) -> float:
        start = time.perf_counter()
        run(batches[n])
        return (time.perf_counter() - start) * 1000

    mixed, grouped = [], []  # grouped goes first: every size has run once before mixed counts
    for _ in range(rounds):
        for n in sorted(set(sizes)):
            run(batches[n])  # the switch to this size: not counted in grouped
            grouped += [timed(n) for _ in range(repeat * sizes.count(n))]
        mixed += [timed(n) for n in sizes]
    return summarise(mixed, grouped)


def summarise(mixed: list[float], grouped: list[float]) -> dict:
    mean_mixed, mean_grouped = statistics.fmean(mixed), statistics.fmean(grouped)
    return {
        "mixed_mean_ms": round(mean_mixed, 3),
        "mixed_median_ms": round(statistics.median(mixed), 3),
        "mixed_max_ms": round(max(mixed), 3),
        "grouped_mean_ms": round(mean_grouped, 3),
        "grouped_median_ms": round(statistics.median(grouped), 3),
        "ratio": round(mean_mixed / mean_grouped, 2),
        "calls": {"mixed": len(mixed), "grouped": len(grouped)},
    }


def runtime_settings(model: Path, max_batch: int) -> dict:
    """{name: callable(batch)}: one session per search setting where the CUDA provider exists,
    then the lab's stand-in classifier (the verdict's row, last)."""
    import onnxruntime as ort

    from servelab.serving.runtimes import OnnxClassifier
    from servelab.serving.shape_buckets import bucket_sizes

    ort.set_default_logger_severity(3)  # DEFAULT's "Conv running in Fallback mode", per call
    options = ort.SessionOptions()
    options.log_severity_level = 3
    found = {}
    if "CUDAExecutionProvider" in ort.get_available_providers():
        for search in SEARCHES:
            provider = ("CUDAExecutionProvider", {"cudnn_conv_algo_search": search})
            session = ort.InferenceSession(str(model), options, providers=[provider])
            found[f"one session, {search}"] = _session_call(session)
    lab = OnnxClassifier(
        model, device="cuda" if found else "cpu", batch_sizes=bucket_sizes(max_batch)
    )
    where = f"one session per batch size {lab.buckets.sizes}" if lab.buckets else "one session"
    found[f"the lab's OnnxClassifier ({lab.device}, {where})"] = lab
    return found


def _session_call(session):
    return lambda batch: session.run(["output"], {"input": batch})[0]


def triton_call(url: str, model: str):
    """callable(batch): one request of that batch to the served model, over HTTP."""
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(
        url.split("://")[-1], connection_timeout=120, network_timeout=120
    )
    if not client.is_model_ready(model):
        raise SystemExit(f"{model} is not READY at {url}: load it first (notebook 5 does)")

    def call(batch):
        tensor = httpclient.InferInput("input", list(batch.shape), "FP32")
        tensor.set_data_from_numpy(batch, binary_data=True)
        return client.infer(model, [tensor]).as_numpy("output")

    return call


def table(rows: dict) -> str:
    lines = [
        "| setting | mixed: mean (median, max) ms a call | grouped: mean (median) ms "
        "| mixed / grouped |",
        "|---|---|---|---|",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['mixed_mean_ms']:.1f} ({r['mixed_median_ms']:.1f}, "
            f"{r['mixed_max_ms']:.1f}) | {r['grouped_mean_ms']:.1f} ({r['grouped_median_ms']:.1f}) "
            f"| {r['ratio']:.2f}x |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("runtime", "triton"))
    parser.add_argument("--model", default=None, help="runtime: model.onnx (default: the lab's)")
    parser.add_argument("--name", default="food_classifier_onnx", help="triton: the model's name")
    parser.add_argument("--url", default=None, help="triton: default TRITON_SERVER_URL")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each order")
    parser.add_argument("--max-batch", type=int, default=16)
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    sizes = [n for n in MIXED if n <= args.max_batch] or [1]
    if args.mode == "runtime":
        from servelab.paths import MODEL_ONNX

        settings = runtime_settings(Path(args.model or MODEL_ONNX), args.max_batch)
    else:
        from servelab import labenv

        labenv.load()  # the running stack's URLs (make up writes them)
        url = args.url or labenv.url("TRITON_SERVER_URL")
        settings = {f"{args.name} served at {url}": triton_call(url, args.name)}
    rows = {}
    for name, run in settings.items():
        rows[name] = measure(run, sizes, args.rounds)
        print(f"{name}: {rows[name]}", flush=True)
    verdict_name = list(rows)[-1]
    ratio = rows[verdict_name]["ratio"]
    ok = ratio <= MAX_RATIO
    print(f"\nbatch sizes, mixed: {sizes}\n\n{table(rows)}\n")
    print(
        f"{'PASS' if ok else 'FAIL'}: {verdict_name}: mixed batch sizes cost {ratio:.2f}x the same "
        f"sizes grouped (at most {MAX_RATIO:g}x)"
        + ("" if ok else ": a dynamic batcher would stall on this runtime (docs/instructors.md)")
    )
    if args.out:
        args.out.write_text(
            json.dumps({"sizes": sizes, "rows": rows, "verdict": ok}, indent=2) + "\n"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
