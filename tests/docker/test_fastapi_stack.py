"""The FastAPI stack (notebooks 3-4) as a class runs it: built, started, used from the host, from
inside the containers, and by notebooks 3 and 4 executed in its Jupyter container."""

from __future__ import annotations

import base64
import json
import re
import subprocess

import pandas as pd
import pytest
import requests
from compose_stack import HOST_RESULTS, Stack, say

from labstack.lab import QUICK_PARAMS
from servelab import food11
from servelab.paths import TEST_IMAGES

pytestmark = pytest.mark.slow  # builds, starts and uses a compose stack


def a_jpeg():
    """A Food-11 test image (from `make artifacts`; looked up when a test runs, not at import)."""
    return sorted(TEST_IMAGES.glob("*.jpg"))[0]


@pytest.fixture(scope="module")
def stack(settings):
    Stack("triton", settings).down()  # both stacks use the container names flask and jupyter
    stack = Stack("fastapi", settings)
    stack.down()  # a stack left over from an interrupted run
    seconds = stack.up()
    say(f"FastAPI stack built and healthy in {seconds:.0f} s ({stack.file_options})")
    yield stack
    stack.down()


def predict(base_url: str, image: bytes) -> requests.Response:
    return requests.post(
        f"{base_url}/predict", json={"image": base64.b64encode(image).decode()}, timeout=60
    )


def test_every_service_healthy_and_published_on_loopback_only(stack):
    published = {}
    for service in ("fastapi_server", "flask", "jupyter"):
        info = stack.container(service)
        assert info["State"]["Health"]["Status"] == "healthy", service
        published[service] = {
            b["HostIp"]
            for bindings in info["NetworkSettings"]["Ports"].values()
            for b in bindings or []
        }
    assert published == {s: {"127.0.0.1"} for s in published}, published


def test_fastapi_predicts_a_jpeg_from_the_host(stack, settings):
    health = requests.get(settings.url("FASTAPI_PORT", "/health"), timeout=10).json()
    assert health["status"] == "ready" and health["runtime"] == "pytorch"
    assert health["device"] == ("cuda:0" if settings.gpu else "cpu")
    resp = predict(settings.url("FASTAPI_PORT"), a_jpeg().read_bytes())
    assert resp.status_code == 200, resp.text
    assert resp.json()["prediction"] in food11.CLASSES


@pytest.mark.parametrize(
    "body, status",
    [
        ({"image": "%%%"}, 400),
        ({"image": ""}, 400),
        ({"image": base64.b64encode(b"not an image").decode()}, 415),
        ({"img": "x"}, 422),
    ],
)
def test_bad_input_is_a_clear_4xx_and_the_service_keeps_serving(stack, settings, body, status):
    resp = requests.post(settings.url("FASTAPI_PORT", "/predict"), json=body, timeout=30)
    assert resp.status_code == status and len(resp.json()["detail"]) > 20
    assert predict(settings.url("FASTAPI_PORT"), a_jpeg().read_bytes()).status_code == 200


def test_flask_upload_reaches_fastapi_by_service_name(stack, settings):
    env = {
        e.split("=", 1)[0]: e.split("=", 1)[1] for e in stack.container("flask")["Config"]["Env"]
    }
    assert env["FASTAPI_SERVER_URL"] == "http://fastapi_server:8000"
    with open(a_jpeg(), "rb") as f:
        page = requests.post(
            settings.url("FLASK_PORT", "/predict"),
            files={"file": (a_jpeg().name, f, "image/jpeg")},
            timeout=60,
        )
    label = re.search(r'class="label">([^<]+)<', page.text)
    assert page.status_code == 200 and label and label.group(1) in food11.CLASSES, page.text[:500]


def test_uvicorn_in_its_image_cuts_off_endless_headers(stack, settings):
    """The image's uvicorn command carries the header limit (h11; httptools had none): memory of
    the container's processes (seen from the host) stays flat."""
    from maintainers.reliability import hostile

    pid = stack.container("fastapi_server")["State"]["Pid"]
    row = hostile.endless_headers(settings.url("FASTAPI_PORT"), pid)
    say(f"endless headers: {row}")
    assert row["ok"], row


def test_flask_in_its_image_returns_memory_after_crafted_uploads(stack, settings):
    """Flask (the one service published on every interface) decodes uploads with the services'
    bounded path: 5 s after 16 crafted 40 Mpx PNGs its memory is back within 150 MiB (before:
    +1,040 MiB, kept)."""
    from maintainers.reliability import hostile

    pid = stack.container("flask")["State"]["Pid"]
    row = hostile.crafted_canvases(settings.url("FLASK_PORT"), pid, clients=16, target="flask")
    say(f"crafted uploads to Flask: {row}")
    assert row["ok"], row


def test_jupyter_reaches_both_services_by_name(stack):
    script = (
        "import requests; print(requests.get('http://fastapi_server:8000/health', "
        "timeout=10).json()['status'], requests.get('http://flask:5000/healthz', "
        "timeout=10).json()['status'])"
    )
    out = stack.exec("jupyter", "python", "-c", script, user="jovyan").stdout.split()
    assert out == ["ready", "ok"]


def test_jupyter_needs_its_token(stack, settings, jupyter_token):
    assert (
        requests.get(settings.url("JUPYTER_PORT", "/api/contents"), timeout=10).status_code == 403
    )
    ok = requests.get(
        settings.url("JUPYTER_PORT", "/api/contents"),
        timeout=10,
        headers={"Authorization": f"token {jupyter_token}"},
    )
    assert ok.status_code == 200


def test_the_jupyter_user_can_save_notebooks_and_perf_analyzer_runs(stack):
    stack.exec(
        "jupyter", "bash", "-c", "touch notebooks/.saved && rm notebooks/.saved", user="jovyan"
    )
    version = stack.exec("jupyter", "perf_analyzer", "--version", user="jovyan")
    assert "Perf Analyzer Version 2.51.0" in version.stdout + version.stderr  # it prints to stderr


def test_notebooks_3_and_4_run_in_the_jupyter_container(stack):
    code, commands, log = stack.run_notebook("03_fastapi_setup", {})
    assert code == 0, log[-3000:]
    assert "FASTAPI_SERVER_URL" in log and "HTTP 200" in log
    code, commands, log = stack.run_notebook(
        "04_fastapi_benchmarks", QUICK_PARAMS, predictions=True
    )
    assert code == 0, log[-5000:]
    # the switches the notebook asks for, printed with the compose files the stack runs with;
    # one to ONNX first waits for the image notebook 2 builds (docker/build_images.sh)
    onnx = "bash build_images.sh wait onnx; FASTAPI_BACKEND=onnx"
    switches = (onnx, "FASTAPI_BACKEND=pt", f"{onnx} WEB_CONCURRENCY=2", "FASTAPI_BACKEND=pt")
    assert commands == [
        f"{a} docker compose {stack.file_options} up -d --build --wait fastapi_server"
        for a in switches
    ]
    summary = pd.read_csv(HOST_RESULTS / "fastapi" / "summary.csv")
    assert list(summary["run"]) == [
        "pytorch_sequential",
        "onnx_sequential",
        "onnx_concurrent_16",
        "pytorch_concurrent_16",
        "onnx_concurrent_16_2_workers",
    ]
    assert (summary["errors"] == 0).all()
    assert (HOST_RESULTS / "fastapi" / "fastapi_runs.png").stat().st_size > 10_000


def test_the_bundle_outlives_the_jupyter_container(stack):
    """Issue 41: notebook 4's measure pass (the test before) kept its results bundle where the
    Jupyter container's volume keeps it (results/, bound to the host's): once the stack and its
    containers are gone, the bundle is on the host, whole, and readable without the lab."""
    bundle = HOST_RESULTS / "bundles" / "04_fastapi_benchmarks"
    assert (bundle / "manifest.json").is_file(), "notebook 4's run (the test before) made none"
    jupyter = stack.container("jupyter")["Id"]
    stack.down()
    gone = subprocess.run(["docker", "inspect", jupyter], capture_output=True, text=True)
    assert gone.returncode != 0, "the Jupyter container is still there"
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["notebook"] == "04_fastapi_benchmarks" and manifest["finished"], manifest
    runs = {k: e for k, e in manifest["entries"].items() if e["kind"] == "http"}
    assert set(runs) >= {"http pytorch_sequential", "http onnx_sequential"}, manifest["entries"]
    for entry in runs.values():
        requests_csv = pd.read_csv(bundle / "entries" / entry["folder"] / "requests.csv")
        assert len(requests_csv) > 0 and (requests_csv["status"] == 200).all()
    claims = pd.read_csv(bundle / "claims.csv")
    assert len(claims) == 6 and set(claims["verdict"]) <= {"holds", "does not hold", "inconclusive"}
    assert (bundle.parent / "04_fastapi_benchmarks.zip").stat().st_size > 0  # to download
