"""servelab.serving.triton_watchdog without a server: the parts that decide what to remove and
what to report. (With a real Triton: tests/test_faults.py kills its stubs and its server.)"""

from __future__ import annotations

import json
import mmap
import os
import time

from servelab import labenv
from servelab.serving import triton_watchdog as wd


def test_the_admin_header_is_the_labs():
    assert wd.ADMIN_HEADER == labenv.ADMIN_HEADER


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
        in_use = wd.mapped_shm()
        monkeypatch.setattr(wd, "mapped_shm", lambda: in_use | {live.name})
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
    monkeypatch.setattr(wd, "_ok", lambda url: True)  # a server that answers ready
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
    """What the watchdog asks Triton, answered from a dict (models: name -> instance count)."""

    def __init__(self, models: dict[str, int]):
        self.models = models

    def get(self, url, timeout=5.0):
        if url.endswith("/v2/models/stats"):
            return 200, {"model_stats": [{"name": m} for m in self.models]}
        name = url.split("/v2/models/")[1].split("/")[0]
        config = {"backend": "python", "instance_group": [{"count": self.models[name]}]}
        return 200, config


def _watchdog(monkeypatch, tmp_path, server, alive):
    monkeypatch.setattr(wd, "_get", server.get)
    monkeypatch.setattr(wd, "_ok", lambda url, timeout=3.0: True)
    monkeypatch.setattr(wd, "privatise_regions", lambda prefix: 0)
    dog = wd.Watchdog("http://t", tmp_path / "health.json", "key", "", 512)
    monkeypatch.setattr(dog, "stubs", lambda server_pid: (dict(alive), {}))
    reloads = []
    monkeypatch.setattr(dog, "_reload", lambda model, pids, why: reloads.append((model, why)))
    return dog, reloads


def test_a_stub_that_vanished_without_a_zombie_has_its_model_loaded_again(monkeypatch, tmp_path):
    """Triton may reap a dead stub before the watchdog sees its zombie (the Docker stack): a model
    that had all its stubs and now misses one for SHORT_STEPS looks is loaded again."""
    alive = {"food_classifier": 2}
    dog, reloads = _watchdog(monkeypatch, tmp_path, _Server({"food_classifier": 2}), alive)
    dog.step(1)
    alive["food_classifier"] = 1
    for _ in range(wd.SHORT_STEPS - 1):
        dog.step(1)
    assert reloads == []  # a dip while a load replaces stubs is not a death
    report = dog.step(1)
    for thread, _ in dog.reloading.values():
        thread.join(5)
    assert reloads == [("food_classifier", "1 of 2 stub(s) running")], report


def test_a_smaller_config_loaded_on_purpose_is_not_a_dead_stub(monkeypatch, tmp_path):
    server, alive = _Server({"food_classifier": 4}), {"food_classifier": 4}
    dog, reloads = _watchdog(monkeypatch, tmp_path, server, alive)
    dog.step(1)
    server.models["food_classifier"], alive["food_classifier"] = 2, 2  # a student's edit()
    for _ in range(2 * wd.SHORT_STEPS):
        dog.step(1)
    assert reloads == [] and dog.reloading == {}


def test_the_zombie_of_a_stub_replaced_on_purpose_is_not_a_death(monkeypatch, tmp_path):
    """A load with another config ends the old instances' stubs (zombies for a while) while the
    new ones run: every stub the config asks for is there, so nothing is reloaded (in the Docker
    stack an unload there took food_classifier_tuned away in the middle of notebook 7)."""
    alive = {"food_classifier_tuned": 1}
    server = _Server({"food_classifier_tuned": 1})
    dog, reloads = _watchdog(monkeypatch, tmp_path, server, alive)
    dog.step(1)
    old_stub = os.getpid() + 10**6  # no such process: its state reads "gone"
    monkeypatch.setattr(
        dog, "stubs", lambda server_pid: (dict(alive), {"food_classifier_tuned": [old_stub]})
    )
    dog.step(1)
    assert reloads == [] and dog.reloading == {}
    alive["food_classifier_tuned"] = 0  # and a real death: fewer stubs than the config asks for
    dog.step(1)
    for thread, _ in dog.reloading.values():
        thread.join(5)
    assert reloads == [("food_classifier_tuned", f"stub [{old_stub}] died")]
