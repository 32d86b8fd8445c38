"""Notebook 9's Ray cluster (`make up RAY=1`, or the notebook's first cell) closed to anyone
without its token, on 127.0.0.1 only, and without the lab's secrets in what it runs.

The cluster is started as notebook 9 starts it: `python -m labstack.launcher ray` from a kernel
whose environment holds the Jupyter token, Triton's admin key, a Jupyter URL with the token in it
and a cloud credential (Chameleon's). Then, as an attacker on the machine would try it: a job
posted to the dashboard's job API, a driver (`ray.init(address=...)`) and a Ray Client
connection, each without the token (refused) and with it (they run: the refusal is the token's,
not a broken cluster); every socket the cluster's processes listen on, from the kernel's tables;
and what a task, an actor and a job see in os.environ; and what another local user reaches of
the cluster's files (Ray opens its own folders to everyone: they sit in a 0700 folder). About 2
minutes on the 2-core machine, most of it Ray starting.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest
import requests
from launcher_cli import run_launcher

from labstack import ray_cluster
from maintainers.reliability import other_user, ray_probes
from maintainers.reliability.procs import is_loopback, listening_sockets

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# what a notebook kernel's environment holds (the values are this test's own)
KERNEL_SECRETS = {
    "JUPYTER_TOKEN": secrets.token_hex(16),
    "TRITON_ADMIN_KEY": secrets.token_hex(16),
    "OS_APPLICATION_CREDENTIAL_SECRET": secrets.token_hex(16),
}
KERNEL_SECRETS["JUPYTER_URL"] = f"http://127.0.0.1:1/lab?token={KERNEL_SECRETS['JUPYTER_TOKEN']}"


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
    assert ray_probes.post_job(dashboard, "id").status_code == 401
    assert ray_probes.post_job(dashboard, "id", secrets.token_hex(32)).status_code == 403
    for path in ("/api/jobs/", "/api/v0/nodes", "/api/serve/applications/"):
        assert requests.get(f"{dashboard}{path}", timeout=10).status_code == 401, path
    # with the token a job runs: it sees none of the kernel's secrets
    status, env = ray_probes.job_env(dashboard, token)
    assert status == "SUCCEEDED", env
    _assert_no_secret(env, "a job")


def test_a_driver_without_the_token_is_refused_and_what_runs_sees_no_secret(cluster):
    kernel = {**ray_probes.kernel_env(KERNEL_SECRETS), "HOME": str(cluster["home"])}
    address, urls = cluster["urls"]["RAY_ADDRESS"], cluster["urls"]
    auth = {k: urls[k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH")}
    refused = ray_probes.start_driver(address, kernel)
    allowed = ray_probes.start_driver(address, kernel, auth)
    code, out, _ = ray_probes.driver_result(refused)
    assert code == 3 and "REFUSED" in out, out[-2000:]
    assert "Authentication token is missing or incorrect" in out, out[-2000:]
    code, out, envs = ray_probes.driver_result(allowed)
    assert code == 0 and len(envs) == 2, out[-2000:]
    for what, env in zip(("a task", "an actor"), envs, strict=True):
        _assert_no_secret(env, what)


def test_a_ray_client_connection_without_the_token_is_refused(cluster):
    port = cluster["records"]["ray_head"]["client_port"]
    assert ray_probes.client_ping(port) == "UNAUTHENTICATED"
    assert ray_probes.client_ping(port, "00") == "UNAUTHENTICATED"
    assert ray_probes.client_ping(port, cluster["token"]) == "OK"  # the same ping, with it


def test_ray_files_are_the_lab_users_alone(cluster):
    """Both nodes keep their sessions, sockets and logs in Ray's folder inside the cluster's own,
    0700: Ray makes its folders 0777 without the sticky bit, so this folder is the door; every
    Unix socket of the cluster is behind it, and another local user (a throwaway account) can
    neither list it, reach the raylet's socket, move it aside, read a log nor plant a file or a
    symlink in the logs (issue 52, R2)."""
    folder = Path(cluster["records"]["ray_head"]["temp_dir"])
    info = folder.lstat()
    assert folder.is_dir() and not folder.is_symlink()
    assert info.st_uid == os.getuid() and oct(info.st_mode & 0o777) == "0o700"
    pids = [p for r in cluster["records"].values() for p in ray_cluster.session_members(r["pid"])]
    for sid in (r["pid"] for r in cluster["records"].values()):  # each `ray start` uses it
        argv = Path(f"/proc/{sid}/cmdline").read_bytes().split(b"\0")
        assert f"--temp-dir={folder / 'ray'}".encode() in argv, argv
    sockets = ray_probes.unix_sockets(pids)
    assert any(s.endswith("/sockets/raylet") for s in sockets), sockets
    outside = [s for s in sockets if not _private(Path(s))]
    assert outside == [], f"Ray sockets another user may reach: {outside}"
    with other_user.another_user() as user:
        if isinstance(user, str):
            pytest.skip(f"the modes are checked; acting as another user is not: {user}")
        answers = other_user.attempts_as(*user, ray_probes.file_attempts(str(folder)))
    assert answers and set(answers.values()) == {"EACCES"}, answers


def _private(path: Path) -> bool:
    """Is some folder above `path` this user's alone (0700, or closer)?"""
    for parent in path.parents:
        info = parent.lstat()
        if info.st_uid == os.getuid() and not info.st_mode & 0o077:
            return True
    return False


def _assert_no_secret(env: dict, what: str) -> None:
    """None of the kernel's secrets, by name or by value, in what Ray ran."""
    leaked = ray_probes.leaked(env, KERNEL_SECRETS)
    assert not leaked, f"{what} sees {leaked}"
    assert "RAY_AUTH_TOKEN" not in env  # Ray's token is read from its file, never passed around
    assert env.get("LAB_STATE_DIR") or env.get("PATH"), (
        f"{what}: an empty environment proves nothing"
    )
