"""GourmetGram-style upload page: pick a food photo, get one of 11 classes from the backend.

Run locally: gunicorn flask_app.app:app   (the backend comes from the environment: backends.py)
"""
from __future__ import annotations

import base64
import time

from flask import Flask, render_template, request
from werkzeug.exceptions import RequestEntityTooLarge

from flask_app import backends
from servelab import food11

ALLOWED = {"jpg", "jpeg", "png"}
app = Flask(__name__)
app.config["MAX_CONTENT_LENGTH"] = food11.MAX_IMAGE_BYTES + 64 * 1024  # the file plus form overhead


def _error(message: str, status: int):
    return render_template("error.html", message=message, backend=_backend_name()), status


def _backend_name() -> str:
    try:
        return backends.from_env().name
    except ValueError as exc:
        return str(exc)


@app.get("/")
def index():
    return render_template("index.html", backend=_backend_name(), max_mb=food11.MAX_IMAGE_BYTES // (1024 * 1024))


@app.get("/healthz")
def healthz():
    return {"status": "ok", "backend": _backend_name()}


@app.post("/predict")
def predict():
    upload = request.files.get("file")
    if upload is None or not upload.filename:
        return _error("No file was chosen: pick a JPEG or PNG photo and press Classify.", 400)
    extension = upload.filename.rsplit(".", 1)[-1].lower() if "." in upload.filename else ""
    if extension not in ALLOWED:
        return _error(f"'{upload.filename}' is not a JPEG or PNG file (allowed: .jpg, .jpeg, .png).", 415)
    data = upload.read()
    try:
        food11.load_image(data)  # refuse empty, damaged or non-image files before bothering the backend
    except food11.BadInput as exc:
        return _error(str(exc), exc.status)
    try:
        backend = backends.from_env()
        start = time.perf_counter()
        label, probability = backend.predict(data)
        elapsed_ms = (time.perf_counter() - start) * 1e3
    except (backends.BackendError, ValueError) as exc:
        return _error(str(exc), 502)
    mime = "image/png" if extension == "png" else "image/jpeg"
    return render_template("result.html", label=label, probability=probability, backend=backend.name,
                           weights=backend.weights(), elapsed_ms=elapsed_ms,
                           image_url=f"data:{mime};base64,{base64.b64encode(data).decode()}")


@app.errorhandler(RequestEntityTooLarge)
def too_large(_exc):
    return _error(
        f"The file is larger than {food11.MAX_IMAGE_BYTES // (1024 * 1024)} MiB: choose a smaller photo.", 413
    )
