"""docker/build_images.sh without Docker: the script runs for real, with a stub `docker` (and, for
a GPU host, a stub `nvidia-smi`) first on PATH that records each command with the
FASTAPI_BACKEND it saw, and can hold a build until the test lets it go or make one part fail.
What the builds produce is tests/docker/test_build_script_images.py's (make test-docker).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "docker" / "build_images.sh"

DOCKER_STUB = r"""#!/bin/bash
[ "$1" = info ] && { [ -n "${STUB_DOCKER_DOWN-}" ] && exit 1
  [ "$2" = --format ] && echo "${STUB_RUNTIMES-"{\"runc\":{}}"}"; exit 0; }
echo "$PPID" > "$STUB_PARENT.new" && mv "$STUB_PARENT.new" "$STUB_PARENT"
echo "FASTAPI_BACKEND=${FASTAPI_BACKEND-} docker $*" >> "$STUB_CALLS"
case "$*" in *triton*) part=triton ;; *) part=fastapi ;; esac
[ "${FASTAPI_BACKEND-}" = onnx ] && part=onnx
if [ -n "${STUB_GATE-}" ]; then while [ ! -e "$STUB_GATE" ]; do sleep 0.05; done; fi
echo "#7 [$part] RUN pip install ... done"
[ "$part" != "${STUB_FAIL-}" ] || { echo "ERROR: failed to solve: $part: no space" >&2; exit 1; }
"""
# two GPUs, the second listed a moment later: a reader that stops at the first line (grep -q)
# makes the second write fail, as on a busy node
NVIDIA_SMI_STUB = """#!/bin/bash
echo "GPU 0: Tesla P100-PCIE-16GB (UUID: GPU-0)"; sleep 0.2
echo "GPU 1: Tesla P100-PCIE-16GB (UUID: GPU-1)"
"""
NVIDIA_RUNTIME = '{"nvidia":{"path":"nvidia-container-runtime"},"runc":{}}'


class Host:
    """A host for the script: its state folder, the stub's record and knobs."""

    def __init__(self, base: Path, gpu: bool = False):
        self.base, self.bin, self.state = base, base / "bin", base / "state"
        self.bin.mkdir()
        stubs = {"docker": DOCKER_STUB, **({"nvidia-smi": NVIDIA_SMI_STUB} if gpu else {})}
        for name, body in stubs.items():
            (self.bin / name).write_text(body)
            (self.bin / name).chmod(0o755)
        self.calls, self.gate = base / "calls.log", base / "gate"
        self.env = {
            **os.environ,
            "PATH": f"{self.bin}:{os.environ['PATH']}",
            "BUILD_IMAGES_DIR": str(self.state),
            "BUILD_IMAGES_POLL": "0.1",
            "BUILD_IMAGES_LOCK_WAIT": "0.5",  # a second start gives up on a build's lock
            "STUB_CALLS": str(self.calls),
            "STUB_PARENT": str(base / "parent"),
            **({"STUB_RUNTIMES": NVIDIA_RUNTIME} if gpu else {}),
        }
        self.env.pop("FASTAPI_BACKEND", None)

    def run(self, *args: str, timeout: float = 30, **knobs: str) -> subprocess.CompletedProcess:
        return subprocess.run(  # as notebook 2 runs it: from the clone, by its relative path
            ["bash", "docker/build_images.sh", *args],
            cwd=REPO,
            env={**self.env, **knobs},
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,  # as an SSH command: a session of its own
        )

    def builds(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []

    def log(self) -> str:
        return (self.state / "build_images.log").read_text()


@pytest.fixture(autouse=True)
def _needs_tools():
    missing = [t for t in ("flock", "setsid", "nohup") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (util-linux, coreutils)")


def wait_until(check, seconds: float = 20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("not within the time")


def test_shellcheck_clean():
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (scripts/install_system_packages.sh installs it)")
    out = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout


def test_every_part_in_the_order_the_notebooks_need_with_the_stacks_own_files(tmp_path):
    """A GPU host: each stack's own file, no override; the ONNX image is the FastAPI service
    built with FASTAPI_BACKEND=onnx, as notebook 4 switches it."""
    host = Host(tmp_path, gpu=True)
    built = host.run()
    assert built.returncode == 0, built.stdout + built.stderr
    assert host.builds() == [
        "FASTAPI_BACKEND= docker compose -f docker-compose-fastapi.yaml build",
        "FASTAPI_BACKEND=onnx docker compose -f docker-compose-fastapi.yaml build fastapi_server",
        "FASTAPI_BACKEND= docker compose -f docker-compose-triton.yaml build",
    ]
    assert "==> triton: built in" in built.stdout and "==> triton: built in" in host.log()
    waited = host.run("wait")
    assert waited.returncode == 0 and waited.stdout.count("Built: ") == 3, waited.stdout
    again = host.run()  # idempotent: the same builds again (Docker's cache makes them quick)
    assert again.returncode == 0 and host.builds()[3:] == host.builds()[:3]


@pytest.mark.parametrize("runtimes", [None, '{"runc":{}}'], ids=["no GPU", "no nvidia runtime"])
def test_a_host_whose_containers_see_no_gpu_gets_the_cpu_overrides(tmp_path, runtimes):
    host = Host(tmp_path, gpu=runtimes is not None)
    built = host.run(**({"STUB_RUNTIMES": runtimes} if runtimes else {}))
    assert built.returncode == 0, built.stdout + built.stderr
    assert host.builds() == [
        "FASTAPI_BACKEND= docker compose -f docker-compose-fastapi.yaml "
        "-f docker-compose-cpu.yaml build",
        "FASTAPI_BACKEND=onnx docker compose -f docker-compose-fastapi.yaml "
        "-f docker-compose-cpu.yaml build fastapi_server",
        "FASTAPI_BACKEND= docker compose -f docker-compose-triton.yaml "
        "-f docker-compose-triton-cpu.yaml build",
    ]
    assert "CPU override file" in host.run("wait").stdout


def test_start_returns_at_once_outlives_its_session_and_runs_once(tmp_path):
    host = Host(tmp_path, gpu=True)
    started = host.run("start", timeout=20, STUB_GATE=str(host.gate))  # held at the first build
    assert started.returncode == 0, started.stdout + started.stderr
    assert "in the background" in started.stdout and str(host.state) in started.stdout
    wait_until(lambda: len(host.builds()) == 1)
    # the build leads a session of its own (setsid): the end of the SSH session that started
    # it (a hang-up to that session's processes) does not reach it
    build = int((tmp_path / "parent").read_text())
    assert os.getsid(build) == build != os.getsid(0)
    twice = host.run("start", STUB_GATE=str(host.gate))
    assert twice.returncode == 0 and "already being built" in twice.stdout
    assert len(host.builds()) == 1  # the second start started nothing
    waiting = subprocess.Popen(
        ["bash", str(SCRIPT), "wait", "onnx"], env=host.env, stdout=subprocess.PIPE, text=True
    )
    time.sleep(0.5)
    assert waiting.poll() is None  # the ONNX image is not built yet
    host.gate.touch()
    out, _ = waiting.communicate(timeout=20)
    assert waiting.returncode == 0, out
    assert "waiting for the background build of the FastAPI service's ONNX Runtime image" in out
    assert "Built: the FastAPI service's ONNX Runtime image" in out
    assert host.run("wait").returncode == 0 and len(host.builds()) == 3


def test_a_failed_part_is_reported_with_its_log_and_the_others_still_build(tmp_path):
    host = Host(tmp_path, gpu=True)
    assert host.run("start", STUB_FAIL="triton").returncode == 0
    fastapi = host.run("wait", "fastapi")
    assert fastapi.returncode == 0 and "Built: the FastAPI stack's images" in fastapi.stdout
    failed = host.run("wait", "triton")
    assert failed.returncode == 1, failed.stdout
    out = failed.stdout
    assert "FAILED: the background build of the Triton stack's images" in out
    assert f"Its log: {host.state}/build_images.log" in out
    assert "ERROR: failed to solve: triton: no space" in out  # the log's last lines
    assert "up --build` as the notebook says: it builds what is missing" in out
    assert host.run("wait").returncode == 1  # every part: one failed
    assert len(host.builds()) == 3


def test_a_build_that_stopped_halfway_is_reported_not_waited_for_forever(tmp_path):
    host = Host(tmp_path, gpu=True)
    assert host.run("start", STUB_GATE=str(host.gate)).returncode == 0
    wait_until(lambda: (tmp_path / "parent").exists())
    os.killpg(int((tmp_path / "parent").read_text()), signal.SIGKILL)  # the node restarted
    stopped = host.run("wait", "fastapi")
    assert stopped.returncode == 1, stopped.stdout
    assert "stopped before it built the FastAPI stack's images" in stopped.stdout
    assert "builds what is missing" in stopped.stdout


def test_a_wait_where_no_build_was_started_returns_at_once(tmp_path):
    """Self-paced hosts and `make test-docker` never start one: `up --build` builds."""
    waited = Host(tmp_path).run("wait", "triton", timeout=10)
    assert waited.returncode == 0 and "No build of the lab's images was started" in waited.stdout


def test_docker_that_does_not_answer_stops_the_start_with_what_to_do(tmp_path):
    host = Host(tmp_path)
    refused = host.run("start", STUB_DOCKER_DOWN="1")
    assert refused.returncode == 1 and "run docker/setup_host.sh first" in refused.stderr
    assert host.builds() == []
    assert host.run("wait", "bogus").returncode == 2
