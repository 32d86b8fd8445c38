"""Triton Model Analyzer: a small configuration search instead of hand tuning (notebook 8).

    python -m labstack.model_analyzer --workdir results/going_further/model_analyzer \\
        [--model food_classifier_onnx] [--instances 1 2] [--max-batch-sizes 1 8] \\
        [--concurrency 1 4] [--budget-ms 100] [--launch local|remote] [--url http://host:8000]

prints every measurement, the best configuration per objective under the p99 budget and the
Pareto front, and leaves in --workdir what servelab.model_analyzer.load() reads (search.json,
Model Analyzer's CSV and summary, the variants' config.pbtxt, pareto.png, model_analyzer.log).

Model Analyzer (PyPI triton-model-analyzer, pinned in requirements/constraints.txt) measures each
configuration with perf_analyzer. It needs a Triton to load them into, in one of two ways:

- **local** (local mode, `make test-extended`): Model Analyzer starts `tritonserver` itself, once
  per configuration, from a repository of its own. Both binaries are the lab's: the Triton 2.51 of
  the nvidia-pytriton wheel and the perf_analyzer of tritonclient 2.51, with the environment
  labstack.triton_local builds for them. That Triton has only the Python backend, so the model
  searched there is the ONNX classifier's Python-backend stand-in (same model.onnx).
- **remote** (the Docker stack's Jupyter, which has perf_analyzer but no tritonserver): Model
  Analyzer loads each configuration into the running Triton through the repository API, with the
  config sent in the load request (the model's files stay where they are), and measures it
  there. Model Analyzer 1.44 sends no headers with those requests, and the lab's Triton answers
  its repository API only with the node's secret (labenv.ADMIN_HEADER): the search runs in a
  child process in which tritonclient's load/unload carry that header. At the end the model is
  loaded again from its own config.pbtxt, as it was.

The version: the Model Analyzer of Triton 24.10 (server 2.51) is 1.45.0, which is not on PyPI;
1.44.0 (24.09) is, and its code and requirements are the same as 1.45.0's (the release commits
between the two tags change only the README, the Dockerfile and VERSION).
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from servelab import labenv
from servelab import model_analyzer as results
from servelab.paths import RESULTS, model_repository_dir
from servelab.perf import tool as tools
from servelab.triton import model_repository, triton_config

# What the search measures (Model Analyzer's own names; see DEFAULT_INFERENCE_OUTPUT_FIELDS there).
INFERENCE_FIELDS = [
    "model_name",
    "model_config_path",
    "batch_size",
    "concurrency",
    "instance_group",
    "max_batch_size",
    "satisfies_constraints",
    "perf_throughput",
    "perf_latency_p95",
    "perf_latency_p99",
    "perf_server_queue",
    "perf_server_compute_infer",
]


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


def local_binaries(backends: Path) -> dict:
    """tritonserver, its Python-backend folder (built in `backends`), perf_analyzer and the one
    environment both need, from local mode's machinery."""
    from labstack import triton_local

    env = tools.perf_analyzer_env(triton_local.server_env(stub_root=backends.parent))
    triton_local.check_stub_numpy(env)
    return {
        "tritonserver": str(triton_local.tritonserver_binary()),
        "backend_directory": str(triton_local.backend_directory(backends).resolve()),
        "perf_analyzer": tools.perf_analyzer_path(),
        "env": env,
    }


def model_analyzer_path() -> str:
    """The model-analyzer command next to this interpreter (the lab's venv), else on PATH."""
    here = Path(sys.executable).parent / "model-analyzer"
    found = str(here) if here.is_file() else shutil.which("model-analyzer")
    if not found:
        raise FileNotFoundError(
            "model-analyzer not found: pip install -r requirements/lab.txt "
            "-c requirements/constraints.txt (triton-model-analyzer)"
        )
    return found


def installed_version() -> str:
    from importlib import metadata

    return metadata.version("triton-model-analyzer")


def _search_space(search: Search) -> dict:
    return {
        "run_config_search_disable": True,  # manual brute search: exactly the space below
        "concurrency": list(search.concurrency),
        "latency_budget": int(search.p99_budget_ms),
        "inference_output_fields": INFERENCE_FIELDS,
        # one PDF per configuration: needs wkhtmltopdf, adds minutes
        "skip_detailed_reports": True,
        "perf_analyzer_flags": {
            "measurement-mode": "time_windows",
            "measurement-interval": search.window_ms,
            "stability-percentage": 1000,
            "max-trials": 3,
        },
        "profile_models": {
            search.model: {
                "model_config_parameters": {
                    "max_batch_size": list(search.max_batch_sizes),
                    "dynamic_batching": {"max_queue_delay_microseconds": [search.queue_delay_us]},
                    "instance_group": [{"kind": search.kind, "count": list(search.instances)}],
                }
            }
        },
    }


def _paths(workdir: Path) -> dict:
    return {
        "output_model_repository_path": str(workdir / "output_model_repository"),
        "override_output_model_repository": True,
        "export_path": str(workdir / "export"),
        "checkpoint_directory": str(workdir / "checkpoints"),
    }


def local_config(search: Search, workdir: Path, repo: Path, binaries: dict) -> dict:
    """Model Analyzer's config for local launch mode with the lab's binaries."""
    http, grpc, metrics = _free_ports(3)
    return {
        "model_repository": str(repo),
        **_paths(workdir),
        "triton_launch_mode": "local",
        "triton_server_path": binaries["tritonserver"],
        "triton_output_path": str(workdir / "tritonserver.log"),
        # loopback only, as the lab's own Triton (Model Analyzer's would listen on every address)
        "triton_server_flags": {
            "backend-directory": binaries["backend_directory"],
            "log-verbose": 0,
            "exit-timeout-secs": 5,
            "http-address": "127.0.0.1",
            "grpc-address": "127.0.0.1",
            "metrics-address": "127.0.0.1",
        },
        "triton_http_endpoint": f"127.0.0.1:{http}",
        "triton_grpc_endpoint": f"127.0.0.1:{grpc}",
        "triton_metrics_url": f"http://127.0.0.1:{metrics}/metrics",
        "perf_analyzer_path": binaries["perf_analyzer"],
        **_search_space(search),
    }


def remote_config(search: Search, workdir: Path, repo: Path, url: str, metrics_url: str) -> dict:
    """Model Analyzer's config for remote launch mode: the running Triton at `url`; the base
    config.pbtxt is read from `repo`, the folder that server serves."""
    return {
        "model_repository": str(repo),
        **_paths(workdir),
        "triton_launch_mode": "remote",
        "client_protocol": "http",
        "triton_http_endpoint": url.split("://")[-1],
        "triton_metrics_url": metrics_url,
        "perf_analyzer_path": tools.perf_analyzer_path(),
        **_search_space(search),
    }


def _profile_with_admin_header() -> None:
    """The child process of a remote search: Model Analyzer's `profile`, its repository-API
    requests carrying the node's secret (see the module's docstring)."""
    import tritonclient.grpc
    import tritonclient.http

    # the three repository-API calls Model Analyzer makes (it passes no headers to any of them)
    for client in (
        tritonclient.http.InferenceServerClient,
        tritonclient.grpc.InferenceServerClient,
    ):
        for name in ("load_model", "unload_model", "get_model_repository_index"):
            original = getattr(client, name)

            def with_header(self, *args, _original=original, **kwargs):
                kwargs["headers"] = {**labenv.admin_headers(), **(kwargs.get("headers") or {})}
                return _original(self, *args, **kwargs)

            setattr(client, name, with_header)
    from model_analyzer.entrypoint import main

    sys.argv = ["model-analyzer", *sys.argv[1:]]
    main()


def remote_command(*args: str) -> list[str]:
    """The command of the remote search's child: `model-analyzer *args` with the header."""
    # __spec__, not __name__: under `python -m labstack.model_analyzer` __name__ is __main__,
    # which the child cannot import from
    module = __spec__.name if __spec__ else __name__
    child = f"from {module} import _profile_with_admin_header as p; p()"
    return [sys.executable, "-c", child, *args]


def run(
    search: Search,
    workdir: Path | str,
    launch: str = "local",
    url: str | None = None,
    metrics_url: str | None = None,
    repo: Path | str | None = None,
    timeout: float = 900.0,
    verbose: bool = True,
) -> results.Report:
    """Run `model-analyzer profile` on `search`; return what servelab.model_analyzer.load() reads.
    local: a repository of its own in workdir (local mode, CPU), one tritonserver per
    configuration. remote: the running Triton at url (default TRITON_SERVER_URL) serving `repo`
    (default the lab's model repository). Raises with the end of Model Analyzer's log if it
    fails."""
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    for stale in ("output_model_repository", "export", "checkpoints", "search.json"):
        target = workdir / stale
        target.unlink() if target.is_file() else shutil.rmtree(target, ignore_errors=True)
    if launch == "local":
        repo = workdir / "model_repository"
        model_repository.populate(repo, mode="local", kind="cpu", verbose=False)
        binaries = local_binaries(workdir / "backends")
        config, env = local_config(search, workdir, repo, binaries), binaries["env"]
        cmd = [model_analyzer_path(), "profile", "-f", str(workdir / "config.yaml")]
    elif launch == "remote":
        url = labenv.triton_url(url)
        metrics_url = labenv.metrics_url(metrics_url, server=url)
        repo = Path(repo or model_repository_dir()).resolve()
        config, env = (
            remote_config(search, workdir, repo, url, metrics_url),
            tools.perf_analyzer_env(),
        )
        cmd = remote_command("profile", "-f", str(workdir / "config.yaml"))
    else:
        raise ValueError(f"launch must be 'local' or 'remote', not {launch!r}")
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    if verbose:
        print(
            f"$ model-analyzer profile -f {workdir / 'config.yaml'}   ({launch} launch mode, "
            f"{search.points} measurements; log: {workdir / 'model_analyzer.log'})",
            flush=True,
        )
    start = time.perf_counter()
    try:
        with open(workdir / "model_analyzer.log", "w") as log:
            proc = subprocess.run(
                cmd,
                cwd=workdir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
            )
    finally:
        if launch == "remote":  # the model as its own config.pbtxt says, not the last variant
            # (a load without a config keeps the last override: seen with Triton 2.51)
            triton_config.unload_model(search.model, url)
            ok, _, error = triton_config.load_model(search.model, url)
            if not ok:
                print(f"WARNING: {search.model} not reloaded from its config.pbtxt: {error}")
    seconds = time.perf_counter() - start
    log_text = (workdir / "model_analyzer.log").read_text(errors="replace")
    csv = workdir / results.RESULTS_CSV
    if proc.returncode != 0 or not csv.is_file():
        tail = "\n".join(log_text.splitlines()[-40:])
        raise RuntimeError(
            f"model-analyzer exited with {proc.returncode} after {seconds:.0f} s "
            f"(its CSV {'is missing' if not csv.is_file() else 'was written'}):\n{tail}"
        )
    record = {
        **asdict(search),
        "launch": launch,
        "seconds": round(seconds, 1),
        "points": search.points,
        "model_analyzer": installed_version(),
        "triton": url if launch == "remote" else "one local tritonserver per configuration",
    }
    (workdir / "search.json").write_text(json.dumps(record, indent=2) + "\n")
    report = results.load(workdir)
    if verbose:
        print(f"Model Analyzer: {len(report.table)} measurements in {seconds:.0f} s", flush=True)
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="A small Model Analyzer search (local or remote launch mode)"
    )
    parser.add_argument("--workdir", type=Path, default=RESULTS / "model_analyzer")
    parser.add_argument("--model", default=Search.model)
    parser.add_argument("--instances", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--max-batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--delay-us", type=int, default=100, help="max_queue_delay_microseconds")
    parser.add_argument("--budget-ms", type=float, default=100.0, help="p99 budget (notebook 7)")
    parser.add_argument("--window-ms", type=int, default=1500, help="perf_analyzer window")
    parser.add_argument("--kind", default="KIND_CPU", choices=["KIND_CPU", "KIND_GPU"])
    parser.add_argument(
        "--launch",
        choices=["local", "remote"],
        default="local",
        help="local: Model Analyzer starts tritonserver; remote: the running Triton (--url)",
    )
    parser.add_argument("--url", default=None, help="remote: Triton's HTTP URL")
    parser.add_argument("--metrics-url", default=None, help="remote: Triton's metrics URL")
    parser.add_argument("--repo", type=Path, default=None, help="remote: the repository it serves")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    search = Search(
        model=args.model,
        instances=args.instances,
        max_batch_sizes=args.max_batch_sizes,
        concurrency=args.concurrency,
        queue_delay_us=args.delay_us,
        p99_budget_ms=args.budget_ms,
        window_ms=args.window_ms,
        kind=args.kind,
    )
    report = run(
        search, args.workdir, args.launch, args.url, args.metrics_url, args.repo, args.timeout
    )
    table = report.table.sort_values(["variant", "concurrency"])
    print(table[results.SHOWN].to_markdown(index=False, floatfmt=".1f"))
    best = results.best_per_objective(report.table, search.p99_budget_ms)
    print(f"\nbest under p99 <= {search.p99_budget_ms:g} ms:")
    print(best[["objective", *results.SHOWN]].to_markdown(index=False, floatfmt=".1f"))
    print("\nPareto front (throughput vs p99):")
    front = results.pareto_front(report.table)[results.SHOWN]
    print(front.to_markdown(index=False, floatfmt=".1f"))
    import matplotlib

    matplotlib.use("Agg")
    ax = results.plot(report.table, search.p99_budget_ms)
    ax.figure.tight_layout()
    ax.figure.savefig(args.workdir / "pareto.png", dpi=100)
    print(
        f"\n{len(report.table)} measurements in {report.search['seconds']:.0f} s; summary: "
        f"{report.summary_report}; plot: {args.workdir / 'pareto.png'}"
    )


if __name__ == "__main__":
    main()
