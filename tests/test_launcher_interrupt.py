"""`make up` and `make down` interrupted by a Ctrl-C (SIGINT to the whole process group, as a
terminal sends it) at several points: every process the launcher started is either recorded
(state.json, and `status` lists it) or stopped; what was kept stays running, with the same pid.

The points: `make up` itself while its first service starts; `up` while JupyterLab starts after
two services started; `up --ray` after a crash, while the Ray head starts (FastAPI kept, Flask
started again); `down` after its first service stopped. "Every process the launcher started" is
every process whose environment names this test's state folder (LAB_STATE_DIR), which every
service and everything it starts inherits; each must belong to the process group or session of a
recorded service. About a minute on the 2-core machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launcher_cli import run_launcher

from labstack.processes import is_running
from servelab.paths import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _interrupt(argv: list[str], state: Path, at: str, delay: float = 0.5) -> tuple[int, str]:
    """Run argv in a process group of its own; `delay` s after a line starting with `at`,
    SIGINT the whole group (what Ctrl-C in a terminal does). Returns (exit status, output)."""
    env = {**os.environ, "LAB_STATE_DIR": str(state), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        argv,
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        # a terminal's foreground job takes Ctrl-C; a job started with `&` by a non-interactive
        # shell (a CI runner's, say) inherits SIGINT ignored, and so would make and the launcher
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith(at):
            time.sleep(delay)
            os.killpg(proc.pid, signal.SIGINT)
            break
    rest, _ = proc.communicate(timeout=300)
    output = "".join(seen) + rest
    assert any(line.startswith(at) for line in seen), f"never reached {at!r}:\n{output}"
    return proc.returncode, output


def _recorded(state: Path) -> dict:
    try:
        return json.loads((state / "state.json").read_text())["services"]
    except FileNotFoundError:
        return {}


def _ours(state: Path) -> list[int]:
    """Every live process whose environment names this state folder."""
    mark = f"LAB_STATE_DIR={state}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if mark not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
        except OSError:
            continue
        found.append(int(entry.name))
    return found


def _group_and_session(pid: int) -> tuple[int, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[2]), int(fields[3])


def _assert_recorded_or_stopped(state: Path) -> dict:
    """Each process of ours belongs to a recorded service, and `status` lists every recorded
    one. Returns the records."""
    deadline = time.time() + 20  # what was stopped may take a moment to be reaped
    while True:
        records = _recorded(state)
        leaders = {r["pid"] for r in records.values()}
        strays = []
        for pid in _ours(state):
            try:
                if not leaders & set(_group_and_session(pid)):
                    strays.append((pid, Path(f"/proc/{pid}/cmdline").read_bytes()[:200]))
            except OSError:
                continue
        if not strays or time.time() > deadline:
            break
        time.sleep(0.5)
    assert not strays, f"running with no record: {strays} (records: {sorted(records)})"
    status = run_launcher(state, "status")
    for name in records:
        assert f"  {name} " in status.stdout, status.stdout
    if not records:
        assert "not running" in status.stdout, status.stdout
    return records


def test_a_ctrl_c_leaves_every_process_recorded_or_stopped(tmp_path, built_artifacts):
    state = tmp_path / "lab"
    launcher = [sys.executable, "-m", "labstack.launcher"]
    try:
        # `make up` itself, while its first service starts: nothing else ran, nothing is left
        code, out = _interrupt(["make", "--no-print-directory", "up"], state, "starting fastapi")
        assert code != 0 and "interrupted" in out, out
        assert _assert_recorded_or_stopped(state) == {}, out

        # while JupyterLab starts, after FastAPI and Flask have: those two stay, recorded
        code, out = _interrupt(
            [*launcher, "up", "--no-triton", "--jupyter"], state, "starting jupyterlab"
        )
        assert code == 130 and "interrupted while it started: stopped jupyter" in out, out
        records = _assert_recorded_or_stopped(state)
        assert sorted(records) == ["fastapi", "flask"], out
        assert all(is_running(r["pid"], r["marker"]) for r in records.values())

        # Flask crashed; `up --ray` keeps FastAPI, starts Flask again, is interrupted as the Ray
        # head starts: FastAPI (the same process) and the new Flask stay, the head is stopped
        os.killpg(records["flask"]["pid"], signal.SIGKILL)
        code, out = _interrupt(
            [*launcher, "up", "--no-triton", "--jupyter", "--ray"], state, "starting ray_head", 3
        )
        assert code == 130 and "fastapi: running and healthy" in out, out
        assert "interrupted while it started: stopped ray_head" in out, out
        again = _assert_recorded_or_stopped(state)
        assert sorted(again) == ["fastapi", "flask"], out
        assert again["fastapi"]["pid"] == records["fastapi"]["pid"], "the kept service was stopped"
        assert again["flask"]["pid"] != records["flask"]["pid"]
        assert all(is_running(r["pid"], r["marker"]) for r in again.values())

        # `down`, interrupted once its first service stopped: that one is forgotten, the other
        # stays recorded (running, or stopped if the Ctrl-C came as it stopped it)
        code, out = _interrupt([*launcher, "down"], state, "stopped flask", 0)
        assert code == 130, out
        assert set(_assert_recorded_or_stopped(state)) <= {"fastapi"}, out
    finally:
        done = run_launcher(state, "down")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _assert_recorded_or_stopped(state) == {} and _ours(state) == []
