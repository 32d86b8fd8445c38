"""Keeps Triton serving: notices a dead Python-backend stub and reloads its model, restarts a
crashed tritonserver, and tells health checks what it sees. Standard library only (it runs in
Triton's image too, and beside the server in local mode).

    python -m servelab.serving.triton_watchdog [options] -- tritonserver ARGS...   # supervise
    python -m servelab.serving.triton_watchdog --check                            # health check

Why it is needed: each Python-backend model instance runs in its own stub process. When one dies
(an OOM kill, a crash inside torch, `kill -9`), Triton 2.51 keeps the model READY and the server
ready, and answers every request to that model with 500 "Stub process ... is not healthy" for
as long as the server runs: nothing in Triton notices or repairs it.

What it does, every --every seconds (default 1):
- a stub is recognised by its command line (triton_python_backend_stub <repository>/<model>/
  <version>/model.py ...); a stub that has died stays a zombie child of tritonserver, or is
  reaped soon (seen in the Docker stack), while Triton keeps the model READY; so a zombie that
  was a known stub of a model Triton still calls READY is a dead instance, and so is a missing
  one: a Python-backend model that had every stub its served config asks for and misses one for
  SHORT_STEPS looks in a row. The model is loaded again with the config it was serving
  (GET /v2/models/<m>/config, then the repository API with the node's secret,
  TRITON_ADMIN_KEY), so a config.pbtxt edited in the meantime is not picked up by surprise;
- a tritonserver that exits (a crash) is started again with the same command line (same ports),
  after its Python-backend shared-memory regions are removed; at most MAX_RESTARTS in
  RESTART_WINDOW_S, then the watchdog exits with the server's status (Docker's restart policy,
  or `make status`, takes over);
- the stubs' /dev/shm regions are made readable by their owner only (Triton creates them 0644);
- a stub region that has grown over --max-region-mib (an oversized input: Triton 2.51 copies a
  request into the stub's region whatever its size, and the region never shrinks) has its model
  loaded again, which the old instance keeps serving through, and the region goes back to 1 MiB;
- it writes what it saw to --health-file (JSON): the server, and per model: ready, stubs alive,
  dead, and whether a reload is under way. `--check` reads that file and asks Triton itself (server
  and per-model readiness): exit 0 only if all is well and the file is fresh. That is the Docker
  health check and what `make status` reports.

Python-backend stubs put their tensors in /dev/shm regions named by the server's
--backend-config=python,shm-region-prefix-name; remove_stale_regions() removes the regions of a
prefix that no running process maps (a crashed server leaves them behind).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ADMIN_HEADER = "lab-admin-key"  # the same as servelab.labenv.ADMIN_HEADER (a test keeps it so)
STUB = "triton_python_backend_stub"
MAX_RESTARTS = 5
RESTART_WINDOW_S = 600
DEFAULT_HEALTH_FILE = (
    os.environ.get("LAB_TRITON_HEALTH_FILE") or f"/tmp/triton_health_{os.getuid()}.json"
)
STALE_AFTER_S = 15.0  # a health file older than this means the watchdog itself is not running
# The largest a stub's region may stay. The lab's largest legitimate batches are far below: 16
# images of 8 MiB as base64 (food_classifier) is 180 MiB; 256 uint8 photos (notebook 7) 38 MiB.
MAX_REGION_MIB = 512
# looks in a row (one a second) a model must miss a stub before it counts as dead: a load through
# the repository API replaces stubs, and the count dips while it does
SHORT_STEPS = 3


# ---------------------------------------------------------------- what /proc says


def _parents() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        tree.setdefault(ppid, []).append(int(stat.parent.name))
    return tree


def descendants(pid: int) -> list[int]:
    tree, found, todo = _parents(), [], [pid]
    while todo:
        kids = tree.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def stub_model(pid: int) -> str | None:
    """The model a running stub serves (from its command line), else None."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if len(argv) < 2 or not argv[0].decode(errors="replace").endswith(STUB):
        return None
    parts = Path(argv[1].decode(errors="replace")).parts
    return parts[-3] if len(parts) >= 3 else None


def server_pids() -> list[int]:
    """tritonserver processes of this user (in a container: the container's)."""
    found = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "tritonserver" and comm.stat().st_uid == os.getuid():
                found.append(int(comm.parent.name))
        except (OSError, ValueError):
            continue
    return found


def mapped_shm() -> set[str]:
    """Names of the /dev/shm objects some process we can see has mapped."""
    names = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            text = maps.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            at = line.find(" /dev/shm/")
            if at >= 0:
                names.add(line[at + len(" /dev/shm/") :].split(" (deleted)")[0])
    return names


def remove_stale_regions(prefix: str, shm: Path = Path("/dev/shm")) -> list[str]:
    """Remove this user's /dev/shm objects named prefix* that no running process maps: what the
    stubs of a crashed tritonserver leave behind. Returns the names removed."""
    if not prefix:
        return []
    in_use = mapped_shm()
    removed = []
    for region in sorted(shm.glob(prefix + "*")):
        try:
            if region.stat().st_uid == os.getuid() and region.name not in in_use:
                region.unlink()
                removed.append(region.name)
        except OSError:
            continue
    return removed


def privatise_regions(prefix: str, shm: Path = Path("/dev/shm")) -> int:
    """Make this user's regions named prefix* readable by their owner only. The Python backend
    creates them 0644 whatever the umask (Boost sets the mode itself), so any local user could
    read the tensors passing through a stub. Returns how many were changed."""
    changed = 0
    for region in shm.glob(prefix + "*") if prefix else ():
        try:
            info = region.stat()
            if info.st_uid == os.getuid() and info.st_mode & 0o077:
                region.chmod(0o600)
                changed += 1
        except OSError:
            continue
    return changed


def shm_prefix(argv: list[str]) -> str:
    """The Python backend's region prefix on a tritonserver command line ('' if none is set)."""
    flag = "python,shm-region-prefix-name="
    for arg in argv:
        if arg.startswith("--backend-config=" + flag):
            return arg.split(flag, 1)[1]
    return ""


# ---------------------------------------------------------------- what Triton says


def _get(url: str, timeout: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        body = resp.read()
        return resp.status, (json.loads(body) if body else None)


def _ok(url: str) -> bool:
    try:
        return _get(url, timeout=3.0)[0] == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def loaded_models(url: str) -> list[str]:
    """Models Triton has loaded (the statistics API lists them; it needs no secret)."""
    try:
        _, stats = _get(f"{url}/v2/models/stats")
    except (urllib.error.URLError, OSError, ValueError):
        return []
    return sorted({m["name"] for m in (stats or {}).get("model_stats", [])})


def expected_stubs(config: dict) -> int | None:
    """How many instances a model's served config asks for: one stub each for a Python-based
    backend (count per GPU listed for KIND_GPU; a KIND_GPU group without a list counts once, so
    the figure is never too high). None for an ensemble or an unreadable config. A backend
    without stubs (Triton's C++ onnxruntime) never shows them all, so it is never acted on."""
    if not config or config.get("platform") == "ensemble":
        return None
    total = 0
    for group in config.get("instance_group") or [{"count": 1}]:
        gpus = group.get("gpus") or []
        per = len(gpus) if group.get("kind") == "KIND_GPU" and gpus else 1
        total += int(group.get("count", 1)) * per
    return total


def served_config(url: str, model: str) -> dict:
    try:
        return _get(f"{url}/v2/models/{model}/config")[1] or {}
    except (urllib.error.URLError, OSError, ValueError):
        return {}


def reload_model(
    url: str, model: str, key: str, timeout: float = 600.0, unload_first: bool = False
) -> tuple[bool, str]:
    """Load `model` again with the config it is serving (repository API, the node's secret).
    unload_first: for a dead stub. A load with an unchanged config can keep the instances it
    has (seen in the Docker stack: 'loaded again in 0.0 s', the dead stub still there)."""

    def post(action: str, body: bytes) -> bool:
        request = urllib.request.Request(
            f"{url}/v2/repository/models/{model}/{action}",
            data=body,
            headers={ADMIN_HEADER: key, "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status == 200

    try:
        _, config = _get(f"{url}/v2/models/{model}/config")
        if unload_first:
            post("unload", b"{}")
            deadline = time.monotonic() + timeout
            while _ok(f"{url}/v2/models/{model}/ready") and time.monotonic() < deadline:
                time.sleep(0.2)  # unload returns before the model is gone
        body = json.dumps({"parameters": {"config": json.dumps(config)}}).encode()
        return post("load", body), ""
    except urllib.error.HTTPError as exc:
        return False, f"HTTP {exc.code}: {exc.read()[:300].decode(errors='replace')}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return False, f"{type(exc).__name__}: {exc}"


# ---------------------------------------------------------------- the watchdog


def log(message: str) -> None:
    print(f"[triton_watchdog {time.strftime('%F %T')}] {message}", file=sys.stderr, flush=True)


class Watchdog:
    """One tritonserver, its stubs and its health file."""

    def __init__(
        self,
        url: str,
        health_file: Path,
        key: str = "",
        prefix: str = "",
        max_region_mib: float = MAX_REGION_MIB,
    ):
        self.url, self.health_file, self.key = url.rstrip("/"), Path(health_file), key
        self.prefix = prefix  # of the stubs' /dev/shm regions
        self.max_region = max_region_mib * 2**20
        self.known: dict[int, str] = {}  # stub pid -> model, learned while the stub ran
        self.handled: set[int] = set()  # dead stubs already acted on (their zombies stay)
        self.reloading: dict[str, tuple[threading.Thread, str]] = {}  # model -> (thread, why)
        self.events: list[str] = []
        # a stub that died can vanish at once (Triton reaps it when it next looks at it, seen in
        # the Docker stack): a model with fewer stubs than its config asks for, after it had them
        # all, for SHORT_STEPS looks in a row, is a model with a dead stub too
        self.expected: dict[str, int | None] = {}  # model -> stubs its config asked for last look
        self.complete: set[str] = set()  # models seen with every stub running since (re)load
        self.short: dict[str, int] = {}  # model -> looks in a row with stubs missing

    def stubs(self, server_pid: int) -> tuple[dict[str, int], dict[str, list[int]]]:
        """(stubs alive per model, stubs to act on per model: dead ones, and live ones whose
        region grew over the limit) of the server now."""
        alive: dict[str, int] = {}
        act: dict[str, list[int]] = {}
        for pid in descendants(server_pid):
            state = _state(pid)
            model = stub_model(pid) if state not in ("Z", "gone") else None
            if model:
                self.known[pid] = model
                alive[model] = alive.get(model, 0) + 1
                if pid not in self.handled and self._region_bytes(pid) > self.max_region:
                    act.setdefault(model, []).append(pid)
            elif state == "Z" and pid in self.known and pid not in self.handled:
                act.setdefault(self.known[pid], []).append(pid)
        return alive, act

    def _region_bytes(self, pid: int) -> int:
        """The size of the largest /dev/shm region (of this server's prefix) the stub maps."""
        if not self.prefix:
            return 0
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            return 0
        sizes = [0]
        for name in {ln.split()[-1] for ln in maps.splitlines() if f"/dev/shm/{self.prefix}" in ln}:
            try:
                sizes.append(Path(name).stat().st_size)
            except OSError:
                continue
        return max(sizes)

    def _reload(self, model: str, pids: list[int], why: str) -> None:
        started = time.monotonic()
        dead = not pids or any(_state(p) in ("Z", "gone") for p in pids)
        ok, error = reload_model(self.url, model, self.key, unload_first=dead)
        event = (
            f"{time.strftime('%T')} {model}: {why}, model loaded again in "
            f"{time.monotonic() - started:.1f} s" + ("" if ok else f"; FAILED: {error}")
        )
        self.events = (self.events + [event])[-10:]
        log(event)

    def step(self, server_pid: int) -> dict:
        """One look: start reloading what died, write and return the health report."""
        privatise_regions(self.prefix)
        server_ready = _ok(f"{self.url}/v2/health/ready")
        alive, act = self.stubs(server_pid) if server_ready else ({}, {})
        names = set(loaded_models(self.url)) | set(act) | set(self.reloading)
        models = {m: {"ready": _ok(f"{self.url}/v2/models/{m}/ready")} for m in sorted(names)}
        for model in models:
            if not models[model]["ready"] or model in self.reloading:
                self.short.pop(model, None)
                continue
            want = expected_stubs(served_config(self.url, model))
            if self.expected.get(model, want) != want:  # loaded since with another config
                self.complete.discard(model)
                self.short.pop(model, None)
            self.expected[model] = want
            have = alive.get(model, 0)
            if want is None:
                continue
            if have >= want:
                self.complete.add(model)
                self.short.pop(model, None)
            elif model in self.complete:
                self.short[model] = self.short.get(model, 0) + 1
                if self.short[model] >= SHORT_STEPS and model not in act:
                    act[model] = []
        for model, pids in act.items():
            self.handled.update(pids)
            if not models[model]["ready"] or model in self.reloading:
                continue  # unloaded since (nothing to bring back), or already being reloaded
            dead = [p for p in pids if _state(p) in ("Z", "gone")]
            want = self.expected.get(model)
            if dead and (want is None or alive.get(model, 0) >= want):
                continue  # a stub replaced on purpose (a load with another config) exits too
            if not pids:
                why = f"{alive.get(model, 0)} of {self.expected[model]} stub(s) running"
            elif dead:
                why = f"stub {dead} died"
            else:
                why = f"stub {pids} holds a region over {self.max_region / 2**20:.0f} MiB"
            # after the reload: the config may differ, and the stubs must all run again first
            self.expected.pop(model, None)
            self.complete.discard(model)
            self.short.pop(model, None)
            log(f"{model}: {why}; loading the model again")
            thread = threading.Thread(target=self._reload, args=(model, pids, why), daemon=True)
            self.reloading[model] = (thread, why)
            thread.start()
        for model, (thread, _) in list(self.reloading.items()):
            if not thread.is_alive():
                del self.reloading[model]
        for model, info in models.items():
            info["stubs_alive"] = alive.get(model, 0)
            info["reloading"] = self.reloading[model][1] if model in self.reloading else ""
        return self.write(server_pid, server_ready, models)

    def write(self, server_pid: int, ready: bool, models: dict) -> dict:
        report = {
            "time": time.time(),
            "server_pid": server_pid,
            "server_ready": ready,
            "models": models,
            "events": self.events,
        }
        tmp = self.health_file.with_name(self.health_file.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(report, f)
        os.replace(tmp, self.health_file)
        return report


def supervise(
    argv: list[str],
    url: str,
    health_file: Path,
    every: float,
    max_region_mib: float = MAX_REGION_MIB,
) -> int:
    """Run tritonserver (argv) and keep it and its models serving; return its exit status."""
    os.umask(0o077)  # the stubs' /dev/shm regions and the health file: this user's only
    key = os.environ.get("TRITON_ADMIN_KEY", "")
    if not key:
        log("TRITON_ADMIN_KEY is not set: a model whose stub dies cannot be reloaded")
    prefix = shm_prefix(argv)
    watchdog = Watchdog(url, health_file, key, prefix, max_region_mib)
    stopping = False
    server = None

    def stop(signum, _frame):
        nonlocal stopping
        stopping = True
        if server is not None and server.poll() is None:
            server.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    restarts: list[float] = []
    while True:
        removed = remove_stale_regions(prefix)
        if removed:
            log(f"removed {len(removed)} shared-memory region(s) left by a previous server")
        server = subprocess.Popen(argv)
        while server.poll() is None and not stopping:
            try:
                watchdog.step(server.pid)
            except OSError as exc:  # a health file that cannot be written is not a reason to stop
                log(f"health file: {exc}")
            _reap_orphans(server.pid)
            time.sleep(every)
        code = server.wait()
        _end_orphaned_stubs(watchdog.known, prefix)  # they would keep their regions mapped
        if stopping:
            return code
        now = time.monotonic()
        restarts = [t for t in restarts if now - t < RESTART_WINDOW_S] + [now]
        log(f"tritonserver exited with status {code}")
        watchdog.write(server.pid, False, {})
        if len(restarts) > MAX_RESTARTS:
            log(f"{MAX_RESTARTS} restarts within {RESTART_WINDOW_S} s: giving up")
            return code or 1
        watchdog.events = (watchdog.events + [f"{time.strftime('%T')} server exited ({code})"])[
            -10:
        ]
        log("starting tritonserver again")


def _end_orphaned_stubs(known: dict[int, str], prefix: str, wait: float = 10.0) -> None:
    """SIGKILL the stubs of a server that has exited (each checks on its parent only now and
    then), recognised by the region prefix on their command line (never a reused pid)."""
    mine = []
    for pid in known:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if prefix and prefix.encode() in argv and _state(pid) not in ("Z", "gone"):
            mine.append(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + wait
    while any(_state(p) not in ("Z", "gone") for p in mine) and time.monotonic() < deadline:
        time.sleep(0.1)


def _reap_orphans(server_pid: int) -> None:
    """As PID 1 of a container, stubs orphaned by a crashed server become our children: reap
    them, never the server (its status is Popen's)."""
    if os.getpid() != 1:
        return
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid == server_pid:
            return
        os.waitpid(info.si_pid, 0)


def check(url: str, health_file: Path) -> tuple[bool, list[str]]:
    """(healthy, lines saying why): Triton's own readiness, server and per model, and the
    watchdog's fresh report on each model's stubs."""
    lines, healthy = [], True
    if not _ok(f"{url}/v2/health/ready"):
        return False, ["server: not ready"]
    try:
        report = json.loads(Path(health_file).read_text())
    except (OSError, ValueError):
        report = None
    if report is None or time.time() - report.get("time", 0) > STALE_AFTER_S:
        healthy = False
        lines.append(f"watchdog: no fresh report in {health_file}")
        report = {"models": {}}
    for model in sorted(set(loaded_models(url)) | set(report["models"])):
        seen = report["models"].get(model, {})
        ready = _ok(f"{url}/v2/models/{model}/ready")
        ok = ready and not seen.get("reloading")
        healthy &= ok
        state = "ready" if ok else "NOT READY"
        if seen.get("reloading"):  # unloaded and loaded again after a stub died: not ready a while
            state = f"reloading ({seen['reloading']})"
        lines.append(f"{model}: {state} ({seen.get('stubs_alive', '?')} stub(s) running)")
    return healthy, lines


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    server_argv = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="python -m servelab.serving.triton_watchdog")
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="Triton's HTTP endpoint")
    parser.add_argument("--health-file", default=DEFAULT_HEALTH_FILE)
    parser.add_argument("--every", type=float, default=1.0, help="seconds between looks")
    parser.add_argument("--check", action="store_true", help="health check: exit 0 if healthy")
    parser.add_argument(
        "--max-region-mib",
        type=float,
        default=MAX_REGION_MIB,
        help="a stub's shared-memory region larger than this has its model loaded again",
    )
    args = parser.parse_args(own)
    if args.check:
        healthy, lines = check(args.url, Path(args.health_file))
        print("\n".join(lines))
        return 0 if healthy else 1
    if not server_argv:
        parser.error("give the tritonserver command after --")
    return supervise(server_argv, args.url, Path(args.health_file), args.every, args.max_region_mib)


if __name__ == "__main__":
    sys.exit(main())
