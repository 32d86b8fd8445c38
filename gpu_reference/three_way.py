"""The same model, the same load, three ways to serve it, side by side in one run (issue 47, item
3): Triton with notebook 7's best configuration, Ray Serve with notebook 9's deployment, FastAPI
with the lab's ONNX service. The protocol (what each receives and why that is fair, the ladder,
the fixed rate, the intervals) is servelab/three_way.py; this script starts the three servers on
this machine, measures and writes OUT. A maintainers' experiment.

    python3 gpu_reference/three_way.py OUT                   # every part not done yet
    python3 gpu_reference/three_way.py OUT --setting cpu     # the small setting (default on a CPU)
    python3 gpu_reference/three_way.py OUT --parts report    # only rewrite OUT/README.md
    LAB_RESUMABLE_S=420 python3 gpu_reference/three_way.py OUT   # stop between parts after 420 s

Parts, in order, each recorded in OUT/progress.json once done (a second invocation goes on with
the first part not done; each takes well under 10 minutes on the H100 and on 2 CPU cores):
  up          the three servers started and recorded in OUT/servers.json, each warmed up, and the
              same photo asked of each (answers.json); on a GPU Triton compiles its model (about
              1.5-2.5 minutes on the H100 on 2026-11-27)
  sequential  each way one request at a time: where a request's time goes (sequential.csv)
  ladder      each way's rates up to the latency objective (ladder.csv)
  fixed       every way at one rate, rounds interleaved, with the CPU each process group used per
              request (fixed.csv, cpu.csv)
  perf        perf_analyzer against Triton at the fixed rate over HTTP (the lab's generator
              checked against Triton's own), and notebook 7's best line (perf_*.csv)
  down        the servers stopped
  report      OUT/three_way.json and OUT/README.md from the files
With LAB_RESUMABLE_S it stops between two parts once that many seconds have passed (exit status
75), the servers left running (OUT/servers.json); the same command in the next device call, on
the still-warm machine, goes on. A part that finds a server gone starts the servers again first.

The servers: Triton (the local-mode tritonserver, food_classifier_tuned alone, explicit loads; on
a GPU the best config.pbtxt of the 2026-11-24 H100 reference, LAB_THREEWAY_BEST=FILE for another
served_over_limit.json; on a CPU that configuration's CPU form: fp32, one instance, max batch 8,
2000 us, notebook 7's CPU sweep), Ray (one head node sized for the machine, token auth, on
127.0.0.1 only: labstack/ray_cluster.py; the deployment servelab/serving/ray_app.py with
--ray-replicas replicas, on the GPU with num_gpus 1/replicas each), FastAPI (uvicorn with
fastapi_onnx, --fastapi-workers processes, ONNX Runtime on the GPU where there is one).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PARTS = ("up", "sequential", "ladder", "fixed", "perf", "down", "report")
RESUME_EXIT = 75  # as labstack/resume_state.py: stopped between parts, go on next call
# per setting: Ray replicas, Ray's max_ongoing_requests, FastAPI workers
SERVERS = {"cpu": (2, 2, 1), "gpu": (4, 2, 4)}


def on_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


# ------------------------------------------------------------------ the servers


def triton_config_text(gpu: bool) -> str:
    """Notebook 7's best configuration (a GPU's), or its CPU form."""
    from servelab import three_way

    own = os.environ.get("LAB_THREEWAY_BEST")
    return three_way.best_config(Path(own) if own else None, gpu)[0]


def start_triton(work: Path, gpu: bool) -> dict:
    """tritonserver with notebook 7's model in its best configuration and, beside it, the ONNX
    Runtime model of notebook 6 with 2 instances (notebook 9.5's): the same runtime as Ray's and
    FastAPI's, so the serving path is compared apart from the runtime."""
    import shutil

    from labstack import processes, triton_local
    from labstack.ports import free_port
    from servelab.triton import instances, model_repository, triton_config

    repo = work / "model_repository"
    kind = "gpu" if gpu else "cpu"
    model_repository.populate(repo, mode="local", kind=kind, verbose=False)
    shutil.rmtree(repo / "food_classifier")  # notebook 6's PyTorch model: not compared here
    onnx_config = repo / "food_classifier_onnx" / "config.pbtxt"
    group = instances.instance_group(2, 1 if gpu else 0)
    onnx_config.write_text(
        re.sub(r"instance_group \[.*?\n\]", group, onnx_config.read_text(), flags=re.S)
    )
    folder = model_repository.add_model(
        "food_classifier_tuned", repo, mode="local", kind=kind, verbose=False
    )
    (folder / "config.pbtxt").write_text(triton_config_text(gpu))
    http, grpc, metrics = (free_port() for _ in range(3))
    argv, env = triton_local.server_command(repo, http, grpc, metrics, backends=work / "b")
    service = processes.Service(
        "triton",
        argv,
        health=f"http://127.0.0.1:{http}/v2/health/live",
        marker=f"--http-port={http}",
        env=env,
        timeout=300,
    )
    record = processes.start(service)
    url = f"http://127.0.0.1:{http}"
    loaded = {}
    for model in ("food_classifier_onnx", "food_classifier_tuned"):  # --load-model=* began them
        ok, load_s, error = triton_config.load_model(model, url, 900)
        if not ok:
            raise RuntimeError(f"Triton did not load {model}: {error}")
        loaded[model] = round(load_s, 1)
    return {
        **record,
        "url": url,
        "grpc": f"127.0.0.1:{grpc}",
        "load_s": loaded,
        "config": (folder / "config.pbtxt").read_text(),
        "onnx_config": onnx_config.read_text(),
    }


def start_fastapi(workers: int) -> dict:
    from labstack import processes
    from labstack.ports import free_port
    from labstack.stack_services import fastapi_service

    port = free_port()
    record = processes.start(fastapi_service(port, "onnx", workers))
    health = __import__("requests").get(f"http://127.0.0.1:{port}/health", timeout=10).json()
    return {**record, "url": f"http://127.0.0.1:{port}", "health": health, "workers": workers}


def start_ray(gpu: bool, replicas: int, ongoing: int) -> dict:
    from labstack import processes, ray_cluster

    cpus = os.cpu_count() or 1
    gpus = 1 if gpu else 0
    record = processes.start(ray_cluster.head_service(ray_cluster.temp_dir(), cpus, gpus))
    os.environ.update(ray_cluster.urls(record))
    url = _ray_deploy(gpu, replicas, ongoing)
    return {
        **record,
        "url": url,
        "urls": ray_cluster.urls(record),
        "replicas": replicas,
        "max_ongoing_requests": ongoing,
        "cpus": cpus,
        "gpus": gpus,
    }


def _ray_deploy(gpu: bool, replicas: int, ongoing: int) -> str:
    """Notebook 9's deployment: `replicas` replicas, each a core and, on a GPU, its share of it."""
    from servelab import ray_serving

    url = ray_serving.connect()
    actor = {"num_cpus": 1, **({"num_gpus": round(1 / replicas, 4)} if gpu else {})}
    deployment = ray_serving.FoodClassifier.options(
        num_replicas=replicas, max_ongoing_requests=ongoing, ray_actor_options=actor
    )
    ray_serving.deploy(deployment)
    return url


def alive(servers: dict) -> bool:
    from labstack.processes import is_running

    return bool(servers) and all(
        is_running(servers[n]["pid"], servers[n]["marker"]) for n in ("triton", "ray", "fastapi")
    )


def stop_all(servers: dict) -> None:
    from labstack import processes, ray_cluster

    for name in ("fastapi", "triton"):
        if name in servers:
            processes.stop_process(servers[name]["pid"], servers[name]["marker"])
    if "ray" in servers:
        ray_cluster.stop_node(servers["ray"])


def setup(servers: dict, run) -> dict:
    """What ran: the machine, the setting, each server's configuration (no process ids)."""
    import platform

    return {
        "machine": {
            "cores": os.cpu_count(),
            "cpu": next(
                (
                    line.split(":", 1)[1].strip()
                    for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")
                ),
                platform.processor(),
            ),
            "gpu": _gpu_name(),
            "python": platform.python_version(),
            "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
            "started": time.strftime("%F %T %Z"),
        },
        "setting": dict(run.setting.__dict__),
        "gpu_processes": _gpu_processes(servers),
        "triton": {k: servers["triton"][k] for k in ("load_s", "config", "onnx_config")},
        "ray": {k: servers["ray"][k] for k in ("replicas", "max_ongoing_requests", "cpus", "gpus")},
        "fastapi": {
            "workers": servers["fastapi"]["workers"],
            "health": {k: v for k, v in servers["fastapi"]["health"].items() if k != "pid"},
        },
    }


def _gpu_processes(servers: dict) -> list[dict]:
    """The processes using the GPU (nvidia-smi), each named by the server it belongs to: are the
    Ray replicas and FastAPI's workers on the GPU, as Triton's stubs are?"""
    import shutil
    import subprocess

    if not shutil.which("nvidia-smi"):
        return []
    out = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
    ).stdout
    owner = {}
    for name, record in servers.items():
        for pid in _session(record["pid"]):
            owner[pid] = name
    rows = []
    for line in out.splitlines():
        pid, memory = (x.strip() for x in line.split(","))
        rows.append({"server": owner.get(int(pid), "other"), "memory_mib": int(memory)})
    return rows


def _session(sid: int) -> list[int]:
    from labstack import ray_cluster

    return ray_cluster.session_members(sid)


def _gpu_name() -> str:
    try:
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    except ImportError:
        return "none"


# ------------------------------------------------------------------ CPU per process group


def groups(servers: dict, senders) -> dict[str, list[int]]:
    """The processes of each server, by role, and the load generator's."""
    import psutil

    from labstack import ray_cluster

    def command(pid: int) -> str:
        try:
            return " ".join(psutil.Process(pid).cmdline())
        except psutil.Error:
            return ""

    out: dict[str, list[int]] = {"generator": [os.getpid(), *senders.pids()]}
    fastapi = psutil.Process(servers["fastapi"]["pid"])
    out["fastapi: uvicorn"] = [fastapi.pid] + [p.pid for p in fastapi.children(recursive=True)]
    triton = psutil.Process(servers["triton"]["pid"])
    stubs = [p.pid for p in triton.children(recursive=True)]
    for way, model in (
        ("triton", "food_classifier_tuned"),
        ("triton_onnx", "food_classifier_onnx"),
    ):
        out[f"{way}: tritonserver"] = [triton.pid]  # shared: counted in each way's own runs
        out[f"{way}: stubs"] = [p for p in stubs if f"/{model}/" in command(p)]
    roles = {
        "ServeReplica": "ray: replicas",
        "ProxyActor": "ray: proxy",
        "ServeController": "ray: controller",
    }
    for pid in ray_cluster.session_members(servers["ray"]["pid"]):
        text = command(pid)
        role = next((r for key, r in roles.items() if key in text), "ray: the rest")
        out.setdefault(role, []).append(pid)
    return out


def cpu_now(by_group: dict[str, list[int]]) -> dict:
    import psutil

    out = {}
    for group, pids in by_group.items():
        out[group] = {}
        for pid in pids:
            try:
                t = psutil.Process(pid).cpu_times()
                out[group][pid] = t.user + t.system + t.children_user + t.children_system
            except psutil.Error:
                pass
    t = psutil.cpu_times()
    out["machine"] = {0: sum(t) - t.idle - t.iowait}
    return out


def cpu_used(before: dict, after: dict) -> dict:
    """CPU seconds of each group between two cpu_now(), processes alive at both."""
    return {
        g: sum(after[g][p] - before[g][p] for p in before[g].keys() & after.get(g, {}).keys())
        for g in before
    }


# ------------------------------------------------------------------ the parts


class Run:
    def __init__(self, out: Path, setting_name: str | None, overrides: dict | None = None):
        import dataclasses

        from servelab import three_way

        self.out = out
        self.progress_file = out / "progress.json"
        self.progress = (
            json.loads(self.progress_file.read_text()) if self.progress_file.exists() else {}
        )
        name = setting_name or self.progress.get("setting") or ("gpu" if on_gpu() else "cpu")
        self.progress.setdefault("setting", name)
        if self.progress["setting"] != name:
            raise SystemExit(f"{out} was started with --setting {self.progress['setting']}")
        self.gpu = on_gpu()
        self.progress.setdefault("overrides", overrides or {})
        if overrides and overrides != self.progress["overrides"]:
            raise SystemExit(f"{out} was started with --set {self.progress['overrides']}")
        self.setting = dataclasses.replace(three_way.SETTINGS[name], **self.progress["overrides"])
        self.servers_file = out / "servers.json"
        self.servers = (
            json.loads(self.servers_file.read_text()) if self.servers_file.exists() else {}
        )
        self._senders = None

    def save(self) -> None:
        self.progress_file.write_text(json.dumps(self.progress, indent=2) + "\n")

    @property
    def senders(self):
        from servelab.loadgen import spread

        if self._senders is None:
            self._senders = spread.Senders(self.setting.senders)
        return self._senders

    def ways(self) -> dict:
        from servelab import three_way
        from servelab.paths import test_photo

        s = self.servers
        urls = {"triton": s["triton"]["url"], "triton_onnx": s["triton"]["url"]}
        urls.update(ray=s["ray"]["url"], fastapi=s["fastapi"]["url"])
        return three_way.ways(test_photo(), urls)

    def ensure_up(self) -> None:
        if not alive(self.servers):
            if self.servers:
                print("a server is gone: starting the three again", flush=True)
                self.progress.setdefault("restarts", 0)
                self.progress["restarts"] += 1
                stop_all(self.servers)
            self.part_up()
        elif "RAY_ADDRESS" not in os.environ:
            os.environ.update(self.servers["ray"]["urls"])

    # -- up
    def part_up(self) -> None:
        from servelab import three_way

        replicas, ongoing, workers = SERVERS[self.setting.name]
        servers: dict = {}
        timings = {}
        try:
            for name, start in (
                ("fastapi", lambda: start_fastapi(workers)),
                ("ray", lambda: start_ray(self.gpu, replicas, ongoing)),
                ("triton", lambda: start_triton(self.out / "work", self.gpu)),
            ):
                t0 = time.monotonic()
                servers[name] = start()
                timings[name] = round(time.monotonic() - t0, 1)
                print(f"{name} up in {timings[name]} s", flush=True)
                self.servers = servers
                self.servers_file.write_text(json.dumps(servers, indent=2) + "\n")
        except BaseException:
            stop_all(servers)
            raise
        (self.out / "setup.json").write_text(json.dumps(setup(servers, self), indent=2) + "\n")
        ways = self.ways()
        for way in ways.values():
            three_way.warm_up(way, self.setting.warm_up_n)
        answers = three_way.same_answer(ways)
        answers.update(start_s=timings, receives={n: w.receives for n, w in ways.items()})
        answers["bytes_sent"] = {n: len(w.body) for n, w in ways.items()}
        (self.out / "answers.json").write_text(json.dumps(answers, indent=2) + "\n")
        print(f"answers: {answers['labels']} (agree: {answers['agree']})", flush=True)

    # -- sequential
    def part_sequential(self) -> None:
        import pandas as pd

        from servelab import three_way

        rows = []
        for name, way in self.ways().items():
            seq = three_way.sequential(way, self.setting.sequential_n)
            seq.to_csv(self.out / f"sequential_{name}.csv", index=False)
            rows.append(three_way.where_time_goes(way, seq))
            print(f"{name}: {rows[-1]}", flush=True)
        pd.DataFrame(rows).to_csv(self.out / "sequential.csv", index=False)

    # -- ladder
    def part_ladder(self) -> None:
        import pandas as pd

        from servelab import three_way

        rows = []
        for name, way in self.ways().items():
            runs: dict = {}
            rows += three_way.ladder(way, self.setting, self.senders, runs)
            requests = [df.assign(step=label) for label, df in runs.items()]
            pd.concat(requests).to_csv(self.out / f"ladder_requests_{name}.csv", index=False)
        pd.DataFrame(rows).to_csv(self.out / "ladder.csv", index=False)

    # -- fixed
    def part_fixed(self) -> None:
        import pandas as pd

        from servelab import three_way

        all_ways, runs, cpu_rows = self.ways(), {}, []
        senders = self.senders
        names = list(all_ways)
        s = self.setting
        rows = []
        for r in range(s.rounds):
            turn = names[r % len(names) :] + names[: r % len(names)]
            for name in turn:
                label = f"{name} fixed {s.fixed_rps:g}/s round {r + 1}"
                by_group = groups(self.servers, senders)
                before, t0 = cpu_now(by_group), time.monotonic()
                df = three_way.at_rate(all_ways[name], s.fixed_rps, s.fixed_s, senders, label, r)
                used, wall = cpu_used(before, cpu_now(by_group)), time.monotonic() - t0
                df.attrs["way"] = name
                runs[label] = df
                rows.append({**three_way.step_row(df, s.objective_ms), "round": r + 1})
                answered = int((df["status"] == 200).sum())
                for group, seconds in used.items():
                    cpu_rows.append(
                        {
                            "way": name,
                            "round": r + 1,
                            "group": group,
                            "cpu_s": round(seconds, 3),
                            "cores": round(seconds / wall, 3),
                            "cpu_ms_per_request": round(seconds * 1e3 / max(answered, 1), 3),
                            "answered": answered,
                            "wall_s": round(wall, 2),
                        }
                    )
                print(f"  {label}: {three_way._step_text(rows[-1])}", flush=True)
        pd.DataFrame(rows).to_csv(self.out / "fixed.csv", index=False)
        pd.DataFrame(cpu_rows).to_csv(self.out / "cpu.csv", index=False)
        pooled = [three_way.latency_at_fixed_rate(three_way.of_way(runs, n), n) for n in names]
        pd.DataFrame(pooled).to_csv(self.out / "fixed_pooled.csv", index=False)
        for name in names:
            pd.concat(three_way.of_way(runs, name)).to_csv(
                self.out / f"fixed_requests_{name}.csv", index=False
            )

    # -- perf
    def part_perf(self) -> None:
        from servelab import perf

        t = self.servers["triton"]
        host = t["url"].split("://")[-1]
        s = self.setting
        base = f"perf_analyzer -m food_classifier_tuned -u {host} --shape input:224,224,3"
        rate = f"--request-rate-range {s.fixed_rps:g} --request-distribution poisson"
        windows = "" if self.gpu else " --measurement-interval 5000 --max-trials 4"
        lines = {
            "fixed_http": f"{base} {rate}{windows}",
            "onnx_fixed_http": f"perf_analyzer -m food_classifier_onnx -u {host} {rate}{windows}",
        }
        if self.gpu:  # notebook 7's best line: Triton's capacity with its own client
            from servelab import three_way

            own = os.environ.get("LAB_THREEWAY_BEST")
            record = three_way.best_config(Path(own) if own else None)[1]
            best = json.loads(record.read_text())
            lines["best_line"] = re.sub(r"-u \S+", f"-u {t['grpc']}", best["command"])
        else:
            lines["best_line"] = f"{base} --concurrency-range 16 --async{windows}"
        summary = {}
        for name, line in lines.items():
            try:
                run = perf.run_line(line, name, out=self.out, url=t["url"], timeout=240)
                row = run.row
                summary[name] = {
                    "line": line,
                    "infer_s": row.get("throughput_infer_s"),
                    "p50_ms": row.get("p50_ms"),
                    "p95_ms": row.get("p95_ms"),
                    "mode": row.get("mode"),
                }
            except Exception as exc:  # noqa: BLE001 - kept in the page with its reason
                summary[name] = {"line": line, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            print(f"perf {name}: {summary[name]}", flush=True)
        (self.out / "perf.json").write_text(json.dumps(summary, indent=2) + "\n")

    def part_down(self) -> None:
        stop_all(self.servers)
        if self.servers_file.exists():
            self.servers_file.unlink()
        self.servers = {}

    def part_report(self) -> None:
        import three_way_report

        three_way_report.write(self.out)

    def run(self, parts: list[str], stop_after: float | None) -> int:
        start = time.monotonic()
        try:
            for part in parts:
                if part in self.progress.get("done", {}) and part not in ("report",):
                    continue
                if stop_after is not None and time.monotonic() - start > stop_after:
                    print(f"stopped before {part}: {stop_after:g} s passed", flush=True)
                    return RESUME_EXIT
                if part in ("sequential", "ladder", "fixed", "perf"):
                    self.ensure_up()
                t0 = time.monotonic()
                print(f"== {part}", flush=True)
                getattr(self, f"part_{part}")()
                self.progress.setdefault("done", {})[part] = {
                    "seconds": round(time.monotonic() - t0, 1),
                    "finished": time.strftime("%F %T %Z"),
                }
                self.save()
        finally:
            if self._senders is not None:
                self._senders.close()
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--setting", choices=("cpu", "gpu"), help="default: gpu if one is seen")
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument(
        "--set", action="append", default=[], metavar="FIELD=VALUE", help="a setting's field"
    )
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.set:
        key, _, value = item.partition("=")
        overrides[key] = (
            int(value)
            if key in ("rounds", "sequential_n", "warm_up_n", "senders")
            else float(value)
        )
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("LAB_STATE_DIR", str((args.out / "lab").resolve()))
    parts = [p for p in args.parts.split(",") if p]
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts {sorted(unknown)}; parts: {', '.join(PARTS)}")
    stop_after = float(os.environ["LAB_RESUMABLE_S"]) if os.environ.get("LAB_RESUMABLE_S") else None
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    return Run(args.out, args.setting, overrides).run(parts, stop_after)


if __name__ == "__main__":
    sys.exit(main())
