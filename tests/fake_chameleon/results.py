"""Running a scenario (harness.py in its own network namespace) and reading what it recorded."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent / "harness.py"


def _unshare_works() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    return subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0


needs_namespace = pytest.mark.skipif(
    not _unshare_works(), reason="needs `unshare -rn` (a private network namespace)"
)


# Each scenario is a harness of its own (a fake Chameleon, kernels, a node): a process in its
# own network namespace, which waits now and then (kernels starting, the node's commands, the
# tests' threads): a few run at once, more than the machine's cores.
PARALLEL = int(os.environ.get("FAKE_CHAMELEON_PARALLEL", "4"))
_pool = ThreadPoolExecutor(max_workers=max(1, PARALLEL))
_started: dict[str, Future] = {}
_running: dict[str, subprocess.Popen] = {}
_stopping = False
_cleanups: list = []
FIXTURES: dict[str, str] = {}  # fixture name -> scenario name, for scenarios_ahead


def _run_scenario(name: str, out: Path, env: dict | None) -> dict:
    if _stopping:
        pytest.skip("the run is ending (a test failed with -x)")
    proc = subprocess.Popen(
        ["unshare", "-rn", sys.executable, str(HARNESS), name, str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=True,  # its zygote, kernels and node commands: one group to stop
    )
    _running[str(out)] = proc
    try:
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        _running.pop(str(out), None)
    assert proc.returncode == 0 and out.exists(), stdout + stderr[-5000:]
    return json.loads(out.read_text())


def stop_all() -> None:
    """The run ends (its last test, or a first failure with -x): scenarios not started yet are
    not started, and those under way are stopped, instead of running on to the end."""
    global _stopping
    _stopping = True
    for future in _started.values():
        future.cancel()
    for proc in list(_running.values()):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _pool.shutdown(wait=True, cancel_futures=True)


def scenario(name: str, tmp_path_factory, env: dict | None = None) -> dict:
    """The scenario's recorded result: the run started ahead (scenarios_ahead), or a run now."""
    started = None if env else _started.get(name)
    if started is not None:
        return started.result()
    return _run_scenario(name, tmp_path_factory.mktemp(name) / "result.json", env)


def scenario_fixture(fixture: str, name: str):
    """A module-scoped fixture `fixture` holding scenario `name`'s result, which the class's other
    scenarios may run beside (scenarios_ahead)."""
    FIXTURES[fixture] = name

    @pytest.fixture(scope="module", name=fixture)
    def _result(tmp_path_factory):
        return scenario(name, tmp_path_factory)

    return _result


@pytest.fixture(scope="module", autouse=True)
def scenarios_ahead(request, tmp_path_factory):
    """Start, PARALLEL at a time and in the order the tests need them, every scenario a selected
    test of the session needs."""
    if stop_all not in _cleanups:
        _cleanups.append(stop_all)
        request.config.add_cleanup(stop_all)
    needed = {
        FIXTURES[f]: None
        for item in request.session.items
        for f in getattr(item, "fixturenames", ())
        if f in FIXTURES
    }
    for name in [n for n in needed if n not in _started]:
        out = tmp_path_factory.mktemp(name) / "result.json"
        _started[name] = _pool.submit(_run_scenario, name, out, None)


def runs(result, notebook, label=None):
    return [
        r
        for r in result["runs"]
        if r["notebook"] == notebook and (label is None or r["label"] == label)
    ]


def run(result, notebook, label):
    (found,) = runs(result, notebook, label)
    return found


def requests(result, method, path_pattern, during=None):
    """API requests by method and path (regex); during=a run: only those that run made."""
    log = result["api"] if during is None else result["api"][during["api_from"] : during["api_to"]]
    return [e for e in log if e["method"] == method and re.fullmatch(path_pattern, e["path"])]


def text(a_run) -> str:
    return "".join(c["text"] for c in a_run["cells"])


def at(entry) -> dt.datetime:
    return dt.datetime.fromisoformat(entry["at"])


def blazar_time(value: str) -> dt.datetime:
    return dt.datetime.strptime(value, "%Y-%m-%d %H:%M")


def students(result, things):
    return [x for x in things if x.get("user_id") == result["user_id"]]


def reservation(lease, kind):
    return next(r for r in lease["reservations"] if r["resource_type"] == kind)


def reserved_fip(result, lease) -> dict:
    """The floating IP Blazar created for a lease's floating-IP reservation."""
    rid = reservation(lease, "virtual:floatingip")["id"]
    return next(f for f in result["fips"] if f"reservation:{rid}" in f["tags"])


def unrouted(result) -> list[tuple[str, str]]:
    """Requests to a Neutron path that names no resource (Neutron answers 404): python-chi
    1.2.10's Server.delete() sends one for each floating IP it means to delete."""
    return [(e["method"], e["path"]) for e in result["api"] if e.get("unrouted")]


def neutron_deletes(result, during=None) -> list[str]:
    """The paths of every DELETE sent to Neutron (floating IPs, and paths that do not exist)."""
    return [e["path"] for e in requests(result, "DELETE", r"/tacc/neutron/.*", during)]
