"""How much of the raw limit can Triton serve to batch-1 clients, lever by lever (issue 27)?

    python3 maintainers/reference/serving_levers.py OUT_DIR CONFIG [CONFIG ...]

A maintainers' experiment on the GPU machine, before the levers become steps of notebook 7. It
starts the local tritonserver with only food_classifier_tuned (KIND_GPU), and for each CONFIG
(a name from CONFIGS below) writes its config.pbtxt fragment with triton_config.edit (the
notebooks' own path), runs its perf_analyzer line with perf.run_line, and appends the row to
OUT_DIR/levers.csv. Every config starts from uint8 pixels in, fp16, CUDA graphs.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from labstack import launcher, triton_local  # noqa: E402
from servelab import perf  # noqa: E402
from servelab.triton import model_repository, triton_config

MODEL = "food_classifier_tuned"
BASE = """
input [ { name: "input", data_type: TYPE_UINT8, dims: [ 224, 224, 3 ] } ]
parameters { key: "precision" value { string_value: "fp16" } }
parameters { key: "cuda_graphs" value { string_value: "on" } }
"""
GPU_INPUTS = 'parameters { key: "FORCE_CPU_ONLY_INPUT_TENSORS" value { string_value: "no" } }'
COMPILED = 'parameters { key: "compile" value { string_value: "on" } }'


KIND = "cpu" if sys.argv[2:] == ["smoke"] else "gpu"


def shape(instances: int, max_batch: int, delay_us: int) -> str:
    return (
        f"instance_group [ {{ count: {instances}, kind: KIND_GPU, gpus: [ 0 ] }} ]\n"
        f"max_batch_size: {max_batch}\n"
        f"dynamic_batching {{ max_queue_delay_microseconds: {delay_us} }}\n"
    )


# name -> (config fragment, transport flags, clients in flight)
CONFIGS = {
    # a CPU check of this script itself (no fp16, no CUDA): python3 ... OUT smoke
    "smoke": (shape(1, 8, 2000), "--shared-memory system", 8),
    "sysshm-8x64": (shape(8, 64, 500), "--shared-memory system", 1024),
    "cudashm-8x64": (shape(8, 64, 500) + GPU_INPUTS, "--shared-memory cuda", 1024),
    "cudashm-4x128": (shape(4, 128, 500) + GPU_INPUTS, "--shared-memory cuda", 1024),
    "cudashm-2x256": (shape(2, 256, 500) + GPU_INPUTS, "--shared-memory cuda", 1024),
    "cudashm-4x256": (shape(4, 256, 1000) + GPU_INPUTS, "--shared-memory cuda", 2048),
    "cudashm-1x256": (shape(1, 256, 500) + GPU_INPUTS, "--shared-memory cuda", 1024),
    "compiled-4x128": (shape(4, 128, 500) + GPU_INPUTS + COMPILED, "--shared-memory cuda", 1024),
    "compiled-2x256": (shape(2, 256, 500) + GPU_INPUTS + COMPILED, "--shared-memory cuda", 1024),
    "compiled-8x64": (shape(8, 64, 500) + GPU_INPUTS + COMPILED, "--shared-memory cuda", 1024),
}


def start_server(workdir: Path):
    repo = workdir / "model_repository"
    repo.mkdir(parents=True, exist_ok=True)
    model_repository.add_model(MODEL, repo, mode="local", kind=KIND)
    http, grpc, metrics = (launcher.free_port() for _ in range(3))
    service = triton_local.service(  # the lab's way: the admin key masked; no repairs here
        repo,
        (http, grpc, metrics),
        workdir / "triton_health.json",
        health="/v2/health/live",
        backends=workdir / "b",
        repair=False,
    )
    record = launcher.start(service)
    return record, repo, http, grpc


def main() -> None:
    out, names = Path(sys.argv[1]), sys.argv[2:]
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("LAB_PERF_INTERVAL_MS", "3000")
    record, repo, http, grpc = start_server(Path("/tmp/levers"))
    url = f"http://127.0.0.1:{http}"
    os.environ["TRITON_SERVER_URL"] = url
    ok, seconds, error = triton_config.load_model(MODEL, url, timeout=600)
    print(f"{MODEL} loaded: {ok} in {seconds:.0f} s {error}", flush=True)
    if KIND == "gpu":
        triton_config.edit(MODEL, BASE, repo=repo, url=url, timeout=600)
    rows = []
    try:
        for name in names:
            fragment, transport, clients = CONFIGS[name]
            start = time.perf_counter()
            result = triton_config.edit(
                MODEL, fragment, repo=repo, url=url, timeout=600, verbose=False
            )
            print(
                f"\n== {name}: reload {time.perf_counter() - start:.0f} s ok={result.ok} "
                f"{result.error[:300]}",
                flush=True,
            )
            if not result.ok:
                continue
            line = (
                f"perf_analyzer -m {MODEL} -u 127.0.0.1:{grpc} -i grpc {transport} "
                f"--concurrency-range {clients} --async --shape input:224,224,3"
            )
            try:
                run = perf.run_line(line, name, out=out, url=url, verbose=False)
            except perf.PerfAnalyzerError as exc:
                print(f"{name}: perf_analyzer failed: {str(exc)[-1500:]}", flush=True)
                continue
            row = {
                "config": name,
                **{
                    k: run.row.get(k)
                    for k in (
                        "throughput_infer_s",
                        "p99_ms",
                        "avg_batch_size",
                        "server_queue_ms",
                        "server_compute_input_ms",
                        "server_compute_infer_ms",
                        "server_compute_output_ms",
                        "gpu0_util_pct",
                        "cpu_util_pct",
                    )
                },
            }
            rows.append(row)
            print(row, flush=True)
            import pandas as pd

            pd.DataFrame(rows).to_csv(out / "levers.csv", index=False)
    finally:
        launcher.stop_process(record["pid"], record["marker"])
        log = Path(record["log"]).read_text(errors="replace")
        (out / "triton.log").write_text(log[-200_000:])


if __name__ == "__main__":
    main()
