"""Notebook 6's verdicts, each claim judged on your own runs: per GPU (each GPU on its own, so
"every GPU" means each of them), and one call per step's claims.

Introduced in notebook 6.
"""

from __future__ import annotations

from servelab import claims


def busiest_gpu_pct(row: dict) -> float | None:
    """The highest per-GPU utilisation of a run's row (None without GPU readings)."""
    values = [
        v for k, v in row.items() if k.startswith("gpu") and k.endswith("_util_pct") and v == v
    ]
    return max(values) if values else None


def gpu_util_columns(row: dict, n_gpus: int) -> list[str]:
    """The per-GPU utilisation columns a run's row should have on a server with n_gpus GPUs
    (gpu0_util_pct, gpu1_util_pct, ...), in GPU order; ValueError when the row lacks one (the
    metrics did not report that GPU during the run)."""
    columns = [f"gpu{i}_util_pct" for i in range(n_gpus)]
    missing = [c for c in columns if c not in row or row[c] != row[c]]
    if missing:
        raise ValueError(f"no {', '.join(missing)} in this run's row: Triton did not report it")
    return columns


def claim_each_gpu(check, claim: str, run, n_gpus: int, threshold: float) -> list[str]:
    """Decide a claim about utilisation on each GPU of the server on its own (check is
    claims.at_least or claims.at_most, run a perf run whose row has gpuN_util_pct), so "every
    GPU" means each of them, however many there are; on a server without GPU (or whose metrics
    do not report one) the claim is not checkable, and says why."""
    if n_gpus <= 0:
        cpu = run.row.get("cpu_util_pct")
        seen = (
            f"; the CPU (all cores) was {cpu:.0f}% busy" if cpu == cpu and cpu is not None else ""
        )
        return [claims.not_checkable(claim, f"this server has no GPU{seen}")]
    try:
        columns = gpu_util_columns(run.row, n_gpus)
    except ValueError as exc:
        return [claims.not_checkable(claim, str(exc))]
    return [
        check(f"{claim} (GPU {i} of {n_gpus}, mean %)", run.measured(column), threshold)
        for i, column in enumerate(columns)
    ]
