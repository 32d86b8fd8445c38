"""What a second GPU buys: the utilisation law on each GPU, and the same instances on one GPU
against spread over two.

Introduced in notebook 6.

    gpu_scaling.laws_per_gpu(row, {"GPU 0": 4}, N_GPUS)       # U = X·S on each GPU
    gpu_scaling.side_by_side([(spread, placed), (on_gpu0, {"GPU 0": 4})], N_GPUS)
    verdicts.second_gpu_buys("6.3", on_gpu0, spread, N_GPUS)   # the claim (verdicts/triton.py)

A GPU's utilisation U_g (nvidia-smi's, Triton's: the share of time a kernel ran) over the
executions its instances ran per second X_g is its busy time per execution, S_g = U_g / X_g: set
beside the execution's whole time (Triton's statistics) it says how much of an execution is the
GPU's, and so whether a second GPU can add anything.
"""

from __future__ import annotations


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


def side_by_side(placed_runs, n_gpus: int):
    """laws_per_gpu of several runs ((perf.Run, its instances per device) pairs) in one table, a
    row per run and GPU."""
    import pandas as pd

    return pd.concat(
        {run.name: laws_per_gpu(run.row, placed, n_gpus) for run, placed in placed_runs}
    )
