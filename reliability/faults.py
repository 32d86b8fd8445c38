"""Faults of the FastAPI/Flask half and of the launcher: FastAPI killed behind Flask, a FastAPI
server killed mid-benchmark, `up` after a crash, `down` twice, stale state with a reused pid.
Each scenario returns one row: what was expected, what happened (measured), passed or not."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import requests

from labstack import launcher
from reliability.procs import healthy, running, start_fastapi, start_flask
from servelab.paths import REPO_ROOT


def scenario(name: str, expected: str, fn) -> dict:
    """Run fn() -> (passed, what happened); an exception inside is a failed scenario, reported as
    such."""
    start = time.perf_counter()
    try:
        passed, observed = fn()
    except Exception as exc:
        passed, observed = (
            False,
            f"the scenario itself failed: {type(exc).__name__}: {str(exc)[:300]}",
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
    b64: str, n: int = 400, concurrency: int = 4, kill_after_s: float = 1.5
) -> dict:
    """servelab.loadgen.run (notebook 4's load generator, default timeouts) against uvicorn; SIGKILL
    the server after kill_after_s: the run must end, every failed request counted as an error."""

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
        left = {n: r["pid"] for n, r in old.items() if n != "fastapi"}
        gone = {n: not running(p, old[n]["marker"]) for n, p in left.items()}
        said = [ln.strip() for ln in again.stdout.splitlines() if "leftover" in ln]
        all_healthy = bool(new) and all(healthy(r["health"]) for r in new.values())
        ok = (
            again.returncode == 0
            and all(gone.values())
            and len(said) == len(left)
            and set(new) == set(old)
            and all_healthy
        )
        return ok, (
            f"second `{' '.join(args)}`: exit {again.returncode}, said {said}; old processes gone: "
            f"{'yes' if all(gone.values()) else gone}; services {sorted(new)} all healthy: "
            f"{'yes' if all_healthy else 'NO'}"
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
                "up stops every leftover process, forgets the old state, starts all afresh",
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
