"""Local mode's Ray cluster (notebook 9): a head node and a second node, each a `ray start`
process with a fixed share of the machine, started and stopped by the launcher.

    python -m labstack.launcher up --jupyter --ray   # make up RAY=1: the stack and the cluster
    python -m labstack.launcher ray                  # the cluster alone, the rest kept (notebook 9)
    python -m labstack.launcher down                 # stops it with everything else

Each node is `ray start --block` in its own process session: the head with Ray's GCS, dashboard
and Serve's controller and proxy once notebook 9 starts Serve; the second node joins it with
`--address`, as a second Chameleon node would. Each node has `RAY_NODE_CPUS` logical CPUs and,
on a machine with two cores or more, its processes are pinned to one core of their own once it
is up (pin(): every thread of the node's processes; the workers Ray starts later inherit it), so
"two nodes" means two shares of the machine, not one pool. (Pinned from its start, with
`taskset`, the head's raylet missed `ray start`'s fixed 30 s to register on a busy machine.)
Every port is chosen free (two clusters can share a machine: a test and yours), and Ray keeps its
state in a temporary folder of its own, removed at `down`: `ray` inside a 0700 folder
(temp_dir()), which both nodes use. Ray opens its own folders to everyone (0777, no sticky bit),
so the closed folder around them is what keeps the sockets and logs the lab's user's alone; the
`ray start` wrapper refuses a temporary folder without it and starts Ray with umask 077.

Closed to everyone without the token (docs/security.md lists every port):
- Ray's token authentication is on (RAY_AUTH_MODE=token, RAY_AUTH_TOKEN_PATH: the launcher's
  .lab/ray_token, made once, 0600): the GCS, the raylets, the dashboard's job and state APIs and
  the Ray Client server refuse a caller without it. Notebook 9's client gets the two variables
  (the path, never the token) from .lab/urls.env (urls());
- every Ray server listens on 127.0.0.1 only: both nodes have the node address 127.0.0.1, which
  `ray start` keeps through servelab.serving.ray_loopback (Ray would otherwise replace it with
  the machine's address and listen on every interface);
- Ray runs whatever code a job or a driver sends, in processes that inherit the nodes'
  environment: the nodes start from the launcher's environment without the lab's secrets
  (lab_secrets.without_secrets), so no job, task or actor sees the Jupyter token or Triton's key.

Stopping is exact: `ray stop` would stop every Ray process of the machine, so `down` sends SIGTERM
to the two `ray start` processes, then SIGKILL to whatever of their sessions is left (the workers
and replicas Ray started for them), by process id; the Ray processes of a session whose `ray
start` is gone already (a Ctrl-C at the wrong moment) are found by their session too.

Ray Serve's autoscaler hears from the proxy and the replicas every 10 s by default; the nodes
start with Ray's own settings for it at 0.5 s (RAY_SERVE_*_AUTOSCALING_METRIC_PUSH_INTERVAL_S),
so a load step of a few seconds is seen while it lasts; and Ray's workers at the niceness of the
rest of the lab (RAY_ENV says why).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import requests

from labstack.lab_files import RAY_TOKEN
from labstack.lab_secrets import ray_auth_env, without_secrets
from labstack.ports import port_for, service_url
from labstack.processes import Service, is_running

RAY_NODE_CPUS = 1  # logical CPUs of each node (Ray's --num-cpus), replicas take 0.5 each
OBJECT_STORE_BYTES = 200_000_000  # per node: requests of 600 kB pass through it
RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    # Ray starts its workers (the replicas, Serve's proxy) at nice 15 so its own daemons stay
    # responsive; on a machine shared with the rest of the lab they would then get the cores last
    "RAY_worker_niceness": "0",
    "RAY_SERVE_HANDLE_AUTOSCALING_METRIC_PUSH_INTERVAL_S": "0.5",
    "RAY_SERVE_REPLICA_AUTOSCALING_METRIC_PUSH_INTERVAL_S": "0.5",
}
# On the head only: Ray's switch for a cluster of one machine, under which its Python processes
# take 127.0.0.1 as the node's address. The head's `ray start` keeps it anyway (ray_loopback);
# this also covers what Ray starts there itself (a job's driver, the Ray Client's servers). The
# second node cannot have it: `ray start --address` refuses to join a cluster with it.
HEAD_ONLY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
NODE_JOIN_S = 180.0
# `ray start` gives its raylet 30 s to register (a constant in ray/_private/node.py), which a
# machine busy with the rest of the lab can miss: the launcher then starts the node once more
STARTUP_TIMED_OUT = "timed out during startup"


def _ray_start() -> list[str]:
    """`ray start`, with the node address kept on loopback (servelab.serving.ray_loopback)."""
    return [sys.executable, "-m", "servelab.serving.ray_loopback", "start"]


def pin(record: dict) -> None:
    """Pin every thread of a node's processes to its core (record["core"]), where the machine has
    a core for each node; the processes Ray starts for it later inherit the pinning. Twice: a
    process started while the first pass ran is caught by the second."""
    cores = os.cpu_count() or 1
    if cores < 2 or "core" not in record:
        return
    for _ in range(2):
        for pid in session_members(record["pid"]):
            with contextlib.suppress(OSError):
                for task in Path(f"/proc/{pid}/task").iterdir():
                    with contextlib.suppress(OSError, ValueError):
                        os.sched_setaffinity(int(task.name), {record["core"] % cores})


def temp_dir() -> str:
    """A short folder of the cluster's own (its sockets' paths must stay under 108 characters),
    0700: Ray's temporary folder is `ray` inside it (ray_temp_dir()), which Ray makes 0777 but
    nobody else can reach through this one."""
    return tempfile.mkdtemp(prefix="lab_ray_", dir="/tmp")  # 0700, a name nobody can guess


def ray_temp_dir(folder: str) -> str:
    """Ray's `--temp-dir` inside the cluster's private folder."""
    return str(Path(folder) / "ray")


def _node_ports(name: str) -> list[str]:
    return [
        f"--dashboard-agent-listen-port={port_for(f'{name}_agent')}",
        f"--metrics-export-port={port_for(f'{name}_metrics')}",
        f"--runtime-env-agent-port={port_for(f'{name}_runtime_env')}",
    ]


def node_env() -> dict:
    """What each node starts with: the launcher's environment without the lab's secrets, Ray's
    token settings and the lab's Ray settings."""
    return {**without_secrets(dict(os.environ)), **ray_auth_env(), **RAY_ENV}


def head_service(folder: str, cpus: int = RAY_NODE_CPUS, gpus: int | None = None) -> Service:
    """The head node as a launcher Service: RAY_NODE_CPUS logical CPUs (local mode's node); a
    one-node cluster sized for its machine takes `cpus` and `gpus`
    (maintainers/reference/three_way.py; None: the GPUs Ray finds)."""
    gcs, dashboard, client = port_for("ray_gcs"), port_for("ray_dashboard"), port_for("ray_client")
    agent = port_for("ray_head_agent")  # the same port _node_ports asks for (ports.json)
    argv = [
        *_ray_start(),
        "--head",
        "--block",
        f"--num-cpus={cpus}",
        *([f"--num-gpus={gpus}"] if gpus is not None else []),
        "--node-ip-address=127.0.0.1",
        f"--port={gcs}",
        f"--ray-client-server-port={client}",
        "--dashboard-host=127.0.0.1",
        f"--dashboard-port={dashboard}",
        f"--temp-dir={ray_temp_dir(folder)}",
        f"--object-store-memory={OBJECT_STORE_BYTES}",
        "--disable-usage-stats",
        *_node_ports("ray_head"),
    ]
    return Service(
        "ray_head",
        argv,
        # the node's own agent, on a route Ray leaves open without the token: is its raylet up
        # (the node, not only the GCS)?
        health=f"{service_url(agent)}/api/local_raylet_healthz",
        marker=f"--port={gcs}",
        env=HEAD_ONLY_ENV,
        base_env=node_env(),
        timeout=180,
        ports={
            "port": dashboard,
            "gcs_port": gcs,
            "serve_port": port_for("ray_serve"),
            "client_port": client,
        },
        extra={"temp_dir": folder, "core": 0},
    )


def node_service(head: dict) -> Service:
    """The second node, joining the head at its GCS address (`ray start --address`), in the
    head's private folder."""
    agent = port_for("ray_node_agent")  # the same port _node_ports asks for (ports.json)
    argv = [
        *_ray_start(),
        "--block",
        f"--num-cpus={RAY_NODE_CPUS}",
        f"--address=127.0.0.1:{head['gcs_port']}",
        "--node-ip-address=127.0.0.1",
        f"--temp-dir={ray_temp_dir(head['temp_dir'])}",
        f"--object-store-memory={OBJECT_STORE_BYTES}",
        "--disable-usage-stats",
        *_node_ports("ray_node"),
    ]
    return Service(
        "ray_node",
        argv,
        health=f"{service_url(agent)}/api/local_raylet_healthz",  # then wait_for_nodes()
        marker=f"--dashboard-agent-listen-port={agent}",
        base_env=node_env(),
        timeout=60,
        ports={"port": agent},
        extra={"core": 1},
    )


def auth_headers(token_file: Path | str | None = None) -> dict:
    """The dashboard's Authorization header, from the token's file (default: this launcher's)."""
    try:
        return {"Authorization": f"Bearer {Path(token_file or RAY_TOKEN).read_text().strip()}"}
    except OSError:
        return {}


def alive_nodes(dashboard: str, token_file: Path | str | None = None) -> int:
    """How many nodes the head's state API lists as ALIVE (0 when it does not answer); the token
    read from `token_file` (a cluster of another state folder: its RAY_AUTH_TOKEN_PATH)."""
    try:
        resp = requests.get(
            f"{dashboard}/api/v0/nodes",
            params={"limit": 100},
            headers=auth_headers(token_file),
            timeout=10,
        )
        nodes = resp.json()["data"]["result"]["result"]
    except (requests.RequestException, ValueError, KeyError, TypeError):
        return 0
    return sum(node.get("state") == "ALIVE" for node in nodes)


def wait_for_nodes(
    dashboard: str, count: int = 2, timeout: float = NODE_JOIN_S, node: dict | None = None
) -> None:
    """Wait until the head lists `count` nodes alive; give up early if `node` (the record of the
    one joining) has ended."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if alive_nodes(dashboard) >= count:
            return
        if node is not None and not is_running(node["pid"], node["marker"]):
            raise RuntimeError(f"the Ray node (pid {node['pid']}) ended before it joined")
        time.sleep(1)
    raise RuntimeError(f"the Ray cluster at {dashboard} has not got {count} nodes alive")


def session_members(sid: int, zombies: bool = False) -> list[int]:
    """The process ids of a session: a `ray start` and every process Ray started for it (with
    zombies: also those that have exited and wait to be reaped, `<defunct>` in ps)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid and (zombies or fields[0] != "Z"):
                members.append(int(stat.parent.name))
    return members


def _ray_process(pid: int) -> bool:
    """Is pid one of Ray's processes (a raylet, the GCS, a worker, an agent), by its command?"""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"/ray/" in argv or argv.startswith(b"ray::")


def stop_node(record: dict) -> bool:
    """Stop a recorded node: its `ray start` and its session, or, when its `ray start` is gone
    already, the Ray processes left in its session. True if anything was running."""
    sid = record["pid"]
    leader = is_running(sid, record["marker"])
    left = [] if leader else [p for p in session_members(sid) if _ray_process(p)]
    if leader or left:
        stop_sessions([sid])
    remove_temp_dir(record.get("temp_dir"))
    return leader or bool(left)


def stop_sessions(sids: list[int], grace: float = 5.0) -> None:
    """SIGTERM to each `ray start` (its node drains), SIGKILL after `grace` to what is left of
    their sessions, then wait until none of their processes runs."""
    for sid in sids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(sid, signal.SIGTERM)
    deadline = time.time() + grace
    while time.time() < deadline and any(session_members(s) for s in sids):
        time.sleep(0.2)
    for _ in range(50):
        left = [pid for s in sids for pid in session_members(s)]
        if not left:
            break
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
    for _ in range(50):  # and until their parents have reaped them: ps shows none after `down`
        if not any(session_members(s, zombies=True) for s in sids):
            return
        time.sleep(0.2)


def remove_temp_dir(folder: str | None) -> None:
    if folder and Path(folder).name.startswith("lab_ray_"):
        shutil.rmtree(folder, ignore_errors=True)


def urls(head: dict) -> dict:
    """What notebook 9 reads from .lab/urls.env (servelab.labenv): the cluster's address, its
    dashboard, the port Serve's HTTP proxy takes, and how to use the cluster's token (its mode
    and the path of its file: Ray reads the token there, and nothing else carries it)."""
    return {
        "RAY_ADDRESS": f"127.0.0.1:{head['gcs_port']}",
        "RAY_DASHBOARD_URL": service_url(head["port"]),
        "RAY_SERVE_URL": service_url(head["serve_port"]),
        **ray_auth_env(),
    }
