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
