"""The FastAPI inference service, shared by fastapi_pt/ and fastapi_onnx/ (they differ only in
runtime).

POST /predict  {"image": "<base64 JPEG/PNG>"}  ->  {"prediction": "<class>", "probability": 0..1}
GET  /health   200 only once the model is loaded (503 while loading or if loading failed)
GET  /docs     Swagger UI with a ready-to-send example

Each response carries a Server-Timing header (decode, queue, infer in ms): the model runs one
request at a time, so under concurrent load `queue` grows while `infer` stays flat — the lesson
of notebook 4, visible from the client side.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from contextlib import asynccontextmanager

import numpy as np
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from servelab import food11
from servelab.serving.body_limit import BodySizeLimit
from servelab.serving.runtimes import RUNTIMES, thread_budget

log = logging.getLogger("servelab.fastapi")
MAX_BODY_BYTES = (food11.MAX_IMAGE_BYTES * 4) // 3 + 4096  # base64 of the largest image, plus JSON
# Request line + headers: uvicorn's default parser (httptools) has no limit (32 clients sending
# 16 MiB of unfinished header took 513 MiB), so the service runs uvicorn's h11 parser with this one
# (UVICORN_ARGS; the same in docker/Dockerfile.fastapi): above it h11 answers 431 and closes.
MAX_HEADER_BYTES = 64 * 1024
UVICORN_ARGS = ["--http", "h11", "--h11-max-incomplete-event-size", str(MAX_HEADER_BYTES)]
EXAMPLE_IMAGE = (  # an 8x8 orange PNG, so "Try it out" in Swagger works without a file at hand
    "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAFUlEQVR42mO81GPDgA0wMeAAg1MCAETJAar3ayW4AAAAAElFTkSuQmCC"
)


class PredictRequest(BaseModel):
    image: str = Field(
        ...,
        description="base64-encoded JPEG, PNG or WebP file (at most 8 MiB)",
        json_schema_extra={"examples": [EXAMPLE_IMAGE]},
    )


class Prediction(BaseModel):
    prediction: str = Field(
        ...,
        description="one of the 11 Food-11 classes",
        json_schema_extra={"examples": ["Dessert"]},
    )
    probability: float = Field(..., ge=0, le=1, description="softmax probability of that class")


class ModelHolder:
    """Loads the model in the background so /health can say 'loading' instead of hanging."""

    def __init__(self, runtime: str):
        self.runtime = runtime
        self.model = None
        self.error: str | None = None
        self.lock = threading.Lock()  # one model instance serves one request at a time
        self.weights = "unknown"

    def load(self) -> None:
        try:
            try:
                self.weights = food11.read_metadata()["weights"]
            except (FileNotFoundError, KeyError):
                self.weights = "unknown"
            start = time.time()
            # uvicorn --workers N (WEB_CONCURRENCY) runs N processes: each gets its share of the
            # cores
            threads = thread_budget(
                int(os.environ.get("WEB_CONCURRENCY") or 1), os.environ.get("FOOD11_THREADS")
            )
            model = RUNTIMES[self.runtime](threads=threads)
            model(np.zeros((1, 3, food11.INPUT_SIZE, food11.INPUT_SIZE), np.float32))  # warm-up
            self.model = model
            log.info(
                "%s model ready on %s, %d thread(s), in %.1f s (%s weights)",
                self.runtime,
                model.device,
                model.threads,
                time.time() - start,
                self.weights,
            )
        except Exception as exc:  # reported by /health, never a crash loop
            self.error = f"{type(exc).__name__}: {exc}"
            log.exception("model failed to load")


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"detail": message})


def create_app(runtime: str) -> BodySizeLimit:
    holder = ModelHolder(runtime)

    @asynccontextmanager
    async def lifespan(app):
        threading.Thread(target=holder.load, daemon=True).start()
        yield

    app = FastAPI(
        title=f"Food-11 classifier ({runtime})",
        description=(
            "Classifies a food photo into one of 11 classes. With the lab's generated "
            "weights the model is UNTRAINED: predictions are arbitrary but latency is real."
        ),
        lifespan=lifespan,
    )
    app.state.holder = holder

    body_hint = (
        'Send a JSON body of the form {"image": "<base64 JPEG, PNG or WebP>"} '
        "with Content-Type: application/json."
    )

    @app.exception_handler(RequestValidationError)
    async def explain_bad_body(request: Request, exc: RequestValidationError):
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in exc.errors()
        )
        return _error(422, f"{body_hint} Problem: {problems}")

    @app.exception_handler(StarletteHTTPException)
    async def explain_unparsable_body(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 400 and "parsing the body" in str(
            exc.detail
        ):  # bytes that are not JSON text
            return _error(422, f"{body_hint} Problem: the body could not be parsed as JSON.")
        return _error(exc.status_code, str(exc.detail))

    # async: answered on the event loop, never queued behind the decodes and model calls that
    # /predict runs in the thread pool
    @app.get("/health")
    async def health():
        body = {
            "runtime": runtime,
            "weights": holder.weights,
            "workers": int(os.environ.get("WEB_CONCURRENCY") or 1),
            "pid": os.getpid(),
        }  # which worker process answered: a switch waits until every one is ready
        if holder.model is not None:
            return {
                "status": "ready",
                "device": str(holder.model.device),
                "threads": holder.model.threads,
                **body,
            }
        if holder.error:
            return JSONResponse(
                status_code=503, content={"status": "error", "detail": holder.error, **body}
            )
        return JSONResponse(status_code=503, content={"status": "loading", **body})

    @app.post(
        "/predict",
        response_model=Prediction,
        responses={
            400: {"description": "not base64 / not an image / empty"},
            413: {"description": "image too large, or too costly to decode"},
            415: {"description": "not an image"},
            422: {"description": 'body is not {"image": "..."}'},
            503: {"description": "model still loading, or busy decoding other images"},
        },
    )
    def predict(req: PredictRequest):
        if holder.model is None:
            return _error(503, "The model is still loading (or failed to load): see GET /health.")
        t0 = time.perf_counter()
        try:
            x = food11.tensor_from_base64(req.image)[None]
        except food11.BadInput as exc:
            return _error(exc.status, str(exc))
        t1 = time.perf_counter()
        with holder.lock:
            t2 = time.perf_counter()
            logits = holder.model(x)[0]
            t3 = time.perf_counter()
        label, prob = food11.top_class(logits)
        timing = ", ".join(
            f"{name};dur={seconds * 1e3:.3f}"
            for name, seconds in (("decode", t1 - t0), ("queue", t2 - t1), ("infer", t3 - t2))
        )
        return JSONResponse(
            {"prediction": label, "probability": prob}, headers={"Server-Timing": timing}
        )

    # The body limit holds while the body is read (a chunked body has no Content-Length to check)
    return BodySizeLimit(app, MAX_BODY_BYTES, _too_large)


def _too_large(size: int, more: bool) -> str:
    sent = f"{size:,} bytes and more" if more else f"{size:,} bytes"
    return (
        f"The request body is {sent}; at most {MAX_BODY_BYTES:,} bytes are accepted (an image of "
        f"at most {food11.MAX_IMAGE_BYTES // 2**20} MiB, base64-encoded, in JSON)."
    )
