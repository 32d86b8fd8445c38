"""Local mode: the lab's services as native processes (no Docker, no GPU needed).

    python -m labstack.launcher up [--jupyter] [--no-triton] [--ray]  # start, check, write urls.env
    python -m labstack.launcher ray             # a local Ray cluster beside the rest (notebook 9)
    python -m labstack.launcher status
    python -m labstack.launcher restart fastapi --set FASTAPI_BACKEND=onnx
    python -m labstack.launcher restart triton     # one service back after a crash (make restart)
    python -m labstack.launcher down                            # stop exactly what `up` started

Every service gets a port on 127.0.0.1 (LAB_BIND_HOST to change), runs in its own process
session with its log in .lab/logs/<name>.log, and is recorded in .lab/state.json; `down` stops
only processes recorded there whose command line still matches. One command at a time changes
the stack: up, restart and down hold a lock (.lab/launcher.lock), so two at once run one after
the other and the state file records every process started.

Restarts keep what a student relies on: `up` after a crash starts only what is not running and
healthy (JupyterLab and its kernels survive a FastAPI crash); each service comes back on the port
it had (.lab/ports.json; a port just freed by a killed process is waited for, and one taken by
another program is replaced, with Flask restarted on the new URLs and notebooks reading them with
labenv.load()); the Jupyter token and Triton's admin key stay the same (.lab/secrets.env); `up`
keeps edited config.pbtxt files in the model repository.

With --ray (or `launcher ray`, which keeps what runs), a Ray head and a second Ray node run as
two more services, one core each, closed to anyone without the cluster's token and on 127.0.0.1
only (labstack/ray_cluster.py); `up` keeps a running cluster and `down` stops it with the rest.

A Ctrl-C at any moment of `up`, `restart`, `ray` or `down` leaves every process either recorded
(state.json, shown by `status`) or stopped: a service is recorded as soon as its process exists;
one interrupted while it starts is stopped (it was not ready), and what was kept or had started
stays running and recorded; `down` forgets each service only once it has stopped.

Triton runs under servelab.serving.triton_watchdog: a model whose Python-backend stub dies is
loaded again, a crashed tritonserver is started again on its ports, and `status` shows each
model's health from it (.lab/triton_health.json). Its stubs' /dev/shm regions are private and
removed after a crash.

Secrets: files holding one (secrets.env, urls.env, ray_token) and every log are readable by
their owner only; nothing the launcher prints, records in state.json or writes to a log carries a
token or the key (they are named, not shown). JupyterLab reads its token from its environment,
the Triton watchdog the admin key; tritonserver takes the key only on its command line, where the
watchdog masks it once the server has read it (docs/security.md).

The parts: labstack.lab_files (.lab/ and the lock), labstack.ports, labstack.lab_secrets,
labstack.records (state.json, urls.env), labstack.processes (start, stop), labstack.stack_services
(what each service runs), labstack.stack_status (`status`); this module is the commands.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import time
from pathlib import Path

from labstack import ray_cluster
from labstack.lab_files import (  # noqa: F401 - the launcher's public names
    LAB_DIR,
    LOCK,
    LOGS,
    PORTS,
    RAY_TOKEN,
    SECRETS,
    STATE,
    TRITON_HEALTH,
    URLS_ENV,
    locked,
)
from labstack.lab_secrets import SECRET_KEYS, lab_secrets, ray_token  # noqa: F401
from labstack.ports import BIND, free_port, port_for, service_url, wait_port_free  # noqa: F401
from labstack.processes import (  # noqa: F401
    RESTART_KEYS,
    Service,
    is_running,
    is_zombie,
    left_by_watchdog,
    log_tail,
    start,
    stop_process,
    uninterrupted,
    wait_group_gone,
)
from labstack.records import client_urls, forget, read_state, write_state  # noqa: F401
from labstack.stack_services import (  # noqa: F401
    RAY_SERVICES,
    fastapi_service,
    flask_service,
    jupyter_service,
    service_for,
    triton_service,
)
from labstack.stack_status import healthy, print_status, red  # noqa: F401
from servelab.paths import model_repository_dir
from servelab.serving.runtimes import fastapi_backend

INTERRUPTED = 130  # the exit status of a command ended by Ctrl-C (128 + SIGINT)
RAY_ATTEMPTS = 3  # a Ray node that misses `ray start`'s 30 s to register is started again


# ---------------------------------------------------------------- recording as it happens


def _save(state: dict) -> None:
    """Record the state as it is now (nothing runs: no state.json, no urls.env)."""
    with uninterrupted():
        if state["services"]:
            write_state(state)
        else:
            forget(state)


def _stop(state: dict, name: str, say: str = "") -> bool:
    """Stop a recorded service, then forget it (not before: a Ctrl-C meanwhile leaves it
    recorded). True if it was running."""
    stopped = _stop_service(name, state["services"][name], say)
    state["services"].pop(name, None)
    _save(state)
    return stopped


def _launch(state: dict, name: str, service: Service) -> dict:
    """Start `name` and record it the moment its process exists, then wait until it is ready."""

    def record(rec: dict) -> None:
        state["services"][name] = rec
        _save(state)

    return start(service, on_launch=record)


@contextlib.contextmanager
def _ending_cleanly(state: dict, command: str):
    """Run a command's changes; on a Ctrl-C, stop only the service that was starting (it is not
    ready, and a half-joined Ray node or a server still loading is no use), keep and record
    everything else, say so, and exit with 130. A second Ctrl-C meanwhile is ignored."""
    starting: list[str] = []
    try:
        yield starting
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for name in starting:
            if name in state["services"]:
                _stop(state, name, "interrupted while it started: stopped")
        _save(state)
        running = ", ".join(state["services"]) or "nothing"
        print(f"`{command}` interrupted; recorded and running: {running}", flush=True)
        print_status(state)
        raise SystemExit(INTERRUPTED) from None


# ---------------------------------------------------------------- the commands


def _keep(name: str, rec: dict | None, state: dict) -> str:
    """Why a recorded service can stay as it is ('' if it must be started again)."""
    if not rec or not healthy(rec):
        return ""
    env = rec.get("env", {})
    if name == "ray_node" and rec.get("head_pid") != state["services"].get("ray_head", {}).get(
        "pid"
    ):
        return ""  # it belonged to a head that is gone
    if name == "fastapi":
        asked = os.environ.get("FASTAPI_BACKEND")
        if asked and fastapi_backend(asked) != env.get("FASTAPI_BACKEND"):
            return ""
    if name == "flask":
        urls = {k: v for k, v in client_urls(state).items() if k.endswith("_SERVER_URL")}
        if any(env.get(k) not in (None, v) for k, v in urls.items()):
            return ""  # a model server it calls moved
        for key in ("FLASK_BACKEND", "FOOD11_MODEL_NAME"):
            if os.environ.get(key) and os.environ[key] != env.get(key):
                return ""
    return "running and healthy"


def up(jupyter: bool = False, triton: bool = True, ray: bool = False) -> dict:
    """Bring the stack up: start what is not running and healthy, keep what is (a crash of one
    service restarts that one; JupyterLab and its kernels survive), each on the port it had.
    ray: also a local Ray cluster (kept anyway when one runs: notebook 9 may have started it).

    state.json says what runs at every moment: what is kept stays recorded, what starts is
    recorded as soon as its process exists, what stops is forgotten once it has stopped. A
    service that fails to start is stopped, and so is every other this `up` started; what it
    kept stays running, recorded (`make status`). A Ctrl-C stops only the one starting."""
    with locked():
        lab_secrets()  # made once; the same token and key after every restart
        state = read_state()
        state.setdefault("services", {})
        before = {n: dict(r) for n, r in state["services"].items()}
        wanted = ["fastapi", *(["triton"] if triton else []), "flask"]
        if ray or all(n in before for n in RAY_SERVICES):
            wanted += list(RAY_SERVICES)
        wanted += ["jupyter"] if jupyter else []
        with _ending_cleanly(state, "up") as starting:
            repository = str(model_repository_dir()) if triton else None
            if triton and state.get("model_repository") not in (None, repository):
                # another stack (`make lab` runs one of its own): nothing of the running one is kept
                print("the running stack serves another model repository: starting afresh")
                for name in reversed(list(state["services"])):
                    _stop(state, name, "stopped")
            if triton:
                state["model_repository"] = repository
            state["started"] = time.strftime("%F %T")
            for name in [n for n in reversed(list(state["services"])) if n not in wanted]:
                _stop(state, name, "stopped")  # `up` says what the stack is
            started: list[str] = []
            try:
                for name in wanted:
                    rec = state["services"].get(name)
                    why = _keep(name, rec, state)
                    if why:
                        print(f"{name}: {why} (pid {rec['pid']}), kept", flush=True)
                        continue
                    if rec:  # its record stays (its place in the order) until replaced
                        _stop_service(name, rec, "stopped leftover")
                    starting[:] = [name]
                    _start_fresh(name, state)
                    starting.clear()
                    started.append(name)
            except (RuntimeError, SystemExit):  # undo this `up`'s starts; what it kept stays
                for name in reversed(started):
                    if name in state["services"]:
                        _stop(state, name, "`up` failed, stopped")
                raise
        _moved(before, state)
        print_status(state)
        return state


def _start_fresh(name: str, state: dict) -> dict:
    """Start `name` (recorded at once, see _launch); raise if it does not become ready, after
    stopping it."""
    try:
        return _start_ready(name, state)
    except (RuntimeError, SystemExit):
        if name in state["services"]:
            _stop(state, name)
        raise


def _start_ready(name: str, state: dict) -> dict:
    if name in RAY_SERVICES:
        print(f"starting {name} (a Ray node, one core) ...", flush=True)
        for attempt in range(1, RAY_ATTEMPTS + 1):
            try:
                return _start_ray_node(name, state)
            except RuntimeError as exc:
                if attempt == RAY_ATTEMPTS or ray_cluster.STARTUP_TIMED_OUT not in str(exc):
                    raise
                if name in state["services"]:
                    _stop(state, name)  # what is left of its session
                print(
                    f"{name}: {ray_cluster.STARTUP_TIMED_OUT} (a busy machine), again", flush=True
                )
    if name == "fastapi":
        runtime = os.environ.get("FASTAPI_BACKEND", "pt")
        print(f"starting fastapi ({runtime}) ...", flush=True)
        return _launch(state, name, service_for("fastapi", state, {"FASTAPI_BACKEND": runtime}))
    if name == "triton":
        from servelab.triton import model_repository

        model_repository.populate(model_repository_dir(), mode="local", keep_configs=True)
        print(
            "starting triton (loading every model; about 15-30 s per model on a 2-core CPU) ...",
            flush=True,
        )
        return _launch(state, name, service_for("triton", state))
    print(f"starting {'jupyterlab' if name == 'jupyter' else name} ...", flush=True)
    return _launch(state, name, service_for(name, state))


def _start_ray_node(name: str, state: dict) -> dict:
    """A Ray node, recorded at once; the second one ready once the head lists it alive."""
    record = _launch(state, name, service_for(name, state))
    if name == "ray_node":
        head = state["services"]["ray_head"]
        record["head_pid"] = head["pid"]  # a node of another head is not kept (_keep)
        _save(state)
        try:
            ray_cluster.wait_for_nodes(service_url(head["port"]), node=record)
        except RuntimeError as exc:
            tail = log_tail(Path(record["log"]))
            raise RuntimeError(f"{exc}; last lines of {record['log']}:\n{tail}") from None
    ray_cluster.pin(record)  # up now: its share of the machine from here on
    return record


def _moved(before: dict, state: dict) -> None:
    """Tell the student which URLs changed (a port taken by another program): a running
    JupyterLab keeps its environment, and its notebooks read the new ones with labenv.load()."""
    changed = [
        n
        for n, r in state["services"].items()
        if n in before and before[n].get("port") != r["port"]
    ]
    if changed and "jupyter" in state["services"]:
        print(
            f"{', '.join(changed)} moved to a new port: in a running notebook, run "
            "`labenv.load()` again (it reads the new URLs from .lab/urls.env)"
        )


def restart(name: str, overrides: dict | None = None) -> dict:
    """Restart one service on its port, with the same secrets and, optionally, changed settings
    (e.g. FASTAPI_BACKEND=onnx). After a crash this brings back the one service that died; the
    model repository is not touched (Triton loads the configs as they are now)."""
    with locked():
        state = read_state()
        rec = state["services"].get(name)
        if rec is None:
            raise SystemExit(
                f"{name} is not running (services: {sorted(state['services'])}); "
                "run `make up` first"
            )
        with _ending_cleanly(state, f"restart {name}") as starting:
            _stop_service(name, rec)  # its record stays until the new process replaces it
            starting[:] = [name]
            _start_fresh_in_place(state, name, overrides)
            starting.clear()
            print(f"{name} restarted" + (f" with {overrides}" if overrides else ""))
            new_port = state["services"][name]["port"]
            if (
                new_port != rec["port"]
                and name in ("fastapi", "triton")
                and "flask" in state["services"]
            ):
                _stop_service("flask", state["services"]["flask"])
                starting[:] = ["flask"]
                _start_fresh_in_place(state, "flask")
                starting.clear()
                print("flask restarted: the model server it calls moved")
        _moved({name: rec}, state)
        return state


def _start_fresh_in_place(state: dict, name: str, overrides: dict | None = None) -> None:
    """Start `name` again where it is in the state (its place in the order: `down` stops in
    reverse); stopped and forgotten if it does not become ready."""
    try:
        _launch(state, name, service_for(name, state, overrides))
    except (RuntimeError, SystemExit):
        _stop(state, name)
        raise


@contextlib.contextmanager
def paused(reason: str = ""):
    """Stop (SIGSTOP) every running service of the local stack for the block, then let them go on
    (SIGCONT): a measurement of the raw model gets the cores to itself, as on an idle machine."""
    groups = [
        rec["pid"]
        for rec in read_state().get("services", {}).values()
        if is_running(rec["pid"], rec["marker"])
    ]
    for pid in groups:
        os.killpg(pid, signal.SIGSTOP)
    print(f"paused {len(groups)} local service(s)" + (f" ({reason})" if reason else ""), flush=True)
    try:
        yield
    finally:
        for pid in groups:
            os.killpg(pid, signal.SIGCONT)
        print(f"resumed {len(groups)} local service(s)", flush=True)


def ray() -> dict:
    """The local Ray cluster beside whatever runs (notebook 9's first cell): kept when both nodes
    run and are healthy, else started afresh; nothing else is touched."""
    with locked():
        state = read_state()
        services = state.setdefault("services", {})
        if all(n in services and healthy(services[n]) for n in RAY_SERVICES):
            print("the Ray cluster runs and is healthy: kept", flush=True)
        else:
            with _ending_cleanly(state, "ray") as starting:
                for name in reversed(RAY_SERVICES):
                    if name in services:
                        _stop(state, name, "stopped leftover")
                try:
                    for name in RAY_SERVICES:
                        starting[:] = [name]
                        _start_fresh(name, state)
                        starting.clear()
                except (RuntimeError, SystemExit):
                    for name in reversed(RAY_SERVICES):  # half a cluster is no use
                        if name in services:
                            _stop(state, name)
                    raise
        print_status(state)
        return state


def down(quiet: bool = False) -> None:
    """Stop everything recorded, last started first; each is forgotten once it has stopped."""
    with locked():
        state = read_state()
        state.setdefault("services", {})
        stopped = []
        with _ending_cleanly(state, "down"):
            for name in reversed(list(state["services"])):
                if _stop(state, name):
                    stopped.append(name)
                    if not quiet:
                        print(f"stopped {name}", flush=True)
            forget(state)
            TRITON_HEALTH.unlink(missing_ok=True)
    if not quiet:
        print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")


def _stop_service(name: str, rec: dict, say: str = "") -> bool:
    """Stop a recorded service (its whole process group); after Triton, remove the /dev/shm
    regions its stubs may have left. True if it was running."""
    if name in RAY_SERVICES:  # a node and the workers Ray started for it (their own groups)
        stopped = ray_cluster.stop_node(rec)
    else:
        stopped = stop_process(rec["pid"], rec["marker"])
    if stopped and say:
        print(f"{say} {name} (pid {rec['pid']})", flush=True)
    left = left_by_watchdog(rec) if name == "triton" and not stopped else []
    if left:  # its watchdog died, the server and its stubs did not: end them too (SIGTERM)
        print(f"stopped tritonserver and its stubs {left}, left running by their dead watchdog")
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        stopped = True
    if name == "triton":
        wait_group_gone(rec["pid"])  # its stubs map their regions until they exit
        from servelab.serving.triton_watchdog import remove_stale_regions

        removed = remove_stale_regions(rec.get("shm_prefix", ""))
        if removed:
            print(f"removed {len(removed)} shared-memory region(s) Triton's stubs left behind")
    return stopped


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up")
    p_up.add_argument("--jupyter", action="store_true", help="also start JupyterLab")
    p_up.add_argument("--no-triton", action="store_true", help="FastAPI half only")
    p_up.add_argument("--ray", action="store_true", help="also a local Ray cluster (notebook 9)")
    sub.add_parser("ray", help="a local Ray cluster (two nodes) beside what runs")
    sub.add_parser("down")
    sub.add_parser("status")
    p_re = sub.add_parser("restart")
    p_re.add_argument("name", choices=["fastapi", "flask", "triton", "jupyter"])
    p_re.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="e.g. FASTAPI_BACKEND=onnx (or pt); FLASK_BACKEND=triton FOOD11_MODEL_NAME=...",
    )
    args = parser.parse_args(argv)
    if args.cmd == "up":
        up(jupyter=args.jupyter, triton=not args.no_triton, ray=args.ray)
    elif args.cmd == "ray":
        ray()
    elif args.cmd == "down":
        down()
    elif args.cmd == "status":
        print_status()
    else:
        restart(args.name, dict(kv.split("=", 1) for kv in args.set))


if __name__ == "__main__":
    main()
