"""The GPUs of the node, each by one number, and where each model instance runs on them.

Introduced in notebook 6.

    gpus.table(METRICS)                  # a row per GPU: its index, uuid, nvidia-smi's, memory
    gpus.names_agree("6.1", METRICS)     # the fact: Triton's GPU i is nvidia-smi's GPU i
    gpus.where_instances_run("6.3", "food_classifier", N_GPUS, TRITON, METRICS, REPOSITORY)
        # a row per instance: the GPU Triton gave it, its process, where that process runs (as
        # it reports, and as nvidia-smi sees it), Triton's memory per GPU, and the claim that the
        # config's placement was honoured
    gpus.both_forms(2, N_GPUS)           # one group over every GPU, or a group per GPU: the same

Every GPU is named by the index `gpus: [ i ]` gives it, which the lab makes nvidia-smi's and
nvtop's too (servelab/triton/gpu_names.py says how, and why Triton's own metrics cannot).
"""

from __future__ import annotations

import time
from collections import Counter

from servelab import claims
from servelab.triton import gpu_names, instances, triton_config, triton_stats


def _scrape(metrics_url: str | None) -> dict:
    return triton_stats.Sampler(metrics_url).scrape()


def table(metrics_url: str | None = None, scrape: dict | None = None):
    """A row per GPU the server reports: its index as `gpus: [ i ]` means it, its uuid (find it
    with `nvidia-smi -L` on the node), nvidia-smi's index for it on this machine (where
    nvidia-smi runs here), Triton's reading of its utilisation and memory, and the instances that
    report running on it. Printed (a headless run keeps it in its log), with where the names
    came from, and returned."""
    import pandas as pd

    scrape = _scrape(metrics_url) if scrape is None else scrape
    named = gpu_names.names(scrape)
    on = Counter(i["gpu_uuid"] for i in scrape.get("instances", []))
    uuids = set(scrape.get("gpus", {})) | set(named.index)
    rows = [
        {
            "gpu": named.title(uuid) if uuid in named.index else "not named",
            "uuid": uuid,
            "nvidia_smi_index_here": named.smi.get(uuid, "not visible here"),
            "util_pct": round(100 * scrape.get("gpus", {}).get(uuid, float("nan")), 1),
            "memory_used_mib": round(scrape.get("gpu_memory_bytes", {}).get(uuid, 0) / 2**20),
            "instances_on_it": on.get(uuid, 0),
        }
        for uuid in sorted(uuids, key=lambda u: (named.index.get(u, 99), u))
    ]
    frame = pd.DataFrame(rows)
    print(f"GPUs named by {named.source}:\n{frame.to_string(index=False)}" if rows else "no GPU")
    return frame


def names_agree(
    step: str, metrics_url: str | None = None, scrape: dict | None = None
) -> str | None:
    """A fact, where both sides are known: each GPU's index in Triton (`gpus: [ i ]`, as its
    instances report it) is nvidia-smi's index for the same uuid on this machine, or, where the
    server sees only some GPUs (CUDA_VISIBLE_DEVICES), the place of that GPU in that list.
    Nothing to decide (None) where Triton reports no GPU."""
    scrape = _scrape(metrics_url) if scrape is None else scrape
    if not scrape.get("gpus") and not scrape.get("cuda_devices"):
        print("Triton reports no GPU: every instance runs on the CPU")
        return None
    named = gpu_names.names(scrape)
    subset = gpu_names.visible().get("CUDA_VISIBLE_DEVICES")
    claim = f"{step}: each GPU has one number: Triton's gpus: [ i ] is " + (
        f"the i-th GPU of CUDA_VISIBLE_DEVICES={subset}" if subset else "nvidia-smi's GPU i"
    )
    reported = scrape.get("cuda_devices") or {}
    if not reported or not named.smi:
        missing = (
            "nvidia-smi does not run here (Docker: on the node, `nvidia-smi -L` lists each "
            "GPU's uuid beside its index)"
            if reported
            else "no instance on a GPU reports its device in Triton's metrics"
        )
        return claims.not_checkable(claim, missing)
    pairs = {u: (reported[u], named.smi[u]) for u in reported if u in named.smi}
    expected = gpu_names.from_smi(gpu_names.listing())  # CUDA's order through the subset
    wrong = [u for u in pairs if expected.get(u) != reported[u]]
    return claims.fact(
        claim,
        bool(pairs) and not wrong and len(pairs) == len(reported),
        {f"GPU {t} in Triton": f"nvidia-smi's {s}" for t, s in sorted(pairs.values())},
        note=_agreement(pairs, wrong, named),
    )


def _agreement(pairs: dict, wrong: list, named) -> str:
    """names_agree's note: {uuid: (Triton's index, nvidia-smi's)}, the uuids out of place."""
    if wrong:
        return (
            "Triton sees another subset or order than this environment gives it "
            "(CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER in its own): name these GPUs by uuid"
        )
    if any(mine != smi for mine, smi in pairs.values()):
        return "the server sees only some GPUs, numbered from 0: the lab writes each as " + (
            ", ".join(named.title(u) for u in sorted(pairs, key=lambda u: pairs[u]))
        )
    return "the same uuid has the same number on both sides"


def _device(index) -> str:
    return "CPU" if index is None else f"GPU {index}"


def instance_table(model: str, placed: dict, scrape: dict, stubs=None, apps=None):
    """A row per instance of `model`: the device Triton gave it (`triton_put_it_on`), its
    process, the GPU that process says its model is on (`runs_on`), and where nvidia-smi runs
    here (`apps`: gpu_names.compute_apps()), the GPU nvidia-smi sees that process on and the
    memory it holds there. Instances on a GPU report themselves in Triton's metrics; CPU
    instances report nothing, so they come from `stubs` (instances.python_stubs) where this
    machine sees Triton's processes. `placed`: instances.placement() of the served config."""
    import pandas as pd

    named = gpu_names.names(scrape)
    by_pid = {a["pid"]: a for a in apps or []}
    mine = [i for i in scrape.get("instances", []) if i.get("model") == model]
    rows = []
    for inst in sorted(mine, key=lambda i: i["instance"]):
        seen, device_id = by_pid.get(inst["pid"]), str(inst.get("device_id", ""))
        smi = "not visible here" if apps is None else "not listed"
        smi = named.title(seen["gpu_uuid"]) if seen else smi
        rows.append(
            {
                "instance": inst["instance"],
                "triton_put_it_on": _device(int(device_id)) if device_id.isdigit() else "?",
                "pid": inst["pid"],
                "runs_on": _device(named.index.get(inst["gpu_uuid"], "?")),  # gpus: [ i ]
                "nvidia_smi_sees_it_on": smi,
                "gpu_memory_mib": seen["used_mib"] if seen else float("nan"),
            }
        )
    if not rows and stubs and set(placed) == {"CPU"}:
        on_cpu = {"triton_put_it_on": "CPU", "runs_on": "CPU"}
        rows = [{"instance": s["instance"], "pid": s["pid"], **on_cpu} for s in stubs]
    return pd.DataFrame(rows)


def seen_per_device(frame) -> dict[str, int]:
    """Instances per device as their processes report it: {"GPU 0": 2, "GPU 1": 2}."""
    if frame is None or len(frame) == 0:
        return {}
    return dict(sorted(Counter(frame["runs_on"]).items()))


def placement_honoured(step: str, frame, placed: dict) -> str | None:
    """The claim that the config's placement was honoured: every instance's process runs on the
    GPU Triton gave it (where nvidia-smi sees the process, on that GPU too), and the instances per
    GPU are those the config asks for (`placed`, instances.placement). Nothing to decide (None)
    where the config puts no instance on a GPU."""
    claim = f"{step}: every instance runs on the GPU its config put it on"
    if not placed or not any(d.startswith("GPU") for d in placed):
        return None
    if frame is None or len(frame) == 0:
        return claims.not_checkable(
            claim,
            "the instances do not report where they run (a backend in C++ runs its instances as "
            "threads of tritonserver): Triton's memory per GPU, above, shows where it took memory",
        )
    seen = seen_per_device(frame)
    elsewhere = frame[frame["runs_on"] != frame["triton_put_it_on"]]
    smi = frame.get("nvidia_smi_sees_it_on")
    checked = smi is not None and bool(smi.str.startswith(("GPU", "CPU", "not listed")).any())
    # nvidia-smi's own number, where it differs, is in brackets: "GPU 0 (nvidia-smi's GPU 1)"
    smi_base = smi.str.split(" (", regex=False).str[0] if checked else smi
    smi_differs = frame[smi_base != frame["runs_on"]] if checked else frame.iloc[0:0]
    return claims.fact(
        claim,
        seen == dict(sorted(placed.items())) and elsewhere.empty and smi_differs.empty,
        {"the config": _per_device(placed), "their processes": _per_device(seen)},
        note=(
            "nvidia-smi sees each process on the same GPU"
            if checked
            else "as each instance's process reports it (nvidia-smi's processes are not visible "
            "here: on the node, `nvidia-smi` lists them)"
        ),
    )


def _per_device(per_device: dict) -> str:
    return ", ".join(f"{n} on {d}" for d, n in sorted(per_device.items())) or "none"


def where_instances_run(
    step: str,
    model: str,
    n_gpus: int,
    url: str | None = None,
    metrics_url: str | None = None,
    repository=None,
    settle_s: float = 10.0,
):
    """After an instance-group change: where each instance of `model` runs (instance_table,
    printed and returned), with Triton's memory per GPU, and the claim that the served config's
    placement was honoured. Waits up to `settle_s` until the instances reporting are exactly
    those the config asks for, GPU by GPU: a reload's last instance may publish a moment after
    the model answers READY, and an instance being finalized still reports until its process
    ends (so a count alone could take an old instance for a new one)."""
    placed = instances.placement(triton_config.served_config(model, url), n_gpus)
    on_gpus = {d: n for d, n in placed.items() if d.startswith("GPU")}
    deadline = time.monotonic() + settle_s
    while True:
        scrape = _scrape(metrics_url)
        if _reported(model, scrape) == on_gpus or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    stubs = instances.python_stubs(model, repository)
    frame = instance_table(model, placed, scrape, stubs, gpu_names.compute_apps())
    named, memory = gpu_names.names(scrape), scrape.get("gpu_memory_bytes", {})
    used = sorted((named.title(u), b) for u, b in memory.items())
    if used:
        print("Triton's memory per GPU: " + ", ".join(f"{g} {b / 2**20:,.0f} MiB" for g, b in used))
    print(f"{model}: the config puts {_per_device(placed)}")
    if len(frame):
        print(frame.to_string(index=False))
    elif "CPU" in placed:
        print("in Docker the Triton container's processes are its own: on the node, `ps` or nvtop")
    placement_honoured(step, frame, placed)
    return frame


def _reported(model: str, scrape: dict) -> dict[str, int]:
    """Instances of `model` per GPU as they report themselves (by the GPU their model sits on)."""
    named = gpu_names.names(scrape)
    mine = [i for i in scrape.get("instances", []) if i.get("model") == model]
    return dict(Counter(_device(named.index.get(i["gpu_uuid"], "?")) for i in mine))


def both_forms(count: int, n_gpus: int) -> bool:
    """Print `count` instances on every GPU in both spellings, one group listing every GPU and
    the original lab's group per GPU, with where Triton puts each (instances.placement); True
    where they agree. Nothing to show without a GPU."""
    if n_gpus < 1:
        return True
    one = instances.instance_group(count, n_gpus)
    groups = ", ".join(
        f"{{ count: {count}, kind: KIND_GPU, gpus: [ {i} ] }}" for i in range(n_gpus)
    )
    per_gpu = f"instance_group [ {groups} ]"
    places = [instances.placement(text, n_gpus) for text in (one, per_gpu)]
    for what, text, where in zip(("one group", "a group per GPU"), (one, per_gpu), places):
        print(f"{what}: {text}\n    puts {_per_device(where)}")
    return places[0] == places[1]
