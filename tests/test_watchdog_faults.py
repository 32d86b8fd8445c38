"""Issue 35's faults of Triton's processes, made for real on the stack `make up` starts
(maintainers/reliability/faults_watchdog.py, the same code as `make reliability`), with notebook 8's
ensemble loaded: a stub killed right after its repair, a stub killed while Triton loads its model, a
stub stopped with SIGSTOP, the watchdog itself killed; and the admin key on no command line but
tritonserver's. The ensemble must serve again within 60 s (30 s once a stopped stub's fault is
over) and `make status` must never say healthy while it does not. (The decisions alone, without a
server: tests/test_triton_watchdog.py.)"""

from __future__ import annotations

import pytest

from maintainers.reliability import faults_watchdog


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_watchdog_converges_and_status_tells_the_truth(tmp_path, test_images):
    image = next(p for p in test_images if p.suffix == ".jpg").read_bytes()
    rows = faults_watchdog.watchdog_faults(tmp_path, image)
    for row in rows:
        print(f"{row['scenario']}: {row['observed']} ({row['seconds']} s)")
    assert len(rows) == 5
    failed = [f"{r['scenario']}: {r['observed']}" for r in rows if not r["passed"]]
    assert not failed, "\n".join(failed)
