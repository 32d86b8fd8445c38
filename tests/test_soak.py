"""Bounded soak of FastAPI (PyTorch, ONNX) and Flask -> FastAPI: sustained concurrent load for a
set time.

Short in `make test-extended` (SOAK_SECONDS, default 10 s per service); `make soak
SOAK_SECONDS=300` runs the long form through python -m maintainers.reliability --only soak.
Expected: zero failed requests and bounded growth of the server's resident memory (RSS summed over
its process tree).
Triton's soak: test_fuzz_triton.py.
"""

import os

import pytest

from maintainers.reliability import common, procs, soak

SECONDS = float(os.environ.get("SOAK_SECONDS", 10))
pytestmark = pytest.mark.timeout(120 + 4 * SECONDS)


def _assert_soak(row):
    print(row)
    assert row["requests"] > 10 and row["errors"] == 0, row["error_examples"]
    assert row["seconds"] >= SECONDS  # it really ran for the set time
    assert row["rss_growth_mib"] <= common.RSS_GROWTH_LIMIT_MIB, row
    assert row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"] <= row["max_ms"] < 30_000


@pytest.fixture(scope="module")
def services(built_artifacts):
    """FastAPI (PyTorch, ONNX) and Flask in front of the ONNX one, started once for the module."""
    with procs.fastapi_and_flask() as started:
        yield started


@pytest.mark.slow
@pytest.mark.parametrize("runtime", ["pt", "onnx"])
def test_fastapi_soak(services, image_b64, runtime):
    api = services[runtime]
    row = soak.soak(
        f"FastAPI {runtime}", soak.fastapi_sender(api.url, image_b64), SECONDS, 4, api.pid
    )
    assert row["processes"] == 1  # uvicorn, one process
    _assert_soak(row)


@pytest.mark.slow
def test_flask_soak(services, test_images):
    flask = services["flask"]
    row = soak.soak(
        "Flask -> FastAPI",
        soak.flask_sender(flask.url, test_images[0].read_bytes()),
        SECONDS,
        4,
        flask.pid,
    )
    assert row["processes"] == 1  # waitress: one process, threads
    _assert_soak(row)


def test_a_failing_service_is_counted_not_hidden():
    """The soak counts failures: against a port where nothing listens, every request fails and none
    hangs."""
    row = soak.soak(
        "nothing there",
        soak.fastapi_sender("http://127.0.0.1:9", "AAAA"),
        1.0,
        2,
        os.getpid(),
        warmup_s=0.1,
    )
    assert row["requests"] > 0 and row["errors"] == row["requests"], row
    assert "ConnectionError" in row["error_examples"][0][0] and row["seconds"] < 5
