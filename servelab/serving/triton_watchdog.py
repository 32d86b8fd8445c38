"""Keeps Triton serving: repairs a model whose Python-backend stub died, stopped or holds an
oversized region, restarts a tritonserver that crashed or wedged, and tells health checks what it
sees. Standard library only (it runs in Triton's image too, and beside the server in local mode).

    python -m servelab.serving.triton_watchdog [options] -- tritonserver ARGS...   # supervise
    python -m servelab.serving.triton_watchdog --check                            # health check

Why it is needed: each Python-backend model instance runs in its own stub process, and Triton 2.51
repairs none of what can happen to one. Measured on the lab's local Triton (issue 35):
- a stub that dies (an OOM kill, a crash inside torch, `kill -9`): the model stays READY and
  answers 500 "Stub process ... is not healthy" for good;
- a stopped stub (SIGSTOP): the same 500 at once, for as long as it is stopped (continuing it
  made tritonserver abort);
- a stub that dies while Triton loads its model: the model stays LOADING for good, an ensemble
  using it is unloaded, and an unload through the API hangs too; only a new server recovers;
- a load with the config a model is serving already is a no-op ("loaded again in 0.0 s").

What it does, every --every seconds (default 1), for every model Triton serves and every model a
served ensemble names (the repository index, read with the node's secret, TRITON_ADMIN_KEY):
- a Python-backend model READY with a stub dead (a zombie of a known stub), missing (fewer
  running than its served config asks for, SHORT_STEPS looks in a row) or stopped (STOPPED_STEPS
  looks) is unloaded and loaded again with the config it was serving (Triton ends a stopped stub
  on unload); a reload that fails is tried again, FAILED_RELOADS times, then the server restarts;
- a stub whose /dev/shm region has grown over --max-region-mib (an oversized input: Triton
  copies a request into the region whatever its size, and the region never shrinks) has its model
  loaded again with a marker parameter changed (lab_watchdog_reload), so Triton really makes new
  instances, every time; the old instance serves meanwhile;
- a Python-backend model LOADING with no stub running for WEDGED_STEPS looks (a stub died while it
  loaded), or any model LOADING or UNLOADING, or a reload of ours, for STUCK_S: tritonserver is
  restarted (SIGTERM, SIGKILL after STOP_GRACE_S), which loads every model of the repository;
- a tritonserver that exits is started again with the same command line (same ports), after its
  stubs are ended (one whose server died mid-request may otherwise wait for good, holding its
  model's memory) and their shared-memory regions removed, but loading no model itself: once it
  answers, the models that served before it ended are loaded through the repository API, each with
  the config it served, all at once (load_again), so each serves again as soon as it is loaded
  rather than when the slowest one is (Triton opens its HTTP and gRPC ports only after loading what
  its command line asks for), and a model nobody had loaded is not loaded; it is never given up on:
  the first BACKOFF_AFTER restarts within RESTART_WINDOW_S at once, then after 2, 4, 8, 16 s, then
  every BACKOFF_MAX_S (restart_delay); while it waits, its report says why, how often and when it
  starts the server again (a request that crashes Triton 2.51, sent again and again, costs its
  sender a slower answer, not everyone a Triton that stays down: docs/security.md);
- the stubs' /dev/shm regions are made readable by their owner only (Triton creates them 0644);
- --restrict-apis: the flags that restrict those Triton APIs to the node's secret are added to
  tritonserver's command line here, from TRITON_ADMIN_KEY in this process's environment (Triton
  reads the key from nowhere but its command line, which every local user can read); once the
  server has read its options, the key is overwritten there with a random mask
  (triton_procs.hide_argument), and the server is checked to answer the real key. tritonserver
  starts from this process's environment without the key (server_env()): neither it nor its
  Python-backend stubs, which run the models' code, hold it there;
- --no-repair: only that (the flags, the mask, an environment without the key) and waiting for
  the server, whose exit status it returns: what the maintainers' measurements start
  (labstack.triton_local.supervised_command), where a repair would hide what happened;
- it writes what it saw to --health-file (JSON): per model Triton's state, the stubs running,
  stopped and asked for, a reload under way, and a problem in words. `--check` reads that file
  and asks Triton itself: exit 0 only if the report is fresh and every model it lists is ready
  with no problem. That is the Docker health check and what `make status` reports.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from servelab.serving.triton_procs import (  # noqa: F401 - the launcher and tests use them here
    descendants,
    hide_argument,
    privatise_regions,
    proc_state,
    region_bytes,
    remove_stale_regions,
    server_pids,
    shm_prefix,
    stub_model,
    stubs_of,
)

ADMIN_HEADER = "lab-admin-key"  # the same as servelab.labenv.ADMIN_HEADER (a test keeps it so)
RESTART_WINDOW_S = 600  # restarts counted over the last 10 minutes ...
BACKOFF_AFTER = 3  # ... the first three at once, then waiting longer each time ...
BACKOFF_MAX_S = 20.0  # ... up to this: Triton (15-30 s to load) is back within a minute
DEFAULT_HEALTH_FILE = (
    os.environ.get("LAB_TRITON_HEALTH_FILE") or f"/tmp/triton_health_{os.getuid()}.json"
)
STALE_AFTER_S = 15.0  # a health file older than this means the watchdog itself is not running
# The largest a stub's region may stay. The lab's largest legitimate batches are far below: 16
# images of 8 MiB as base64 (food_classifier) is 180 MiB; 256 uint8 photos (notebook 7) 38 MiB.
MAX_REGION_MIB = 512
# Looks in a row (one a second) before acting, each longer than what a healthy server shows:
SHORT_STEPS = 3  # a model missing a stub (a load replaces stubs; the count dips while it does)
STOPPED_STEPS = 5  # a stub stopped (SIGSTOP): Triton answers 500 for its model meanwhile
WEDGED_STEPS = 5  # a Python-backend model LOADING without a stub (a load starts one in ms)
# A model LOADING or UNLOADING, or a reload of ours, for longer than this is stuck: the longest
# load measured is food_classifier's 20 s on the busy 2-core machine.
STUCK_S = 180.0
FAILED_RELOADS = 3  # reloads of one model failing in a row before the server is restarted
STOP_GRACE_S = 10.0  # a wedged server gets this long after SIGTERM before SIGKILL
RELOAD_PARAMETER = "lab_watchdog_reload"  # changed in the config of a forced reload
KEY_SHOWN = "the admin key was on tritonserver's command line for"  # logged at every start
RECOVER = "make restart SERVICE=triton"  # (Docker: docker compose restart triton_server)


def restart_delay(recent: int) -> float:
    """Seconds to wait before starting tritonserver again after its `recent`-th end within
    RESTART_WINDOW_S: none for the first BACKOFF_AFTER, then 2, 4, 8, 16 s, then BACKOFF_MAX_S."""
    if recent <= BACKOFF_AFTER:
        return 0.0
    return min(BACKOFF_MAX_S, 2.0 ** (recent - BACKOFF_AFTER))


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


def _post(url: str, body: dict, key: str, timeout: float):
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={ADMIN_HEADER: key, "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=timeout) as resp:
        raw = resp.read()
        return resp.status, (json.loads(raw) if raw else None)


def loaded_models(url: str) -> list[str]:
    """Models Triton has loaded (the statistics API lists them; it needs no secret)."""
    try:
        _, stats = _get(f"{url}/v2/models/stats")
    except (urllib.error.URLError, OSError, ValueError):
        return []
    return sorted({m["name"] for m in (stats or {}).get("model_stats", [])})


def repository_index(url: str, key: str) -> dict[str, tuple[str, str]] | None:
    """{model: (state, reason)} of every model in the repository (READY, LOADING, UNLOADING,
    UNAVAILABLE), or None without the secret or an answer."""
    if not key:
        return None
    try:
        _, index = _post(f"{url}/v2/repository/index", {}, key, timeout=5.0)
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return {m["name"]: (m.get("state", ""), m.get("reason", "")) for m in index or []}


def answers_key(url: str, key: str) -> bool | None:
    """Does Triton's restricted repository API take `key`? None: no answer to tell."""
    try:
        _post(f"{url}/v2/repository/index", {}, key, timeout=5.0)
        return True
    except urllib.error.HTTPError as exc:
        return False if exc.code == 403 else None
    except (urllib.error.URLError, OSError, ValueError):
        return None


def expected_stubs(config: dict) -> int | None:
    """How many instances a model's served config asks for: one stub each for a Python-based
    backend (count per GPU listed for KIND_GPU; a KIND_GPU group without a list counts once, so
    the figure is never too high). None for an ensemble or an unreadable config."""
    if not config or config.get("platform") == "ensemble":
        return None
    total = 0
    for group in config.get("instance_group") or [{"count": 1}]:
        gpus = group.get("gpus") or []
        per = len(gpus) if group.get("kind") == "KIND_GPU" and gpus else 1
        total += int(group.get("count", 1)) * per
    return total


def ensemble_steps(config: dict) -> list[str]:
    """The models an ensemble's served config names (none for another model)."""
    steps = (config or {}).get("ensemble_scheduling", {}).get("step", [])
    return [s["model_name"] for s in steps if s.get("model_name")]


def served_config(url: str, model: str) -> dict:
    try:
        return _get(f"{url}/v2/models/{model}/config")[1] or {}
    except (urllib.error.URLError, OSError, ValueError):
        return {}


def reload_model(
    url: str,
    model: str,
    key: str,
    timeout: float = STUCK_S,
    unload_first: bool = False,
    force: str = "",
    config: dict | None = None,
) -> tuple[bool, str]:
    """Load `model` again with the config it is serving (repository API, the node's secret), or
    with `config` (what it served before an unload). unload_first: for a dead or stopped stub (a
    load with an unchanged config keeps the instances it has). force: a reason; the config's
    RELOAD_PARAMETER is set to it and the time, so Triton makes new instances while the old ones
    serve."""
    base = f"{url}/v2/repository/models/{model}"
    try:
        config = (
            json.loads(json.dumps(config)) if config else _get(f"{url}/v2/models/{model}/config")[1]
        )
        if force:
            value = f"{time.strftime('%F %T')} {force}"
            config.setdefault("parameters", {})[RELOAD_PARAMETER] = {"string_value": value}
        if unload_first:
            _post(f"{base}/unload", {}, key, timeout)
            deadline = time.monotonic() + timeout
            while _ok(f"{url}/v2/models/{model}/ready") and time.monotonic() < deadline:
                time.sleep(0.2)  # unload returns before the model is gone
        body = {"parameters": {"config": json.dumps(config)}}
        return _post(f"{base}/load", body, key, timeout)[0] == 200, ""
    except urllib.error.HTTPError as exc:
        return False, f"HTTP {exc.code}: {exc.read()[:300].decode(errors='replace')}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return False, f"{type(exc).__name__}: {exc}"


def load_model(url: str, model: str, key: str, timeout: float = STUCK_S) -> tuple[bool, str]:
    """Load `model` from the repository's files (repository API, the node's secret)."""
    try:
        return _post(f"{url}/v2/repository/models/{model}/load", {}, key, timeout)[0] == 200, ""
    except urllib.error.HTTPError as exc:
        return False, f"HTTP {exc.code}: {exc.read()[:300].decode(errors='replace')}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return False, f"{type(exc).__name__}: {exc}"


def python_backend(repo: str, model: str) -> bool:
    """Does the model's config.pbtxt in the repository name the Python backend (its stubs)?"""
    try:
        text = (Path(repo) / model / "config.pbtxt").read_text()
    except OSError:
        return False
    return re.search(r'^\s*backend\s*:\s*"python"', text, re.M) is not None


def restricted_api_args(apis: str, key: str) -> list[str]:
    """tritonserver's flags restricting these API groups (comma-separated) to the admin header
    with `key`, over HTTP and gRPC (gRPC metadata: the header with Triton's
    'triton-grpc-protocol-' prefix)."""
    return [
        f"--http-restricted-api={apis}:{ADMIN_HEADER}={key}",
        f"--grpc-restricted-protocol={apis}:{ADMIN_HEADER}={key}",
    ]


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
        repo: str = "",
    ):
        self.url, self.health_file, self.key = url.rstrip("/"), Path(health_file), key
        self.prefix = prefix  # of the stubs' /dev/shm regions
        self.repo = repo  # the model repository (--model-repository), to read a model's backend
        self.max_region = max_region_mib * 2**20
        self.known: dict[int, str] = {}  # stub pid -> model, learned while the stub ran
        self.handled: set[int] = set()  # stubs already acted on (their zombies stay)
        self.reloading: dict[str, tuple[threading.Thread, str, float]] = {}  # (thread, why, t0)
        self.events: list[str] = []
        self.expected: dict[str, int | None] = {}  # model -> stubs its served config asked for
        self.python: dict[str, bool] = {}  # model -> runs on the Python backend (has stubs)
        self.count: dict[tuple[str, str], int] = {}  # (what, model) -> looks in a row
        self.since: dict[str, float] = {}  # model -> when it was first seen LOADING/UNLOADING
        self.failures: dict[str, int] = {}  # model -> our reloads that failed in a row
        self.lost: dict[str, str] = {}  # models we unloaded to repair, until they are back
        self.configs: dict[str, dict] = {}  # model -> the config it served when last ready
        self.restart = ""  # why tritonserver must be restarted ('' while it need not)
        self.note = ""  # why the server is not ready (it is being started again)
        self.wanted: set[str] = set()  # READY or being loaded at the last look
        self.loading_again: threading.Thread | None = None  # load_again's, after a restart
        self.check_key = False  # the key was hidden on the server's command line: check it took
        self.key_refused = False  # ... and the server refused it (hidden before it was read)
        self._looked: dict[str, dict] = {}  # served configs read during this look

    def config(self, model: str) -> dict:
        """The config `model` serves (read once a look), remembered for a reload after unload."""
        if model not in self._looked:
            self._looked[model] = served_config(self.url, model)
            if self._looked[model]:
                self.configs[model] = self._looked[model]
                self.python[model] = self._looked[model].get("backend") == "python"
        return self._looked[model]

    # ------------------------------------------------------------ looking

    def stubs(self, server_pid: int) -> tuple[dict[str, list[int]], dict[str, list[int]], dict]:
        """(running stubs per model, stopped stubs per model, stubs to act on per model: dead
        ones, and running ones whose region grew over the limit) of the server now."""
        running: dict[str, list[int]] = {}
        stopped: dict[str, list[int]] = {}
        act: dict[str, list[int]] = {}
        for pid in descendants(server_pid):
            state = proc_state(pid)
            model = stub_model(pid) if state not in ("Z", "gone") else None
            if model:
                self.known[pid] = model
                (stopped if state in ("T", "t") else running).setdefault(model, []).append(pid)
                if pid not in self.handled and region_bytes(pid, self.prefix) > self.max_region:
                    act.setdefault(model, []).append(pid)
            elif state == "Z" and pid in self.known and pid not in self.handled:
                act.setdefault(self.known[pid], []).append(pid)
        return running, stopped, act

    def _looks(self, what: str, model: str, bad: bool) -> int:
        """Count the looks in a row at which `what` held for `model` (0 once it does not)."""
        key = (what, model)
        self.count[key] = self.count.get(key, 0) + 1 if bad else 0
        return self.count[key]

    def _served(self, index, act) -> dict[str, tuple[str, str]]:
        """{model: (state, reason)} of what the watchdog answers for: what Triton serves or is
        loading, what we are repairing, and every model a served ensemble names."""
        if index is None:  # no secret: what the statistics API lists, ready or not
            index = {m: ("READY", "") for m in loaded_models(self.url)}
        models = {
            m: sr
            for m, sr in index.items()
            if sr[0] in ("READY", "LOADING", "UNLOADING") or m in self.lost
        }
        for model in [*act, *self.reloading]:
            models.setdefault(model, index.get(model, ("", "")))
        for model, (state, _) in list(models.items()):
            if state == "READY":
                for step in ensemble_steps(self.config(model)):
                    models.setdefault(step, index.get(step, ("UNAVAILABLE", "not loaded")))
        return models

    # ------------------------------------------------------------ one look

    def step(self, server_pid: int) -> dict:
        """One look: start what repairs a model, decide a restart, write the health report."""
        privatise_regions(self.prefix)
        self._looked = {}
        if not _ok(f"{self.url}/v2/health/ready"):
            return self.write(server_pid, False, {})
        if self.loading_again is None or not self.loading_again.is_alive():
            self.note = ""  # (while load_again runs, the report says so)
        if self.check_key and answers_key(self.url, self.key) is not None:
            self.check_key = False
            if not answers_key(self.url, self.key):
                self.key_refused = True
                self._restart("tritonserver refuses its admin key (hidden before it read it?)")
        for model, (thread, _, _) in list(self.reloading.items()):
            if not thread.is_alive():
                del self.reloading[model]
        running, stopped, act = self.stubs(server_pid)
        index = repository_index(self.url, self.key)
        if index is not None:
            loading = {m for m, (state, _) in index.items() if state in ("READY", "LOADING")}
            self.wanted = loading | set(self.reloading) | set(self.lost)
        models = {}
        for model, (state, reason) in sorted(self._served(index, act).items()):
            info = {
                "state": state,
                "ready": _ok(f"{self.url}/v2/models/{model}/ready"),
                "stubs_alive": len(running.get(model, [])),
                "stopped": stopped.get(model, []),
                "problem": "",
            }
            info["problem"] = self._judge(model, info, reason, running, act)
            models[model] = info
        self._ensembles(models)
        for model, info in models.items():
            info["reloading"] = self.reloading[model][1] if model in self.reloading else ""
            info["stubs_expected"] = self.expected.get(model)
        return self.write(server_pid, True, models)

    def _judge(self, model: str, info: dict, reason: str, running, act) -> str:
        """What is wrong with `model` ('' if nothing), starting its repair where one is due."""
        state, now = info["state"], time.monotonic()
        if model not in self.python and self.repo:  # never served yet: its file says
            self.python[model] = python_backend(self.repo, model)
        if state in ("LOADING", "UNLOADING"):  # a load of ours, or anyone's, under way
            since = self.since.setdefault(model, now)
            starved = state == "LOADING" and self.python.get(model) and not running.get(model)
            if self._looks("wedged", model, bool(starved)) >= WEDGED_STEPS:
                self._restart(f"{model} is LOADING with no stub running (one died as it loaded)")
            elif now - since > STUCK_S:
                self._restart(f"{model} has been {state} for {now - since:.0f} s")
        if model in self.reloading:
            _, why, started = self.reloading[model]
            if now - started > STUCK_S:
                self._restart(f"reloading {model} ({why}) has not ended in {STUCK_S:.0f} s")
        if self.restart and (model in self.reloading or state in ("LOADING", "UNLOADING")):
            return f"{state or 'reloading'}: {self.restart}; restarting tritonserver"
        if model in self.reloading:
            return f"reloading ({self.reloading[model][1]})"
        if state in ("LOADING", "UNLOADING"):
            return f"{state} for {now - self.since[model]:.0f} s"
        self.since.pop(model, None)
        self._looks("wedged", model, False)
        if not info["ready"]:
            if model in self.lost:  # unloaded by a repair of ours: it was serving, bring it back
                return self._bring_back(model)
            return f"not ready ({state or 'not loaded'}{': ' + reason if reason else ''})"
        self.lost.pop(model, None)
        self.failures.pop(model, None)
        return self._stubs_problem(model, info, running, act)

    def _stubs_problem(self, model: str, info: dict, running, act) -> str:
        """A READY model's stubs: dead, missing, stopped or holding an oversized region."""
        config = self.config(model)
        want = expected_stubs(config)
        if config.get("backend") != "python" or want is None:
            self.expected[model] = None
            return ""  # an ensemble, or a backend without stubs (Triton's onnxruntime)
        if self.expected.get(model, want) != want:  # loaded since with another config
            self._looks("short", model, False)
        self.expected[model] = want
        have, pids = info["stubs_alive"], act.get(model, [])
        self.handled.update(pids)
        replaced = [p for p in info["stopped"] if p in self.handled]
        info["stopped"] = [p for p in info["stopped"] if p not in self.handled]
        if replaced and have >= want:  # stopped, and its model serves without it: end it
            self._end_stubs(model, replaced)
        dead = [p for p in pids if proc_state(p) in ("Z", "gone")]
        big = [p for p in pids if p not in dead]
        if dead and have >= want:
            dead = []  # a stub replaced on purpose (a load with another config) exits too
        short = self._looks("short", model, have + len(info["stopped"]) < want)
        held = self._looks("stopped", model, bool(info["stopped"]))
        if dead:
            return self._repair(model, dead, f"stub {dead} died")
        if short >= SHORT_STEPS:
            return self._repair(model, [], f"{have} of {want} stub(s) running")
        if held >= STOPPED_STEPS:
            why = f"stub {info['stopped']} stopped (SIGSTOP) for {held} s"
            self.handled.update(info["stopped"])  # Triton may leave it, stopped, after the reload
            return self._repair(model, info["stopped"], why)
        if info["stopped"]:
            return f"stub {info['stopped']} stopped (SIGSTOP): Triton answers 500 for {model}"
        if big:
            why = f"stub {big} holds a region over {self.max_region / 2**20:.0f} MiB"
            return self._repair(model, big, why, unload=False, force=why)
        if have < want:
            return f"{have} of {want} stub(s) running"
        return ""

    def _bring_back(self, model: str) -> str:
        """Load a model that a repair of ours unloaded (it, or an ensemble naming it) with the
        config it served, once every model it names serves again."""
        waiting = [
            s
            for s in ensemble_steps(self.configs.get(model, {}))
            if s in self.reloading or not _ok(f"{self.url}/v2/models/{s}/ready")
        ]
        if waiting:
            return f"not ready ({self.lost[model]}; waiting for {', '.join(waiting)})"
        return self._repair(model, [], f"{self.lost[model]}; loading it again", unload=False)

    def _ensembles(self, models: dict) -> None:
        """An ensemble serves only while every model it names does."""
        for model, info in models.items():
            if info["ready"] and not info["problem"] and info["state"] == "READY":
                broken = [
                    s
                    for s in ensemble_steps(self.config(model))
                    if s not in models or models[s]["problem"] or not models[s]["ready"]
                ]
                if broken:
                    info["problem"] = f"its step(s) {', '.join(broken)} not serving"

    # ------------------------------------------------------------ acting

    def _repair(self, model, pids, why, unload: bool = True, force: str = "") -> str:
        """Load `model` again in a thread (unloaded first: a dead or stopped stub)."""
        if self.restart:
            return f"{why}; restarting tritonserver"
        self.count[("short", model)] = self.count[("stopped", model)] = 0
        self.expected.pop(model, None)  # after the reload: the config may differ
        if unload:  # Triton unloads the ensembles that name it too: bring them back after it
            for other, config in self.configs.items():
                if model in ensemble_steps(config) and _ok(f"{self.url}/v2/models/{other}/ready"):
                    self.lost.setdefault(other, f"unloaded with {model}")
        log(f"{model}: {why}; loading the model again")
        thread = threading.Thread(
            target=self._reload, args=(model, why, unload, force), daemon=True
        )
        self.reloading[model] = (thread, why, time.monotonic())
        thread.start()
        return f"reloading ({why})"

    def _reload(self, model: str, why: str, unload: bool, force: str) -> None:
        started = time.monotonic()
        if unload:
            self.lost[model] = why
        config = self.configs.get(model) if model in self.lost and not unload else None
        ok, error = reload_model(
            self.url, model, self.key, unload_first=unload, force=force, config=config
        )
        if ok:
            self.lost.pop(model, None)
        else:
            self.failures[model] = self.failures.get(model, 0) + 1
            if self.failures[model] >= FAILED_RELOADS:
                self._restart(f"loading {model} again failed {FAILED_RELOADS} times: {error}")
        took = time.monotonic() - started
        self._event(
            f"{model}: {why}, model loaded again in {took:.1f} s"
            + ("" if ok else f"; FAILED: {error}")
        )

    def _end_stubs(self, model: str, pids: list[int]) -> None:
        """SIGKILL stubs of this server that stay stopped after their model was loaded again
        (they keep their memory and region otherwise)."""
        for pid in pids:
            if self.known.get(pid) == model and proc_state(pid) in ("T", "t"):
                try:
                    os.kill(pid, signal.SIGKILL)
                    self._event(f"{model}: ended stub [{pid}], stopped and replaced")
                except ProcessLookupError:
                    pass

    # ------------------------------------------------------------ after a restart

    def serving(self) -> dict[str, dict]:
        """What the server was to serve at the last look: the models READY, loading, or being
        repaired, each with the config it served ({} if it has not served yet: its files')."""
        return {m: self.configs.get(m, {}) for m in self.wanted}

    def load_again(self, served: dict[str, dict]) -> None:
        """Once the server answers, load the models that served before it ended, each with the
        config it served, all at once (each serves as soon as it is loaded), an ensemble once
        the models it names are loaded; the report says so meanwhile."""
        self.note = f"{self.note}; loading again what served: {', '.join(sorted(served))}"

        def run():
            deadline = time.monotonic() + STUCK_S
            while not _ok(f"{self.url}/v2/health/live"):
                if time.monotonic() > deadline or _stop_requested.wait(0.1):
                    return
            started, loads = time.monotonic(), {}
            for model in sorted(served, key=lambda m: self._is_ensemble(m, served[m])):
                steps = ensemble_steps(served[model])
                if not steps and self._is_ensemble(model, served[model]):
                    steps = list(loads)  # never served: after every other model
                after = [loads[s] for s in steps if s in loads]
                loads[model] = threading.Thread(
                    target=self._load_one, args=(model, served[model], started, after)
                )
                loads[model].start()
            for load in loads.values():
                load.join()

        self.loading_again = threading.Thread(target=run, daemon=True)
        self.loading_again.start()

    def _is_ensemble(self, model: str, config: dict) -> bool:
        """Is `model` an ensemble, by the config it served, else by its repository's file?"""
        if config:
            return config.get("platform") == "ensemble"
        try:
            text = (Path(self.repo) / model / "config.pbtxt").read_text()
        except OSError:
            return False
        return re.search(r'^\s*platform\s*:\s*"ensemble"', text, re.M) is not None

    def _load_one(self, model: str, config: dict, started: float, after=()) -> None:
        """Load `model` with `config` once the loads in `after` (its steps') are done."""
        for load in after:
            load.join()
        if config:
            ok, error = reload_model(self.url, model, self.key, config=config)
        else:  # never served: what its files say
            ok, error = load_model(self.url, model, self.key)
        took = time.monotonic() - started
        if ok:
            log(f"{model}: loaded again, {took:.1f} s after the server answered")
        else:
            self._event(f"{model}: loading it again failed ({error[:200]})")

    def _restart(self, why: str) -> None:
        if not self.restart:
            self.restart = why
            log(f"{why}: restarting tritonserver")

    def _event(self, event: str) -> None:
        self.events = (self.events + [f"{time.strftime('%T')} {event}"])[-10:]
        log(event)

    def write(
        self, server_pid: int, ready: bool, models: dict, failed: str = "", next_start: float = 0
    ) -> dict:
        report = {
            "time": time.time(),
            "server_pid": server_pid,
            "server_ready": ready,
            "restarting": self.restart or self.note,
            "next_start": next_start,  # when a server that keeps ending is started again
            "failed": failed,
            "models": models,
            "events": self.events,
        }
        tmp = self.health_file.with_name(self.health_file.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(report, f)
        os.replace(tmp, self.health_file)
        return report


def _end(server: subprocess.Popen, grace: float = STOP_GRACE_S) -> None:
    """SIGTERM the server, SIGKILL it after `grace` seconds (a wedged one ignores the first)."""
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            server.kill()


def server_env() -> dict:
    """tritonserver's environment: this process's without the admin key (the server takes it on
    its command line; its stubs run the models' code and need it nowhere)."""
    return {k: v for k, v in os.environ.items() if k != "TRITON_ADMIN_KEY"}


def start_server(argv: list[str], key: str, hide: bool) -> subprocess.Popen:
    """Start tritonserver; with `hide`, mask the key on its command line once it has read it."""
    server = subprocess.Popen(argv, env=server_env())
    started = time.monotonic()  # Popen returns once tritonserver's exec has succeeded
    if hide:
        why_not = hide_argument(server.pid, key)
        server.key_hidden = not why_not
        if why_not:
            log(f"the admin key stays on tritonserver's command line: {why_not}")
        else:  # what a local user could see meanwhile (docs/security.md: the residual)
            shown = (time.monotonic() - started) * 1000
            log(f"{KEY_SHOWN} {shown:.1f} ms (from its start until masked)")
    return server


def run_once(argv: list[str], key: str, hide: bool) -> int:
    """--no-repair: start tritonserver (the key's flags added and masked), pass SIGTERM and
    SIGINT on to it, return its exit status."""
    server = start_server(argv, key, hide)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda sig, _frame: server.send_signal(sig))
    return server.wait()


def supervise(
    argv: list[str],
    url: str,
    health_file: Path,
    every: float,
    max_region_mib: float = MAX_REGION_MIB,
    restrict_apis: str = "",
    repair: bool = True,
) -> int:
    """Run tritonserver (argv) and keep it and its models serving; return its exit status.
    repair=False: run it once, unwatched (run_once)."""
    os.umask(0o077)  # the stubs' /dev/shm regions and the health file: this user's only
    key = os.environ.get("TRITON_ADMIN_KEY", "")
    if restrict_apis and not key:
        log("--restrict-apis needs TRITON_ADMIN_KEY in the environment; not starting tritonserver")
        return 2
    if not key:
        log("TRITON_ADMIN_KEY is not set: a model whose stub dies cannot be reloaded")
    if restrict_apis:
        argv = [*argv, *restricted_api_args(restrict_apis, key)]
    if not repair:
        return run_once(argv, key, bool(restrict_apis))
    prefix = shm_prefix(argv)
    repo = next((a.split("=", 1)[1] for a in argv if a.startswith("--model-repository=")), "")
    stopping = False
    server = None

    def stop(signum, _frame):
        nonlocal stopping
        stopping = True
        _stop_requested.set()
        if server is not None and server.poll() is None:
            server.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    restarts: list[float] = []
    events: list[str] = []
    note = ""  # why the server is being started again, for the report until it is ready
    hide = bool(restrict_apis)  # the key flags are ours: hide the key once the server read it
    served: dict[str, dict] = {}  # what served before the server ended: loaded again after
    while True:
        removed = remove_stale_regions(prefix)
        if removed:
            log(f"removed {len(removed)} shared-memory region(s) left by a previous server")
        watchdog = Watchdog(url, health_file, key, prefix, max_region_mib, repo)
        watchdog.events, watchdog.note = events, note
        server = start_server(_loading_nothing(argv) if served and key else argv, key, hide)
        watchdog.check_key = getattr(server, "key_hidden", False)
        if served and key:
            watchdog.load_again(served)
        ended = _ended(server)
        while server.poll() is None and not stopping and not watchdog.restart:
            try:
                watchdog.step(server.pid)
            except OSError as exc:  # a health file that cannot be written is not a reason to stop
                log(f"health file: {exc}")
            _reap_orphans(server.pid)
            ended.wait(every)  # back at once when the server ends
        served = _to_load_again(watchdog, served)
        why = watchdog.restart
        hide = hide and not watchdog.key_refused
        if why and not stopping:
            _end(server)
        code = server.wait()
        _end_orphaned_stubs(prefix)  # they would keep their regions mapped
        if stopping:
            remove_stale_regions(prefix)  # what the stubs leave in /dev/shm when stopped with it
            return code
        now = time.monotonic()
        restarts = [t for t in restarts if now - t < RESTART_WINDOW_S] + [now]
        last = why or f"it exited with status {code}{_signal_name(code)}"
        watchdog._event(f"server {'restarted: ' + why if why else 'ended: ' + last}")
        events = watchdog.events
        delay = restart_delay(len(restarts))
        if delay:
            minutes = RESTART_WINDOW_S // 60
            if not _wait_before_restart(watchdog, server.pid, delay, len(restarts), minutes, last):
                remove_stale_regions(prefix)
                return code
        watchdog.note = f"started again after: {last}"
        watchdog.restart = ""
        watchdog.write(server.pid, False, {})
        note = watchdog.note
        log("starting tritonserver again")


def _loading_nothing(argv: list[str]) -> list[str]:
    """The server's command line without --load-model: it opens its ports at once, and the
    watchdog loads what served (Watchdog.load_again)."""
    return [a for a in argv if not a.startswith("--load-model")]


def _ended(server: subprocess.Popen) -> threading.Event:
    """An event set when the server ends (a thread waits for it)."""
    ended = threading.Event()
    threading.Thread(target=lambda: (server.wait(), ended.set()), daemon=True).start()
    return ended


def _to_load_again(watchdog: Watchdog, served: dict[str, dict]) -> dict[str, dict]:
    """What to load after the next start: what served at the watchdog's last look; with what it
    was still loading again, if the server ended before it was done."""
    now = watchdog.serving()
    if watchdog.loading_again is not None and watchdog.loading_again.is_alive():
        return {**served, **now}
    return now or served


def _signal_name(code: int) -> str:
    """', SIGSEGV' for a server killed by a signal (Popen's negative status), else ''."""
    if code is not None and code < 0:
        try:
            return f", {signal.Signals(-code).name}"
        except ValueError:
            return ""
    return ""


def _wait_before_restart(dog, server_pid, delay, count, minutes, last) -> bool:
    """Wait `delay` s before the next start, the report saying so (rewritten every second, so it
    stays fresh); False if the watchdog was told to stop meanwhile."""
    at = time.time() + delay
    dog.note = (
        f"tritonserver ended {count} times in {minutes} min (last: {last}); backing off: "
        f"starting it again at {time.strftime('%T', time.localtime(at))}"
    )
    log(f"{dog.note} (in {delay:.0f} s)")
    while time.time() < at:
        if _stop_requested.is_set():
            return False
        dog.write(server_pid, False, {}, next_start=at)
        _stop_requested.wait(min(1.0, max(0.0, at - time.time())))
    return not _stop_requested.is_set()


_stop_requested = threading.Event()  # SIGTERM or SIGINT to the watchdog


def _end_orphaned_stubs(prefix: str, wait: float = 10.0) -> None:
    """SIGKILL the stubs of a server that has exited, recognised by the region prefix on their
    command line (never a reused pid), every one, not only those the watchdog has seen: a stub
    started just before a crash is not known yet, and one whose server died mid-request may
    wait on a futex for good (Triton 2.51: two stubs left by seven crashes, found after a test)."""
    mine = stubs_of(prefix)
    for pid in mine:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + wait
    while any(proc_state(p) not in ("Z", "gone") for p in mine) and time.monotonic() < deadline:
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


# ---------------------------------------------------------------- the health check


def check(url: str, health_file: Path) -> tuple[bool, list[str]]:
    """(healthy, lines saying why): the watchdog's fresh report on every model it answers for
    (Triton's state, stubs running / asked for, a repair under way, a problem in words) and
    Triton's own readiness, server and per model. Healthy only if every model is ready with the
    stubs its served config asks for and nothing is wrong."""
    try:
        report = json.loads(Path(health_file).read_text())
    except (OSError, ValueError):
        report = None
    if report and report.get("failed"):
        return False, [f"FAILED: {report['failed']}"]
    if not _ok(f"{url}/v2/health/ready"):
        if report and report.get("restarting"):
            fresh = time.time() - report.get("time", 0) <= STALE_AFTER_S
            wait = report.get("next_start", 0) - time.time()
            when = f"; next start in {wait:.0f} s" if fresh and wait > 0 else ""
            return False, [f"server: not ready ({report['restarting']}{when})"]
        return False, ["server: not ready"]
    if report is None or time.time() - report.get("time", 0) > STALE_AFTER_S:
        return False, [
            f"watchdog: no fresh report in {health_file}: it is not running, so nothing repairs "
            f"a model whose stub dies; run `{RECOVER}`"
        ]
    lines, healthy = [], not report.get("restarting")
    if report.get("restarting"):
        lines.append(f"server: restarting ({report['restarting']})")
    seen = report.get("models", {})
    for model in sorted(set(loaded_models(url)) | set(seen)):
        info = seen.get(model)
        ready = _ok(f"{url}/v2/models/{model}/ready")
        if info is None:
            healthy = False
            lines.append(f"{model}: {'ready' if ready else 'NOT READY'}, not yet looked at")
            continue
        problem = info.get("problem", "") or ("" if ready else "NOT READY")
        healthy &= ready and not problem
        want = info.get("stubs_expected")
        stubs = f" ({info.get('stubs_alive', 0)} of {want} stub(s) running)" if want else ""
        lines.append(f"{model}: {problem or 'ready'}{stubs}")
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
    parser.add_argument(
        "--no-repair",
        action="store_true",
        help="only add the key's flags, mask the key and wait for tritonserver (no repairs, no "
        "restarts, no health file)",
    )
    parser.add_argument(
        "--restrict-apis",
        default="",
        metavar="GROUPS",
        help="e.g. model-repository,shared-memory,logging,trace: restrict these Triton APIs to "
        f"the header {ADMIN_HEADER} with $TRITON_ADMIN_KEY (the flags are added here)",
    )
    args = parser.parse_args(own)
    if args.check:
        healthy, lines = check(args.url, Path(args.health_file))
        print("\n".join(lines))
        return 0 if healthy else 1
    if not server_argv:
        parser.error("give the tritonserver command after --")
    return supervise(
        server_argv,
        args.url,
        Path(args.health_file),
        args.every,
        args.max_region_mib,
        args.restrict_apis,
        repair=not args.no_repair,
    )


if __name__ == "__main__":
    sys.exit(main())
