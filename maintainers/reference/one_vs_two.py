"""The `one_vs_two` part of the reference run: one GPU against two on the same host.

    LAB_PERF_INTERVAL_MS=3000 python3 maintainers/reference/run_reference.py --out DIR \
        --parts one_vs_two

The same host serves notebook 6's capacity (one ONNX instance at 4 in flight, 6.6b) and its best
two-GPU configurations (the ONNX model 2 per GPU at 16 in flight, 6.4; the Python-backend model
4 per GPU at 8 in flight, 6.3) twice in one invocation: first from a Triton that may use one GPU
(started with CUDA_VISIBLE_DEVICES=0, a common way to give a run one GPU of a shared machine; the
lab counts one GPU there and puts every instance on it), then from one that uses both. The same
instances, the same load, side by side: each run's throughput, its utilisation law per GPU
(servelab/triton/gpu_scaling.py: a GPU's busy share over the executions it ran is its busy time
per execution, and over the whole execution its share of one), and a claim per configuration
saying what the second GPU bought and why.

The law says what to expect. Added up over the two GPUs, the utilisations of the two-GPU run
are the busy share one GPU would need to carry the same work: below 100 %, one GPU carries it
and the second buys little (the instances' own work, the Python-backend stubs' CPU work on the
node's shared cores, is the limit); above, one GPU cannot, and the second buys up to that sum.

Each server: the model repository's configs as staged, the stack up, the GPUs it counts and
names, then per configuration the edit (triton_config.edit: unloaded, its old instances gone,
loaded), where each instance runs (the placement claim), an uncounted warm-up run and the
counted run; the stack down. About 80 s per server on the two-H200 host at 3 s windows (two
stack starts, four reloads, six counted runs): under 4 minutes in all. Writes
results/one_vs_two/one_vs_two.json, its runs' CSVs and claims.csv, and each server's Triton log
beside the page's files.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

# each server's start: its name, and the CUDA_VISIBLE_DEVICES it is started with (None: unset)
SERVERS = {"one GPU": "0", "two GPUs": None}
WARM_UP = "--measurement-interval 1000 --max-trials 3 --stability-percentage 1000"
ROW = (  # the columns of a run kept in one_vs_two.json
    "throughput_infer_s",
    "p95_ms",
    "avg_latency_ms",
    "server_queue_ms",
    "execution_ms",
    "avg_batch_size",
    "instances",
    "busy_U",
    "cpu_util_pct",
    "gpu0_util_pct",
    "gpu1_util_pct",
    "mode",
)


@dataclass(frozen=True)
class Config:
    """A configuration of notebook 6, served with one GPU and with two."""

    key: str  # in file names: perf_<server>_<key>.csv
    name: str
    model: str
    load: str  # the perf_analyzer flags after -m and -u
    instances: int  # in all: on GPU 0 alone, or spread evenly over the GPUs
    spread: bool  # two GPUs: spread over both (False: one instance, on GPU 0 anyway)

    def fragment(self, n_gpus: int) -> str:
        from servelab.triton import instances

        if self.spread and n_gpus >= 2:
            return instances.instance_group(self.instances // n_gpus, n_gpus)
        return f"instance_group [ {{ count: {self.instances}, kind: KIND_GPU, gpus: [ 0 ] }} ]"

    def line(self, host: str) -> str:
        from servelab.paths import PERF_INPUT_JSON

        load = self.load.replace("{PERF_INPUT}", str(PERF_INPUT_JSON))
        return f"perf_analyzer -m {self.model} -u {host} {load}"


CONFIGS = (
    Config(
        "capacity",
        "capacity: one ONNX instance, 4 in flight (6.6b)",
        "food_classifier_onnx",
        "--concurrency-range 4 --shape input:3,224,224",
        1,
        False,
    ),
    Config(
        "onnx",
        "ONNX model, 4 instances, 16 in flight (6.4: 2 per GPU)",
        "food_classifier_onnx",
        "--concurrency-range 16 --shape input:3,224,224",
        4,
        True,
    ),
    Config(
        "python",
        "Python-backend model, 8 instances, 8 in flight (6.3: 4 per GPU)",
        "food_classifier",
        "--concurrency-range 8 --input-data {PERF_INPUT}",
        8,
        True,
    ),
)
ONE_INSTANCE = "instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 0 ] } ]"


@contextlib.contextmanager
def visible_gpus(value: str | None):
    """CUDA_VISIBLE_DEVICES=value for what starts inside (None: unset), as it was afterwards; the
    GPU names the lab remembers are forgotten on the way in and out (another server)."""
    from servelab.triton import gpu_names

    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = value
    gpu_names.forget()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before
        gpu_names.forget()


def measure(config: Config, server: str, n_gpus: int, urls: dict, folder: Path) -> dict:
    """One configuration on the running server: edited and loaded, its instances where the
    config put them, warmed up, measured. Returns what one_vs_two.json keeps of it."""
    from servelab import perf
    from servelab.paths import model_repository_dir
    from servelab.triton import gpu_scaling, gpus, instances, triton_config

    url, metrics = urls["TRITON_SERVER_URL"], urls["TRITON_METRICS_URL"]
    fragment = config.fragment(n_gpus)
    print(f"\n>>> {server}: {config.name}: {fragment}", flush=True)
    loaded = triton_config.edit(config.model, fragment, url=url, verbose=False)
    if not loaded.ok:
        raise RuntimeError(f"{config.model} did not load {fragment}: {loaded.error}")
    placed = instances.placement(loaded.served or fragment, n_gpus)
    step = f"one_vs_two, {server}, {config.name}"
    gpus.where_instances_run(step, config.model, n_gpus, url, metrics, model_repository_dir())
    line, tag = config.line(url.split("://")[-1]), f"{server} {config.key}"
    try:  # its numbers are not the result: first calls, sessions, caches
        perf.run_line(f"{line} {WARM_UP}", f"{tag} warm-up", out=folder, url=url, verbose=False)
    except perf.PerfAnalyzerError as exc:
        print(f"warm-up did not settle: {str(exc)[:200]}", flush=True)
    run = perf.run_line(line, tag, out=folder, url=url, metrics_url=metrics, timeout=240)
    laws = gpu_scaling.laws_per_gpu(run.row, placed, max(n_gpus, 1))
    print(laws.to_string(), flush=True)
    throughput = run.throughput
    return {
        "config": asdict(config),
        "fragment": fragment,
        "placed": placed,
        "command": run.row.get("command", line),
        "row": {k: run.row.get(k) for k in ROW if k in run.row},
        "throughput": [throughput.value, throughput.lo, throughput.hi],
        "laws": laws.reset_index().to_dict("records"),
    }


def serve(server: str, visible: str | None, folder: Path, out: Path) -> dict:
    """Every configuration on one freshly started server given `visible` GPUs."""
    from labstack import launcher
    from servelab.paths import model_repository_dir
    from servelab.triton import gpus, model_repository, triton_stats

    entry: dict = {"CUDA_VISIBLE_DEVICES": visible, "runs": []}
    start = time.time()
    log = Path(os.environ["LAB_STATE_DIR"]) / "logs" / "triton.log"  # each start appends to it
    before = log.stat().st_size if log.is_file() else 0
    with visible_gpus(visible):
        try:
            # the staged configs, not the ones an earlier part or server left
            model_repository.populate(model_repository_dir(), mode="local", verbose=False)
            launcher.up(jupyter=False, triton=True)
            urls = launcher.client_urls(launcher.read_state())
            os.environ.update(urls)
            url, metrics = urls["TRITON_SERVER_URL"], urls["TRITON_METRICS_URL"]
            entry["n_gpus"] = n_gpus = triton_stats.gpu_count(url, metrics)
            print(f"\n>>> {server} (CUDA_VISIBLE_DEVICES={visible}): {n_gpus} GPU(s)", flush=True)
            entry["gpus"] = gpus.table(metrics).to_dict("records")
            gpus.names_agree(f"one_vs_two, {server}", metrics)
            for config in CONFIGS:
                entry["runs"].append(measure(config, server, n_gpus, urls, folder))
        except Exception as exc:  # noqa: BLE001 - a failed server is recorded, with its reason
            entry["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
            print(f"{server}: {entry['error']}", flush=True)
        finally:
            launcher.down()
            if log.is_file():  # this server's part of Triton's log
                kept = out / f"service_triton_one_vs_two_{server.replace(' ', '_')}.log"
                kept.write_bytes(log.read_bytes()[before:])
    entry["seconds"] = round(time.time() - start)
    return entry


def needed(two: dict) -> float:
    """The busy share one GPU would need for the two-GPU run's work: its GPUs' utilisations added
    up (1.0: one GPU busy all the time)."""
    row = two["row"]
    return sum(float(row.get(f"gpu{i}_util_pct") or 0) for i in range(2)) / 100


def judge(record: dict) -> None:
    """The claims, from the runs of both servers: the one-GPU server counted one GPU, and per
    configuration what the second GPU bought against what the utilisation law says it can."""
    from servelab import claims

    one, two = (record["servers"].get(s, {}) for s in SERVERS)
    counted = "one_vs_two: a server given one GPU of two (CUDA_VISIBLE_DEVICES=0) counts one, a "
    counted += "server given both counts two"
    if (two.get("n_gpus") or 0) < 2:  # this host has fewer GPUs: nothing here can be decided
        why = f"the server given every GPU of this host counted {two.get('n_gpus')}: it needs two"
        claims.not_checkable(counted, why)
        for config in CONFIGS:
            claims.not_checkable(f"one_vs_two, {config.name}: what a second GPU buys", why)
        return
    claims.fact(
        counted,
        (one.get("n_gpus"), two.get("n_gpus")) == (1, 2),
        {"one GPU": one.get("n_gpus"), "two GPUs": two.get("n_gpus")},
    )
    cores = record.get("cores")
    for config, a, b in zip(CONFIGS, one.get("runs", []), two.get("runs", [])):
        ratio = claims.Measured(*b["throughput"]) / claims.Measured(*a["throughput"])
        share = next((r["gpu_share_of_execution"] for r in b["laws"] if r["instances"]), 0.0)
        numbers = {
            "infer/s, one GPU": round(a["throughput"][0]),
            "two GPUs": round(b["throughput"][0]),
            "GPU 0 + GPU 1 busy with two (%)": round(100 * needed(b)),
            "GPU 0 busy with one (%)": a["row"].get("gpu0_util_pct"),
            "GPU's share of an execution with two": share,
            "CPU busy with one / two (%)": f"{a['row'].get('cpu_util_pct')} / "
            f"{b['row'].get('cpu_util_pct')}",
        }
        stubs = f"the stubs share the node's {cores} cores on either server"
        if needed(b) <= 1:
            note = (
                f"each execution holds the GPU {share:.0%} of its time, and all the instances "
                f"together keep one GPU busy {needed(b):.0%} of the time: their own work limits "
                f"them; {stubs}"
            )
        else:
            note = (
                f"each execution holds the GPU {share:.0%} of its time, but the instances together "
                f"need {needed(b):.0%} of one GPU's time: one GPU runs out; {stubs}"
            )
        claim = f"one_vs_two, {config.name}: "
        if not config.spread:
            claims.between(
                claim + "one instance serves as much with a second GPU beside it (two / one)",
                ratio,
                0.9,
                1.1,
                numbers,
                "one instance runs on one GPU: the second has nothing to do",
            )
        elif needed(b) <= 1:
            claims.at_most(
                claim + "a second GPU buys little where one GPU could carry both GPUs' work "
                "(their utilisations add up to 100 % or less; two / one)",
                ratio,
                1.15,
                numbers,
                note,
            )
        else:
            claims.at_least(
                claim + "a second GPU buys capacity where one GPU could not carry both GPUs' "
                "work: at least half of what their utilisations add up to past 100 % (two / one)",
                ratio,
                round(1 + (min(needed(b), 2.0) - 1) / 2, 2),
                numbers,
                note,
            )


def run(out: Path) -> int:
    """The part, into out/results/one_vs_two; 0 when both servers ran and every claim holds."""
    from labstack import artifacts
    from servelab import claims

    artifacts.build()
    folder = out / "results" / "one_vs_two"
    folder.mkdir(parents=True, exist_ok=True)
    claims.RESULTS.clear()
    record = {
        "window_ms": os.environ.get("LAB_PERF_INTERVAL_MS", "perf's default"),
        "cores": os.cpu_count(),
        "servers": {},
    }
    try:
        for server, visible in SERVERS.items():
            record["servers"][server] = serve(server, visible, folder, out)
        judge(record)
    finally:
        (folder / "one_vs_two.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
        claims.save(folder)
    failed = any("error" in s for s in record["servers"].values())
    return 0 if not failed and all(r["verdict"] == claims.HOLDS for r in claims.RESULTS) else 1


def report_lines(folder: Path) -> list[str]:
    """The page's section: both servers side by side, the law per GPU, the claims."""
    import pandas as pd

    if not (folder / "one_vs_two.json").exists():
        return []
    record = json.loads((folder / "one_vs_two.json").read_text())
    servers = record["servers"]
    lines = [
        "## One GPU against two on the same host (`one_vs_two`)",
        "",
        f"The same configurations and loads from a Triton given one GPU of the host "
        f"(`CUDA_VISIBLE_DEVICES=0`) and from one given both, started one after the other in one "
        f"invocation ({record['cores']} cores, {record['window_ms']} ms windows). "
        + "; ".join(
            f"{name}: {s.get('n_gpus', '?')} GPU(s) counted, {s.get('seconds', '?')} s"
            + (f", **failed**: {s['error']}" if "error" in s else "")
            for name, s in servers.items()
        )
        + ".",
        "",
        "| configuration | server | instances | infer/s | p95 ms | execution ms | GPU 0 % | "
        "GPU 1 % | CPU % | GPU's share of an execution |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, config in enumerate(CONFIGS):
        for name, s in servers.items():
            if i >= len(s.get("runs", [])):
                continue
            r = s["runs"][i]
            row, busy = r["row"], [x for x in r["laws"] if x["instances"]]
            share = ", ".join(f"{x['gpu']} {x['gpu_share_of_execution']}" for x in busy)
            lines.append(
                f"| {config.name} | {name} | {r['placed']} | {row['throughput_infer_s']:.0f} | "
                f"{row.get('p95_ms', float('nan')):.1f} | {row.get('execution_ms', 0):.2f} | "
                f"{row.get('gpu0_util_pct', '')} | {row.get('gpu1_util_pct', '')} | "
                f"{row.get('cpu_util_pct', '')} | {share} |"
            )
    lines += [
        "",
        "The utilisation law per GPU, each run (U = X·S on each GPU: `gpu_ms_per_execution` is "
        "its busy time per execution):",
        "",
    ]
    for name, s in servers.items():
        for r in s.get("runs", []):
            table = pd.DataFrame(r["laws"]).set_index("gpu")
            lines += [f"*{name}, {r['config']['name']}:*", "", table.to_markdown(), ""]
    if (folder / "claims.csv").exists():
        lines += ["| claim | verdict | measured | numbers | note |", "|---|---|---|---|---|"]
        for _, c in pd.read_csv(folder / "claims.csv").fillna("").iterrows():
            measured = f"{c['value']} {c['interval']} ({c['rule']})" if c["rule"] else ""
            lines.append(
                f"| {c['claim']} | {c['verdict']} | {measured} | {c['numbers']} | {c['note']} |"
            )
        lines.append("")
    return lines
