"""GPU names that agree everywhere: each GPU by the index `gpus: [ i ]`, nvidia-smi and nvtop use.

Introduced in notebook 6 (through servelab/triton/gpus.py; servelab/triton/triton_stats.py names
its per-GPU readings with it).

Three programs number a node's GPUs, and the lab makes them agree:
- `gpus: [ i ]` in config.pbtxt is CUDA's device i in Triton's process: CUDA's order among the
  GPUs that process may see (CUDA_VISIBLE_DEVICES; in Docker, the GPUs given to the container).
  CUDA's default order, FASTEST_FIRST, leaves the order of equal GPUs unspecified, so the lab
  starts Triton with CUDA_DEVICE_ORDER=PCI_BUS_ID (labstack/triton_local.py, the compose files).
- nvidia-smi and nvtop number GPUs by PCI bus order: with PCI_BUS_ID, the same as CUDA's where
  Triton sees every GPU. Where it sees only some (CUDA_VISIBLE_DEVICES=1 in its environment, a
  common way to give a run one GPU of a shared machine), its GPU 0 is the first GPU listed
  there; a container given some of the node's GPUs (NVIDIA_VISIBLE_DEVICES=1) numbers them from
  0 inside. The lab counts the GPUs the server can use, names each by its `gpus: [ i ]` index,
  and adds nvidia-smi's index on the node where the two differ: "GPU 0 (nvidia-smi's GPU 1)".
- Triton's metrics carry no index at all, only each GPU's uuid (nv_gpu_utilization{gpu_uuid=..}).
  Sorted by uuid, two GPUs came out swapped on a two-GPU host; so a uuid is named by the index
  Triton's own instances report for it (servelab/serving/gpu_report.py publishes it in the same
  metrics), else by this machine's nvidia-smi mapped through CUDA_VISIBLE_DEVICES, else not at
  all (its columns then carry the uuid, and per-GPU claims say they cannot be checked).

    named = gpu_names.names(scrape)           # {uuid: index}, and where the names came from
    gpu_names.util_row(scrape["gpus"], named) # {"gpu0_util_pct": .., "gpu1_util_pct": ..}
    gpu_names.listing()                       # nvidia-smi's GPUs on this machine
    gpu_names.compute_apps()                  # the processes nvidia-smi sees on each GPU

`scrape` is one reading of Triton's metrics endpoint as servelab/triton/triton_stats.py reads it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field

QUERY = "index,uuid,name,pci.bus_id,memory.used,memory.total,utilization.gpu"
# what a Python-backend instance on a GPU publishes (servelab/serving/gpu_report.py, which the
# model.py files import without the lab's notebook helpers: the names are repeated there)
DEVICE_METRIC = "lab_cuda_device"
INSTANCE_METRIC = "lab_instance_gpu"


@dataclass(frozen=True)
class Gpu:
    """One GPU as nvidia-smi lists it on this machine."""

    index: int
    uuid: str
    name: str
    bus_id: str
    memory_used_mib: float
    memory_total_mib: float
    util_pct: float


@dataclass
class Names:
    """{uuid: index as `gpus: [ i ]` means it}, and where that came from (`source`); `smi` holds
    {uuid: nvidia-smi's index on the node} where nvidia-smi runs here (node_indexes)."""

    index: dict = field(default_factory=dict)
    source: str = "no source: neither nvidia-smi here nor a GPU instance reporting in Triton"
    smi: dict = field(default_factory=dict)

    def label(self, uuid: str) -> str:
        """The name of a GPU in columns: gpu0, gpu1, ...; a GPU with no index keeps its uuid."""
        if uuid in self.index:
            return f"gpu{self.index[uuid]}"
        return "gpu_" + "".join(c for c in uuid.removeprefix("GPU-")[:8] if c.isalnum())

    def title(self, uuid: str) -> str:
        """The name of a GPU in tables and sentences: "GPU 1", or "GPU 0 (nvidia-smi's GPU 1)"
        where the server sees only some GPUs and nvidia-smi on the node numbers it otherwise."""
        if uuid not in self.index:
            return self.label(uuid)
        mine, theirs = self.index[uuid], self.smi.get(uuid)
        return f"GPU {mine}" + ("" if theirs in (None, mine) else f" (nvidia-smi's GPU {theirs})")


# ---------------------------------------------------------------- nvidia-smi on this machine


def _smi(*args: str) -> list[list[str]] | None:
    """nvidia-smi's CSV rows (no header, no units) for a query, or None where it does not run."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        done = subprocess.run(
            ["nvidia-smi", *args, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return [[cell.strip() for cell in line.split(",")] for line in done.stdout.splitlines() if line]


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:  # "[N/A]", "[Not Supported]"
        return float("nan")


def listing() -> list[Gpu]:
    """The GPUs nvidia-smi lists here, by its index ([] without nvidia-smi or a GPU)."""
    rows = _smi(f"--query-gpu={QUERY}") or []
    gpus = [
        Gpu(int(r[0]), r[1], r[2], r[3], _number(r[4]), _number(r[5]), _number(r[6]))
        for r in rows
        if len(r) >= 7 and r[0].isdigit()
    ]
    return sorted(gpus, key=lambda g: g.index)


def compute_apps() -> list[dict] | None:
    """The processes nvidia-smi sees on each GPU: [{pid, gpu_uuid, used_mib, process}], or None
    where nvidia-smi does not run here. Inside a container nvidia-smi lists no processes of
    other containers (their process ids are not its own): run it on the node."""
    rows = _smi("--query-compute-apps=pid,gpu_uuid,used_memory,process_name")
    if rows is None:
        return None
    return [
        {"pid": int(r[0]), "gpu_uuid": r[1], "used_mib": _number(r[2]), "process": r[3]}
        for r in rows
        if len(r) >= 4 and r[0].isdigit()
    ]


def cuda_order(gpus: list[Gpu], visible: str | None = None) -> list[Gpu]:
    """The GPUs in CUDA's order in a process started with CUDA_DEVICE_ORDER=PCI_BUS_ID and
    CUDA_VISIBLE_DEVICES=`visible` (None or empty string: unset): by PCI bus id, then only the
    devices listed, in the listed order, each by index or by (a prefix of) its uuid. As CUDA
    does, the list ends at its first entry that names no GPU."""
    ordered = sorted(gpus, key=lambda g: g.bus_id.lower())
    if visible is None or not visible.strip():
        return ordered
    chosen: list[Gpu] = []
    for entry in (e.strip() for e in visible.split(",")):
        if entry.isdigit() and int(entry) < len(ordered):
            match = ordered[int(entry)]
        else:
            found = [g for g in ordered if entry and g.uuid.startswith(entry)]
            match = found[0] if len(found) == 1 else None
        if match is None or match in chosen:
            break
        chosen.append(match)
    return chosen


# ---------------------------------------------------------------- naming the uuids

# the last {uuid: index} that Triton's instances reported (stable while the server runs)
_FROM_TRITON: dict = {}


def from_triton(scrape: dict) -> dict:
    """{uuid: index} as a GPU instance's process reported it (scrape["cuda_devices"]); the last
    one seen while none is loaded (a reload takes a moment)."""
    reported = scrape.get("cuda_devices") or {}
    if reported:
        _FROM_TRITON.clear()
        _FROM_TRITON.update(reported)
    return dict(_FROM_TRITON)


def visible(env: dict | None = None) -> dict[str, str]:
    """The settings that give a process only some of the GPUs (a server started from this
    environment inherits them): {"CUDA_VISIBLE_DEVICES": "1"}, {"NVIDIA_VISIBLE_DEVICES": "0"}
    (a container's, set by the NVIDIA runtime), or {} where nothing restricts ("all", unset)."""
    env = os.environ if env is None else env
    found = {}
    for name in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        value = (env.get(name) or "").strip()
        if value and value.lower() != "all":
            found[name] = value
    return found


def node_indexes(gpus: list[Gpu], env: dict | None = None) -> dict:
    """{uuid: index} as nvidia-smi and nvtop on the node number each GPU listed here: the index
    here, except in a container given some of the node's GPUs by index (NVIDIA_VISIBLE_DEVICES=
    1,3), whose nvidia-smi numbers them from 0 in the same (PCI bus) order."""
    given = visible(env).get("NVIDIA_VISIBLE_DEVICES", "")
    ids = [e.strip() for e in given.split(",")] if given else []
    here = sorted(gpus, key=lambda g: g.index)
    if ids and all(i.isdigit() for i in ids) and len(ids) == len(here):
        node = sorted(int(i) for i in ids)
        return {g.uuid: node[k] for k, g in enumerate(here)}
    return {g.uuid: g.index for g in here}


def from_smi(gpus: list[Gpu] | None = None, env: dict | None = None) -> dict:
    """{uuid: CUDA index} of a Triton server started on this machine with the lab's environment:
    nvidia-smi's listing in CUDA's order through CUDA_VISIBLE_DEVICES."""
    env = os.environ if env is None else env
    gpus = listing() if gpus is None else gpus
    return {g.uuid: i for i, g in enumerate(cuda_order(gpus, env.get("CUDA_VISIBLE_DEVICES")))}


_SMI_CACHE: dict = {}


def _smi_once() -> list[Gpu]:
    """listing(), asked once per process (a sampler reads names twice a second)."""
    if "gpus" not in _SMI_CACHE:
        _SMI_CACHE["gpus"] = listing()
    return _SMI_CACHE["gpus"]


def forget() -> None:
    """Ask nvidia-smi again, and forget what Triton reported (tests; a new server)."""
    _SMI_CACHE.clear()
    _FROM_TRITON.clear()


def names(scrape: dict | None = None) -> Names:
    """Each GPU's index as `gpus: [ i ]` means it: from Triton's instances where one on a GPU
    reports (the server's own CUDA order: right in Docker too), else from nvidia-smi here (local
    mode), else none."""
    here = _smi_once()
    smi = node_indexes(here)
    reported = from_triton(scrape or {})
    if reported:
        return Names(reported, "Triton's instances (CUDA's index in the server)", smi)
    if here:
        return Names(from_smi(here), "nvidia-smi on this machine (PCI bus order)", smi)
    return Names(smi=smi)


def util_row(util_by_uuid: dict, names: Names) -> dict:
    """Per-GPU utilisation (0..1 by uuid, as Triton reports it) as percent columns named by index,
    in index order: {"gpu0_util_pct": .., "gpu1_util_pct": ..}."""
    order = sorted(util_by_uuid, key=lambda u: (u not in names.index, names.index.get(u, 0), u))
    return {f"{names.label(u)}_util_pct": round(100 * util_by_uuid[u], 1) for u in order}
