"""Running the class's scenarios (harness.py, in workers of their own network namespace) and
reading what each recorded."""

from __future__ import annotations

import datetime as dt
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
from concurrent.futures import Future
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


# The scenarios run in a few workers (harness.py --worker: a process in its own network
# namespace, with one fake HTTP server and one kernels' zygote for every scenario it runs, one
# after another). A worker waits now and then (kernels starting, the node's commands): a few run
# at once, more than the machine's cores.
PARALLEL = int(os.environ.get("FAKE_CHAMELEON_PARALLEL", "6"))
# the longest scenarios start first, so that none of them is the run's tail
LONGEST = ("old_python_chi", "class_day")
TIMEOUT_S = int(os.environ.get("FAKE_CHAMELEON_TIMEOUT", "600"))  # one scenario, seconds
_jobs: queue.Queue = queue.Queue()  # (name, out, env, future), None: a worker's thread ends
_threads: list[threading.Thread] = []
_workers: list[subprocess.Popen] = []
_started: dict[str, Future] = {}
_stopping = False
_cleanups: list = []
FIXTURES: dict[str, str] = {}  # fixture name -> scenario name, for scenarios_ahead


class _Worker:
    """One worker process and the file its stderr goes to."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.stderr = open(folder / "stderr.log", "w+")  # noqa: SIM115 - kept for its life
        self.proc = subprocess.Popen(
            ["unshare", "-rn", sys.executable, str(HARNESS), "--worker", str(folder)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            start_new_session=True,  # its zygote, kernels and node commands: one group to stop
        )
        _workers.append(self.proc)

    def run(self, name: str, out: Path, env: dict, timeout: float) -> dict:
        at = self.stderr.tell()
        timer = threading.Timer(timeout, self.kill)
        timer.start()
        try:
            self.proc.stdin.write(f"{name}\t{out}\t{json.dumps(env)}\n")
            self.proc.stdin.flush()
            said = self.proc.stdout.readline().strip()
        except (BrokenPipeError, OSError):
            said = ""
        finally:
            timer.cancel()
        if said != f"done {name}" or not out.exists():
            self.stderr.seek(at)
            why = self.stderr.read()[-5000:]
            raise AssertionError(f"scenario {name}: {said or 'the worker ended'}\n{why}")
        return json.loads(out.read_text())

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _serve_jobs(folder: Path) -> None:
    worker = None
    while True:
        job = _jobs.get()
        if job is None:
            break
        name, out, env, timeout, future = job
        if not future.set_running_or_notify_cancel():
            continue
        try:
            if _stopping:
                raise pytest.skip.Exception("the run is ending (a test failed with -x)")
            if worker is None or not worker.alive():
                worker = _Worker(folder)
            future.set_result(worker.run(name, out, env, timeout))
        except BaseException as err:  # the test that needs it fails (or skips) with it
            future.set_exception(err)
    if worker is not None and worker.alive():
        worker.proc.stdin.close()
        try:
            worker.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()


def _submit(
    name: str, out: Path, env: dict | None, tmp_path_factory, timeout: float = TIMEOUT_S
) -> Future:
    if not _threads:
        for n in range(max(1, PARALLEL)):
            folder = tmp_path_factory.mktemp(f"worker{n}")
            _threads.append(threading.Thread(target=_serve_jobs, args=(folder,), daemon=True))
            _threads[-1].start()
    future: Future = Future()
    _jobs.put((name, out, env or {}, timeout, future))
    return future


def stop_all() -> None:
    """The run ends (its last test, or a first failure with -x): scenarios not started yet are
    not started, and those under way are stopped, instead of running on to the end."""
    global _stopping
    _stopping = True
    for future in _started.values():
        future.cancel()
    for proc in list(_workers):
        if proc.poll() is None and proc.stdin and not proc.stdin.closed:
            try:  # a worker between two scenarios ends at once; one in a scenario is stopped
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for _ in _threads:
        _jobs.put(None)
    for thread in _threads:
        thread.join(timeout=60)


def scenario(
    name: str, tmp_path_factory, env: dict | None = None, timeout: float = TIMEOUT_S
) -> dict:
    """The scenario's recorded result: the run started ahead (scenarios_ahead), or a run now
    (within `timeout` seconds)."""
    started = None if env else _started.get(name)
    if started is None:
        started = _submit(
            name, tmp_path_factory.mktemp(name) / "result.json", env, tmp_path_factory, timeout
        )
    return started.result()


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
    """Start, PARALLEL at a time, every scenario a selected test of the session needs: the
    LONGEST first, the others in the order the tests need them."""
    if stop_all not in _cleanups:
        _cleanups.append(stop_all)
        request.config.add_cleanup(stop_all)
    needed = {
        FIXTURES[f]: None
        for item in request.session.items
        for f in getattr(item, "fixturenames", ())
        if f in FIXTURES
    }
    ahead = sorted(needed, key=lambda n: LONGEST.index(n) if n in LONGEST else len(LONGEST))
    for name in [n for n in ahead if n not in _started]:
        out = tmp_path_factory.mktemp(name) / "result.json"
        _started[name] = _submit(name, out, None, tmp_path_factory)


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
