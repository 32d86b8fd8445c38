"""The `placement` part of the reference run: each GPU named one way everywhere, and every
instance seen where its config put it, on this machine's GPUs, with no notebook around it.

1. nvidia-smi's GPUs (index, uuid, PCI bus), and CUDA's order in a fresh process under each
   environment that changes it (CUDA_DEVICE_ORDER, CUDA_VISIBLE_DEVICES), against what
   servelab/triton/gpu_names.py predicts for a server started so;
2. the local stack up (Triton with CUDA_DEVICE_ORDER=PCI_BUS_ID, as the lab starts it), the GPUs
   as Triton's instances report them, and the fact that their numbers are nvidia-smi's;
3. food_classifier with one instance on GPU 0, two per GPU written as one group and as a group
   per GPU, and all four on GPU 0: after each, where every instance's process runs (its own
   report, nvidia-smi's processes, Triton's memory per GPU) and the claim that the placement was
   honoured. Each change goes through triton_config.edit, as the notebooks make it: unloaded,
   its old instances gone (Triton's repository index no longer says UNLOADING), then loaded.

Writes results/placement/placement.json and claims.csv under the page's folder, and Triton's log
of the part as service_triton_placement.log beside them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

UUIDS = (
    "import torch\n"
    "print(' '.join(str(torch.cuda.get_device_properties(i).uuid)"
    " for i in range(torch.cuda.device_count())))"
)
ENVIRONMENTS = [  # what changes CUDA's order in a process, as a server could be started
    {},
    {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
    {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1"},
    {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1,0"},
]


def cuda_orders(listed) -> list[dict]:
    """CUDA's order of the GPUs (their uuids) in a fresh process per environment, beside
    gpu_names.cuda_order's prediction for it."""
    from servelab.triton import gpu_names

    found = []
    for extra in ENVIRONMENTS:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_")} | extra
        done = subprocess.run(
            [sys.executable, "-c", UUIDS], env=env, capture_output=True, text=True, timeout=120
        )
        seen = [u if u.startswith(("GPU-", "MIG-")) else f"GPU-{u}" for u in done.stdout.split()]
        predicted = [
            g.uuid for g in gpu_names.cuda_order(listed, extra.get("CUDA_VISIBLE_DEVICES"))
        ]
        found.append({"environment": extra, "cuda_order": seen, "predicted": predicted})
    return found


def forms(n_gpus: int) -> dict[str, str]:
    """The placements loaded one after another (the class's two-GPU forms where there are two)."""
    from servelab.triton import instances

    groups = ", ".join(f"{{ count: 2, kind: KIND_GPU, gpus: [ {i} ] }}" for i in range(n_gpus))
    every = 2 * n_gpus
    return {
        "one instance on GPU 0": "instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 0 ] } ]",
        "two per GPU, one group": instances.instance_group(2, n_gpus),
        "two per GPU, a group per GPU": f"instance_group [ {groups} ]",
        "all on GPU 0": f"instance_group [ {{ count: {every}, kind: KIND_GPU, gpus: [ 0 ] }} ]",
    }


def run(out: Path) -> int:
    """Run the part into out/results/placement; 0 when every fact and claim holds."""
    from labstack import artifacts, launcher
    from servelab import claims
    from servelab.paths import model_repository_dir
    from servelab.triton import gpu_names, gpus, triton_config, triton_stats

    artifacts.build()

    folder = out / "results" / "placement"
    folder.mkdir(parents=True, exist_ok=True)
    claims.RESULTS.clear()
    listed = gpu_names.listing()
    record: dict = {"nvidia_smi": [g.__dict__ for g in listed], "cuda_orders": cuda_orders(listed)}
    for entry in record["cuda_orders"]:
        if entry["environment"].get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID":
            claims.fact(
                f"placement: CUDA's order under {entry['environment']} is the one predicted",
                entry["cuda_order"] == entry["predicted"],
                {"CUDA": " ".join(u[:12] for u in entry["cuda_order"])},
            )
    try:
        launcher.up(jupyter=False, triton=True)
        urls = launcher.client_urls(launcher.read_state())
        os.environ.update(urls)
        url, metrics = urls["TRITON_SERVER_URL"], urls["TRITON_METRICS_URL"]
        n_gpus = triton_stats.gpu_count(url, metrics)
        record["triton_gpus"] = gpus.table(metrics).to_dict("records")
        gpus.names_agree("placement", metrics)
        record["placements"] = []
        for name, fragment in forms(n_gpus).items():
            print(f"\n>>> {name}: {fragment}", flush=True)
            start = time.time()
            triton_config.edit("food_classifier", fragment, verbose=False)
            frame = gpus.where_instances_run(
                f"placement, {name}", "food_classifier", n_gpus, repository=model_repository_dir()
            )
            record["placements"].append(
                {
                    "name": name,
                    "fragment": fragment,
                    "seconds": round(time.time() - start, 1),
                    "instances": frame.to_dict("records"),
                    "memory_mib": {
                        k: round(v / 2**20)
                        for k, v in triton_stats.Sampler(metrics)
                        .scrape()["gpu_memory_bytes"]
                        .items()
                    },
                }
            )
    finally:
        launcher.down()
        (folder / "placement.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
        claims.save(folder)
        # Triton's own account of each load and unload (when each instance started and ended)
        logs = Path(os.environ["LAB_STATE_DIR"]) / "logs"
        if (logs / "triton.log").is_file():
            shutil.copy(logs / "triton.log", out / "service_triton_placement.log")
    return 0 if all(r["verdict"] == claims.HOLDS for r in claims.RESULTS) else 1
