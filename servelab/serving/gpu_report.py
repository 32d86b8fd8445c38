"""Where a Python-backend model instance runs, as its own process says, in Triton's metrics.

Triton's metrics name a GPU by its uuid alone (nv_gpu_utilization{gpu_uuid="GPU-..."}), while
`gpus: [ i ]` in config.pbtxt means CUDA's device i in the server's process. An instance on a GPU
publishes both sides, so a reader of the metrics endpoint (servelab/triton/gpus.py, also from the
Jupyter container, which sees no GPU) can name every GPU as the config does:

- lab_cuda_device{instance, gpu_index, gpu_uuid} 1: each GPU the instance's process sees, by
  CUDA's index there (the server's environment: what `gpus: [ i ]` means) and its uuid;
- lab_instance_gpu{model, instance, device_id, gpu_uuid} = the process id: the device Triton gave
  the instance (device_id) and the GPU its model actually sits on (gpu_uuid).

The instance name is in every label set: Triton may keep some instances of a reloaded model and
finalize others, and a metric two processes share would vanish with the first to finalize.
"""

from __future__ import annotations

import os

DEVICE_METRIC = "lab_cuda_device"
INSTANCE_METRIC = "lab_instance_gpu"


def cuda_uuids() -> list[str]:
    """The uuid of each GPU this process sees, in CUDA's order ("GPU-..." as nvidia-smi writes
    it); [] where PyTorch cannot say (no GPU, or a PyTorch without device uuids)."""
    import torch

    if not torch.cuda.is_available():
        return []
    found = []
    for index in range(torch.cuda.device_count()):
        uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
        if uuid is None:
            return []
        text = str(uuid)
        found.append(text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}")
    return found


def cuda_index(device) -> int | None:
    """The CUDA index of a device the model runs on: "cuda:1", a torch.device, or an ONNX Runtime
    provider with its device_id ("CUDAExecutionProvider", index given apart); None on the CPU."""
    text = str(device)
    if not text.startswith("cuda"):
        return None
    return int(text.partition(":")[2] or 0)


class Report:
    """Publish where this instance runs (keep the object until finalize(): a metric family must
    outlive its metrics). Nothing is published for an instance on the CPU."""

    def __init__(self, pb_utils, args: dict, device):
        self._families: list = []
        self._metrics: list = []
        index = cuda_index(device)
        uuids = cuda_uuids() if index is not None else []
        if not uuids:
            return
        instance = args.get("model_instance_name", "?")
        devices = self._family(pb_utils, DEVICE_METRIC, "1 for each GPU this process sees")
        for i, uuid in enumerate(uuids):
            labels = {"instance": instance, "gpu_index": str(i), "gpu_uuid": uuid}
            self._set(devices, labels, 1)
        runs = self._family(
            pb_utils, INSTANCE_METRIC, "the process id of an instance, by the GPU it runs on"
        )
        labels = {
            "model": args.get("model_name", "?"),
            "instance": instance,
            "device_id": str(args.get("model_instance_device_id", "")),
            "gpu_uuid": uuids[index] if index < len(uuids) else "not visible",
        }
        self._set(runs, labels, os.getpid())

    def _family(self, pb_utils, name: str, description: str):
        family = pb_utils.MetricFamily(
            name=name, description=description, kind=pb_utils.MetricFamily.GAUGE
        )
        self._families.append(family)
        return family

    def _set(self, family, labels: dict, value: float) -> None:
        metric = family.Metric(labels=labels)
        metric.set(value)
        self._metrics.append(metric)

    def close(self) -> None:
        self._metrics, self._families = [], []
