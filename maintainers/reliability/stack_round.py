"""The local stack as `make up RAY=1` starts it (FastAPI, Triton under its watchdog, Flask,
JupyterLab and the Ray cluster; a state folder and a model repository of its own), tried as an
attacker on the node would (issue 43):

- every socket the stack's processes listen on, from the kernel's tables (Ray's included);
- Ray without its token: a job posted to the dashboard's job API, a driver, a Ray Client
  connection; with it, what a job, a task and an actor see of the environment;
- the two requests that crash Triton 2.51, sent straight to the stack's Triton seven times in a
  row: how soon it serves again each time, and what the watchdog's report said meanwhile;
- crafted files (the scan bomb behind a stray byte, EXIF as PNG text, an MPO, a PNG whose text
  inflates, ...) uploaded to Flask and to FastAPI: each service's CPU time for it, and Flask's
  /healthz timed meanwhile;
- FastAPI killed: Flask's /healthz names it; `make up` brings it back and keeps the rest;
- the admin key's residual on command lines: tritonserver's at each of its starts (the
  watchdog's own measure), perf_analyzer's with `-H` (the mask servelab.perf applies).

Each returns rows like reliability.hostile's: check, status, measured, bound, ok.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests

from labstack import ray_cluster
from maintainers.reliability import corpus, ray_probes
from maintainers.reliability.decode_cost import _HealthWatch, tree_cpu_s
from maintainers.reliability.procs import is_loopback, listening_sockets
from servelab import decode_budget
from servelab.paths import REPO_ROOT
from servelab.serving import triton_guard, triton_watchdog
from servelab.serving.triton_procs import hide_argument

PY = sys.executable
BACK_GOAL_S = 60.0  # Triton serving again after a crash (the goal)
HEALTH_BOUND_S = 2.0
CRASHES = 7


def _row(check, status, bound, ok, **measured) -> dict:
    return {"check": check, "status": status, **measured, "bound": bound, "ok": bool(ok)}


@contextlib.contextmanager
def make_up_ray(workdir: Path, log=print):
    """`make up RAY=1` in its own state folder and model repository; `make down` after. Yields
    (env, state folder)."""
    env = {
        **os.environ,
        "LAB_STATE_DIR": str(workdir / "lab"),
        "TRITON_MODEL_REPOSITORY": str(workdir / "model_repository"),
    }
    log("stack: make up RAY=1 (FastAPI, Triton, Flask, the Ray cluster, JupyterLab) ...")
    started = time.monotonic()
    up = subprocess.run(
        ["make", "--no-print-directory", "up", "RAY=1"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    try:
        if up.returncode != 0:
            raise RuntimeError(f"make up RAY=1 failed:\n{(up.stdout + up.stderr)[-3000:]}")
        env["_UP_S"] = f"{time.monotonic() - started:.0f}"
        yield env, workdir / "lab"
    finally:
        subprocess.run([PY, "-m", "labstack.launcher", "down"], cwd=REPO_ROOT, env=env, timeout=300)


def _records(state: Path) -> dict:
    return json.loads((state / "state.json").read_text())["services"]


def _urls(state: Path) -> dict:
    return dict(
        ln.split("=", 1) for ln in (state / "urls.env").read_text().splitlines() if "=" in ln
    )


def _members(name: str, rec: dict) -> list[int]:
    """The processes of a recorded service: its session (Ray's nodes) or its process group."""
    if name in ("ray_head", "ray_node"):
        return ray_cluster.session_members(rec["pid"])
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[2]) == rec["pid"]:
                found.append(int(stat.parent.name))
    return found


def sockets(state: Path) -> list[dict]:
    """Every TCP socket each service's processes listen on: loopback only?"""
    rows = []
    for name, rec in _records(state).items():
        found = listening_sockets(_members(name, rec))
        wide = sorted({f"{a}:{p}" for _, a, p in found if not is_loopback(a)})
        addresses = sorted({a for _, a, _ in found})
        rows.append(
            _row(
                f"{name}: every socket its processes listen on",
                f"{len(found)} socket(s) on {', '.join(addresses) or 'none'}",
                "127.0.0.1 only, and at least one",
                found and not wide,
                beyond_loopback=", ".join(wide) or "none",
            )
        )
    return rows


def ray_closed(state: Path) -> list[dict]:
    """Ray without its token (a job, a driver, a Ray Client), and with it: a job's, a task's and
    an actor's environment, against the lab's secrets."""
    urls, rec = _urls(state), _records(state)["ray_head"]
    dashboard, token = urls["RAY_DASHBOARD_URL"], (state / "ray_token").read_text().strip()
    secrets = dict(
        ln.split("=", 1) for ln in (state / "secrets.env").read_text().splitlines() if "=" in ln
    )
    secrets["RAY_AUTH_TOKEN"] = token
    rows = []
    none, wrong = (
        ray_probes.post_job(dashboard, "id"),
        ray_probes.post_job(dashboard, "id", "0" * 64),
    )
    rows.append(
        _row(
            "Ray job API: a job (`id`) without the token / with a wrong one",
            f"{none.status_code} / {wrong.status_code}",
            "refused (401 / 403)",
            none.status_code == 401 and wrong.status_code == 403,
            detail=none.text[:80],
        )
    )
    kernel = ray_probes.kernel_env({k: v for k, v in secrets.items() if k != "RAY_AUTH_TOKEN"})
    auth = {k: urls[k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH")}
    refused = ray_probes.start_driver(urls["RAY_ADDRESS"], kernel)
    allowed = ray_probes.start_driver(urls["RAY_ADDRESS"], kernel, auth)
    code, out, _ = ray_probes.driver_result(refused)
    said = next((ln for ln in out.splitlines() if "Authentication" in ln), out[-120:])
    rows.append(
        _row(
            "Ray driver (`ray.init(address=...)`) without the token",
            "refused" if code == 3 else f"exit {code}",
            "refused",
            code == 3,
            detail=said.strip()[:160],
        )
    )
    pings = [ray_probes.client_ping(rec["client_port"], t) for t in (None, "00", token)]
    rows.append(
        _row(
            "Ray Client server: a ping without the token / a wrong one / the token",
            " / ".join(pings),
            "UNAUTHENTICATED / UNAUTHENTICATED / OK",
            pings == ["UNAUTHENTICATED", "UNAUTHENTICATED", "OK"],
        )
    )
    code, out, envs = ray_probes.driver_result(allowed)
    status, job = ray_probes.job_env(dashboard, token)
    seen = {"task": envs[0] if envs else {}, "actor": envs[1] if len(envs) > 1 else {}, "job": job}
    leaks = {what: ray_probes.leaked(env, secrets) for what, env in seen.items()}
    rows.append(
        _row(
            "Ray with the token: the lab's secrets (Jupyter token, Triton's key, Ray's token) in "
            "the environment of a task, an actor and a job (the driver's holds them)",
            f"driver exit {code}, job {status}",
            "they run; no secret, by name or value",
            code == 0 and status == "SUCCEEDED" and all(seen.values()) and not any(leaks.values()),
            variables_seen=", ".join(f"{w} {len(e)}" for w, e in seen.items()),
            secrets_seen=", ".join(f"{w}: {v}" for w, v in leaks.items() if v) or "none",
        )
    )
    return rows


def _crash(url: str, image_b64: str, n: int) -> tuple[str, bool]:
    """Send the n-th crashing request (odd: classification on a BYTES output; even: JSON nested
    50,000 deep): (what came back, 'no answer' when the server died; whether the lab's guard,
    which its own forwarding code asks, refuses it)."""
    outputs = []
    if n % 2:
        outputs = [{"name": "FOOD_LABEL", "parameters": {"classification": 3}}]
        image = {"name": "INPUT_IMAGE", "datatype": "BYTES", "shape": [1, 1], "data": [image_b64]}
        body = json.dumps({"inputs": [image], "outputs": outputs}).encode()
        model = "food_classifier"
    else:
        deep = "[" * 50_000 + "]" * 50_000
        body = (
            '{"inputs":[{"name":"input","datatype":"FP32","shape":[1,3,224,224],"data":'
            + deep
            + "}]}"
        ).encode()
        model = "food_classifier_onnx"
    guarded = bool(triton_guard.refusal(body, outputs, {"FOOD_LABEL": "BYTES"}))
    try:
        resp = requests.post(f"{url}/v2/models/{model}/infer", data=body, timeout=60)
        return f"HTTP {resp.status_code}", guarded
    except requests.ConnectionError:
        return "no answer", guarded


def _serving(url: str, image_b64: str) -> bool:
    body = {
        "inputs": [
            {"name": "INPUT_IMAGE", "datatype": "BYTES", "shape": [1, 1], "data": [image_b64]}
        ]
    }
    try:
        ok = requests.post(f"{url}/v2/models/food_classifier/infer", json=body, timeout=10)
        ready = requests.get(f"{url}/v2/models/food_classifier_onnx/ready", timeout=5)
        return ok.status_code == 200 and ready.status_code == 200
    except requests.RequestException:
        return False


def triton_crashes(state: Path, image: bytes, log=print) -> list[dict]:
    """The two crashing requests, CRASHES times in a row, straight to the stack's Triton."""
    urls, rec = _urls(state), _records(state)["triton"]
    url, health = urls["TRITON_SERVER_URL"], Path(rec["health_file"])
    image_b64 = base64.b64encode(image).decode()
    rows = []
    for n in range(1, CRASHES + 1):
        kind = "classification on FOOD_LABEL (BYTES)" if n % 2 else "JSON `data` nested 50,000 deep"
        log(f"stack: crashing request {n} of {CRASHES} ({kind}) ...")
        answer, guarded = _crash(url, image_b64, n)
        sent = time.monotonic()
        said = ""
        while not _serving(url, image_b64) and time.monotonic() - sent < BACK_GOAL_S + 60:
            lines = triton_watchdog.check(url, health)[1]
            said = said or next((ln for ln in lines if "backing off" in ln), "")
            time.sleep(0.5)
        back = time.monotonic() - sent
        watchdog = _alive(rec)
        rows.append(
            _row(
                f"Triton: crashing request {n} of {CRASHES} in a row: {kind}",
                answer,
                f"crashes (Triton 2.51's defect); serving again within {BACK_GOAL_S:.0f} s; "
                "the watchdog never gives up",
                answer == "no answer" and back <= BACK_GOAL_S and watchdog and guarded,
                serving_again_after_s=round(back, 1),
                refused_by_the_guard_of_flask="yes" if guarded else "NO",
                watchdog_said=said or "-",
            )
        )
    return rows


def _alive(rec: dict) -> bool:
    from labstack.processes import is_running

    return is_running(rec["pid"], rec["marker"])


def crafted_files() -> list[tuple[str, bytes]]:
    from PIL import Image, PngImagePlugin

    text = PngImagePlugin.PngInfo()
    text.add_text("comment", "x" * 5_000_000, zip=True)
    exif, big_exif = corpus.exif_block(6, filler=60_000), corpus.exif_block(6, filler=2_000_000)
    unknown = b"\xff\xf3\x00\x06junk"  # JPG3, a marker no decoder knows, with a length
    return [
        ("scan bomb behind a stray byte (JPEG, 5,000 scans)", corpus.jpeg_stray_scan_bomb()),
        ("scan bomb behind an unknown marker segment", corpus.jpeg_stray_scan_bomb(stray=unknown)),
        (
            "D3: 2,172 scans behind a reserved marker (FF 02) after a restart interval",
            corpus.jpeg_restart_hidden_scans(),
        ),
        ("EXIF as PNG 'Raw profile type exif' text, 60 KB", corpus.png_raw_profile_exif(exif)),
        ("EXIF as PNG 'Raw profile type exif' text, 2 MB", corpus.png_raw_profile_exif(big_exif)),
        ("EXIF in WebP, 60 KB, orientation 6", corpus.webp_with_exif(exif)),
        ("MPO, two 4000x3000 pictures", corpus.mpo(4000)),
        (
            "PNG whose text inflates to 5 MB",
            corpus.encode(Image.new("RGB", (64, 48)), "PNG", pnginfo=text),
        ),
    ]


def crafted_uploads(state: Path, log=print) -> list[dict]:
    """Each crafted file to Flask (which decodes it, then FastAPI does) and to FastAPI: each
    service's CPU for it (its process tree's, decode workers included, those the kernel ended
    too), and Flask's /healthz timed meanwhile."""
    urls, records = _urls(state), _records(state)
    flask, fastapi = urls["FLASK_SERVER_URL"], urls["FASTAPI_SERVER_URL"]
    pids = {n: records[n]["pid"] for n in ("flask", "fastapi")}
    rows = []
    for name, data in crafted_files():
        log(f"stack: crafted upload: {name} ...")
        with _HealthWatch(f"{flask}/healthz") as watch:
            before = {n: tree_cpu_s(p) for n, p in pids.items()}
            started = time.monotonic()
            ext = {b"\xff\xd8": "jpg", b"\x89P": "png"}.get(data[:2], "webp")
            page = requests.post(
                f"{flask}/predict", files={"file": (f"x.{ext}", data)}, timeout=120
            )
            flask_s = time.monotonic() - started
            middle = {n: tree_cpu_s(p) for n, p in pids.items()}
            body = {"image": base64.b64encode(data).decode()}
            api = requests.post(f"{fastapi}/predict", json=body, timeout=120)
            after = tree_cpu_s(pids["fastapi"])
            time.sleep(0.3)
        cpu = {
            "flask": middle["flask"] - before["flask"],
            "fastapi": after - middle["fastapi"],
        }
        said = api.json().get("detail", "") if api.status_code != 200 else "classified"
        budget = decode_budget.MAX_DECODE_CPU_S
        rows.append(
            _row(
                f"crafted upload: {name} ({len(data) / 1024:,.1f} KiB)",
                f"Flask {page.status_code}, FastAPI {api.status_code}",
                f"each service's CPU < {budget:g} s (one decode's budget); /healthz < "
                f"{HEALTH_BOUND_S:g} s meanwhile",
                max(cpu.values()) < budget and watch.worst < HEALTH_BOUND_S and not watch.failed,
                flask_answer_s=round(flask_s, 2),
                cpu_s=f"Flask {cpu['flask']:.2f}, FastAPI {cpu['fastapi']:.2f}",
                healthz_worst_s=round(watch.worst, 3),
                detail=str(said)[:90],
            )
        )
    return rows


def flask_degraded(env: dict, state: Path, log=print) -> list[dict]:
    """FastAPI killed: Flask's /healthz; then `make up` again."""
    records, urls = _records(state), _urls(state)
    flask = urls["FLASK_SERVER_URL"]
    os.killpg(records["fastapi"]["pid"], signal.SIGKILL)
    time.sleep(2.5)  # /healthz reuses an answer up to 2 s old
    health = requests.get(f"{flask}/healthz", timeout=10)
    said = health.json()
    status = subprocess.run(
        ["make", "--no-print-directory", "status"],
        cwd=REPO_ROOT,
        env={**env, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    flask_line = next((ln.strip() for ln in status.splitlines() if "flask " in ln), "")
    log("stack: FastAPI killed; make up RAY=1 again ...")
    again = subprocess.run(
        ["make", "--no-print-directory", "up", "RAY=1"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    kept = [ln.split(":")[0] for ln in again.stdout.splitlines() if ln.endswith(", kept")]
    time.sleep(2.5)
    after = requests.get(f"{flask}/healthz", timeout=10).json()
    return [
        _row(
            "FastAPI killed behind Flask: Flask's /healthz and `make status`",
            f"{health.status_code} {said.get('status')}; make status: "
            f"{'DEGRADED' if 'DEGRADED' in flask_line else flask_line[:40]}",
            "503 degraded, naming FastAPI; `make status` says Flask is DEGRADED",
            health.status_code == 503
            and said.get("status") == "degraded"
            and "FastAPI" in said.get("problem", "")
            and "DEGRADED" in flask_line,
            detail=said.get("problem", "")[:120],
        ),
        _row(
            "then `make up RAY=1`: FastAPI back, the rest kept",
            f"exit {again.returncode}; /healthz {after.get('status')}",
            "exit 0, ok; every other service kept",
            again.returncode == 0
            and after.get("status") == "ok"
            and set(kept) == set(records) - {"fastapi"},
            kept=", ".join(kept),
        ),
    ]


def key_residual(state: Path, runs: int = 5) -> list[dict]:
    """How long the admin key stood on tritonserver's command line at each start (the watchdog's
    own measure, in its log) and on perf_analyzer's with `-H` (started, masked as servelab.perf
    masks it, and watched every millisecond by another process's view of /proc)."""
    log_text = (state / "logs" / "triton.log").read_text(errors="replace")
    shown = re.escape(triton_watchdog.KEY_SHOWN) + r" ([\d.]+) ms"
    server = [float(m) for m in re.findall(shown, log_text)]
    urls = _urls(state)
    key = dict(ln.split("=", 1) for ln in (state / "secrets.env").read_text().splitlines())[
        "TRITON_ADMIN_KEY"
    ]
    from servelab.perf.tool import perf_analyzer_env, perf_analyzer_path

    host = urls["TRITON_SERVER_URL"].split("://")[-1]
    windows, seen = [], []
    for _ in range(runs):
        argv = [
            perf_analyzer_path(),
            "-m",
            "food_classifier_onnx",
            "-u",
            host,
            "--concurrency-range",
            "1",
            "-H",
            f"lab-admin-key:{key}",
        ]
        proc = subprocess.Popen(
            argv, env=perf_analyzer_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        started = time.monotonic()
        watcher = _Watch(proc.pid, key)
        why_not = hide_argument(proc.pid, key)
        windows.append((time.monotonic() - started) * 1000 if not why_not else float("nan"))
        time.sleep(0.05)
        watcher.stop()
        seen.append(watcher.shown_ms)
        proc.kill()
        proc.wait()
    span = lambda xs: f"{min(xs):.0f}-{max(xs):.0f} ms" if xs else "no sample"  # noqa: E731
    return [
        _row(
            "Triton's admin key on tritonserver's command line at each start, until masked",
            f"{len(server)} starts",
            "measured and stated (docs/security.md)",
            bool(server),
            from_start_to_mask=span(server),
        ),
        _row(
            "Triton's admin key on perf_analyzer's command line (`-H`), until masked",
            f"{runs} runs",
            "measured and stated (docs/security.md)",
            all(w == w for w in windows),
            from_start_to_mask=span([w for w in windows if w == w]),
            seen_by_another_process=span([s for s in seen if s]),
        ),
    ]


class _Watch:
    """Another process's view: reads /proc/<pid>/cmdline as often as it can; shown_ms is how
    long it saw the key there (first to last look that showed it)."""

    def __init__(self, pid: int, secret: str):
        self.pid, self.secret, self.looks = pid, secret.encode(), []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                argv = Path(f"/proc/{self.pid}/cmdline").read_bytes()
            except OSError:
                return
            if argv:
                self.looks.append((time.monotonic(), self.secret in argv))
            time.sleep(0.0005)

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=5)

    @property
    def shown_ms(self) -> float:
        shown = [t for t, holds in self.looks if holds]
        return (shown[-1] - shown[0]) * 1000 if shown else 0.0


def run(workdir: Path, image: bytes, log=print) -> list[dict]:
    """The round's cases against `make up RAY=1`'s stack; rows for the report (one failed row
    saying why, should the stack not start: the rest of the report is kept)."""
    try:
        return _run(workdir, image, log)
    except RuntimeError as exc:
        return [_row("`make up RAY=1`", "FAILED", "the stack starts", False, detail=str(exc))]


def _run(workdir: Path, image: bytes, log=print) -> list[dict]:
    with make_up_ray(workdir, log) as (env, state):
        rows = [
            _row(
                "`make up RAY=1`: every service started",
                ", ".join(_records(state)),
                "FastAPI, Triton, Flask, both Ray nodes, JupyterLab",
                set(_records(state)) >= {"fastapi", "triton", "flask", "ray_head", "ray_node"},
                seconds=env["_UP_S"],
            )
        ]
        log("stack: listening sockets ...")
        rows += sockets(state)
        log(
            "stack: Ray without its token (job, driver, Ray Client), and what its processes see ..."
        )
        rows += ray_closed(state)
        rows += crafted_uploads(state, log)
        rows += triton_crashes(state, image, log)
        rows += key_residual(state)
        rows += flask_degraded(env, state, log)
    return rows
