"""What a second GPU buys: the utilisation law on each GPU, and the same instances on one GPU
against spread over two.

Introduced in notebook 6.

    gpu_scaling.laws_per_gpu(row, {"GPU 0": 4}, N_GPUS)       # U = X·S on each GPU
    gpu_scaling.side_by_side(runs, {SPREAD: placed, ON_GPU0: {"GPU 0": 4}}, N_GPUS)
    gpu_scaling.second_gpu_buys("6.3", runs, ON_GPU0, SPREAD, N_GPUS)   # the claim

A GPU's utilisation U_g (nvidia-smi's, Triton's: the share of time a kernel ran) over the
executions its instances ran per second X_g is its busy time per execution, S_g = U_g / X_g: set
beside the execution's whole time (Triton's statistics) it says how much of an execution is the
GPU's, and so whether a second GPU can add anything.
"""

from __future__ import annotations

from servelab import claims


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


def side_by_side(runs: dict, placements: dict, n_gpus: int):
    """laws_per_gpu of several runs ({run name: its instances per device}) in one table, a row
    per run and GPU."""
    import pandas as pd

    return pd.concat(
        {name: laws_per_gpu(runs[name].row, placed, n_gpus) for name, placed in placements.items()}
    )


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
