"""Faults of the FastAPI/Flask half and the launcher: FastAPI killed behind Flask, a FastAPI server
killed mid-benchmark, `up` after a crash then `down` twice, and stale state with a reused pid.
(Triton's faults: tests/test_fuzz_triton.py. The report runs the launcher sequence with the full
`make up` stack; here with --no-triton, to stay short.)
"""

import pytest

from reliability import faults

pytestmark = pytest.mark.timeout(300)


@pytest.mark.slow
def test_fastapi_killed_behind_flask_then_back(test_images):
    row = faults.fastapi_killed_behind_flask(test_images[0].read_bytes())
    print(row)
    assert row["passed"], row["observed"]
    assert "HTTP 502" in row["observed"] and "same Flask process yes" in row["observed"]


@pytest.mark.slow
def test_fastapi_killed_mid_benchmark_is_reported(image_b64):
    row = faults.fastapi_killed_mid_benchmark(image_b64, n=200, concurrency=4)
    print(row)
    assert row["passed"], row["observed"]
    assert row["seconds"] < 60 and "error:" in row["observed"]


@pytest.mark.slow
def test_launcher_up_after_a_crash_then_down_twice(tmp_path, built_artifacts):
    crash, down = faults.crash_up_down_down(tmp_path, full_stack=False)
    for row in (crash, down):
        print(row)
        assert row["passed"], row["observed"]
    assert "stopped leftover flask" in crash["observed"]
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
