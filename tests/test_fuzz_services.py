"""Schema-driven and generated bad input against the real FastAPI services (both runtimes) and the
Flask upload.

schemathesis reads each service's own /openapi.json and sends positive and negative bodies; then the
image corpus, raw bodies the schema cannot express and Hypothesis-mutated images. Expected: no 5xx,
no crash, no hang, every 4xx with a message that says what is wrong, and a good request still
answered afterwards. The same functions write docs/reliability.md (python -m
maintainers.reliability).
"""

import base64

import pytest
import requests

from labstack import launcher
from maintainers.reliability import corpus, fuzz_fastapi, fuzz_flask, procs
from servelab import food11

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
BOMB = corpus.corpus_file("PNG 20000x20000")


@pytest.fixture(scope="module")
def services(built_artifacts):
    """FastAPI (PyTorch, ONNX) and Flask in front of the ONNX one, as real processes."""
    with procs.fastapi_and_flask() as started:
        yield started


def _assert_clean(tally, cases_at_least: int):
    print(tally.target, tally.cases, dict(tally.counts), dict(tally.statuses))
    assert tally.cases >= cases_at_least
    assert tally.counts["server error"] == 0, tally.examples.get("server error")
    assert tally.counts["crash"] == 0 and tally.counts["no answer"] == 0, tally.examples
    assert tally.counts["unclear"] == 0, tally.examples.get("unclear")
    assert tally.still_serving


@pytest.mark.parametrize("runtime", ["pt", "onnx"])
def test_fastapi_fuzz_from_its_openapi_spec(services, runtime):
    tally = fuzz_fastapi.fuzz_fastapi(services[runtime], examples=60, image_examples=30)
    _assert_clean(tally, 150)
    assert all(tally.statuses[s] > 0 for s in (200, 400, 413, 415, 422)), tally.statuses
    assert tally.counts["accepted"] > 0 and tally.counts["rejected"] > 100


def test_flask_upload_fuzz(services):
    tally = fuzz_flask.fuzz_flask(services["flask"], image_examples=30)
    _assert_clean(tally, 80)
    assert all(tally.statuses[s] > 0 for s in (200, 400, 413, 415)), tally.statuses


def test_decompression_bomb_is_413_with_the_pixel_limit_everywhere(services):
    """A 50 KiB PNG claiming 400 Mpx: FastAPI and Flask both say how many pixels are allowed."""
    limit = f"{food11.MAX_IMAGE_PIXELS:,} pixels"
    for runtime in ("pt", "onnx"):
        resp = requests.post(
            f"{services[runtime].url}/predict",
            timeout=30,
            json={"image": base64.b64encode(BOMB).decode()},
        )
        assert resp.status_code == 413 and limit in resp.json()["detail"], resp.text
    page = requests.post(
        f"{services['flask'].url}/predict",
        timeout=30,
        files={"file": ("bomb.png", BOMB, "image/png")},
    )
    assert page.status_code == 413 and limit in page.text and "Traceback" not in page.text


def test_flask_escapes_a_hostile_filename(services):
    resp = requests.post(
        f"{services['flask'].url}/predict",
        timeout=30,
        files={"file": ("<script>alert(1)</script>.txt", b"x", "text/plain")},
    )
    assert (
        resp.status_code == 415
        and "<script>alert" not in resp.text
        and "&lt;script&gt;" in resp.text
    )


def test_services_listen_on_loopback_only(services):
    if launcher.BIND != "127.0.0.1":
        pytest.skip("LAB_BIND_HOST is set in this environment")
    for proc in services.values():
        assert procs.listen_addresses(proc.record["port"]) == {"127.0.0.1"}, proc.name
