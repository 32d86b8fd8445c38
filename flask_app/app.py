"""GourmetGram-style upload page: pick a food photo, get one of 11 classes from a model server.

Run locally: python -m flask_app.serve   (waitress)
Which model server (FastAPI or Triton) comes from the environment (FLASK_BACKEND): backends.py.
"""

from __future__ import annotations

import base64
import threading
import time

from flask import Flask, render_template, request
from werkzeug.exceptions import RequestEntityTooLarge

from flask_app import backends
from servelab import food11, image_decode

ALLOWED = {"jpg", "jpeg", "png", "webp"}
# Uploads classified at once. The server (flask_app/serve.py) runs HEALTH_THREADS more threads
# than this, so the page and /healthz always have a thread that no upload can take: one more
# upload gets a 503 page at once instead of a place in a queue behind the others.
PREDICT_SLOTS = 16
HEALTH_THREADS = 2
_predicting = threading.BoundedSemaphore(PREDICT_SLOTS)
app = Flask(__name__)
app.config["MAX_CONTENT_LENGTH"] = food11.MAX_IMAGE_BYTES + 64 * 1024  # the file plus form overhead


def _error(message: str, status: int):
    return render_template("error.html", message=message, model_server=_model_server_name()), status


def _model_server_name() -> str:
    try:
        return backends.from_env().name
    except ValueError as exc:
        return str(exc)


@app.get("/")
def index():
    return render_template(
        "index.html",
        model_server=_model_server_name(),
        max_mb=food11.MAX_IMAGE_BYTES // (1024 * 1024),
    )


# /healthz asks the model server too, briefly, and reuses a recent answer: it stays fast while
# uploads wait on a model server that hangs, and a burst of health checks costs one request
BACKEND_CHECK_S = 1.0
BACKEND_FRESH_S = 2.0
_backend = {"checked": float("-inf"), "problem": ""}
_backend_checking = threading.Lock()


def _backend_problem() -> str:
    """What is wrong with the model server ('' if it answers ready), at most BACKEND_FRESH_S old;
    while another thread asks it, the last answer."""
    fresh = time.monotonic() - _backend["checked"] < BACKEND_FRESH_S
    if fresh or not _backend_checking.acquire(blocking=False):
        return _backend["problem"]
    try:
        try:
            problem = backends.from_env().health_problem(BACKEND_CHECK_S)
        except ValueError as exc:  # FLASK_BACKEND names no backend
            problem = str(exc)
        _backend.update(problem=problem, checked=time.monotonic())
    finally:
        _backend_checking.release()
    return problem


@app.get("/healthz")
def healthz():
    """200 while uploads can be classified; 503 "degraded", with the model server named and what
    is wrong with it, while they cannot (the page itself still answers: /livez)."""
    problem = _backend_problem()
    if problem:
        body = {"status": "degraded", "model_server": _model_server_name(), "problem": problem}
        return body, 503
    return {"status": "ok", "model_server": _model_server_name()}


@app.get("/livez")
def livez():
    """200 while the page itself serves, whatever its model server does: what the launcher waits
    for and keeps (a FastAPI crash does not restart the page)."""
    return {"status": "ok"}


@app.post("/predict")
def predict():
    if not _predicting.acquire(blocking=False):
        return _error(
            f"The page is classifying {PREDICT_SLOTS} other photos right now: try again in a few "
            "seconds.",
            503,
        )
    try:
        return _predict()
    finally:
        _predicting.release()


def _predict():
    upload = request.files.get("file")
    if upload is None or not upload.filename:
        return _error(
            f"No file was chosen: pick a {image_decode.FORMAT_NAMES} photo and press Classify.", 400
        )
    extension = upload.filename.rsplit(".", 1)[-1].lower() if "." in upload.filename else ""
    if extension not in ALLOWED:
        return _error(
            f"'{upload.filename}' is not a {image_decode.FORMAT_NAMES} file "
            "(allowed: .jpg, .jpeg, .png, .webp).",
            415,
        )
    data = upload.read()
    try:  # refuse empty, damaged or non-image files before bothering the model server
        # the services' own decoding path: bounded, and the memory of a large canvas given back;
        # the pixels are kept for a model server that takes the tensor
        pixels = food11.tensor_from_bytes(data)
    except food11.BadInput as exc:
        return _error(str(exc), exc.status)
    try:
        server = backends.from_env()
        start = time.perf_counter()
        label, probability = server.predict(data, pixels)
        elapsed_ms = (time.perf_counter() - start) * 1e3
    except backends.ModelServerError as exc:
        return _error(str(exc), exc.status)  # 502, or 400 for a request it would not send
    except ValueError as exc:
        return _error(str(exc), 502)
    mime = {"png": "image/png", "webp": "image/webp"}.get(extension, "image/jpeg")
    return render_template(
        "result.html",
        label=label,
        probability=probability,
        model_server=server.name,
        weights=server.weights(),
        elapsed_ms=elapsed_ms,
        image_url=f"data:{mime};base64,{base64.b64encode(data).decode()}",
    )


@app.errorhandler(RequestEntityTooLarge)
def too_large(_exc):
    # Werkzeug answers 413 for a body over MAX_CONTENT_LENGTH, but also for a form with too many
    # parts or a large non-file field: only the first is about the photo's size
    size = request.content_length
    if size is not None and size > app.config["MAX_CONTENT_LENGTH"]:
        return _error(
            f"The upload is {size / 2**20:.1f} MiB; a photo of at most "
            f"{food11.MAX_IMAGE_BYTES // (1024 * 1024)} MiB is accepted: choose a smaller one.",
            413,
        )
    return _error(
        "The form has too many parts or a text field that is too large: upload one photo, as a "
        "file, with the page's form.",
        413,
    )
