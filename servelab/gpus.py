"""The GPUs of the node, each by one number, and where each model instance runs on them.

Introduced in notebook 6.

    gpus.table(METRICS)                  # a row per GPU: its index, uuid, nvidia-smi's, memory
    gpus.names_agree("6.1", METRICS)     # the fact: Triton's GPU i is nvidia-smi's GPU i
    gpus.where_instances_run("6.3", "food_classifier", N_GPUS, TRITON, METRICS, REPOSITORY)
        # a row per instance: the GPU Triton gave it, its process, where that process runs (as
        # it reports, and as nvidia-smi sees it), Triton's memory per GPU, and the claim that the
        # config's placement was honoured
    gpus.laws_per_gpu(row, placed, N_GPUS)   # U = X·S on each GPU: its share of an execution
    gpus.second_gpu_buys("6.3", runs, "6.3 4 on GPU 0 c8", "6.3 2 inst c8", N_GPUS)

Every GPU is named by the index `gpus: [ i ]` gives it, which the lab makes nvidia-smi's and
nvtop's too (servelab/gpu_names.py says how, and why Triton's own metrics cannot).
"""

from __future__ import annotations

import time
from collections import Counter

from servelab import claims, gpu_names, instances, triton_config, triton_stats


def _scrape(metrics_url: str | None) -> dict:
    return triton_stats.Sampler(metrics_url).scrape()


def table(metrics_url: str | None = None, scrape: dict | None = None):
    """A row per GPU the server reports: its index as `gpus: [ i ]` means it, its uuid (find it
    with `nvidia-smi -L` on the node), nvidia-smi's index for it on this machine (where
    nvidia-smi runs here), Triton's reading of its utilisation and memory, and the instances that
    report running on it. Prints where the names came from."""
    import pandas as pd

    scrape = _scrape(metrics_url) if scrape is None else scrape
    named = gpu_names.names(scrape)
    on = Counter(i["gpu_uuid"] for i in scrape.get("instances", []))
    uuids = set(scrape.get("gpus", {})) | set(named.index)
    print(f"GPUs named by {named.source}")
    rows = [
        {
            "gpu": f"GPU {named.index[uuid]}" if uuid in named.index else "not named",
            "uuid": uuid,
            "nvidia_smi_index_here": named.smi.get(uuid, "not visible here"),
            "util_pct": round(100 * scrape.get("gpus", {}).get(uuid, float("nan")), 1),
            "memory_used_mib": round(scrape.get("gpu_memory_bytes", {}).get(uuid, 0) / 2**20),
            "instances_on_it": on.get(uuid, 0),
        }
        for uuid in sorted(uuids, key=lambda u: (named.index.get(u, 99), u))
    ]
    return pd.DataFrame(rows)


def names_agree(step: str, metrics_url: str | None = None, scrape: dict | None = None) -> str:
    """A fact, where both sides are known: each GPU's index in Triton (`gpus: [ i ]`, as its
    instances report it) is nvidia-smi's index for the same uuid on this machine."""
    scrape = _scrape(metrics_url) if scrape is None else scrape
    named = gpu_names.names(scrape)
    claim = f"{step}: each GPU has one number: Triton's gpus: [ i ] is nvidia-smi's GPU i"
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
    differ = [u for u, (mine, smi) in pairs.items() if mine != smi]
    return claims.fact(
        claim,
        bool(pairs) and not differ and len(pairs) == len(reported),
        {f"GPU {t} in Triton": f"nvidia-smi's {s}" for t, s in sorted(pairs.values())},
        note=(
            "the same uuid has the same number on both sides"
            if not differ
            else "Triton sees a subset or another order (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER "
            "in its environment): name these GPUs by uuid"
        ),
    )


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
    rows = []
    for inst in sorted(scrape.get("instances", []), key=lambda i: i["instance"]):
        if inst.get("model") != model:
            continue
        seen = by_pid.get(inst["pid"])
        device_id = str(inst.get("device_id", ""))
        if seen:
            smi = _device(named.smi.get(seen["gpu_uuid"], "?"))
        else:
            smi = "not visible here" if apps is None else "not listed"
        rows.append(
            {
                "instance": inst["instance"],
                "triton_put_it_on": _device(int(device_id)) if device_id.isdigit() else "?",
                "pid": inst["pid"],
                "runs_on": _device(named.index.get(inst["gpu_uuid"], "?")),
                "nvidia_smi_sees_it_on": smi,
                "gpu_memory_mib": seen["used_mib"] if seen else float("nan"),
            }
        )
    if not rows and stubs and set(placed) == {"CPU"}:
        rows = [
            {
                "instance": s["instance"],
                "triton_put_it_on": "CPU",
                "pid": s["pid"],
                "runs_on": "CPU",
            }
            for s in stubs
        ]
    return pd.DataFrame(rows)


def seen_per_device(frame) -> dict[str, int]:
    """Instances per device as their processes report it: {"GPU 0": 2, "GPU 1": 2}."""
    if frame is None or len(frame) == 0:
        return {}
    return dict(sorted(Counter(frame["runs_on"]).items()))


def placement_honoured(step: str, frame, placed: dict) -> str:
    """The claim that the config's placement was honoured: every instance's process runs on the
    GPU Triton gave it (where nvidia-smi sees the process, on that GPU too), and the instances per
    GPU are those the config asks for (`placed`, instances.placement)."""
    claim = f"{step}: every instance runs on the GPU its config put it on"
    if not placed or not any(d.startswith("GPU") for d in placed):
        return claims.not_checkable(claim, "no instance on a GPU here")
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
    smi_differs = frame[smi != frame["runs_on"]] if checked else frame.iloc[0:0]
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
    """After an instance-group change: where each instance of `model` runs (instance_table), with
    Triton's memory per GPU, and the claim that the served config's placement was honoured.
    Waits up to `settle_s` for every instance the config asks for to report (a reload's last
    instance may publish a moment after the model answers READY)."""
    placed = instances.placement(triton_config.served_config(model, url), n_gpus)
    want = sum(n for d, n in placed.items() if d.startswith("GPU"))
    deadline = time.monotonic() + settle_s
    while True:
        scrape = _scrape(metrics_url)
        mine = [i for i in scrape.get("instances", []) if i.get("model") == model]
        if len(mine) >= want or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    named = gpu_names.names(scrape)
    frame = instance_table(
        model,
        placed,
        scrape,
        instances.python_stubs(model, repository),
        gpu_names.compute_apps(),
    )
    memory = scrape.get("gpu_memory_bytes", {})
    if memory:
        used = sorted((named.label(u).replace("gpu", "GPU ", 1), b) for u, b in memory.items())
        print("Triton's memory per GPU: " + ", ".join(f"{g} {b / 2**20:,.0f} MiB" for g, b in used))
    print(f"{model}: the config puts {_per_device(placed)}")
    placement_honoured(step, frame, placed)
    return frame


# ---------------------------------------------------------------- what a second GPU buys


def laws_per_gpu(row: dict, placed: dict, n_gpus: int):
    """The utilisation law on each of a server's `n_gpus` GPUs in one run (`row`: a perf run's
    row, with its throughput, mean batch, execution time and gpuN_util_pct; `placed`: its
    instances per device, instances.placement). The executions spread over the instances evenly,
    so GPU g ran X_g = X_exec · n_g / n of them per second; its utilisation U_g = X_g · S_g gives
    S_g, the GPU's busy time per execution, and S_g / S its share of one execution (S: Triton's
    execution time, mostly the stub's work on the CPU for the Python-backend model). A GPU
    without instances ran none: its utilisation is whatever else ran there."""
    import pandas as pd

    total = sum(n for d, n in placed.items() if d.startswith("GPU")) or 1
    executions_s = row["throughput_infer_s"] / max(1.0, float(row.get("avg_batch_size") or 1))
    execution_ms = float(row.get("execution_ms") or "nan")
    rows = []
    for index in range(n_gpus):
        n = placed.get(f"GPU {index}", 0)
        util = float(row.get(f"gpu{index}_util_pct", float("nan")))
        x_g = executions_s * n / total
        s_g = util / 100 / x_g * 1000 if x_g else float("nan")
        rows.append(
            {
                "gpu": f"GPU {index}",
                "instances": n,
                "executions_s": round(x_g, 1),
                "util_pct": util,
                "gpu_ms_per_execution": round(s_g, 3),
                "execution_ms": round(execution_ms, 3),
                "gpu_share_of_execution": round(s_g / execution_ms, 3),
            }
        )
    return pd.DataFrame(rows).set_index("gpu")


def second_gpu_buys(step: str, runs: dict, on_one: str, on_two: str, n_gpus: int) -> str:
    """The claim of what a second GPU buys this model: the same instances all on GPU 0 (run
    `on_one`) against spread over two GPUs (run `on_two`), at the same load. Where one GPU's
    share of an execution is small, the instances' own work (the Python backend's stubs, on the
    CPU's cores) is the limit, and the second GPU adds little; the claim says so with the
    numbers why: GPU 0's utilisation with all of them, and its share of an execution."""
    claim = (
        f"{step}: a second GPU buys this model little: the same instances serve at most 1.15x "
        "as much over two GPUs as on one (throughput, two / one)"
    )
    if n_gpus < 2 or on_one not in runs or on_two not in runs:
        return claims.not_checkable(claim, f"this server has {n_gpus} GPU(s): it needs two")
    one = runs[on_one]
    placed = {"GPU 0": int(one.row.get("instances") or 1)}
    laws = laws_per_gpu(one.row, placed, n_gpus)
    return claims.at_most(
        claim,
        runs[on_two].throughput / one.throughput,
        1.15,
        numbers={
            "GPU 0 busy with them all (%)": float(laws.loc["GPU 0", "util_pct"]),
            "GPU 0's share of an execution": float(laws.loc["GPU 0", "gpu_share_of_execution"]),
            "instances busy (busy_U)": float(one.row.get("busy_U", float("nan"))),
        },
        note="the stubs' CPU work, not the GPU, limits the Python-backend model",
    )
