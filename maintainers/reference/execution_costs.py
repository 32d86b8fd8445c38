"""Where an execution of notebook 7's best configuration spends its time, and what each change
to it buys, measured on the GPU machine (issue 47). A maintainers' experiment.

    python3 maintainers/reference/execution_costs.py OUT variants NAME[,NAME...]  # one server
    python3 maintainers/reference/execution_costs.py OUT starts NAME [N]    # N fresh servers
    python3 maintainers/reference/execution_costs.py OUT limit              # the raw limit
    python3 maintainers/reference/execution_costs.py FILE spy               # a py-spy file, summed

Only tritonserver runs (the local-mode binary, food_classifier_tuned alone); the load is the best
run's perf_analyzer line (1024 batch-1 clients, gRPC with system shared memory, async). For each
variant (VARIANTS: a change to the 2026-11-24 best configuration) it records, over the counted
run (3 s windows after an uncounted warm-up):
- perf_analyzer's row and Triton's statistics (executions, batch sizes, compute times);
- the stubs' own profile (servelab.serving.stub_profile: inputs, stacking, device, responses and
  the time between executions, per execution; the GPU's share by CUDA events);
- the CPU time of tritonserver, its stubs and everything else on the machine (perf_analyzer);
- with --profile, a py-spy sample of one stub (native frames too) during the warm-up.
`starts` writes results/stability/starts.json in maintainers/reference/stability.py's format, so the
page's "served/limit over N separately started servers" line reads it. LAB_COSTS_DEADLINE_S (default
540) stops before a step that would not end in time: a device call has 10 minutes.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

MODEL = "food_classifier_tuned"
LIMIT_11_24 = 45372.0  # images/s, torch.compile fp16 + CUDA graph, batch 128 (2026-11-24, H100)
WARM_UP = "--measurement-interval 2000 --max-trials 5 --stability-percentage 1000"
WINDOW_MS = 3000
COUNTED = f"--measurement-interval {WINDOW_MS}"
CLIENTS = 1024

# name -> (instances, max batch, queue delay us, graph_step, clients)
VARIANTS = {
    "base": (8, 64, 500, 0, CLIENTS),  # the 2026-11-24 best: graphs for 1, 2, 4, ..., 64
    "step8": (8, 64, 500, 8, CLIENTS),  # graphs for 1, 2, 4, 8, 16, 24, ..., 64
    "exact": (8, 64, 500, 1, CLIENTS),  # a graph for every size 1..64: no padding
    "exact-6": (6, 64, 500, 1, CLIENTS),
    "exact-12": (12, 64, 500, 1, 1536),
    "exact-8x128": (8, 128, 500, 1, 2048),
    "step8-8x128": (8, 128, 500, 8, 2048),
    "base-8x128": (8, 128, 500, 0, 2048),
    # base, the inputs copied to the GPU straight from the stubs' shared memory (pinned_shm)
    "direct": (8, 64, 500, 0, CLIENTS),
    "direct-step8": (8, 64, 500, 8, CLIENTS),
    "smoke": (1, 8, 2000, 1, 8),  # a CPU check of this script (no fp16, no CUDA)
}
EXTRA = {"direct": {"direct_inputs": "on"}, "direct-step8": {"direct_inputs": "on"}}


def config_text(name: str, profile_dir: Path | None) -> str:
    instances, max_batch, delay, step, _ = VARIANTS[name]
    gpu = name != "smoke"
    lines = [
        f'name: "{MODEL}"',
        'backend: "python"',
        f"max_batch_size: {max_batch}",
        'input [ { name: "input" data_type: TYPE_UINT8 dims: [ 224, 224, 3 ] } ]',
        'output [ { name: "output" data_type: TYPE_FP32 dims: [ 11 ] } ]',
        f"instance_group [ {{ count: {instances}, kind: {'KIND_GPU' if gpu else 'KIND_CPU'}"
        + (", gpus: [ 0 ] } ]" if gpu else " } ]"),
        f"dynamic_batching {{ max_queue_delay_microseconds: {delay} }}",
    ]
    params = {"cpu_threads": "auto", "weights": "untrained"}
    if gpu:
        params.update(precision="fp16", cuda_graphs="on", compile="on", graph_step=str(step))
    params.update(EXTRA.get(name, {}))
    if profile_dir is not None:
        params["profile_dir"] = str(profile_dir)
    lines += [
        f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}' for k, v in params.items()
    ]
    return "\n".join(lines) + "\n"


class Server:
    """tritonserver with food_classifier_tuned alone, started fresh; with `config`, the model is
    loaded in that configuration at the server's start (its only load: load_s is the time from
    the start until the server answers), else in the repository's and changed by load(). The
    admin key on tritonserver's command line is masked once the server has read it, as the lab's
    watchdog does (docs/security.md)."""

    def __init__(self, workdir: Path, config: str | None = None):
        from labstack import launcher, triton_local
        from servelab.triton import model_repository

        self.repo = workdir / "model_repository"
        self.repo.mkdir(parents=True, exist_ok=True)
        kind = "gpu" if config is None or "KIND_GPU" in config else "cpu"
        self.model_dir = model_repository.add_model(MODEL, self.repo, mode="local", kind=kind)
        if config is not None:
            (self.model_dir / "config.pbtxt").write_text(config)
        http, grpc, metrics = (launcher.free_port() for _ in range(3))
        service = triton_local.service(  # the lab's way: the admin key masked; no repairs here
            self.repo,
            (http, grpc, metrics),
            workdir / "triton_health.json",
            health="/v2/health/live",
            backends=workdir / "b",
            repair=False,
            timeout=900,  # with a config, its compile happens before the server answers
        )
        t0 = time.monotonic()
        self.record = launcher.start(service)
        self.start_s = time.monotonic() - t0
        self.url, self.grpc = f"http://127.0.0.1:{http}", f"127.0.0.1:{grpc}"
        os.environ.update(
            TRITON_SERVER_URL=self.url,
            TRITON_GRPC_URL=self.grpc,
            TRITON_METRICS_URL=f"http://127.0.0.1:{metrics}/metrics",
        )

    def load(self, name: str, profile_dir: Path | None, timeout: float) -> tuple[bool, float, str]:
        from servelab.triton import triton_config

        (self.model_dir / "config.pbtxt").write_text(config_text(name, profile_dir))
        return triton_config.load_model(MODEL, self.url, max(timeout, 60))

    def stop(self, out: Path, tag: str) -> None:
        from labstack import launcher

        launcher.stop_process(self.record["pid"], self.record["marker"])
        log = Path(self.record["log"]).read_text(errors="replace")
        (out / f"triton_{tag}.log").write_text(log[-100_000:])


def processes(server_pid: int) -> dict[str, list]:
    """This server's tritonserver process and its model's stubs (another tritonserver on the
    machine, a developer's for instance, is not counted)."""
    import psutil

    def command(p) -> str:
        try:
            return " ".join(p.cmdline())
        except psutil.Error:  # gone meanwhile
            return ""

    from labstack import triton_local

    # started under the lab's watchdog: the server is its child, and the watchdog no serving part
    server = psutil.Process(triton_local.server_pid(server_pid) or server_pid)
    stubs = [
        p
        for p in server.children(recursive=True)
        if MODEL in command(p) and "triton_python_backend_stub" in command(p)
    ]
    return {"tritonserver": [server], "stubs": stubs}


def cpu_seconds(procs: dict[str, list]) -> dict:
    """CPU seconds so far: each process's (by kind and pid), and the machine's busy total."""
    import psutil

    out: dict = {}
    for kind, ps in procs.items():
        out[kind] = {}
        for p in ps:
            try:
                t = p.cpu_times()
                out[kind][p.pid] = t.user + t.system
            except psutil.Error:  # gone (a stub of the previous load, still exiting)
                pass
    t = psutil.cpu_times()
    out["machine_busy"] = sum(t) - t.idle - t.iowait
    return out


def cores_used(before: dict, after: dict, wall: float) -> dict:
    """Cores busy on average between two cpu_seconds(): only processes alive at both count."""
    used = {"machine_busy": round((after["machine_busy"] - before["machine_busy"]) / wall, 2)}
    for kind in ("tritonserver", "stubs"):
        pids = before[kind].keys() & after[kind].keys()
        used[kind] = round(sum(after[kind][p] - before[kind][p] for p in pids) / wall, 2)
        used[f"{kind}_processes"] = len(pids)
    used["other"] = round(used["machine_busy"] - used["tritonserver"] - used["stubs"], 2)
    return used


def py_spy(pid: int, seconds: int, path: Path, delay: float) -> threading.Thread:
    def sample():
        time.sleep(delay)
        # --native (the stub's C++ frames too) cannot be combined with --nonblocking
        cmd = [
            "py-spy",
            "record",
            "--pid",
            str(pid),
            "--native",
            "--rate",
            "250",
            "--duration",
            str(seconds),
            "--format",
            "raw",
            "--output",
            str(path),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
        path.with_suffix(".err").write_text(done.stdout[-3000:] + done.stderr[-3000:])

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    return thread


def measure(
    server: Server,
    name: str,
    out: Path,
    profile_dir: Path,
    spy: bool,
    line: str | None = None,
    warm_up: bool = True,
) -> dict:
    """An uncounted warm-up run (unless warm_up is False) and the counted run of `line` (default:
    the variant's clients, gRPC with system shared memory, async), with the stubs' phase clock,
    Triton's per-execution statistics and the CPU of each process around the counted run."""
    from servelab import perf
    from servelab.serving import stub_profile
    from servelab.triton import triton_stats

    clients = VARIANTS[name][4] if name in VARIANTS else CLIENTS
    line = line or (
        f"perf_analyzer -m {MODEL} -u {server.grpc} -i grpc --shared-memory system "
        f"--concurrency-range {clients} --async --shape input:224,224,3"
    )
    row: dict = {"variant": name, "command": line}
    procs = processes(server.record["pid"])
    row["stub_processes"] = len(procs["stubs"])
    spy_thread = None
    if spy and procs["stubs"]:  # the newest: a stub of an earlier load may be exiting
        newest = max(procs["stubs"], key=lambda p: p.create_time())
        spy_thread = py_spy(newest.pid, 6, out / f"pyspy_{name}.txt", delay=3)
    try:
        if warm_up:
            warm = perf.run_line(f"{line} {WARM_UP}", f"{name}_warm-up", out=out, url=server.url)
            row["warm_up_infer_s"] = warm.row["throughput_infer_s"]
    except perf.PerfAnalyzerError as exc:
        row["warm_up"] = f"did not settle: {str(exc)[:200]}"
    if spy_thread:
        spy_thread.join(timeout=90)
    time.sleep(WRITE_SETTLE_S)
    stats0 = triton_stats.model_stats(MODEL, server.url)
    before, cpu0, t0 = stub_profile.read(profile_dir), cpu_seconds(procs), time.monotonic()
    run = perf.run_line(f"{line} {COUNTED}", name, out=out, url=server.url, timeout=200)
    time.sleep(WRITE_SETTLE_S)
    after, cpu1, wall = stub_profile.read(profile_dir), cpu_seconds(procs), time.monotonic() - t0
    row["per_execution_ms"] = per_execution(stats0, triton_stats.model_stats(MODEL, server.url))
    row["run"] = {k: v for k, v in run.row.items() if isinstance(v, (int, float, str))}
    row["triton_stats"] = {k: v for k, v in run.stats.items() if not callable(v)}
    row["stub_profile"] = stub_profile.between(before, after)
    row["cores_used"] = cores_used(cpu0, cpu1, wall)
    row["infer_s"] = run.row["throughput_infer_s"]
    return row


def per_execution(before: dict, after: dict) -> dict:
    """Triton's own view of an execution between two model_stats(): from its batch statistics
    (each execution counted once, whatever its size), the mean ms of compute_input (the backend
    handing the requests to the stub), compute_infer (the stub's execute) and compute_output (the
    responses back), and the executions by batch size."""

    def by_size(stats):
        return {int(b["batch_size"]): b for b in stats.get("batch_stats", [])}

    old, new = by_size(before), by_size(after)
    out, sizes = {}, {}
    for part in ("compute_input", "compute_infer", "compute_output"):
        ns = count = 0
        for size, b in new.items():
            was = old.get(size, {}).get(part, {})
            ns += int(b[part]["ns"]) - int(was.get("ns", 0))
            count += int(b[part]["count"]) - int(was.get("count", 0))
            if part == "compute_infer":
                sizes[size] = int(b[part]["count"]) - int(was.get("count", 0))
        out[f"{part}_ms"] = ns / count / 1e6 if count else None
    out["executions"] = sum(sizes.values())
    out["by_batch_size"] = {k: v for k, v in sorted(sizes.items()) if v}
    return out


WRITE_SETTLE_S = 0.6  # > stub_profile.WRITE_EVERY_S: the stubs' last sums are on disk


def deadline() -> float:
    return float(os.environ.get("LAB_COSTS_DEADLINE_S", "540"))


def save(path: Path, data) -> None:
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def variants(out: Path, names: list[str], spy: bool) -> None:
    t_start = time.monotonic()
    path = out / "costs.json"
    rows = json.loads(path.read_text()) if path.exists() else []
    server = Server(Path("/tmp/costs_server"))
    try:
        for name in names:
            longest = max([r.get("seconds", 0) for r in rows] + [170])
            if time.monotonic() - t_start + longest > deadline():
                print(f"{name}: skipped, {longest} s would pass the deadline", flush=True)
                continue
            t0 = time.monotonic()
            profile_dir = Path(f"/tmp/stub_profile/{name}_{int(time.time())}")
            left = deadline() - (time.monotonic() - t_start) - 60
            ok, load_s, error = server.load(name, profile_dir, left)
            print(f"== {name}: loaded {ok} in {load_s:.0f} s {error[:300]}", flush=True)
            row = {"variant": name, "load_s": round(load_s, 1), "config": VARIANTS[name]}
            if ok:
                try:
                    row.update(measure(server, name, out, profile_dir, spy))
                except Exception as exc:  # noqa: BLE001 - recorded, the next variant still runs
                    row["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
            else:
                row["error"] = error[:600]
            row["seconds"] = round(time.monotonic() - t0)
            rows.append(row)
            save(path, rows)
            print(summary_line(row), flush=True)
    finally:
        server.stop(out, "variants")


def summary_line(row: dict) -> str:
    if "infer_s" not in row:
        return f"{row['variant']}: {row.get('error', 'no run')}"
    run, prof = row["run"], row["stub_profile"]
    ms = prof["ms_per_execution"]
    return (
        f"{row['variant']}: {row['infer_s']:.0f} infer/s ({row['infer_s'] / LIMIT_11_24:.3f} of "
        f"11-24's limit), batch {prof['mean_batch']:.1f} (padded {prof['mean_padded_batch']:.1f}),"
        f" exec {run.get('execution_ms')} ms (triton in/infer/out "
        + "/".join(
            f"{row['per_execution_ms'].get(k) or 0:.2f}"
            for k in ("compute_input_ms", "compute_infer_ms", "compute_output_ms")
        )
        + f"), U {run.get('busy_U')}, gpu "
        f"{run.get('gpu0_util_pct')} %; stub ms/exec "
        + ", ".join(f"{k} {v:.2f}" for k, v in ms.items())
        + f"; gpu copy {prof['gpu_ms_per_execution']['copy']:.2f} graph "
        f"{prof['gpu_ms_per_execution']['graph']:.2f}; direct copies "
        f"{prof.get('direct_batches', 0)} of {prof['executions']}; cores {row['cores_used']}"
    )


def starts(out: Path, name: str, count: int) -> None:
    t_start = time.monotonic()
    folder = out / "results" / "stability"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "starts.json"
    if name == "auto":  # the variant that served most in an earlier `variants` run into OUT
        rows = [r for r in json.loads((out / "costs.json").read_text()) if "infer_s" in r]
        name = max(rows, key=lambda r: r["infer_s"])["variant"]
        print(f"auto: {name}", flush=True)
    instances, max_batch, delay, step, clients = VARIANTS[name]
    record = (
        json.loads(path.read_text())
        if path.exists()
        else {
            "best": f"{name}: compiled, {instances} inst, max batch {max_batch}, delay {delay} us, "
            f"graph_step {step}, c{clients}",
            "best_record": "maintainers/reference/execution_costs.py VARIANTS",
            "command": f"perf_analyzer -m {MODEL} -u HOST:GRPC -i grpc --shared-memory system "
            f"--concurrency-range {clients} --async --shape input:224,224,3",
            "limit_images_per_s": LIMIT_11_24,
            "window_ms": WINDOW_MS,
            "starts": [],
        }
    )
    for _ in range(count):
        longest = max([s.get("seconds", 0) for s in record["starts"]] + [200])
        if time.monotonic() - t_start + longest > deadline():
            print(f"no more starts: {longest} s would pass the deadline", flush=True)
            break
        entry = {"start": len(record["starts"]) + 1, "started": time.strftime("%F %T %Z")}
        t0 = time.monotonic()
        server = None
        try:
            server = Server(Path(f"/tmp/costs_start_{entry['start']}_{int(time.time())}"))
            profile_dir = Path(f"/tmp/stub_profile/start_{entry['start']}_{int(time.time())}")
            left = deadline() - (time.monotonic() - t_start) - 60
            ok, entry["load_s"], error = server.load(name, profile_dir, left)
            if not ok:
                raise RuntimeError(f"did not load: {error}")
            row = measure(server, name, folder, profile_dir, spy=False)
            row["run"]["start"] = entry["start"]
            entry.update(
                warm_up_infer_s=row.get("warm_up_infer_s"),
                infer_s=row["infer_s"],
                served_over_limit=row["infer_s"] / record["limit_images_per_s"],
                mode=row["run"].get("mode"),
                detail=row,
            )
        except Exception as exc:  # noqa: BLE001 - a failed start is recorded with its reason
            entry["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
        finally:
            if server is not None:
                server.stop(folder, f"start_{entry['start']}")
        entry["seconds"] = round(time.monotonic() - t0)
        record["starts"].append(entry)
        save(path, record)
        print(
            f"fresh start {entry['start']}: "
            + (summary_line(entry["detail"]) if "detail" in entry else entry.get("error", "")),
            flush=True,
        )
    ratios = [s["served_over_limit"] for s in record["starts"] if "served_over_limit" in s]
    if ratios:
        print(
            f"served/limit over {len(ratios)} starts: median {statistics.median(ratios):.3f}, "
            f"min {min(ratios):.3f}, max {max(ratios):.3f}",
            flush=True,
        )


def limit(out: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "servelab.serving.raw_limit",
        "--device",
        "cuda:0",
        "--batches",
        "32,46,64,128",
        "--seconds",
        "2",
        "--json",
        str(out / "raw_limit.json"),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    (out / "raw_limit.log").write_text(done.stdout + done.stderr[-20000:])
    print(done.stdout[-3000:], done.stderr[-1500:], flush=True)


def spy_summary(path: Path, top: int = 25) -> dict:
    """A py-spy --format raw file (one 'frame;frame;...;leaf COUNT' a line) -> the share of the
    samples by leaf frame (where the stub's thread was) and by every frame on the stack (what it
    was inside)."""
    leaf, inside, total = {}, {}, 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n, frames = int(count), stack.split(";")
        total += n
        leaf[frames[-1]] = leaf.get(frames[-1], 0) + n
        for frame in set(frames):
            inside[frame] = inside.get(frame, 0) + n

    def shares(d):
        return [
            (k, round(v / max(total, 1), 4))
            for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:top]
        ]

    return {"samples": total, "leaf": shares(leaf), "inside": shares(inside)}


def main() -> None:
    import signal

    # `timeout` on the device sends SIGTERM: leave through the finally blocks (servers stopped)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped by SIGTERM"))
    out, what = Path(sys.argv[1]), sys.argv[2]
    if what != "spy":
        out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("LAB_PERF_INTERVAL_MS", str(WINDOW_MS))
    if what == "variants":
        variants(out, sys.argv[3].split(","), spy="--profile" in sys.argv)
    elif what == "starts":
        starts(out, sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 3)
    elif what == "limit":
        limit(out)
    elif what == "spy":  # here, on a py-spy file that came back: OUT is that file
        print(json.dumps(spy_summary(out), indent=1))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
