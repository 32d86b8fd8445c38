#!/usr/bin/env python3
"""How a machine numbers its GPUs, read on the machine itself (no Triton, no pack needed):
nvidia-smi's listing as servelab/triton/gpu_names.py parses it, CUDA's order in fresh processes
under each environment that changes it (placement.py's ENVIRONMENTS, beside this file) beside
the order gpu_names predicts, and one process holding a context on the last GPU as nvidia-smi's
process list shows it (pid -> uuid -> index: how the lab finds the GPU an instance's process
runs on).

    python3 maintainers/reference/gpu_facts.py > facts.json
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

HOLD = (
    "import sys, time, torch\n"
    "x = torch.ones(1, device=f'cuda:{sys.argv[1]}')\n"
    "print(str(torch.cuda.get_device_properties(int(sys.argv[1])).uuid), flush=True)\n"
    "time.sleep(30)\n"
)


def main() -> int:
    from maintainers.reference import placement
    from servelab.triton import gpu_names

    listed = gpu_names.listing()
    facts: dict = {
        "nvidia_smi": [g.__dict__ for g in listed],
        "cuda_orders": placement.cuda_orders(listed),
    }
    last = len(listed) - 1
    if last >= 0:  # a process on the last GPU, seen by nvidia-smi
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(last)], stdout=subprocess.PIPE, text=True
        )
        said = holder.stdout.readline().strip()
        uuid = said if said.startswith("GPU-") else f"GPU-{said}"
        time.sleep(1)
        apps = gpu_names.compute_apps() or []
        mine = [a for a in apps if a["pid"] == holder.pid]
        named = {g.uuid: g.index for g in listed}
        facts["process_on_last_gpu"] = {
            "pid": holder.pid,
            "cuda_index_asked": last,
            "its_uuid_by_torch": uuid,
            "nvidia_smi_sees": mine,
            "nvidia_smi_index_of_that_uuid": [named.get(a["gpu_uuid"]) for a in mine],
        }
        holder.kill()
    facts["agrees"] = all(
        e["cuda_order"] == e["predicted"]
        for e in facts["cuda_orders"]
        if e["environment"].get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID"
    ) and all(
        i == last
        for i in facts.get("process_on_last_gpu", {}).get("nvidia_smi_index_of_that_uuid", [last])
    )
    print(json.dumps(facts, indent=2))
    return 0 if facts["agrees"] else 1


if __name__ == "__main__":
    sys.exit(main())
