"""Triton Model Analyzer: a small configuration search instead of hand tuning (issue 26).

For the Model Analyzer section (notebook not written yet).

    from servelab import model_analyzer as ma
    search = ma.Search(model="food_classifier_onnx", instances=[1, 2], max_batch_sizes=[1, 8],
                       concurrency=[1, 4], p99_budget_ms=100)
    result = ma.run(search, workdir)         # `model-analyzer profile` in local launch mode
    result.table                             # every measurement (results/metrics-model-inference.csv)
    ma.best_per_objective(result.table, p99_budget_ms=100)   # the configuration to deploy, per objective
    ma.pareto_front(result.table)            # throughput vs p99: the configurations nothing beats on both

Model Analyzer (PyPI triton-model-analyzer, pinned in requirements/constraints.txt) starts
`tritonserver` itself, once per model configuration it tries (its "local launch mode"), writes
each variant's config.pbtxt into an output repository, and drives `perf_analyzer` against it.
Here both binaries are the lab's own: the Triton 2.51 of the nvidia-pytriton wheel and the
perf_analyzer of tritonclient 2.51 (servelab.stack.triton_local knows where they are and which
libraries they need). That Triton has only the Python backend, so in local mode the model searched
is the ONNX classifier's Python-backend stand-in (same model.onnx, ONNX Runtime inside).

The version: the Model Analyzer of Triton 24.10 (server 2.51) is 1.45.0, which is not on PyPI;
1.44.0 (24.09) is, and its code and requirements are the same as 1.45.0's (the release commits
between the two tags change only the README, the Dockerfile and VERSION).
"""
from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from servelab import model_repository

# What the search measures (Model Analyzer's own names; see DEFAULT_INFERENCE_OUTPUT_FIELDS there).
INFERENCE_FIELDS = ["model_name", "model_config_path", "batch_size", "concurrency", "instance_group",
                    "max_batch_size", "satisfies_constraints", "perf_throughput", "perf_latency_p95",
                    "perf_latency_p99", "perf_server_queue", "perf_server_compute_infer"]
# the CSV's column titles -> short names (times in ms, throughput in infer/s)
COLUMNS = {"Model": "model", "Model Config Path": "config", "Batch": "batch", "Concurrency": "concurrency",
           "Instance Group": "instance_group", "Max Batch Size": "max_batch_size",
           "Satisfies Constraints": "satisfies_constraints", "Throughput (infer/sec)": "throughput_infer_s",
           "p95 Latency (ms)": "p95_ms", "p99 Latency (ms)": "p99_ms", "Server Queue time (ms)": "server_queue_ms",
           "Server Compute Infer time (ms)": "server_compute_infer_ms"}


@dataclass
class Search:
    """A manual brute-force search space, small enough for a lesson: every combination is measured.

    instances x max_batch_sizes model configurations (each with dynamic batching, delay
    `queue_delay_us`), each measured at every `concurrency`. perf_analyzer measures in time
    windows of `window_ms`, three windows per point, whatever their spread (a busy 2-core machine
    never settles, and a lesson cannot wait for it)."""
    model: str = "food_classifier_onnx"
    instances: list[int] = field(default_factory=lambda: [1, 2])
    max_batch_sizes: list[int] = field(default_factory=lambda: [1, 8])
    concurrency: list[int] = field(default_factory=lambda: [1, 4])
    queue_delay_us: int = 100
    p99_budget_ms: float = 100.0
    window_ms: int = 1500
    kind: str = "KIND_CPU"

    @property
    def points(self) -> int:
        """Measurements the search takes (Model Analyzer adds the default configuration's own)."""
        return (len(self.instances) * len(self.max_batch_sizes) + 1) * len(self.concurrency)


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def binaries(backends: Path) -> dict:
    """tritonserver, its Python-backend folder (built in `backends`), perf_analyzer and the one
    environment both need (the only place this module touches the lab's local-mode machinery)."""
    from servelab.stack import triton_local

    env = triton_local.perf_analyzer_env(triton_local.server_env(stub_root=backends.parent))
    triton_local.check_stub_numpy(env)
    return {"tritonserver": str(triton_local.tritonserver_binary()),
            "backend_directory": str(triton_local.backend_directory(backends).resolve()),
            "perf_analyzer": triton_local.perf_analyzer_path(), "env": env}


def model_analyzer_path() -> str:
    """The model-analyzer command next to this interpreter (the lab's venv), else on PATH."""
    import sys

    here = Path(sys.executable).parent / "model-analyzer"
    found = str(here) if here.is_file() else shutil.which("model-analyzer")
    if not found:
        raise FileNotFoundError("model-analyzer not found: pip install -r requirements/lab.txt "
                                "-c requirements/constraints.txt (triton-model-analyzer)")
    return found


def write_config(search: Search, workdir: Path, repo: Path, tools: dict) -> Path:
    """Model Analyzer's YAML config for `search` (local launch mode, the lab's binaries)."""
    http, grpc, metrics = _free_ports(3)
    config = {
        "model_repository": str(repo),
        "output_model_repository_path": str(workdir / "output_model_repository"),
        "override_output_model_repository": True,
        "export_path": str(workdir / "export"),
        "checkpoint_directory": str(workdir / "checkpoints"),
        "triton_launch_mode": "local",
        "triton_server_path": tools["tritonserver"],
        "triton_output_path": str(workdir / "tritonserver.log"),
        # loopback only, as the lab's own Triton (Model Analyzer's servers listen on every address otherwise)
        "triton_server_flags": {"backend-directory": tools["backend_directory"], "log-verbose": 0,
                                "exit-timeout-secs": 5, "http-address": "127.0.0.1",
                                "grpc-address": "127.0.0.1", "metrics-address": "127.0.0.1"},
        "triton_http_endpoint": f"127.0.0.1:{http}",
        "triton_grpc_endpoint": f"127.0.0.1:{grpc}",
        "triton_metrics_url": f"http://127.0.0.1:{metrics}/metrics",
        "perf_analyzer_path": tools["perf_analyzer"],
        "perf_analyzer_flags": {"measurement-mode": "time_windows", "measurement-interval": search.window_ms,
                                "stability-percentage": 1000, "max-trials": 3},
        "run_config_search_disable": True,   # manual brute search: exactly the space below
        "concurrency": list(search.concurrency),
        "latency_budget": int(search.p99_budget_ms),
        "inference_output_fields": INFERENCE_FIELDS,
        "skip_detailed_reports": True,       # one PDF per configuration: needs wkhtmltopdf, adds minutes
        "profile_models": {search.model: {"model_config_parameters": {
            "max_batch_size": list(search.max_batch_sizes),
            "dynamic_batching": {"max_queue_delay_microseconds": [search.queue_delay_us]},
            "instance_group": [{"kind": search.kind, "count": list(search.instances)}],
        }}},
    }
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@dataclass
class SearchResult:
    command: list[str]
    config: Path
    export: Path
    seconds: float
    returncode: int
    output: str
    table: object = None   # pandas DataFrame of every measurement (read_results)

    @property
    def summary_report(self) -> Path | None:
        """Model Analyzer's summary (HTML here: its PDF needs wkhtmltopdf), with its Pareto plot."""
        found = sorted(self.export.glob("reports/summaries/*/result_summary.*"))
        return found[0] if found else None

    @property
    def plots(self) -> list[Path]:
        return sorted(self.export.glob("plots/**/*.png"))

    def variant_config(self, variant: str) -> str:
        """The config.pbtxt Model Analyzer wrote for one variant (what you would deploy)."""
        return (self.config.parent / "output_model_repository" / variant / "config.pbtxt").read_text()

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


def run(search: Search, workdir: Path | str, timeout: float = 900.0, verbose: bool = True) -> SearchResult:
    """Populate a repository (local mode, CPU), write the config, run `model-analyzer profile`,
    read its results. Raises with the end of Model Analyzer's output if it fails."""
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    repo = workdir / "model_repository"
    model_repository.populate(repo, mode="local", kind="cpu", verbose=False)
    for stale in ("output_model_repository", "export", "checkpoints"):
        shutil.rmtree(workdir / stale, ignore_errors=True)
    tools = binaries(workdir / "backends")
    config = write_config(search, workdir, repo, tools)
    cmd = [model_analyzer_path(), "profile", "-f", str(config)]
    if verbose:
        print(f"$ model-analyzer profile -f {config.name}   ({search.points} measurements; log: "
              f"{workdir / 'model_analyzer.log'})", flush=True)
    start = time.perf_counter()
    with open(workdir / "model_analyzer.log", "w") as log:
        proc = subprocess.run(cmd, cwd=workdir, env=tools["env"], stdout=log, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, timeout=timeout)
    seconds = time.perf_counter() - start
    output = (workdir / "model_analyzer.log").read_text(errors="replace")
    result = SearchResult(cmd, config, workdir / "export", seconds, proc.returncode, output)
    csv = result.export / "results" / "metrics-model-inference.csv"
    if proc.returncode != 0 or not csv.is_file():
        raise RuntimeError(f"model-analyzer exited with {proc.returncode} after {seconds:.0f} s "
                           f"(no {csv.name}: {not csv.is_file()}):\n{result.log_tail(40)}")
    result.table = read_results(csv)
    if verbose:
        print(f"Model Analyzer: {len(result.table)} measurements in {seconds:.0f} s", flush=True)
    return result


def read_results(path: Path | str):
    """Model Analyzer's results/metrics-model-inference.csv -> DataFrame, short column names, one
    row per (configuration, concurrency); `variant` is the configuration's folder name."""
    import pandas as pd

    raw = pd.read_csv(path)
    table = raw.rename(columns={c: COLUMNS.get(c.strip(), c.strip()) for c in raw.columns})
    if "config" in table:
        table.insert(0, "variant", table["config"].astype(str))
    if "satisfies_constraints" in table:
        table["satisfies_constraints"] = table["satisfies_constraints"].astype(str).str.lower().isin(
            ["yes", "true", "1"])
    return table


def best_per_objective(table, p99_budget_ms: float):
    """The best measured point under the p99 budget for each objective: highest throughput, lowest
    p99, and the fewest instances that still reach 90% of the best throughput (the frugal choice).
    Chosen from the measurements themselves (p99_ms <= budget), not from Model Analyzer's flag."""
    import pandas as pd

    within = table[table["p99_ms"] <= p99_budget_ms]
    if within.empty:
        return pd.DataFrame(columns=["objective", *table.columns])
    best = {"max throughput": within.loc[within["throughput_infer_s"].idxmax()],
            "min p99": within.loc[within["p99_ms"].idxmin()]}
    enough = within[within["throughput_infer_s"] >= 0.9 * within["throughput_infer_s"].max()]
    if "instance_group" in enough:
        enough = enough.assign(_n=enough["instance_group"].astype(str).str.extract(r"(\d+)")[0].astype(float))
        best["90% of max throughput, fewest instances"] = enough.sort_values(
            ["_n", "throughput_infer_s"], ascending=[True, False]).iloc[0].drop("_n")
    rows = [{"objective": name, **row.to_dict()} for name, row in best.items()]
    return pd.DataFrame(rows)


def pareto_front(table):
    """The measurements that no other beats on both throughput (higher) and p99 (lower)."""
    ordered = table.sort_values(["p99_ms", "throughput_infer_s"], ascending=[True, False])
    front, best = [], -1.0
    for index, row in ordered.iterrows():
        if row["throughput_infer_s"] > best:
            front.append(index)
            best = row["throughput_infer_s"]
    return table.loc[front].sort_values("p99_ms")


def plot(table, p99_budget_ms: float, ax=None):
    """Throughput against p99 for every measurement, the Pareto front joined, the budget drawn."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 4))
    for variant, rows in table.groupby("variant"):
        ax.scatter(rows["p99_ms"], rows["throughput_infer_s"], label=variant, s=30)
    front = pareto_front(table)
    ax.plot(front["p99_ms"], front["throughput_infer_s"], color="black", lw=1, label="Pareto front")
    ax.axvline(p99_budget_ms, color="red", ls="--", lw=1, label=f"p99 budget {p99_budget_ms:g} ms")
    ax.set_xlabel("p99 latency (ms)")
    ax.set_ylabel("throughput (infer/s)")
    ax.legend(fontsize=7)
    return ax


def installed_version() -> str:
    from importlib import metadata

    return metadata.version("triton-model-analyzer")



def main(argv: list[str] | None = None) -> None:
    """python -m servelab.model_analyzer [--workdir results/model_analyzer] [--budget-ms 100] ..."""
    import argparse

    from servelab.paths import RESULTS

    parser = argparse.ArgumentParser(description="A small Model Analyzer search in local launch mode")
    parser.add_argument("--workdir", type=Path, default=RESULTS / "model_analyzer")
    parser.add_argument("--model", default=Search.model)
    parser.add_argument("--instances", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--max-batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--budget-ms", type=float, default=100.0, help="p99 budget (notebook 7's question)")
    parser.add_argument("--window-ms", type=int, default=1500)
    args = parser.parse_args(argv)
    search = Search(model=args.model, instances=args.instances, max_batch_sizes=args.max_batch_sizes,
                    concurrency=args.concurrency, p99_budget_ms=args.budget_ms, window_ms=args.window_ms)
    result = run(search, args.workdir)
    shown = ["variant", "concurrency", "instance_group", "max_batch_size", "throughput_infer_s", "p95_ms", "p99_ms",
             "server_queue_ms", "server_compute_infer_ms"]
    print(result.table[shown].sort_values(["variant", "concurrency"]).to_markdown(index=False))
    print(f"\nbest under p99 <= {search.p99_budget_ms:g} ms:")
    print(best_per_objective(result.table, search.p99_budget_ms)[["objective", *shown]].to_markdown(index=False))
    print("\nPareto front (throughput vs p99):")
    print(pareto_front(result.table)[shown].to_markdown(index=False))
    import matplotlib
    matplotlib.use("Agg")
    ax = plot(result.table, search.p99_budget_ms)
    ax.figure.tight_layout()
    ax.figure.savefig(args.workdir / "pareto.png", dpi=100)
    print(f"\n{len(result.table)} measurements in {result.seconds:.0f} s; summary: {result.summary_report}; "
          f"plot: {args.workdir / 'pareto.png'}")


if __name__ == "__main__":
    main()
