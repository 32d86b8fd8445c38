"""The Flask UI under waitress, in front of a real FastAPI service: upload, limits, the service down
and back (its /healthz 503 "degraded" meanwhile, and `make status` saying so); and the page's
code holds no exercise's answer."""

import io
import re
import time

import pytest
import requests
from PIL import Image

from flask_app import app
from labstack import editions, launcher, stack_status
from servelab import food11
from servelab.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # real waitress and uvicorn processes


def _label(page: str):
    m = re.search(r'class="label">([^<]+)<', page)
    return m.group(1) if m else None


@pytest.fixture(scope="module")
def fastapi_port():
    return launcher.free_port()


@pytest.fixture
def flask(start_service, fastapi_port):
    env = {"FLASK_BACKEND": "fastapi", "FASTAPI_SERVER_URL": f"http://127.0.0.1:{fastapi_port}"}
    return start_service(launcher.flask_service(launcher.free_port(), env))


@pytest.fixture
def flask_url(flask):
    return flask.url


def _upload(url, name, data, mime="image/jpeg"):
    return requests.post(f"{url}/predict", files={"file": (name, data, mime)}, timeout=60)


def test_fastapi_down_gives_a_readable_page_then_recovers_without_restarting_flask(
    flask, flask_url, fastapi_port, start_service, test_images, built_artifacts
):
    image = test_images[0].read_bytes()
    down = _upload(flask_url, test_images[0].name, image)
    assert down.status_code == 502
    assert (
        "not reachable" in down.text and "try again" in down.text and "Traceback" not in down.text
    )
    # its health says so, naming the model server, with a 503 (the page itself answers /livez)
    health = requests.get(f"{flask_url}/healthz", timeout=10)
    assert health.status_code == 503 and health.json()["status"] == "degraded", health.text
    fastapi = f"http://127.0.0.1:{fastapi_port}"
    assert f"FastAPI inference service at {fastapi} is not reachable" in health.json()["problem"]
    assert requests.get(f"{flask_url}/livez", timeout=10).status_code == 200
    # and `make status` says the page cannot classify, and why (it called it healthy before)
    word, lines = stack_status._flask_status(flask.record)
    assert word == "DEGRADED" and "not reachable" in lines[0], lines
    assert stack_status.healthy(flask.record)  # what the launcher keeps: the page is up

    start_service(launcher.fastapi_service(fastapi_port, "onnx"))
    time.sleep(app.BACKEND_FRESH_S)  # /healthz reuses an answer that young
    health = requests.get(f"{flask_url}/healthz", timeout=10)
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert stack_status._flask_status(flask.record) == ("healthy", [])
    up = _upload(flask_url, test_images[0].name, image)
    assert up.status_code == 200, up.text
    assert _label(up.text) == built_artifacts["test_image_predictions"][test_images[0].name][0]
    assert "untrained" in up.text  # the weights are labelled wherever a prediction is shown


def test_upload_page_and_health(flask_url):
    page = requests.get(f"{flask_url}/", timeout=10)
    assert page.status_code == 200 and 'type="file"' in page.text and "8 MiB" in page.text
    health = requests.get(f"{flask_url}/healthz", timeout=10)  # no FastAPI behind it
    assert health.status_code == 503, health.text
    assert health.json()["status"] == "degraded" and "FastAPI" in health.json()["model_server"]


@pytest.mark.parametrize(
    "name, data, status, words",
    [
        ("notes.txt", b"hello", 415, "not a JPEG, PNG or WebP"),
        ("empty.jpg", b"", 400, "empty"),
        ("fake.png", b"this is not a png at all", 415, "not an image"),
        ("huge.jpg", b"\xff" * (food11.MAX_IMAGE_BYTES + 200_000), 413, "a photo of at most"),
    ],
)
def test_bad_uploads_get_a_readable_error_page(flask_url, name, data, status, words):
    resp = _upload(flask_url, name, data)
    assert (
        resp.status_code == status and words in resp.text and "Back to the upload page" in resp.text
    )


def test_no_file_chosen(flask_url):
    resp = requests.post(f"{flask_url}/predict", data={}, timeout=10)
    assert resp.status_code == 400 and "No file was chosen" in resp.text


def test_png_upload_with_alpha(flask_url, start_service, fastapi_port, built_artifacts):
    start_service(launcher.fastapi_service(fastapi_port, "pytorch"))
    buf = io.BytesIO()
    Image.new("RGBA", (300, 200), (10, 200, 30, 128)).save(buf, "PNG")
    resp = _upload(flask_url, "leaf.png", buf.getvalue(), "image/png")
    assert resp.status_code == 200 and _label(resp.text) in food11.CLASSES


def test_a_413_for_too_many_form_parts_does_not_blame_the_photo_size(flask_url, test_images):
    """Werkzeug answers 413 for more than 1000 form parts too: a 69 KB photo is not 'too large'."""
    fields = {f"field{i}": "x" for i in range(1100)}
    with open(test_images[0], "rb") as f:
        resp = requests.post(
            f"{flask_url}/predict",
            data=fields,
            files={"file": ("a.jpg", f, "image/jpeg")},
            timeout=60,
        )
    assert resp.status_code == 413 and "too many parts" in resp.text and "MiB" not in resp.text


REGION = re.compile(r"^[ \t]*### BEGIN SOLUTION\n(.*?)^[ \t]*### END SOLUTION", re.M | re.S)


def test_the_page_holds_no_exercises_answer():
    """The upload page sends its requests from the model's metadata, not with the lines a
    student writes in notebook 5 (5.2: an InferInput named INPUT_IMAGE, FOOD_LABEL and
    PROBABILITY read by name), and no line of any solution region is in flask_app/."""
    code = {p.name: p.read_text() for p in (REPO_ROOT / "flask_app").glob("*.py")}
    for name, text in code.items():
        assert not re.search(r'InferInput\(\s*"(INPUT_IMAGE|IMAGE_BYTES|input)"', text), name
        assert not re.search(r'as_numpy\(\s*"(FOOD_LABEL|PROBABILITY|LOGITS|output)"', text), name
    squeezed = {name: re.sub(r"\s+", "", text) for name, text in code.items()}
    for source in editions.sources():
        for answer in REGION.findall(source.read_text()):
            for line in (re.sub(r"\s+", "", ln) for ln in answer.splitlines()):
                if len(line) >= 30 and not line.startswith("#"):
                    found = [name for name, text in squeezed.items() if line in text]
                    assert not found, f"{source.name}: {line!r} in {found}"
