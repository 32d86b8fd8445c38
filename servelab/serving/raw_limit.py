"""The limit: how many images per second the model itself does on this machine, with no serving.

    python -m servelab.serving.raw_limit [--device cuda:0|all|cpu] [--batches 1,16,64,256]
                                         [--seconds 2] [--no-compile] [--json F]

--device all: every GPU at once, one process per GPU started together (they share the host's
cores and memory bus, as a served configuration over all GPUs does); each row is then the sum
over the GPUs of the same path and batch, and the limit the largest such sum.

The batch is already on the device (no decoding, no transfer, no server): what is left is the
model's own arithmetic, so this is the ceiling a served configuration is compared with. Paths:
- "eager fp32": plain PyTorch, float32, one kernel launch at a time (what food_classifier runs);
- "fp16 channels_last + CUDA graph" (GPU): half precision, tensor-core layout, the whole forward
  pass replayed as one graph: the fastest path this project has, and the one
  food_classifier_tuned serves at its last step (the same servelab.serving.tuned_runtime code);
- "torch.compile fp16 + CUDA graph" (GPU): BatchNorm folded, inductor's fused kernels compiled
  once for every batch size, a CUDA graph per batch size: the same TunedClassifier path
  food_classifier_tuned serves with `compile: on`. About a minute to build; --no-compile skips it
  (it is skipped with the reason if it fails, or on a GPU older than compute capability 7.0, such
  as the P100, where inductor's Triton kernels cannot run). On an H100 it is the fastest path
  (docs/results/h100/07_how_close_to_the_hardware/), so without it the limit would not be the
  device's;
- "onnxruntime fp32": the ONNX export of the same model (FOOD11_ONNX_PATH) in ONNX Runtime, on
  the CPU with all its cores, or with the CUDA provider when onnxruntime has it; on a CPU it is
  the fastest path, so the limit there is what the served path could at best reach.
Random normal input (never zeros), warm-up first, then whole seconds of back-to-back passes.
Every faster path must give the top class eager fp32 gives on 256 seeded random inputs where
fp32's two best logits are clearly apart; a path that does not is reported and left out of the
limit (a limit reached by giving other answers is no limit).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from servelab.paths import MODEL_ONNX, MODEL_PTH
from servelab.serving.tuned_runtime import TunedClassifier, compile_blocker

COMPILED = "torch.compile fp16 + CUDA graph"


def _rate(step, batch: int, seconds: float, sync) -> float:
    for _ in range(3):
        step()
    sync()
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(5):
            step()
        done += 5
        sync()
    return done * batch / (time.perf_counter() - start)


def measure(
    device: str = "cpu",
    batches=(1, 16, 64, 256),
    seconds: float = 2.0,
    compile_: bool = True,
    weights: Path = MODEL_PTH,
    say=print,
    onnx: Path | None = MODEL_ONNX,
    checks: dict | None = None,
    skipped: dict | None = None,
) -> list[dict]:
    """Rows {path, batch, images_per_s} for every path this device has, at every batch size.
    `checks` (if given) receives each faster path's top-class agreement with eager fp32, and
    `skipped` each path this device cannot run, with the reason."""
    import torch

    on_gpu = device.startswith("cuda")
    sync = (lambda: torch.cuda.synchronize(device)) if on_gpu else (lambda: None)
    rows, checks = [], {} if checks is None else checks
    skipped = {} if skipped is None else skipped

    def add(path: str, batch: int, rate: float) -> None:
        rows.append({"path": path, "batch": batch, "images_per_s": round(rate, 1)})
        say(f"  {path:38s} batch {batch:4d}: {rate:10.1f} images/s")

    eager = TunedClassifier(weights, device=device, max_batch=max(batches))
    if on_gpu:  # what the faster paths must agree with
        probe = torch.randn(256, 3, 224, 224, generator=torch.Generator().manual_seed(0))
        probe = probe.to(device)
        with torch.inference_mode():
            reference = eager.forward(probe)
    with torch.inference_mode():
        for batch in batches:
            x = torch.randn(batch, 3, 224, 224, device=device)
            add("eager fp32", batch, _rate(lambda: eager.forward(x), batch, seconds, sync))
    eager = None  # free the model before the fast paths load their own copies
    if onnx is not None:
        _onnx_paths(onnx, device, batches, seconds, add)
    if not on_gpu:
        return rows
    paths = {"fp16 channels_last + CUDA graph": {}}
    blocker = compile_blocker(torch.cuda.get_device_capability(device))
    if compile_ and blocker:
        skipped[COMPILED] = blocker
        say(f"  {COMPILED}: skipped ({blocker})")
    elif compile_:
        paths[COMPILED] = {"compiled": True}
    for path, options in paths.items():
        start = time.perf_counter()
        try:
            fast = TunedClassifier(
                weights,
                device=device,
                precision="fp16",
                cuda_graphs=True,
                max_batch=max(batches),
                graph_sizes=list(batches),
                **options,
            )
        except Exception as exc:  # noqa: BLE001 - report why the path is missing, keep the others
            skipped[path] = f"not available here ({type(exc).__name__}: {str(exc)[:200]})"
            say(f"  {path}: {skipped[path]}")
            continue
        say(f"  ({path}: built in {time.perf_counter() - start:.0f} s)")
        with torch.inference_mode():
            checks[path] = agreement(reference.cpu().numpy(), fast.forward(probe).cpu().numpy())
        say(f"  ({path}: {checks[path]['summary']})")
        if not checks[path]["keeps_classes"]:
            continue  # measured answers that differ: not a limit
        for batch in batches:
            with torch.inference_mode():  # the graph's input buffer is an inference tensor
                fast.graph_input(batch).copy_(torch.randn(batch, 3, 224, 224, device=device))
            add(path, batch, _rate(lambda: fast.replay(batch), batch, seconds, sync))
        fast = None
    return rows


# a faster path keeps eager fp32's answers when it gives fp32's top class on this share of the
# inputs: fp16 may flip a near-tie (untrained weights have some), a wrong path agrees on ~1/11
SAME_CLASS_SHARE = 0.95


def agreement(reference, logits) -> dict:
    """Does a faster path give eager fp32's answers? Both are arrays of logits [N, classes]
    (numpy; notebook 7 checks fp16 with it too). It keeps them when it gives fp32's top class on
    at least SAME_CLASS_SHARE of the inputs. Also reported: the largest logit difference, against
    the spread of fp32's logits, and how many inputs fp32 decides clearly (two best logits further
    apart than twice that difference): on those, no path this close can change the class."""
    reference = np.asarray(reference, dtype=np.float32)
    logits = np.asarray(logits, dtype=np.float32)
    diff = float(np.abs(reference - logits).max())
    spread = float(reference.max() - reference.min())
    best2 = np.sort(reference, axis=1)[:, -2:]
    clear = (best2[:, 1] - best2[:, 0]) > 2 * diff
    same = reference.argmax(1) == logits.argmax(1)
    kept = bool(same.mean() >= SAME_CLASS_SHARE)
    return {
        "inputs": len(same),
        "same_top_class": int(same.sum()),
        "decided_clearly": int(clear.sum()),
        "max_abs_diff": round(diff, 4),
        "logit_spread": round(spread, 4),
        "keeps_classes": kept,
        "summary": f"top class as eager fp32 on {int(same.sum())}/{len(same)} inputs "
        f"({'at least' if kept else 'NOT'} {SAME_CLASS_SHARE:.0%}); largest logit difference "
        f"{diff / spread if spread else 0:.1%} of their spread",
    }


def _onnx_paths(onnx: Path, device: str, batches, seconds: float, add) -> None:
    """The same model exported to ONNX, run by ONNX Runtime on this device (CUDA provider on a GPU
    when this onnxruntime has it; on a CPU, all the cores for one session): on a CPU it is the
    fastest runtime the lab has, so it belongs in the limit."""
    import numpy as np

    from servelab.serving.runtimes import OnnxClassifier, cpu_cores

    if not Path(onnx).is_file():
        return
    session = OnnxClassifier(onnx, device=device, threads=cpu_cores())
    if device.startswith("cuda") and session.device == "CPUExecutionProvider":
        return  # no CUDA provider here: a CPU number is no limit for a GPU
    for batch in batches:
        x = np.random.default_rng(0).standard_normal((batch, 3, 224, 224)).astype(np.float32)
        add(
            f"onnxruntime fp32 ({session.device})",
            batch,
            _rate(lambda: session(x), batch, seconds, lambda: None),
        )


def best(rows: list[dict], path: str | None = None) -> dict:
    return max(
        (r for r in rows if path is None or r["path"] == path), key=lambda r: r["images_per_s"]
    )


def every_gpu(count: int, options: list[str], say) -> dict:
    """raw_limit on GPUs 0..count-1 at the same time; rows summed over the GPUs."""
    import subprocess

    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "servelab.serving.raw_limit",
                "--device",
                f"cuda:{i}",
                *options,
                "--json",
                "-",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]
    per_gpu = [json.loads(p.communicate()[0]) for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit("raw_limit failed on a GPU (its messages are above)")
    say(f"summed over {count} GPUs measured at the same time")
    return combine(per_gpu)


def combine(per_gpu: list[dict]) -> dict:
    """One result from each GPU's: every (path, batch) row summed over the GPUs."""
    totals: dict = {}
    for result in per_gpu:
        for row in result["rows"]:
            key = (row["path"], row["batch"])
            totals[key] = totals.get(key, 0.0) + row["images_per_s"]
    rows = [{"path": k[0], "batch": k[1], "images_per_s": round(v, 1)} for k, v in totals.items()]
    return {
        "device": f"cuda:0..{len(per_gpu) - 1}",
        "device_name": f"{len(per_gpu)} x {per_gpu[0]['device_name']}",
        "torch": per_gpu[0]["torch"],
        "rows": rows,
        "per_gpu_limit": [r["limit"] for r in per_gpu],
        "same_classes": per_gpu[0]["same_classes"],
        "skipped": per_gpu[0].get("skipped", {}),
        "compute_capability": per_gpu[0].get("compute_capability"),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--device",
        default=None,
        help="cuda:0, all (every GPU at once), cpu (default: the first GPU if there is one)",
    )
    parser.add_argument("--batches", default="1,16,64,256", help="comma-separated batch sizes")
    parser.add_argument(
        "--seconds", type=float, default=2.0, help="timed seconds per path and batch"
    )
    parser.add_argument(
        "--no-compile", action="store_true", help="skip the torch.compile path (a minute to build)"
    )
    parser.add_argument(
        "--json",
        help="write the rows and the best path to this file "
        "('-': stdout, the progress lines then go to stderr)",
    )
    args = parser.parse_args(argv)
    import torch

    say = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json == "-" else print
    device = args.device or ("cuda:0" if torch.cuda.is_available() else "cpu")
    if device == "all" and torch.cuda.device_count() > 1:
        options = ["--batches", args.batches, "--seconds", str(args.seconds)]
        result = every_gpu(
            torch.cuda.device_count(), options + ["--no-compile"] * args.no_compile, say
        )
    else:
        if device == "all":  # one GPU, or none
            device = "cuda:0" if torch.cuda.is_available() else "cpu"
        name = torch.cuda.get_device_name(device) if device.startswith("cuda") else "CPU"
        say(
            f"raw model on {device} ({name}), torch {torch.__version__}, "
            f"{torch.get_num_threads()} CPU threads"
        )
        checks: dict = {}
        skipped: dict = {}
        rows = measure(
            device,
            [int(b) for b in args.batches.split(",")],
            args.seconds,
            not args.no_compile,
            say=say,
            checks=checks,
            skipped=skipped,
        )
        capability = torch.cuda.get_device_capability(device) if device.startswith("cuda") else None
        result = {
            "device": device,
            "device_name": name,
            "torch": torch.__version__,
            "rows": rows,
            "same_classes": checks,
            "skipped": skipped,
            "compute_capability": ".".join(map(str, capability)) if capability else None,
        }
    rows = result["rows"]
    top = best(rows)
    result.update(
        per_runtime={r["path"]: best(rows, r["path"]) for r in rows},
        limit=top,
        eager_limit=best(rows, "eager fp32"),
    )
    say(f"limit: {top['images_per_s']:.0f} images/s ({top['path']}, batch {top['batch']})")
    text = json.dumps(result, indent=2) + "\n"
    if args.json == "-":
        sys.stdout.write(text)
    elif args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(text)


if __name__ == "__main__":
    main()
