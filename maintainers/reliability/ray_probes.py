"""What an attacker on the machine tries against the lab's Ray cluster, and what a job, a task and
an actor see of its environment (tests/test_ray_security.py, and the report's stack section).

Each probe is a real client: the dashboard's job API over HTTP, a driver (`ray.init(address=...)`)
in a process of its own, the Ray Client server over gRPC.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time

import requests

from servelab.paths import REPO_ROOT

NO_RAY_AUTH = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
# a job that uses the cluster itself (its driver joins it, as notebook 9's does) and prints its
# environment
ENV_JOB = (
    "import json, os, ray; ray.init(); "
    "assert ray.get(ray.remote(lambda: 42).remote()) == 42; "
    "print('ENV=' + json.dumps(dict(os.environ)))"
)
DRIVER = """
import json, os, sys, ray
from servelab.serving.ray_loopback import keep_loopback
keep_loopback()
try:
    ray.init(address=sys.argv[1], log_to_driver=False, logging_level="ERROR")
except Exception as exc:
    print("REFUSED", type(exc).__name__, exc)
    sys.exit(3)

@ray.remote
def task_env():
    return dict(os.environ)

@ray.remote
class Reader:
    def env(self):
        return dict(os.environ)

print("ENVS=" + json.dumps([ray.get(task_env.remote()), ray.get(Reader.remote().env.remote())]))
"""


def post_job(dashboard: str, entrypoint: str, token: str | None = None) -> requests.Response:
    """POST a job to the dashboard's job API, with the token (Bearer) or without."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.post(
        f"{dashboard}/api/jobs/", json={"entrypoint": entrypoint}, headers=headers, timeout=30
    )


def job_env(dashboard: str, token: str, timeout: float = 240) -> tuple[str, dict]:
    """Run a job (with the token) that runs a task and prints its os.environ: (its final
    status, that env)."""
    posted = post_job(dashboard, f'{sys.executable} -c "{ENV_JOB}"', token)
    posted.raise_for_status()
    job, auth = posted.json()["submission_id"], {"Authorization": f"Bearer {token}"}
    deadline, status = time.time() + timeout, ""
    while time.time() < deadline and status not in ("SUCCEEDED", "FAILED", "STOPPED"):
        time.sleep(2)
        status = requests.get(f"{dashboard}/api/jobs/{job}", headers=auth, timeout=10).json()[
            "status"
        ]
    logs = requests.get(f"{dashboard}/api/jobs/{job}/logs", headers=auth, timeout=10).json()
    line = next((ln for ln in logs["logs"].splitlines() if ln.startswith("ENV=")), "ENV={}")
    return status, json.loads(line[4:])


def start_driver(address: str, env: dict, auth: dict | None = None) -> subprocess.Popen:
    """A driver process joining the cluster at `address` with `env` (RAY_AUTH_* taken out) plus
    `auth` (RAY_AUTH_MODE and RAY_AUTH_TOKEN_PATH, or nothing); it runs a task and an actor that
    return their os.environ (exit 0), or prints REFUSED (exit 3)."""
    env = {k: v for k, v in env.items() if k not in NO_RAY_AUTH}
    env.update(auth or {}, PYTHONPATH=str(REPO_ROOT))
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, address],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def driver_result(proc: subprocess.Popen, timeout: float = 300) -> tuple[int, str, list[dict]]:
    """(exit status, output, [the task's env, the actor's env]) of a start_driver process."""
    out, _ = proc.communicate(timeout=timeout)
    envs = next((ln[5:] for ln in out.splitlines() if ln.startswith("ENVS=")), "[]")
    return proc.returncode, out, json.loads(envs)


def client_ping(port: int, token: str | None = None):
    """One ClusterInfo ping to the Ray Client server: the grpc status code's name ('OK', or why
    not)."""
    import grpc
    from ray.core.generated import ray_client_pb2, ray_client_pb2_grpc

    stub = ray_client_pb2_grpc.RayletDriverStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    ping = ray_client_pb2.ClusterInfoRequest(type=ray_client_pb2.ClusterInfoType.PING)
    metadata = [("authorization", f"Bearer {token}")] if token else []
    try:
        stub.ClusterInfo(ping, timeout=30, metadata=metadata)
        return "OK"
    except grpc.RpcError as exc:
        return exc.code().name


def leaked(env: dict, secrets: dict) -> list[str]:
    """Names of env's variables that are a secret's name or hold a secret's value."""
    values = [v for v in secrets.values() if v]
    return sorted(k for k, v in env.items() if k in secrets or any(s in v for s in values))


def kernel_env(secrets: dict) -> dict:
    """This process's environment plus `secrets`: what a notebook kernel's holds."""
    return {**os.environ, **secrets}


def file_attempts(folder: str) -> dict:
    """What another local user tries on a cluster's files (issue 52's R2), each a function of no
    argument: list the cluster's private folder and Ray's, reach the raylet's socket, move it
    aside, read a log and plant a symlink where Serve's proxy log goes."""
    import glob
    import socket

    ray = os.path.join(folder, "ray")
    # as the lab's user: the paths are found here, the attempts run as the other user
    session = (glob.glob(os.path.join(ray, "session_2*")) or [os.path.join(ray, "session_x")])[0]
    raylet = os.path.join(session, "sockets", "raylet")
    log = next(iter(sorted(glob.glob(os.path.join(session, "logs", "raylet*.out")))), raylet)

    def connect():
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(raylet)

    return {
        "list the cluster's folder": lambda: os.listdir(folder),
        "list Ray's temporary folder": lambda: os.listdir(ray),
        "look up the raylet's socket": lambda: os.stat(raylet),
        "connect to the raylet's socket": connect,
        "move the raylet's socket aside": lambda: os.rename(raylet, raylet + ".moved"),
        "read a node's log": lambda: open(log, "rb").close(),  # noqa: SIM115
        "plant a symlink at Serve's proxy log": lambda: os.symlink(
            "/tmp/chosen", os.path.join(session, "logs", "serve", "proxy_127.0.0.1.log")
        ),
        "create a file in the session's logs": lambda: open(  # noqa: SIM115
            os.path.join(session, "logs", "planted.log"), "x"
        ).close(),
    }


def unix_sockets(pids: list[int]) -> list[str]:
    """The paths of the Unix sockets these processes hold (their listening sockets among them),
    from /proc/net/unix."""
    inodes = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.scandir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(fd.path)
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
    with open("/proc/net/unix") as table:
        rows = [line.split() for line in table.read().splitlines()[1:]]
    return sorted({r[7] for r in rows if len(r) > 7 and r[6] in inodes and r[7].startswith("/")})
