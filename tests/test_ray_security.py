"""Notebook 9's Ray cluster (`make up RAY=1`, or the notebook's first cell) closed to anyone
without its token, on 127.0.0.1 only, and without the lab's secrets in what it runs.

The cluster is started as notebook 9 starts it: `python -m labstack.launcher ray` from a kernel
whose environment holds the Jupyter token, Triton's admin key, a Jupyter URL with the token in it
and a cloud credential (Chameleon's). Then, as an attacker on the machine would try it: a job
posted to the dashboard's job API, a driver (`ray.init(address=...)`) and a Ray Client
connection, each without the token (refused) and with it (they run: the refusal is the token's,
not a broken cluster); every socket the cluster's processes listen on, from the kernel's tables;
and what a task, an actor and a job see in os.environ. About 2 minutes on the 2-core machine,
most of it Ray starting.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from launcher_cli import run_launcher

from labstack import ray_cluster
from reliability.procs import is_loopback, listening_sockets
from servelab.paths import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# what a notebook kernel's environment holds (the values are this test's own)
KERNEL_SECRETS = {
    "JUPYTER_TOKEN": secrets.token_hex(16),
    "TRITON_ADMIN_KEY": secrets.token_hex(16),
    "OS_APPLICATION_CREDENTIAL_SECRET": secrets.token_hex(16),
}
KERNEL_SECRETS["JUPYTER_URL"] = f"http://127.0.0.1:1/lab?token={KERNEL_SECRETS['JUPYTER_TOKEN']}"
NO_RAY_AUTH = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    state = tmp_path_factory.mktemp("lab")
    home = tmp_path_factory.mktemp("home")  # no ~/.ray/auth_token of the machine's user
    env = {**KERNEL_SECRETS, "HOME": str(home)}
    started = run_launcher(state, "ray", extra_env=env)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        urls = dict(line.split("=", 1) for line in (state / "urls.env").read_text().splitlines())
        records = json.loads((state / "state.json").read_text())["services"]
        token = (state / "ray_token").read_text().strip()
        yield {
            "state": state,
            "home": home,
            "urls": urls,
            "records": records,
            "token": token,
            "output": started.stdout + started.stderr,
        }
    finally:
        run_launcher(state, "down", extra_env=env)


def test_the_token_is_made_once_kept_private_and_handed_over_by_its_path(cluster):
    state, token = cluster["state"], cluster["token"]
    assert len(token) == 64 and int(token, 16) >= 0  # 256 random bits, as Ray's own generator
    assert oct((state / "ray_token").stat().st_mode & 0o777) == "0o600"
    urls = cluster["urls"]
    assert urls["RAY_AUTH_MODE"] == "token"
    assert urls["RAY_AUTH_TOKEN_PATH"] == str((state / "ray_token").resolve())
    # never printed, recorded or on a command line
    assert token not in cluster["output"]
    for name in ("state.json", "urls.env", "ports.json"):
        assert token not in (state / name).read_text(), name
    pids = [p for r in cluster["records"].values() for p in ray_cluster.session_members(r["pid"])]
    assert len(pids) >= 6, pids  # two `ray start`, the GCS, two raylets, agents ...
    for pid in pids:
        try:
            assert token.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes(), pid
        except FileNotFoundError:
            pass  # ended meanwhile


def test_every_ray_socket_listens_on_loopback_only(cluster):
    records = cluster["records"]
    pids = [p for r in records.values() for p in ray_cluster.session_members(r["pid"])]
    sockets = listening_sockets(pids)
    ports = {port for _, _, port in sockets}
    head = records["ray_head"]
    # the inspection sees the cluster's servers: the GCS, the dashboard, the Ray Client server
    assert {head["gcs_port"], head["port"], head["client_port"]} <= ports, sockets
    assert len(sockets) >= 8, sockets
    wide = [s for s in sockets if not is_loopback(s[1])]
    assert wide == [], f"Ray sockets beyond loopback: {wide}"


def test_the_dashboard_refuses_jobs_and_state_without_the_token(cluster):
    dashboard, token = cluster["urls"]["RAY_DASHBOARD_URL"], cluster["token"]
    job = {"entrypoint": "id"}
    assert requests.post(f"{dashboard}/api/jobs/", json=job, timeout=10).status_code == 401
    wrong = {"Authorization": f"Bearer {secrets.token_hex(32)}"}
    assert (
        requests.post(f"{dashboard}/api/jobs/", json=job, headers=wrong, timeout=10).status_code
        == 403
    )
    for path in ("/api/jobs/", "/api/v0/nodes", "/api/serve/applications/"):
        assert requests.get(f"{dashboard}{path}", timeout=10).status_code == 401, path
    # with the token a job runs: it sees none of the kernel's secrets
    auth = {"Authorization": f"Bearer {token}"}
    code = "import json, os; print('ENV=' + json.dumps(dict(os.environ)))"
    posted = requests.post(
        f"{dashboard}/api/jobs/",
        json={"entrypoint": f'python -c "{code}"'},
        headers=auth,
        timeout=30,
    )
    assert posted.status_code == 200, posted.text
    job_id = posted.json()["submission_id"]
    deadline, status = time.time() + 240, ""
    while time.time() < deadline and status not in ("SUCCEEDED", "FAILED", "STOPPED"):
        time.sleep(2)
        status = requests.get(f"{dashboard}/api/jobs/{job_id}", headers=auth, timeout=10).json()[
            "status"
        ]
    logs = requests.get(f"{dashboard}/api/jobs/{job_id}/logs", headers=auth, timeout=10).json()
    assert status == "SUCCEEDED", logs
    line = next(ln for ln in logs["logs"].splitlines() if ln.startswith("ENV="))
    _assert_no_secret(json.loads(line[4:]), "a job")


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


def _driver(cluster, with_token: bool) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in NO_RAY_AUTH}
    env.update(KERNEL_SECRETS, HOME=str(cluster["home"]), PYTHONPATH=str(REPO_ROOT))
    if with_token:
        env.update({k: cluster["urls"][k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH")})
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, cluster["urls"]["RAY_ADDRESS"]],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_a_driver_without_the_token_is_refused_and_what_runs_sees_no_secret(cluster):
    refused, allowed = _driver(cluster, with_token=False), _driver(cluster, with_token=True)
    out_refused, _ = refused.communicate(timeout=300)
    out_allowed, _ = allowed.communicate(timeout=300)
    assert refused.returncode == 3 and "REFUSED" in out_refused, out_refused[-2000:]
    assert "Authentication token is missing or incorrect" in out_refused, out_refused[-2000:]
    assert allowed.returncode == 0, out_allowed[-2000:]
    envs = json.loads(next(ln for ln in out_allowed.splitlines() if ln.startswith("ENVS="))[5:])
    for what, env in zip(("a task", "an actor"), envs, strict=True):
        _assert_no_secret(env, what)


def test_a_ray_client_connection_without_the_token_is_refused(cluster):
    import grpc
    from ray.core.generated import ray_client_pb2, ray_client_pb2_grpc

    port = cluster["records"]["ray_head"]["client_port"]
    stub = ray_client_pb2_grpc.RayletDriverStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    ping = ray_client_pb2.ClusterInfoRequest(type=ray_client_pb2.ClusterInfoType.PING)
    with pytest.raises(grpc.RpcError) as refused:
        stub.ClusterInfo(ping, timeout=30)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, refused.value
    with pytest.raises(grpc.RpcError) as wrong:
        stub.ClusterInfo(ping, timeout=30, metadata=[("authorization", "Bearer 00")])
    assert wrong.value.code() == grpc.StatusCode.UNAUTHENTICATED, wrong.value
    answer = stub.ClusterInfo(
        ping, timeout=30, metadata=[("authorization", f"Bearer {cluster['token']}")]
    )
    assert answer.json == "{}"  # the server answers the same ping with the token


def _assert_no_secret(env: dict, what: str) -> None:
    """None of the kernel's secrets, by name or by value, in what Ray ran."""
    values = set(KERNEL_SECRETS.values())
    leaked = {k for k, v in env.items() if k in KERNEL_SECRETS or any(s in v for s in values)}
    assert not leaked, f"{what} sees {sorted(leaked)}"
    assert "RAY_AUTH_TOKEN" not in env  # Ray's token is read from its file, never passed around
    assert env.get("LAB_STATE_DIR") or env.get("PATH"), (
        f"{what}: an empty environment proves nothing"
    )
