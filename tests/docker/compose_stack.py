"""Helpers of the Docker tests: the lab's compose stacks driven as a student drives them.

The tests run only when LAB_DOCKER_TESTS=1 (`make test-docker` sets it after installing and
starting a Docker engine, and making the base images available: pulled, or local stand-ins
where no registry answers, see docker/standins/README.md). `make test` does not collect them.

What a student does, the tests do, with the same files and commands: docker/init_env.sh, then
`docker compose -f <the stack's file> [-f <its CPU override>] up -d --build --wait` from docker/.
The only differences are settings a student could also put in docker/.env: every port is
published on 127.0.0.1 (PUBLISH_ADDRESS) at a free port, and where download.pytorch.org cannot be
resolved, PyTorch comes from PyPI (the pair local mode pins). Both are printed at the start.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import requests

from labstack import editions, notebook_runner
from servelab.paths import REPO_ROOT

DOCKER_DIR = REPO_ROOT / "docker"
RESULTS_SUBDIR = "docker-test"  # results/docker-test/ on the host
RESULTS_IN_JUPYTER = f"/home/jovyan/work/results/{RESULTS_SUBDIR}"
HOST_RESULTS = REPO_ROOT / "results" / RESULTS_SUBDIR
HOST_PROMPT = "Run this on the host"  # services.ask_host's first words
KEEP_IMAGES = os.environ.get("LAB_DOCKER_KEEP_IMAGES") == "1"


def say(message: str) -> None:
    print(f"[docker test] {message}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_has_gpu_runtime() -> bool:
    """A GPU containers can use: nvidia-smi lists one and Docker has the nvidia runtime."""
    smi = shutil.which("nvidia-smi")
    if not smi or subprocess.run([smi, "-L"], capture_output=True).returncode != 0:
        return False
    runtimes = subprocess.run(
        ["docker", "info", "--format", "{{json .Runtimes}}"], capture_output=True, text=True
    )
    return "nvidia" in runtimes.stdout


def resolves(host: str) -> bool:
    try:
        socket.getaddrinfo(host, 443)
        return True
    except OSError:
        return False


def pinned(package: str) -> str:
    text = (REPO_ROOT / "requirements" / "constraints.txt").read_text()
    return re.search(rf"^{re.escape(package)}==(\S+)", text, flags=re.M).group(1)


def read_env_file(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


class Settings:
    """What differs from a classroom node, as environment variables (they override docker/.env)."""

    def __init__(self):
        self.gpu = host_has_gpu_runtime()
        self.env: dict[str, str] = {"PUBLISH_ADDRESS": "127.0.0.1"}
        for name in (
            "FLASK_PORT",
            "JUPYTER_PORT",
            "FASTAPI_PORT",
            "TRITON_HTTP_PORT",
            "TRITON_GRPC_PORT",
            "TRITON_METRICS_PORT",
        ):
            self.env[name] = str(free_port())
        if not self.gpu and not resolves("download.pytorch.org"):
            self.env.update(
                CPU_TORCH_INDEX_URL="https://pypi.org/simple",
                TORCH_VERSION=pinned("torch"),
                TORCHVISION_VERSION=pinned("torchvision"),
            )
        # a setting given to `make test-docker` wins (e.g. TORCH_VERSION for a newer GPU)
        self.env.update({k: os.environ[k] for k in self.env if k in os.environ})
        self.process_env = {**os.environ, **self.env}

    def files(self, stack: str) -> list[str]:
        base = f"docker-compose-{stack}.yaml"
        override = {
            "fastapi": "docker-compose-cpu.yaml",
            "triton": "docker-compose-triton-cpu.yaml",
        }[stack]
        return [base] if self.gpu else [base, override]

    def url(self, port_setting: str, path: str = "") -> str:
        return f"http://127.0.0.1:{self.env[port_setting]}{path}"


class Stack:
    """One of the lab's compose stacks, driven with `docker compose -f ...` from docker/."""

    def __init__(self, name: str, settings: Settings):
        self.name, self.settings = name, settings
        self.files = settings.files(name)

    @property
    def file_options(self) -> str:
        return " ".join(f"-f {f}" for f in self.files)

    def argv(self, *args: str) -> list[str]:
        return ["docker", "compose", *[x for f in self.files for x in ("-f", f)], *args]

    def compose(
        self, *args: str, timeout: float = 1800, check: bool = True
    ) -> subprocess.CompletedProcess:
        result = subprocess.run(
            self.argv(*args),
            cwd=DOCKER_DIR,
            env=self.settings.process_env,
            text=True,
            capture_output=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"docker compose {' '.join(args)} failed ({result.returncode}):\n"
                f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
            )
        return result

    def up(self) -> float:
        start = time.time()
        self.compose("up", "-d", "--build", "--wait", timeout=3600)
        return time.time() - start

    def down(self) -> None:
        self.compose("down", "-v", "--remove-orphans", check=False, timeout=300)

    def exec(
        self,
        service: str,
        *cmd: str,
        user: str | None = None,
        timeout: float = 600,
        check: bool = True,
    ) -> subprocess.CompletedProcess:
        args = ["exec", "-T", *(["-u", user] if user else []), service, *cmd]
        return self.compose(*args, timeout=timeout, check=check)

    def container(self, service: str) -> dict:
        out = subprocess.run(
            ["docker", "inspect", self.compose("ps", "-q", service).stdout.strip()],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return json.loads(out)[0]

    def logs(self, service: str) -> str:
        return self.compose("logs", "--no-color", service, check=False).stdout

    def run_notebook(
        self, name: str, params: dict, timeout: float = 1800, predictions: bool = False
    ) -> tuple[int, list[str], str]:
        """Execute the solved edition of notebook <name> inside the Jupyter container, as the
        Jupyter user, in the container's notebooks/ folder (where the student edition is).

        Whenever the notebook prints a host step ("Run this on the host ...: <command>"), the
        command is run here exactly as printed, from docker/, while the notebook waits for it.
        Returns (exit code, host commands run, the run's log).
        """
        if predictions:  # the prediction cells answered as a student would (labstack.lab)
            from labstack.lab import SCRIPTED_PREDICTIONS

            params = {**params, "PREDICTIONS": json.dumps(SCRIPTED_PREDICTIONS)}
        argv = self.argv(
            "exec",
            "-T",
            "-u",
            "jovyan",
            "-e",
            f"LAB_RESULTS_DIR={RESULTS_IN_JUPYTER}",
            *[x for k, v in params.items() for x in ("-e", f"LAB_{k}={v}")],
            "jupyter",
            "python",
            "-",
            "-",
            f"results/{RESULTS_SUBDIR}/notebooks/{name}.ipynb",
            "--echo",
            "--cwd",
            "notebooks",
        )
        # the runner is the lab's machinery and the solved edition is the instructors', neither
        # part of the students' container: the runner's source, with the solved notebook inside,
        # goes in on stdin (`python - -`), so nothing beyond servelab/ has to be mounted there
        program = notebook_runner.embedded_program(editions.solved_notebook(name))
        proc = subprocess.Popen(
            argv,
            cwd=DOCKER_DIR,
            env=self.settings.process_env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        proc.stdin.write(program)
        proc.stdin.close()
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        log, commands, prompt_seen = [], [], False
        try:
            for line in proc.stdout:
                log.append(line)
                if prompt_seen:
                    command = line.strip()
                    commands.append(command)
                    say(f"host step printed by {name}: {command}")
                    done = subprocess.run(
                        ["bash", "-c", command],
                        cwd=DOCKER_DIR,
                        env=self.settings.process_env,
                        text=True,
                        capture_output=True,
                        timeout=1800,
                    )
                    log.append(f"[host step exit {done.returncode}]\n{done.stderr[-2000:]}\n")
                    if done.returncode != 0:
                        proc.kill()
                        break
                prompt_seen = line.startswith(HOST_PROMPT)
            code = proc.wait()
        finally:
            timer.cancel()
        text = "".join(log)
        HOST_RESULTS.mkdir(parents=True, exist_ok=True)
        (HOST_RESULTS / f"{name}.log").write_text(text)
        return code, commands, text


def wait_for(check, timeout: float, what: str, interval: float = 2.0):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            value = check()
            if value:
                return value
        except requests.RequestException as exc:
            last = exc
        time.sleep(interval)
    raise AssertionError(f"{what}: not within {timeout:.0f} s (last error: {last})")


def build_script(*args: str, settings: Settings, state: Path, **env: str):
    """docker/build_images.sh ARGS with the tests' settings (those of their `up --build`), its
    log, status and lock in `state` (outside the clone: `make test`, running beside CI's image
    build, cleans .lab/)."""
    return subprocess.run(
        ["bash", str(DOCKER_DIR / "build_images.sh"), *args],
        env={**settings.process_env, "BUILD_IMAGES_DIR": str(state), **env},
        text=True,
        capture_output=True,
        timeout=3600,
    )


def build_images() -> None:
    """Build every image of the stacks with the class's own script (docker/build_images.sh, as
    notebook 2 starts it on a node) and the tests' settings, so that CI can build them while
    `make test` runs; the tests' `up --build` then finds them in the build cache."""
    init = subprocess.run(["bash", str(DOCKER_DIR / "init_env.sh")], capture_output=True, text=True)
    if init.returncode != 0:
        raise SystemExit(f"docker/init_env.sh failed: {init.stderr}")
    start = time.time()
    with tempfile.TemporaryDirectory() as state:
        built = build_script(settings=Settings(), state=Path(state))
    print(built.stdout[-6000:], built.stderr[-3000:], sep="\n", flush=True)
    if built.returncode != 0:
        raise SystemExit("docker/build_images.sh failed: its output is above")
    say(f"every stack's images built in {time.time() - start:.0f} s")


if __name__ == "__main__":
    build_images()
