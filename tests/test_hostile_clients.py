"""Hostile clients against real services (maintainers/reliability/hostile.py, the same code as `make
reliability`): each finding of the hardening issue, reproduced and bounded.

- Flask keeps answering /healthz within 1 s while 64 connections hold unfinished requests
  (under gunicorn's threaded worker, 4 such sockets stopped it);
- FastAPI answers a chunked body over its limit with 413 before 32 MiB arrive, memory flat;
- FastAPI (uvicorn) and Flask (waitress) cut off a request header that never ends, memory flat;
- 16 concurrent small PNGs declaring a 40 Mpx canvas (whole, or truncated: the error path), to
  FastAPI and to Flask: memory is back within 150 MiB of the start 5 s after the burst;
- Triton's model-repository API (it can load a model.py) refuses requests without the node's secret;
- so does every other API that changes Triton's state or memory (shared memory, logging, trace),
  over HTTP and gRPC, and the lab's one admin header dict works for both protocols;
- a stub's own /dev/shm region registered as an output region (it made tritonserver segfault) is
  refused and the server keeps serving.
"""

from __future__ import annotations

import os

import pytest
from triton_helpers import start_local_triton

from labstack import launcher
from maintainers.reliability import hostile
from servelab import labenv

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def fastapi_onnx(start_service, built_artifacts):
    return start_service(launcher.fastapi_service(launcher.free_port(), "onnx"))


def _explain(row: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in row.items())


def test_slow_clients_do_not_starve_flask(start_service):
    flask = start_service(
        launcher.flask_service(launcher.free_port(), {"FASTAPI_SERVER_URL": "http://127.0.0.1:9"})
    )
    row = hostile.slow_clients(flask.url, n=64)
    print(_explain(row))
    assert row["ok"], _explain(row)


def test_a_chunked_body_over_the_limit_is_refused_early(fastapi_onnx):
    row = hostile.chunked_body(fastapi_onnx.url, fastapi_onnx.record["pid"], total_mb=300)
    print(_explain(row))
    assert row["ok"], _explain(row)


def test_memory_comes_back_after_a_burst_of_crafted_canvases(fastapi_onnx):
    row = hostile.crafted_canvases(fastapi_onnx.url, fastapi_onnx.record["pid"], clients=16)
    print(_explain(row))
    assert row["ok"], _explain(row)
    assert row["status"] == [200]  # under the pixel cap: classified, not refused


def test_fastapi_returns_memory_after_a_burst_of_truncated_canvases(fastapi_onnx):
    """The error path: each PNG fails late in decoding, after most of its canvas was allocated."""
    row = hostile.crafted_canvases(
        fastapi_onnx.url, fastapi_onnx.record["pid"], clients=16, truncated=True
    )
    print(_explain(row))
    assert row["ok"], _explain(row)
    assert row["status"] == [400]


def test_flask_returns_memory_after_a_burst_of_crafted_canvases(start_service):
    """Flask decodes each upload before it calls the model server (here: none answering, so each
    upload ends in the readable 502 page after the decode)."""
    flask = start_service(
        launcher.flask_service(launcher.free_port(), {"FASTAPI_SERVER_URL": "http://127.0.0.1:9"})
    )
    row = hostile.crafted_canvases(flask.url, flask.record["pid"], clients=16, target="flask")
    print(_explain(row))
    assert row["ok"], _explain(row)
    assert row["status"] == [502]


def test_fastapi_cuts_off_endless_request_headers(fastapi_onnx):
    row = hostile.endless_headers(fastapi_onnx.url, fastapi_onnx.record["pid"])
    print(_explain(row))
    assert row["ok"], _explain(row)


def test_flask_cuts_off_endless_request_headers(start_service):
    flask = start_service(
        launcher.flask_service(launcher.free_port(), {"FASTAPI_SERVER_URL": "http://127.0.0.1:9"})
    )
    row = hostile.endless_headers(flask.url, flask.record["pid"])
    print(_explain(row))
    assert row["ok"], _explain(row)


def test_the_repository_api_needs_the_node_secret(tmp_path, built_artifacts):
    server = start_local_triton(tmp_path)
    try:
        rows = hostile.repository_api(
            server.url, labenv.ADMIN_HEADER, os.environ["TRITON_ADMIN_KEY"]
        )
    finally:
        server.stop()
    assert all(r["ok"] for r in rows), "\n".join(_explain(r) for r in rows)
    assert [r["status"] for r in rows] == [403, 403, 403, 200]
    assert "pwned" not in (tmp_path / "model_repository").iterdir().__repr__()


@pytest.fixture(scope="module")
def triton(built_artifacts, tmp_path_factory):
    from maintainers.reliability import procs

    server = procs.start_triton(tmp_path_factory.mktemp("hostile-triton"))
    try:
        yield server
    finally:
        server.stop()


def test_every_state_changing_triton_api_needs_the_node_secret(triton):
    grpc = f"127.0.0.1:{triton.record['grpc_port']}"
    rows = hostile.admin_apis(triton.url, grpc, labenv.admin_headers())
    bad = [_explain(r) for r in rows if not r["ok"]]
    assert not bad, "\n".join(bad)
    assert len(rows) == len(hostile.HTTP_ADMIN_CALLS) + len(hostile.GRPC_ADMIN_CALLS)


def test_a_stub_region_as_an_output_region_is_refused_and_triton_serves(triton):
    row = hostile.stub_region_attack(triton.url, triton.pid)
    print(_explain(row))
    assert row["ok"], _explain(row)
    assert triton.alive()


def test_an_oversized_input_is_refused_and_the_stub_region_shrinks(tmp_path, built_artifacts):
    """Triton 2.51 copies a request into the stub's /dev/shm region whatever its size (no server
    limit in 2.51; the model config cannot bound a BYTES element): model.py refuses it by its
    length, and the watchdog (its region limit lowered here to 64 MiB) loads the model again so
    the region does not keep the 128 MiB: every time (issue 35: the second time, a reload with
    the same config was a no-op and the region stayed)."""
    from maintainers.reliability import procs

    server = procs.start_triton(tmp_path, watchdog_args=["--max-region-mib=64"])
    try:
        grpc = f"127.0.0.1:{server.record['grpc_port']}"
        rows = [
            hostile.oversized_input(server.url, grpc, server.tritonserver_pid(), mib=128)
            for _ in range(3)
        ]
    finally:
        server.stop()
    for row in rows:
        print(_explain(row))
    assert all(r["ok"] for r in rows), "\n".join(_explain(r) for r in rows)
    assert all("INPUT_IMAGE holds" in r["status"] for r in rows)
