"""Uploads that cost CPU against the real services (reliability/decode_cost.py, the same code as
`make reliability`), issue 35's "done when": two scan-bomb uploads at once are answered within
10 s with a 4xx that names the scans, and the health endpoint answers within 2 s meanwhile;
legitimate large photos, more than decode at once, leave health answering too; Flask keeps a
thread for its page and /healthz when every upload waits on a model server that hangs.
(The ensemble's case, 16 bombs in one Triton request: tests/test_ensemble.py.)"""

from __future__ import annotations

import pytest

from flask_app.app import PREDICT_SLOTS
from labstack import launcher
from reliability import decode_cost

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _explain(row: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in row.items())


@pytest.fixture
def flask(start_service):
    # no model server answers: each bomb must be refused before one is needed
    return start_service(
        launcher.flask_service(launcher.free_port(), {"FASTAPI_SERVER_URL": "http://127.0.0.1:9"})
    )


@pytest.fixture
def fastapi_onnx(start_service, built_artifacts):
    return start_service(launcher.fastapi_service(launcher.free_port(), "onnx"))


def test_two_scan_bombs_at_once_to_flask(flask):
    row = decode_cost.scan_bombs(flask.url, "flask", clients=2)
    print(_explain(row))
    assert row["ok"], _explain(row)


def test_two_scan_bombs_at_once_to_fastapi(fastapi_onnx):
    row = decode_cost.scan_bombs(fastapi_onnx.url, "fastapi", clients=2)
    print(_explain(row))
    assert row["ok"], _explain(row)


def test_fastapi_health_answers_while_large_photos_decode(fastapi_onnx):
    row = decode_cost.costly_photos(fastapi_onnx.url, "fastapi", clients=8)
    print(_explain(row))
    assert row["ok"], _explain(row)
    assert row["status"] == [200]


def test_flask_keeps_a_thread_for_healthz_when_every_upload_waits(start_service):
    hole = decode_cost.BlackHole()
    try:
        flask = start_service(
            launcher.flask_service(launcher.free_port(), {"FASTAPI_SERVER_URL": hole.url})
        )
        row = decode_cost.held_uploads(flask.url, PREDICT_SLOTS)
    finally:
        hole.close()
    print(_explain(row))
    assert row["ok"], _explain(row)
