"""Faults of the FastAPI/Flask half and of the launcher: FastAPI killed behind Flask, a FastAPI
server killed mid-benchmark, `up` after a crash, `down` twice, stale state with a reused pid.
Each scenario returns one row: what was expected, what happened (measured), passed or not."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path

import requests

from labstack import launcher
from maintainers.reliability.procs import healthy, running, start_fastapi, start_flask
from servelab.paths import REPO_ROOT
from servelab.serving.triton_procs import stub_model


def scenario(name: str, expected: str, fn) -> dict:
    """Run fn() -> (passed, what happened); an exception inside is a failed scenario, reported as
    such."""
    start = time.perf_counter()
    try:
        passed, observed = fn()
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        passed, observed = (
            False,
            f"the scenario itself failed: {type(exc).__name__}: {str(exc)[:300]} "
            f"({Path(where.filename).name}:{where.lineno})",
        )
    return {
        "scenario": name,
        "expected": expected,
        "observed": observed,
        "passed": bool(passed),
        "seconds": round(time.perf_counter() - start, 1),
    }


def kill_during(proc, after_s: float, work):
    """Run work() while proc is SIGKILLed after `after_s` seconds: (what work returned, seconds it
    took)."""
    timer = threading.Timer(after_s, proc.kill)
    timer.start()
    t0 = time.perf_counter()
    try:
        return work(), time.perf_counter() - t0
    finally:
        timer.join()


def fastapi_killed_behind_flask(image: bytes, runtime: str = "onnx") -> dict:
    """Kill FastAPI behind a running Flask, ask Flask, start FastAPI again on the same port, ask
    again."""

    def run():
        upload = {"file": ("a.jpg", image, "image/jpeg")}
        port = launcher.free_port()
        api = start_fastapi(runtime, port)
        flask = start_flask(api.url)
        try:
            before = requests.post(f"{flask.url}/predict", files=upload, timeout=60)
            api.kill()
            t0 = time.perf_counter()
            down = requests.post(f"{flask.url}/predict", files=upload, timeout=60)
            answer_s = time.perf_counter() - t0
            readable = (
                down.status_code == 502
                and "not reachable" in down.text
                and "Traceback" not in down.text
            )
            api2 = start_fastapi(runtime, port)
            try:
                again = requests.post(f"{flask.url}/predict", files=upload, timeout=60)
                same_flask = flask.alive()
            finally:
                api2.stop()
            ok = before.status_code == 200 and readable and again.status_code == 200 and same_flask
            return ok, (
                f"before: HTTP {before.status_code}; FastAPI killed: HTTP {down.status_code} in "
                f"{answer_s:.2f} s, page says FastAPI is 'not reachable' "
                f"{'yes' if readable else 'NO'}, no traceback; FastAPI restarted (ready in "
                f"{api2.ready_s:.1f} s): HTTP {again.status_code}, same Flask process "
                f"{'yes' if same_flask else 'NO'}"
            )
        finally:
            flask.stop()
            api.stop()

    return scenario(
        "Flask serving, the FastAPI service behind it killed (SIGKILL), then started again",
        "readable 502 page, no traceback; 200 again without restarting Flask",
        run,
    )


def fastapi_killed_mid_benchmark(
    b64: str, n: int = 8000, concurrency: int = 4, kill_after_s: float = 1.5
) -> dict:
    """servelab.loadgen.run (notebook 4's load generator, default timeouts) against uvicorn; SIGKILL
    the server after kill_after_s: the run must end, every failed request counted as an error.

    n is large so that no machine answers them all before the kill (CI's 2 cores answered 200 in
    1.5 s, and the kill then came after the run), while the requests after it fail in about 0.4 ms
    each (connection refused): the run still ends in a few seconds."""

    def run():
        from servelab import loadgen

        api = start_fastapi("onnx")
        try:
            df, took = kill_during(
                api,
                kill_after_s,
                lambda: loadgen.run(
                    f"{api.url}/predict",
                    {"image": b64},
                    n=n,
                    concurrency=concurrency,
                    progress=False,
                ),
            )
            row = loadgen.summarize(df)
            kinds = Counter(str(s) for s in df["status"] if s != 200)
            ok = (
                0 < row["errors"] < n
                and len(df) == n
                and took < 60
                and not api.alive()
                and all(k.startswith("error:") for k in kinds)
            )
            return ok, (
                f"loadgen.run returned after {took:.1f} s: {len(df)} rows, {n - row['errors']} "
                f"answered before the kill, {row['errors']} reported as {dict(kinds)}"
            )
        finally:
            api.stop()

    return scenario(
        "FastAPI server killed mid-benchmark (servelab.loadgen)",
        "the run ends in bounded time; failed requests counted as errors",
        run,
    )


def _launcher(state_dir: Path, repo: Path):
    """The launcher CLI (what `make up` / `make down` run) in a subprocess with its own state folder
    and model repository: never the user's .lab/ or model_repository/."""
    env = {**os.environ, "LAB_STATE_DIR": str(state_dir), "TRITON_MODEL_REPOSITORY": str(repo)}

    def cli(*args, timeout=600):
        return subprocess.run(
            [sys.executable, "-m", "labstack.launcher", *args],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return cli


def _state(state_dir: Path) -> dict:
    try:
        return json.loads((state_dir / "state.json").read_text())["services"]
    except (OSError, ValueError, KeyError):
        return {}


def crash_up_down_down(tmp: Path, full_stack: bool = True) -> list[dict]:
    """`up`, SIGKILL FastAPI (a crash), `up` again, `down`, `down`. full_stack: `up --jupyter`, the
    command `make up` runs (FastAPI, Triton, Flask, JupyterLab); else `up --no-triton` (faster)."""
    state_dir, repo = tmp / "lab", tmp / "model_repository"
    cli = _launcher(state_dir, repo)
    args = ("up", "--jupyter") if full_stack else ("up", "--no-triton")

    def crash_then_up():
        first = cli(*args)
        if first.returncode != 0:
            return False, f"first `{' '.join(args)}` failed: {first.stderr[-300:]}"
        old = _state(state_dir)
        os.killpg(old["fastapi"]["pid"], signal.SIGKILL)
        again = cli(*args)
        new = _state(state_dir)
        others = [n for n in old if n != "fastapi"]
        kept = {n: new.get(n, {}).get("pid") == old[n]["pid"] for n in others}
        said = [ln.strip() for ln in again.stdout.splitlines() if "kept" in ln]
        all_healthy = bool(new) and all(healthy(r["health"]) for r in new.values())
        ok = (
            again.returncode == 0
            and all(kept.values())
            and len(said) == len(others)
            and new["fastapi"]["pid"] != old["fastapi"]["pid"]
            and new["fastapi"]["port"] == old["fastapi"]["port"]
            and set(new) == set(old)
            and all_healthy
        )
        return ok, (
            f"second `{' '.join(args)}`: exit {again.returncode}, said {said}; the others kept "
            f"(same process): {'yes' if all(kept.values()) else kept}; FastAPI on its port again: "
            f"{'yes' if new['fastapi']['port'] == old['fastapi']['port'] else 'NO'}; services "
            f"{sorted(new)} all healthy: {'yes' if all_healthy else 'NO'}"
        )

    def down_twice():
        pids = {n: (r["pid"], r["marker"]) for n, r in _state(state_dir).items()}
        one, two = cli("down"), cli("down")
        deadline = time.time() + 10
        while time.time() < deadline and any(running(p, m) for p, m in pids.values()):
            time.sleep(0.2)
        left = [n for n, (p, m) in pids.items() if running(p, m)]
        ok = (
            one.returncode == 0
            and two.returncode == 0
            and bool(pids)
            and not left
            and "nothing was running" in two.stdout
            and not (state_dir / "state.json").exists()
        )
        return ok, (
            f"first: exit {one.returncode} {one.stdout.strip()!r}; second: exit {two.returncode} "
            f"{two.stdout.strip()!r}; processes left: {left or 'none'}"
        )

    try:
        return [
            scenario(
                f"launcher `{' '.join(args)}` after a crash (FastAPI SIGKILLed)",
                "up starts again only what died, on its port; the other services keep running",
                crash_then_up,
            ),
            scenario(
                "launcher `down` twice (what `make down` runs)",
                "everything stopped; the second down is harmless ('nothing was running', exit 0)",
                down_twice,
            ),
        ]
    finally:
        cli("down")  # whatever happened above, nothing is left running


def stale_pid(tmp: Path) -> dict:
    """State that records a dead pid and a pid now used by an unrelated program: `down` must stop
    neither."""

    def run():
        state_dir = tmp / "stale"
        bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
        try:
            state_dir.mkdir(parents=True, exist_ok=True)
            (state_dir / "state.json").write_text(
                json.dumps(
                    {
                        "services": {
                            "fastapi": {
                                "pid": bystander.pid,
                                "marker": "fastapi_onnx.app:app",
                                "port": 1,
                            },
                            "flask": {"pid": 2**22 + 7, "marker": "flask_app.app:app", "port": 2},
                        }
                    }
                )
            )
            out = _launcher(state_dir, tmp / "unused")("down")
            alive = bystander.poll() is None
            ok = out.returncode == 0 and alive and not (state_dir / "state.json").exists()
            return ok, (
                f"exit {out.returncode} {out.stdout.strip()!r}; the unrelated process with a "
                f"recorded pid still runs: {'yes' if alive else 'NO'}; stale state removed: "
                f"{'yes' if not (state_dir / 'state.json').exists() else 'NO'}"
            )
        finally:
            bystander.kill()
            bystander.wait()

    return scenario(
        "launcher `down` with stale state (one pid dead, one reused by another program)",
        "only processes whose command line still matches are stopped",
        run,
    )


# ---------------------------------------------------------------- the launcher under stress


def lab_processes(state_dir: Path) -> list[int]:
    """Every running process the launcher started for `state_dir` (they all inherit
    LAB_STATE_DIR in their environment), whatever state.json says."""
    marker = f"LAB_STATE_DIR={state_dir}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker in environ.read_bytes().split(b"\0") and not launcher.is_zombie(
                int(environ.parent.name)
            ):
                found.append(int(environ.parent.name))
        except (OSError, ValueError):
            continue
    return [p for p in found if p != os.getpid()]


def _wait_gone(state_dir: Path, timeout: float = 15.0) -> list[int]:
    deadline = time.time() + timeout
    left = lab_processes(state_dir)
    while left and time.time() < deadline:
        time.sleep(0.2)
        left = lab_processes(state_dir)
    return left


def _secrets(state_dir: Path) -> dict:
    try:
        text = (state_dir / "secrets.env").read_text()
    except OSError:
        return {}
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def _leaks(state_dir: Path, *outputs: str) -> list[str]:
    """Which secret values appear in the given command outputs (stdout + stderr)."""
    return [k for k, v in _secrets(state_dir).items() if v and any(v in o for o in outputs)]


def concurrent_restarts(tmp: Path, rounds: int = 2) -> dict:
    """Two `restart`s at once (FastAPI and Flask, what two terminals or a notebook and a terminal
    do), `rounds` times, then `down`: nothing the launcher started may be left running."""

    def run():
        state_dir = tmp / "concurrent"
        cli = _launcher(state_dir, tmp / "unused")
        try:
            first = cli("up", "--no-triton")
            if first.returncode != 0:
                return False, f"`up --no-triton` failed: {first.stderr[-300:]}"
            codes = []
            for _ in range(rounds):
                env = {**os.environ, "LAB_STATE_DIR": str(state_dir)}
                both = [
                    subprocess.Popen(
                        [sys.executable, "-m", "labstack.launcher", "restart", name],
                        cwd=REPO_ROOT,
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                    for name in ("fastapi", "flask")
                ]
                codes += [p.wait(timeout=600) for p in both]
            before = len(lab_processes(state_dir))
            down = cli("down")
            left = _wait_gone(state_dir)
        finally:
            for pid in lab_processes(state_dir):  # whatever happened above, nothing stays
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        ok = all(c == 0 for c in codes) and down.returncode == 0 and not left
        return ok, (
            f"{rounds} x two restarts at once: exit codes {codes}; {before} processes running; "
            f"`down`: {down.stdout.strip()!r}; left running after it: "
            + (f"{len(left)} (pids {left})" if left else "none")
        )

    return scenario(
        "launcher: `restart fastapi` and `restart flask` at the same time, then `down`",
        "the state file records every process it started; `down` leaves nothing running",
        run,
    )


def crash_keeps_ports_and_survivors(tmp: Path) -> dict:
    """`up --no-triton --jupyter`; clients keep connections open to FastAPI; FastAPI is SIGKILLed;
    `up` again: FastAPI comes back on its port, Flask and JupyterLab (the student's kernels) keep
    running untouched; no secret in what `up` and `status` print; logs readable by their owner
    only."""

    def run():
        state_dir = tmp / "survivors"
        cli = _launcher(state_dir, tmp / "unused")
        try:
            first = cli("up", "--no-triton", "--jupyter")
            if first.returncode != 0:
                return False, f"first `up` failed: {first.stderr[-300:]}"
            old = _state(state_dir)
            url = launcher.service_url(old["fastapi"]["port"])
            sessions = [requests.Session() for _ in range(4)]
            for s in sessions:  # keep-alive connections: the crash leaves them in TIME_WAIT
                s.get(f"{url}/health", timeout=10)
            os.killpg(old["fastapi"]["pid"], signal.SIGKILL)
            again = cli("up", "--no-triton", "--jupyter")
            status = cli("status")
            new = _state(state_dir)
            same_port = new.get("fastapi", {}).get("port") == old["fastapi"]["port"]
            kept = {n: new.get(n, {}).get("pid") == old[n]["pid"] for n in ("flask", "jupyter")}
            healthy_all = bool(new) and all(healthy(r["health"]) for r in new.values())
            leaks = _leaks(state_dir, first.stdout + first.stderr, again.stdout + again.stderr)
            leaks += _leaks(state_dir, status.stdout + status.stderr)
            logs = sorted((state_dir / "logs").glob("*.log"))
            open_logs = [p.name for p in logs if p.stat().st_mode & 0o077]
            for s in sessions:
                s.close()
        finally:
            cli("down")
            for pid in lab_processes(state_dir):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        ok = (
            again.returncode == 0
            and same_port
            and all(kept.values())
            and healthy_all
            and not leaks
            and logs
            and not open_logs
        )
        return ok, (
            f"second `up`: exit {again.returncode}; FastAPI on port {old['fastapi']['port']} -> "
            f"{new.get('fastapi', {}).get('port')}; untouched (same process): {kept}; all healthy: "
            f"{'yes' if healthy_all else 'NO'}; secrets printed by up/status: {leaks or 'none'}; "
            f"logs readable by others: {open_logs or 'none'} (of {len(logs)})"
        )

    return scenario(
        "launcher `up` after a crash (FastAPI SIGKILLed with clients connected)",
        "FastAPI back on its port; Flask and JupyterLab untouched; no secret printed; logs 0600",
        run,
    )


# ---------------------------------------------------------------- Triton's processes killed

SERVING_AGAIN_GOAL_S = 30.0  # the goal, from `kill -9` of a stub to the model serving


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _stubs(state_dir: Path) -> dict[int, str]:
    """Running Python-backend stubs of the lab's Triton: pid -> model (from the command line).

    A stub caught between fork and exec has no model path yet: it is left out, not an error.
    """
    found = {pid: stub_model(pid) for pid in lab_processes(state_dir)}
    return {pid: model for pid, model in found.items() if model}


def _serves(url: str, model: str, b64: str) -> bool:
    if model == "food_classifier":
        inputs = [{"name": "INPUT_IMAGE", "shape": [1, 1], "datatype": "BYTES", "data": [b64]}]
    else:
        shape = [1, 3, 224, 224]
        inputs = [{"name": "input", "shape": shape, "datatype": "FP32", "data": [0.0] * 150528}]
    try:
        resp = requests.post(f"{url}/v2/models/{model}/infer", json={"inputs": inputs}, timeout=60)
        return resp.status_code == 200
    except requests.RequestException:
        return False


def _until_serving(cli, url: str, model: str, b64: str, limit_s: float) -> tuple[float, list]:
    """Seconds until `model` answers again (None past limit_s) and what `status` said meanwhile."""
    said, start = [], time.monotonic()
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            out = cli("status", timeout=60).stdout
            said.append([ln.strip() for ln in out.splitlines() if model in ln])

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        while time.monotonic() - start < limit_s:
            if _serves(url, model, b64):
                return time.monotonic() - start, said
            time.sleep(0.25)
        return None, said
    finally:
        stop.set()
        watcher.join(timeout=90)


def _outage_reported(said: list, model: str) -> str:
    """The first line of `status` that reported the outage ('' if none did): a line about the
    model that does not say it is ready (reloading, a stub missing or stopped, NOT READY)."""
    return next(
        (
            ln
            for lines in said
            for ln in lines
            if ln.startswith(f"{model}:") and not ln.startswith(f"{model}: ready")
        ),
        "",
    )


def triton_killed(tmp: Path, b64: str, limit_s: float = 120.0) -> list[dict]:
    """The lab's Triton (launcher `up`) with its processes killed as a crash would: each model's
    stub (kill -9), then tritonserver itself, then every Triton process at once (the supervisor
    too) followed by `up`. Measured: time from the kill to the model serving again, what `status`
    said meanwhile, ports, the /dev/shm regions of the killed stubs, secrets in files."""
    state_dir, repo = tmp / "triton-killed", tmp / "model_repository"
    cli = _launcher(state_dir, repo)
    rows = []
    try:
        first = cli("up")
        if first.returncode != 0:
            return [scenario("Triton killed", "", lambda: (False, first.stderr[-300:]))]
        url = launcher.service_url(_state(state_dir)["triton"]["port"])

        for model in ("food_classifier_onnx", "food_classifier"):

            def stub_killed(model=model):
                victims = [p for p, m in _stubs(state_dir).items() if m == model]
                if not victims or not _serves(url, model, b64):
                    return False, f"no stub of {model} found, or not serving before the kill"
                os.kill(victims[0], signal.SIGKILL)
                took, said = _until_serving(cli, url, model, b64, limit_s)
                reported = _outage_reported(said, model)
                ok = took is not None and bool(reported)
                return ok, (
                    "serving again after "
                    + (f"{took:.1f} s" if took is not None else f"more than {limit_s:.0f} s: NO")
                    + f" (goal {SERVING_AGAIN_GOAL_S:.0f} s); `make status` during the outage: "
                    + (
                        f"reported it ({reported!r})"
                        if reported
                        else f"did NOT report it ({said[:1]})"
                    )
                )

            rows.append(
                scenario(
                    f"Triton: the stub of {model} killed (kill -9: an OOM kill, a crash in torch)",
                    f"`make status` reports the outage; the model serves again (goal: within "
                    f"{SERVING_AGAIN_GOAL_S:.0f} s)",
                    stub_killed,
                )
            )

        def server_killed():
            server = [p for p in lab_processes(state_dir) if _comm(p) == "tritonserver"]
            if not server:
                return False, "no tritonserver running"
            os.kill(server[0], signal.SIGKILL)
            took, said = _until_serving(cli, url, "food_classifier_onnx", b64, limit_s)
            return took is not None, (
                "tritonserver SIGKILLed: serving again on the same port after "
                + (f"{took:.1f} s" if took is not None else f"more than {limit_s:.0f} s: NO")
            )

        rows.append(
            scenario(
                "Triton: tritonserver itself killed (kill -9: a segfault)",
                "started again on the same ports, without `make restart`",
                server_killed,
            )
        )

        def everything_killed():
            regions = sorted(
                {
                    ln.split()[-1]
                    for pid in _stubs(state_dir)
                    for ln in Path(f"/proc/{pid}/maps").read_text().splitlines()
                    if " /dev/shm/" in ln
                }
            )
            private = all(Path(r).stat().st_mode & 0o077 == 0 for r in regions)
            old = _state(state_dir)["triton"]
            for pid in lab_processes(state_dir):
                if _comm(pid) in ("tritonserver", "triton_python_b") or pid == old["pid"]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            time.sleep(1.0)
            left_behind = [r for r in regions if Path(r).exists()]
            again = cli("up")
            new = _state(state_dir).get("triton", {})
            still = [r for r in regions if Path(r).exists()]
            ports = all(new.get(k) == old[k] for k in ("port", "grpc_port", "metrics_port"))
            key = _secrets(state_dir).get("TRITON_ADMIN_KEY", "")
            files = [state_dir / "state.json", *sorted((state_dir / "logs").glob("*.log"))]
            with_key = [p.name for p in files if key and key in p.read_text(errors="replace")]
            ok = (
                again.returncode == 0
                and regions
                and private
                and not still
                and ports
                and not with_key
                and _serves(url, "food_classifier_onnx", b64)
            )
            return ok, (
                f"{len(regions)} stub regions, readable only by their owner: "
                f"{'yes' if private else 'NO'}; left in /dev/shm by the crash: {len(left_behind)}, "
                f"after `up`: {len(still)}; same ports: {'yes' if ports else 'NO'}; files holding "
                f"Triton's key: {with_key or 'none'}"
            )

        rows.append(
            scenario(
                "Triton: every Triton process killed at once, then `make up`",
                "the crashed stubs' /dev/shm regions removed (and private while they lived); same "
                "ports; Triton's key in no file but secrets.env",
                everything_killed,
            )
        )
        return rows
    finally:
        cli("down")
        for pid in lab_processes(state_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
