"""The same model, the same load, three ways to serve it, side by side in one run (issue 47, item
3; issue 54): Triton with notebook 7's best configuration, Ray Serve with notebook 9's deployment,
FastAPI with the lab's ONNX service; and batching against none, for Triton's ONNX Runtime model
(dynamic batching) and for Ray Serve (@serve.batch), in the same ladder. The protocol (what each
receives and why that is fair, the ladder, the fixed rate, the intervals, the batchers' settings)
is servelab/three_way.py; this script starts the servers on this machine, measures and writes OUT.
A maintainers' experiment.

    python3 maintainers/reference/three_way.py OUT                  # every part not done yet
    python3 maintainers/reference/three_way.py OUT --setting cpu    # small (default on a CPU)
    python3 maintainers/reference/three_way.py OUT --parts report   # only rewrite OUT/README.md
    python3 maintainers/reference/three_way.py OUT --perf best_line # of the perf part, that line
    python3 maintainers/reference/three_way.py OUT --ways triton,fastapi   # only those ways
    LAB_RESUMABLE_S=420 python3 maintainers/reference/three_way.py OUT  # stop after 420 s, between
                                                                        # two parts

Parts, in order, each recorded in OUT/progress.json once done (a second invocation goes on with
the first part not done):
  up          the servers started and recorded in OUT/servers.json, each warmed up, and the
              same photo asked of each (answers.json); on a GPU Triton compiles notebook 7's
              model once (--load-model=*, no second load: 64-99 s on the H200 on 2026-11-28)
  sequential  each way one request at a time: where a request's time goes (sequential.csv)
  fixed       every way at one rate, rounds interleaved, with the CPU each process group used per
              request (fixed.csv, cpu.csv); before the ladder, whose last step overloads a server
  ladder      each way's rates up to the latency objective (ladder.csv)
  perf        perf_analyzer against Triton at the fixed rate over HTTP (the lab's generator
              checked against Triton's own), and notebook 7's best line (perf_*.csv)
  down        the servers stopped
  report      OUT/three_way.json and OUT/README.md from the files
With LAB_RESUMABLE_S it stops between two parts once that many seconds have passed (exit status
75), the servers left running (OUT/servers.json); the same command in the next device call, on
the still-warm machine, goes on. A part that finds a server gone starts the servers again first.

The servers (setup.json states each one's configuration, and the page shows it):
- Triton: the local-mode tritonserver under the lab's watchdog, as `make up` runs it (its admin
  key in OUT/lab/secrets.env, 0600, and on no command line: labstack/triton_local.py); explicit
  model control, every model loaded at start: notebook 7's food_classifier_tuned in its best
  configuration (on a GPU the best config.pbtxt of the 2026-11-24 H100 reference,
  LAB_THREEWAY_BEST=FILE for another served_over_limit.json; on a CPU its CPU form: fp32, one
  instance, max batch 8, 2000 us, notebook 7's CPU sweep), notebook 9.5's food_classifier_onnx
  (ONNX Runtime, 2 instances, no batching) and food_classifier_onnx_batch (the same with
  three_way.BATCHING's dynamic batcher);
- Ray: one head node sized for the machine, token auth, on 127.0.0.1 only
  (labstack/ray_cluster.py), two applications: notebook 9's deployment (servelab/serving/
  ray_app.py's FoodClassifier, max_ongoing_requests 2) at /food and BatchedFoodClassifier
  (@serve.batch with three_way.BATCHING's size and wait, max_ongoing_requests twice the batch) at
  /food_batch, each with the same replicas, on the GPU a share of it each;
- FastAPI: uvicorn with fastapi_onnx, ONNX Runtime on the GPU where there is one, one worker
  process per two cores on a GPU machine (each decodes its requests' JPEGs on its own core and
  holds its own session on the GPU; the first run had 4 on 32 cores), one on the CPU setting.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

# the fixed rate before the ladder: each way's ladder ends with an overloaded step, and in the
# first H200 run (ladder first) Triton's p95 at 200/s after it was 3x its p95 at 225/s before it
PARTS = ("up", "sequential", "fixed", "ladder", "perf", "down", "report")
RESUME_EXIT = 75  # as maintainers/reference/resume_state.py: stopped between parts, go on next call
PERF_LINES = ("fixed_http", "onnx_fixed_http", "best_line")
# per setting: Ray's replicas per application and max_ongoing_requests without batching (notebook
# 9's); with @serve.batch a replica takes twice its largest batch
RAY = {"cpu": (2, 2), "gpu": (4, 2)}
RAY_APPS = {"ray": ("food", "/food"), "ray_batch": ("food_batch", "/food_batch")}


def fastapi_workers(setting: str) -> int:
    """uvicorn's worker processes: one per two cores on the GPU machine (each decodes JPEGs on a
    core and holds an ONNX Runtime session on the GPU; the cores left serve the load generator),
    one on the 2-core CPU setting."""
    return max(1, (os.cpu_count() or 2) // 2) if setting == "gpu" else 1


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


def start_triton(work: Path, gpu: bool, setting: str) -> dict:
    """tritonserver under the lab's watchdog with notebook 7's model in its best configuration
    and, beside it, the ONNX Runtime model of notebook 9.5 (2 instances) without and with dynamic
    batching: the same runtime as Ray's and FastAPI's, so the serving path is compared apart from
    the runtime. Every model is loaded once, at start (--load-model=*)."""
    import shutil

    from labstack import processes, triton_local
    from labstack.lab_secrets import lab_secrets
    from labstack.ports import free_port
    from servelab import three_way
    from servelab.triton import instances, model_repository, triton_config

    repo = work / "model_repository"
    kind = "gpu" if gpu else "cpu"
    model_repository.populate(repo, mode="local", kind=kind, verbose=False)
    shutil.rmtree(repo / "food_classifier")  # notebook 6's PyTorch model: not compared here
    onnx = repo / three_way.ONNX_MODEL
    group = instances.instance_group(2, 1 if gpu else 0)
    text = re.sub(
        r"instance_group \[.*?\n\]", group, (onnx / "config.pbtxt").read_text(), flags=re.S
    )
    (onnx / "config.pbtxt").write_text(text)
    batched = repo / three_way.ONNX_BATCH_MODEL
    shutil.rmtree(batched, ignore_errors=True)
    shutil.copytree(onnx, batched)
    text = text.replace(f'name: "{three_way.ONNX_MODEL}"', f'name: "{three_way.ONNX_BATCH_MODEL}"')
    (batched / "config.pbtxt").write_text(text + "\n" + three_way.batching_fragment(setting) + "\n")
    folder = model_repository.add_model(
        three_way.TRITON_MODEL, repo, mode="local", kind=kind, verbose=False
    )
    (folder / "config.pbtxt").write_text(triton_config_text(gpu))
    http, grpc, metrics = (free_port() for _ in range(3))
    key = lab_secrets()["TRITON_ADMIN_KEY"]  # OUT/lab/secrets.env, 0600: the next call's too
    # as the lab starts it (its admin key masked, in no stub's environment); no repairs here
    service = triton_local.service(
        repo,
        (http, grpc, metrics),
        work / "triton_health.json",
        health="/v2/health/live",
        backends=work / "b",
        admin_key=key,
        repair=False,
        timeout=900,  # every model loads before the server answers (the compile: minutes)
    )
    t0 = time.monotonic()
    record = processes.start(service)
    url = f"http://127.0.0.1:{http}"
    models = (three_way.ONNX_MODEL, three_way.ONNX_BATCH_MODEL, three_way.TRITON_MODEL)
    deadline = time.monotonic() + 900
    while not all(triton_config.model_ready(m, url) for m in models):
        if time.monotonic() > deadline:
            raise RuntimeError(f"Triton did not make {models} ready within 900 s")
        time.sleep(1)
    return {
        **record,
        "url": url,
        "grpc": f"127.0.0.1:{grpc}",
        "ready_s": round(time.monotonic() - t0, 1),
        "configs": {m: (repo / m / "config.pbtxt").read_text() for m in models},
    }


def start_fastapi(workers: int) -> dict:
    import requests

    from labstack import processes
    from labstack.ports import free_port
    from labstack.stack_services import fastapi_service

    port = free_port()
    record = processes.start(fastapi_service(port, "onnx", workers))
    # the first worker's answer makes the service healthy; every worker loads its own session:
    # asked until as many answers in a row as there are workers say ready (each goes to a worker)
    deadline, ready = time.monotonic() + 180, 0
    while ready < 2 * workers and time.monotonic() < deadline:
        health = requests.get(f"http://127.0.0.1:{port}/health", timeout=10)
        ready = ready + 1 if health.status_code == 200 else 0
        time.sleep(0 if ready else 0.5)
    url = f"http://127.0.0.1:{port}"
    return {**record, "url": url, "health": health.json(), "workers": workers}


def start_ray(gpu: bool, setting: str) -> dict:
    from labstack import processes, ray_cluster

    cpus = os.cpu_count() or 1
    gpus = 1 if gpu else 0
    record = processes.start(ray_cluster.head_service(ray_cluster.temp_dir(), cpus, gpus))
    os.environ.update(ray_cluster.urls(record))
    apps = _ray_deploy(gpu, setting, cpus)
    return {
        **record,
        "urls": ray_cluster.urls(record),
        "apps": apps,
        "cpus": cpus,
        "gpus": gpus,
    }


def _ray_deploy(gpu: bool, setting: str, cpus: int) -> dict:
    """Notebook 9's deployment at /food and the same with @serve.batch at /food_batch, the same
    replicas each, each replica a core (or its share of a small machine) and, on a GPU, its share
    of it. Returns each application's URL and options."""
    from servelab import ray_serving, three_way
    from servelab.serving.ray_app import BatchedFoodClassifier, FoodClassifier

    replicas, ongoing = RAY[setting]
    batching = three_way.BATCHING[setting]
    actor = {"num_cpus": min(1.0, cpus / (2 * replicas))}
    if gpu:
        actor["num_gpus"] = round(1 / (2 * replicas), 4)
    url = ray_serving.connect()
    base = url.rsplit("/", 1)[0]
    plain = {"num_replicas": replicas, "max_ongoing_requests": ongoing}
    batched = {"num_replicas": replicas, "max_ongoing_requests": 2 * batching["max_batch_size"]}
    init = {
        "max_batch_size": batching["max_batch_size"],
        "batch_wait_timeout_s": batching["wait_us"] / 1e6,
    }
    apps = {}
    for way, deployment, options, args in (
        ("ray", FoodClassifier, plain, None),
        ("ray_batch", BatchedFoodClassifier, batched, init),
    ):
        name, route = RAY_APPS[way]
        ray_serving.deploy(
            deployment.options(**options, ray_actor_options=actor), name, route, init=args
        )
        apps[way] = {
            "url": f"{base}{route}",
            "app": name,
            "deployment": deployment.name,
            **options,
            "ray_actor_options": actor,
            **({"batch": init} if args else {}),
        }
    return apps


def server_of(way: str) -> str:
    """The server a way is served by: triton, ray or fastapi."""
    return way.split("_", 1)[0]


def alive(servers: dict) -> bool:
    from labstack.processes import is_running

    return bool(servers) and all(is_running(s["pid"], s["marker"]) for s in servers.values())


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

    from servelab import three_way

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
        "ways": list(run.names),
        "batching": three_way.BATCHING[run.setting.name],
        "gpu_processes": _gpu_processes(servers),
        **_configured(servers),
    }


def _configured(servers: dict) -> dict:
    """Each server's configuration as setup.json keeps it (the servers this run started)."""
    out = {}
    if "triton" in servers:
        out["triton"] = {k: servers["triton"][k] for k in ("ready_s", "configs")}
    if "ray" in servers:
        out["ray"] = {k: servers["ray"][k] for k in ("apps", "cpus", "gpus")}
    if "fastapi" in servers:
        health = servers["fastapi"]["health"]
        out["fastapi"] = {
            "workers": servers["fastapi"]["workers"],
            "health": {k: v for k, v in health.items() if k != "pid"},
        }
    return out


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
    """The processes of each way, by role, and the load generator's. A process two ways share
    (tritonserver, Ray's proxy and controller) is named under each: a way's own rounds are what
    its figures count."""
    import psutil

    def command(pid: int) -> str:
        try:
            return " ".join(psutil.Process(pid).cmdline())
        except psutil.Error:
            return ""

    out: dict[str, list[int]] = {"generator": [os.getpid(), *senders.pids()]}
    if "fastapi" in servers:
        fastapi = psutil.Process(servers["fastapi"]["pid"])
        out["fastapi: uvicorn"] = [fastapi.pid, *(p.pid for p in fastapi.children(recursive=True))]
    if "triton" in servers:
        _triton_groups(servers["triton"], out, command)
    if "ray" in servers:
        _ray_groups(servers["ray"], out, command)
    return out


def _triton_groups(triton: dict, out: dict, command) -> None:
    import psutil

    from servelab import three_way

    watchdog = psutil.Process(triton["pid"])
    below = watchdog.children(recursive=True)
    server = [p.pid for p in below if _name(p) == "tritonserver"]
    stubs = [p.pid for p in below if _name(p) != "tritonserver"]
    for way, model in (
        ("triton", three_way.TRITON_MODEL),
        ("triton_onnx", three_way.ONNX_MODEL),
        ("triton_onnx_batch", three_way.ONNX_BATCH_MODEL),
    ):
        out[f"{way}: tritonserver"] = server  # shared: counted in each way's own runs
        out[f"{way}: stubs"] = [p for p in stubs if f"/{model}/" in command(p)]


def _ray_groups(ray: dict, out: dict, command) -> None:
    from labstack import ray_cluster

    apps = {v["app"]: way for way, v in ray["apps"].items()}
    shared = {"ProxyActor": "proxy", "ServeController": "controller"}
    for pid in ray_cluster.session_members(ray["pid"]):
        text = command(pid)
        replica = next((a for a in apps if f"ServeReplica:{a}:" in text), None)
        if replica:
            out.setdefault(f"{apps[replica]}: replicas", []).append(pid)
            continue
        role = next((r for key, r in shared.items() if key in text), "the rest")
        for way in apps.values():
            out.setdefault(f"{way}: {role}", []).append(pid)


def _name(process) -> str:
    import psutil

    try:
        return process.name()
    except psutil.Error:
        return ""


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
    def __init__(
        self,
        out: Path,
        setting_name: str | None,
        overrides: dict | None = None,
        names: list[str] | None = None,
        perf_lines: list[str] | None = None,
    ):
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
        answers = out / "answers.json"
        if "ways" not in self.progress and answers.exists():  # a run from before --ways
            self.progress["ways"] = list(json.loads(answers.read_text())["labels"])
        self.progress.setdefault("ways", names or list(three_way.ORDER))
        if names and names != self.progress["ways"]:
            raise SystemExit(f"{out} was started with --ways {','.join(self.progress['ways'])}")
        self.names = self.progress["ways"]
        self.perf_lines = perf_lines or list(PERF_LINES)
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

        s, urls = self.servers, {}
        if "triton" in s:
            urls.update(
                {n: s["triton"]["url"] for n in ("triton", "triton_onnx", "triton_onnx_batch")}
            )
        if "ray" in s:
            urls.update({way: app["url"] for way, app in s["ray"]["apps"].items()})
        if "fastapi" in s:
            urls["fastapi"] = s["fastapi"]["url"]
        return three_way.ways(test_photo(), {n: urls[n] for n in self.names})

    def ensure_up(self) -> None:
        if not alive(self.servers):
            if self.servers:
                print("a server is gone: starting the three again", flush=True)
                self.progress.setdefault("restarts", 0)
                self.progress["restarts"] += 1
                stop_all(self.servers)
            self.part_up()
        elif "RAY_ADDRESS" not in os.environ and "ray" in self.servers:
            os.environ.update(self.servers["ray"]["urls"])

    # -- up
    def part_up(self) -> None:
        from servelab import three_way

        workers, setting = fastapi_workers(self.setting.name), self.setting.name
        servers: dict = {}
        timings = {}
        needed = {server_of(way) for way in self.names}
        try:
            for name, start in (
                ("fastapi", lambda: start_fastapi(workers)),
                ("ray", lambda: start_ray(self.gpu, setting)),
                ("triton", lambda: start_triton(self.out / "work", self.gpu, setting)),
            ):
                if name not in needed:
                    continue
                t0 = time.monotonic()
                servers[name] = start()
                timings[name] = round(time.monotonic() - t0, 1)
                print(f"{name} up in {timings[name]} s", flush=True)
                self.servers = servers
                self.servers_file.write_text(json.dumps(servers, indent=2) + "\n")
        except BaseException:
            stop_all(servers)
            raise
        ways = self.ways()
        for way in ways.values():
            three_way.warm_up(way, self.setting.warm_up_n)
        (self.out / "setup.json").write_text(json.dumps(setup(servers, self), indent=2) + "\n")
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
                wait = three_way.request_timeout_s(s.objective_ms)
                df = three_way.at_rate(
                    all_ways[name], s.fixed_rps, s.fixed_s, senders, label, r, timeout=wait
                )
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
        from labstack.lab_secrets import lab_secrets
        from servelab import perf

        if "triton" not in self.servers:  # perf_analyzer speaks only Triton's protocol
            (self.out / "perf.json").write_text("{}\n")
            return
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
            line = re.sub(r"-u \S+", f"-u {t['grpc']}", best["command"])
            lines["best_line"] = f"{line} --measurement-interval 3000"  # notebook 7's windows
        else:  # its flags on a CPU (gRPC, shared memory: the node's secret), a CPU's load
            grpc = f"-u {t['grpc']} -i grpc --shared-memory system"
            lines["best_line"] = (
                f"perf_analyzer -m food_classifier_tuned {grpc} --concurrency-range 16 --async "
                f"--shape input:224,224,3{windows}"
            )
        # the node's secret, for the shared-memory API of the best line: perf.run_line adds the
        # header and keeps it off perf_analyzer's command line (servelab/serving/argv_tail.py)
        os.environ["TRITON_ADMIN_KEY"] = lab_secrets()["TRITON_ADMIN_KEY"]
        summary = {}
        for name, line in lines.items():
            if name not in self.perf_lines:
                continue
            try:
                run = perf.run_line(line, name, out=self.out, url=t["url"], timeout=240)
                row = run.row
                summary[name] = {
                    "line": line,
                    "infer_s": row.get("throughput_infer_s"),
                    "p50_ms": row.get("p50_ms"),
                    "p95_ms": row.get("p95_ms"),
                    "mode": row.get("mode"),
                    "avg_batch_size": row.get("avg_batch_size"),
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
        from maintainers.reference import three_way_report

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
                if part == "report":  # made again from the files at will: no record of it
                    continue
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
    parser.add_argument("--ways", help="the ways to compare (default every one, ORDER's names)")
    parser.add_argument("--perf", help=f"the perf part's lines (default: {','.join(PERF_LINES)})")
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
    names = args.ways.split(",") if args.ways else None
    perf_lines = args.perf.split(",") if args.perf else None
    from servelab import three_way

    if names and set(names) - set(three_way.ORDER):
        parser.error(f"unknown ways {sorted(set(names) - set(three_way.ORDER))}")
    if perf_lines and set(perf_lines) - set(PERF_LINES):
        parser.error(f"unknown perf lines {sorted(set(perf_lines) - set(PERF_LINES))}")
    return Run(args.out, args.setting, overrides, names, perf_lines).run(parts, stop_after)


if __name__ == "__main__":
    sys.exit(main())
