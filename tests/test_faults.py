"""Faults of the FastAPI/Flask half, the launcher and the lab's Triton processes: FastAPI killed
behind Flask, a FastAPI server killed mid-benchmark, `up` after a crash then `down` twice, stale
state with a reused pid, two restarts at once, `up` after a crash with clients connected, and
Triton's stubs, server and whole process group killed. (Triton's configuration faults:
tests/test_fuzz_triton.py. The report runs the launcher sequence with the full `make up` stack;
here with --no-triton, to stay short.)
"""

import pytest

from maintainers.reliability import faults

pytestmark = pytest.mark.timeout(300)


@pytest.mark.slow
def test_fastapi_killed_behind_flask_then_back(test_images):
    row = faults.fastapi_killed_behind_flask(test_images[0].read_bytes())
    print(row)
    assert row["passed"], row["observed"]
    assert "HTTP 502" in row["observed"] and "same Flask process yes" in row["observed"]


@pytest.mark.slow
def test_fastapi_killed_mid_benchmark_is_reported(image_b64):
    row = faults.fastapi_killed_mid_benchmark(image_b64)
    print(row)
    assert row["passed"], row["observed"]
    assert row["seconds"] < 60 and "error:" in row["observed"]


@pytest.mark.slow
def test_launcher_up_after_a_crash_then_down_twice(tmp_path, built_artifacts):
    crash, down = faults.crash_up_down_down(tmp_path, full_stack=False)
    for row in (crash, down):
        print(row)
        assert row["passed"], row["observed"]
    assert "the others kept (same process): yes" in crash["observed"]
    assert "nothing was running" in down["observed"]


def test_launcher_down_with_a_stale_pid_leaves_other_programs_alone(tmp_path):
    row = faults.stale_pid(tmp_path)
    print(row)
    assert row["passed"], row["observed"]


def test_a_failing_scenario_is_reported_as_failed():
    def broken():
        raise RuntimeError("port already in use")

    row = faults.scenario("broken", "anything", broken)
    assert not row["passed"] and "RuntimeError: port already in use" in row["observed"]


@pytest.mark.slow
def test_concurrent_restarts_leave_nothing_running_after_down(tmp_path, built_artifacts):
    """Two `make restart`s at once each rewrote the state file: one new process was lost and
    `make down` left it running on its port."""
    row = faults.concurrent_restarts(tmp_path)
    print(row)
    assert row["passed"], row["observed"]


@pytest.mark.slow
def test_up_after_a_crash_restarts_only_what_died_on_its_port(tmp_path, built_artifacts):
    """After a crash `up` moved FastAPI to a new port (TIME_WAIT on the old one), restarted Flask
    and JupyterLab (the student's kernels lost), and printed the Jupyter token."""
    row = faults.crash_keeps_ports_and_survivors(tmp_path)
    print(row)
    assert row["passed"], row["observed"]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_killed_triton_processes_are_noticed_and_repaired(tmp_path, image_b64):
    """kill -9 of a stub left its model answering 500 for good while `make status` said healthy;
    a crashed tritonserver stayed down and left its stubs' /dev/shm regions behind."""
    rows = faults.triton_killed(tmp_path, image_b64)
    for row in rows:
        print(row)
    assert len(rows) == 4
    failed = [f"{r['scenario']}: {r['observed']}" for r in rows if not r["passed"]]
    assert not failed, "\n".join(failed)
