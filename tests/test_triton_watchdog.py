"""servelab.serving.triton_watchdog without a server: the parts that decide what to remove and
what to report. (With a real Triton: tests/test_faults.py kills its stubs and its server.)"""

from __future__ import annotations

import json
import mmap
import os
import signal
import subprocess
import sys
import time

from servelab import labenv
from servelab.serving import triton_procs
from servelab.serving import triton_watchdog as wd


def test_the_admin_header_is_the_labs_and_the_flags_carry_it():
    assert wd.ADMIN_HEADER == labenv.ADMIN_HEADER
    groups = ",".join(labenv.RESTRICTED_APIS)
    assert wd.restricted_api_args(groups, "k") == [
        f"--http-restricted-api={groups}:lab-admin-key=k",
        f"--grpc-restricted-protocol={groups}:lab-admin-key=k",
    ]


def test_stale_regions_go_mapped_ones_stay_and_other_prefixes_are_not_touched(
    tmp_path, monkeypatch
):
    prefix = f"servelab_test_{os.getpid()}_"
    stale, live, other = (tmp_path / n for n in (prefix + "a", prefix + "b", "someone_else_c"))
    for path in (stale, live, other):
        path.write_bytes(b"\0" * 4096)
        path.chmod(0o644)
    with open(live, "r+b") as f, mmap.mmap(f.fileno(), 4096) as mapped:
        assert mapped[:1] == b"\0"
        # the scan finds /dev/shm/<name> in /proc/*/maps; this file lives elsewhere: say it is
        in_use = triton_procs.mapped_shm()
        monkeypatch.setattr(triton_procs, "mapped_shm", lambda: in_use | {live.name})
        assert wd.remove_stale_regions(prefix, shm=tmp_path) == [stale.name]
    assert not stale.exists() and live.exists() and other.exists()
    assert wd.privatise_regions(prefix, shm=tmp_path) == 1
    assert live.stat().st_mode & 0o777 == 0o600 and other.stat().st_mode & 0o777 == 0o644
    assert wd.remove_stale_regions("", shm=tmp_path) == []  # no prefix: never everything


def test_the_prefix_is_read_from_the_server_command():
    argv = ["tritonserver", "--backend-config=python,shm-region-prefix-name=servelab_triton_1_"]
    assert wd.shm_prefix(argv) == "servelab_triton_1_" and wd.shm_prefix(["tritonserver"]) == ""


def test_check_without_a_server_or_with_a_stale_report_is_unhealthy(tmp_path, monkeypatch):
    healthy, lines = wd.check("http://127.0.0.1:9", tmp_path / "none.json")
    assert not healthy and lines == ["server: not ready"]
    report = tmp_path / "health.json"
    report.write_text(json.dumps({"time": time.time() - 3600, "models": {}}))
    monkeypatch.setattr(wd, "_ok", lambda url, timeout=3.0: True)  # a server that answers ready
    monkeypatch.setattr(wd, "loaded_models", lambda url: [])
    healthy, lines = wd.check("http://127.0.0.1:9", report)
    assert not healthy and "no fresh report" in lines[0]


def test_expected_stubs_follow_the_served_config():
    gpu = {"kind": "KIND_GPU", "count": 2, "gpus": [0, 1]}
    assert wd.expected_stubs({"backend": "python", "instance_group": [gpu]}) == 4
    assert wd.expected_stubs({"backend": "python", "instance_group": [{"count": 3}]}) == 3
    assert wd.expected_stubs({"backend": "python"}) == 1
    assert wd.expected_stubs({"backend": "onnxruntime", "instance_group": [gpu]}) == 4
    assert wd.expected_stubs({"kind": "KIND_GPU", "instance_group": [{"kind": "KIND_GPU"}]}) == 1
    assert wd.expected_stubs({"platform": "ensemble"}) is None and wd.expected_stubs({}) is None


class _Server:
    """What the watchdog asks Triton, answered from dicts: models -> config (backend, instance
    count, ensemble steps), state -> the repository index's state, ready -> per-model readiness.
    The decisions are tested here; tests/test_watchdog_faults.py makes each fault for real."""

    def __init__(self, models: dict[str, dict]):
        self.models = models
        self.state = {m: "READY" for m in models}
        self.ready = {m: True for m in models}

    def get(self, url, timeout=5.0):
        if url.endswith("/v2/models/stats"):
            return 200, {"model_stats": [{"name": m} for m in self.models if self.ready[m]]}
        name = url.split("/v2/models/")[1].split("/")[0]
        return 200, self.models[name]

    def ok(self, url, timeout=3.0):
        if "/v2/models/" not in url:
            return True  # the server is ready
        return self.ready.get(url.split("/v2/models/")[1].split("/")[0], False)

    def index(self, url, key):
        return {m: (self.state[m], "") for m in self.models}


def python(count: int = 1) -> dict:
    return {"backend": "python", "instance_group": [{"count": count, "kind": "KIND_CPU"}]}


ENSEMBLE = {
    "platform": "ensemble",
    "ensemble_scheduling": {"step": [{"model_name": "preprocess"}, {"model_name": "onnx"}]},
}


def _watchdog(monkeypatch, tmp_path, server, running, stopped=None, act=None):
    monkeypatch.setattr(wd, "_get", server.get)
    monkeypatch.setattr(wd, "_ok", server.ok)
    monkeypatch.setattr(wd, "repository_index", server.index)
    monkeypatch.setattr(wd, "privatise_regions", lambda prefix: 0)
    dog = wd.Watchdog("http://t", tmp_path / "health.json", "key", "", 512)
    stopped = {} if stopped is None else stopped
    act = {} if act is None else act
    monkeypatch.setattr(dog, "stubs", lambda server_pid: (dict(running), dict(stopped), dict(act)))
    reloads = []

    def reload(model, why, unload, force):
        reloads.append((model, why, unload))

    monkeypatch.setattr(dog, "_reload", reload)
    return dog, reloads


def _settle(dog):
    for thread, _, _ in list(dog.reloading.values()):
        thread.join(5)


def test_a_stub_that_vanished_without_a_zombie_has_its_model_loaded_again(monkeypatch, tmp_path):
    """Triton may reap a dead stub before the watchdog sees its zombie (the Docker stack): a
    Python model missing a stub for SHORT_STEPS looks is loaded again."""
    running = {"food_classifier": [11, 12]}
    dog, reloads = _watchdog(
        monkeypatch, tmp_path, _Server({"food_classifier": python(2)}), running
    )
    dog.step(1)
    running["food_classifier"] = [11]
    for _ in range(wd.SHORT_STEPS - 1):
        report = dog.step(1)
    assert reloads == []  # a dip while a load replaces stubs is not a death
    assert report["models"]["food_classifier"]["problem"] == "1 of 2 stub(s) running"
    dog.step(1)
    _settle(dog)
    assert reloads == [("food_classifier", "1 of 2 stub(s) running", True)]


def test_a_stub_that_dies_right_after_its_repair_is_repaired_again(monkeypatch, tmp_path):
    """Issue 35: the new stub died before the watchdog ever saw it, so the model was never seen
    with all its stubs, and the old rule (act only on a model once complete) never acted."""
    running = {"onnx": []}
    dog, reloads = _watchdog(monkeypatch, tmp_path, _Server({"onnx": python()}), running)
    for _ in range(wd.SHORT_STEPS):
        report = dog.step(1)
    _settle(dog)
    assert reloads == [("onnx", "0 of 1 stub(s) running", True)], report


def test_a_smaller_config_loaded_on_purpose_is_not_a_dead_stub(monkeypatch, tmp_path):
    server, running = _Server({"food_classifier": python(4)}), {"food_classifier": [1, 2, 3, 4]}
    dog, reloads = _watchdog(monkeypatch, tmp_path, server, running)
    dog.step(1)
    server.models["food_classifier"], running["food_classifier"] = python(2), [5, 6]  # an edit()
    for _ in range(2 * wd.SHORT_STEPS):
        report = dog.step(1)
    assert reloads == [] and dog.reloading == {}
    assert report["models"]["food_classifier"]["problem"] == ""


def test_the_zombie_of_a_stub_replaced_on_purpose_is_not_a_death(monkeypatch, tmp_path):
    """A load with another config ends the old instances' stubs (zombies for a while) while the
    new ones run: every stub the config asks for is there, so nothing is reloaded (in the Docker
    stack an unload there took food_classifier_tuned away in the middle of notebook 7)."""
    running = {"food_classifier_tuned": [7]}
    old_stub = os.getpid() + 10**6  # no such process: its state reads "gone"
    act = {"food_classifier_tuned": [old_stub]}
    server = _Server({"food_classifier_tuned": python()})
    dog, reloads = _watchdog(monkeypatch, tmp_path, server, running, act=act)
    dog.step(1)
    assert reloads == [] and dog.reloading == {}
    running["food_classifier_tuned"] = []  # and a real death: fewer stubs than the config asks
    dog.handled.clear()
    dog.step(1)
    _settle(dog)
    assert reloads == [("food_classifier_tuned", f"stub [{old_stub}] died", True)]


def test_a_stopped_stub_is_reported_then_its_model_loaded_again(monkeypatch, tmp_path):
    stopped = {"onnx": [21]}
    dog, reloads = _watchdog(monkeypatch, tmp_path, _Server({"onnx": python()}), {}, stopped)
    report = dog.step(1)
    assert "stopped (SIGSTOP)" in report["models"]["onnx"]["problem"] and reloads == []
    for _ in range(wd.STOPPED_STEPS - 1):
        dog.step(1)
    _settle(dog)
    assert reloads == [("onnx", f"stub [21] stopped (SIGSTOP) for {wd.STOPPED_STEPS} s", True)]
    assert 21 in dog.handled  # once replaced, the leftover is ended, not reloaded for again


def test_a_model_loading_without_a_stub_restarts_the_server(monkeypatch, tmp_path):
    """Issue 35: a stub killed while its model loads leaves it LOADING for good."""
    server = _Server({"onnx": python()})
    dog, reloads = _watchdog(monkeypatch, tmp_path, server, {})
    dog.step(1)  # seen serving: a Python-backend model
    server.state["onnx"], server.ready["onnx"] = "LOADING", False
    for _ in range(wd.WEDGED_STEPS - 1):
        report = dog.step(1)
    assert dog.restart == "" and report["models"]["onnx"]["problem"].startswith("LOADING for")
    report = dog.step(1)
    assert "LOADING with no stub running" in dog.restart and report["restarting"] == dog.restart


def test_a_backend_without_stubs_is_never_reloaded_and_an_ensemble_needs_its_steps(
    monkeypatch, tmp_path
):
    """Triton's onnxruntime backend (the Docker stack) has no stub to count; an ensemble is ready
    only while every model it names serves."""
    server = _Server(
        {
            "onnx": {"backend": "onnxruntime", "instance_group": [{"count": 2}]},
            "preprocess": python(),
            "food_classifier_ensemble": ENSEMBLE,
        }
    )
    running = {"preprocess": [5]}
    dog, reloads = _watchdog(monkeypatch, tmp_path, server, running)
    for _ in range(2 * wd.SHORT_STEPS):
        report = dog.step(1)
    assert reloads == [] and all(not m["problem"] for m in report["models"].values()), report
    server.ready["onnx"], server.state["onnx"] = False, "UNAVAILABLE"
    report = dog.step(1)
    assert report["models"]["food_classifier_ensemble"]["problem"] == (
        "its step(s) onnx not serving"
    )
    assert report["models"]["onnx"]["problem"].startswith("not ready (UNAVAILABLE")


def test_check_is_healthy_only_when_every_model_is(monkeypatch, tmp_path):
    server = _Server({"onnx": python()})
    dog, _ = _watchdog(monkeypatch, tmp_path, server, {"onnx": [3]})
    dog.step(1)
    healthy, lines = wd.check("http://t", tmp_path / "health.json")
    assert healthy and lines == ["onnx: ready (1 of 1 stub(s) running)"]
    monkeypatch.setattr(dog, "stubs", lambda server_pid: ({}, {"onnx": [3]}, {}))
    dog.step(1)
    healthy, lines = wd.check("http://t", tmp_path / "health.json")
    assert not healthy and "stopped (SIGSTOP)" in lines[0]
    dog.write(1, False, {}, failed="the watchdog gave up: run `make restart SERVICE=triton`")
    healthy, lines = wd.check("http://t", tmp_path / "health.json")
    assert not healthy and lines[0].startswith("FAILED:") and "make restart" in lines[0]


def test_a_secret_read_at_start_is_hidden_from_the_command_line(tmp_path):
    """What the watchdog does to tritonserver's admin key, on a real process that, as Triton,
    copies its arguments as it starts and then starts a second thread: the command line every
    local user can read shows a random mask, and the process keeps the value it read."""
    import subprocess
    import sys
    from pathlib import Path

    secret = "0123456789abcdef" * 2
    out = tmp_path / "read.txt"
    code = (
        "import sys, threading, time; v = sys.argv[1].split('=')[1]; "
        "threading.Thread(target=time.sleep, args=(30,), daemon=True).start(); "
        f"time.sleep(1.0); open({str(out)!r}, 'w').write(v); time.sleep(30)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, f"--key={secret}"])
    try:
        assert triton_procs.hide_argument(proc.pid, secret) == ""
        shown = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        assert secret.encode() not in b"".join(shown)
        mask = shown[3].split(b"=")[1]
        assert len(mask) == len(secret) and mask.isupper() and mask.isalpha()
        for _ in range(50):
            if out.exists() and out.read_text():
                break
            time.sleep(0.1)
        assert out.read_text() == secret
    finally:
        proc.kill()
        proc.wait()
    assert triton_procs.hide_argument(proc.pid, secret, wait_s=0.1) != ""  # gone: says why


def _stub_like(prefix: str) -> subprocess.Popen:
    """A process whose command line reads as a Python-backend stub's with a region named
    prefix*, and which waits for good as a stub whose server died mid-request can (SIGTERM
    ignored)."""
    wait = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"
    argv = ["/backends/python/triton_python_backend_stub", "-c", wait, f"{prefix}region", "336"]
    return subprocess.Popen(argv, executable=sys.executable)


def test_every_stub_of_an_ended_server_is_ended_not_only_those_it_has_seen():
    """A stub started just before its server crashed is not known to the watchdog yet, and may
    hang: the watchdog ends it by its region prefix; another server's stub (another prefix,
    here a prefix of ours with one more digit) stays."""
    mine = _stub_like(f"servelab_test_{os.getpid()}_")
    other = _stub_like(f"servelab_test_{os.getpid()}1_")
    try:
        deadline = time.monotonic() + 10
        while len(triton_procs.stubs_of("servelab_test_")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert triton_procs.stubs_of(f"servelab_test_{os.getpid()}_") == [mine.pid]
        wd._end_orphaned_stubs(f"servelab_test_{os.getpid()}_")
        assert mine.wait(timeout=10) == -signal.SIGKILL
        assert other.poll() is None
    finally:
        for proc in (mine, other):
            proc.kill()
            proc.wait()
