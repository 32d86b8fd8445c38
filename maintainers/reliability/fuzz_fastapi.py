"""Bad input against a running FastAPI service: schema-driven (schemathesis, from the service's own
/openapi.json), the image corpus as base64, bodies the schema cannot describe, and mutated
images."""

from __future__ import annotations

import base64
import json
import socket
import time

import requests

from maintainers.reliability.common import HTTP_TIMEOUT, Tally, hypothesis_run, record
from maintainers.reliability.corpus import image_corpus, mutated_images, seed_images
from servelab import food11


def verdict(resp, expected=None, words: str = "") -> tuple[str, str]:
    """FastAPI's contract: 2xx with a Food-11 class, or a 4xx whose JSON 'detail' says what is
    wrong."""
    if resp.status_code >= 500:
        return "server error", f"{resp.status_code}: {resp.text[:200]}"
    if resp.status_code < 300:
        if expected not in (None, 200):
            return "unclear", f"200 although {expected} ({words}) was expected"
        try:
            ok = resp.json().get("prediction") in food11.CLASSES
        except (ValueError, AttributeError):
            ok = False
        return (
            ("accepted", "")
            if ok
            else ("server error", f"200 without a prediction: {resp.text[:200]}")
        )
    try:
        detail = resp.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    if not isinstance(detail, str) or not detail.strip():
        return "unclear", f"{resp.status_code} without a 'detail' message: {resp.text[:200]}"
    if (
        expected is not None and resp.status_code != expected
    ) or words.lower() not in detail.lower():
        return "unclear", f"{resp.status_code} (expected {expected} with {words!r}): {detail}"
    return "rejected", ""


def raw_bodies(good_b64: str) -> list[tuple[str, bytes, dict, int | None, str]]:
    """Bodies the schema cannot describe: (name, body, headers, expected status, words)."""
    js = {"Content-Type": "application/json"}
    nest = 50_000
    wrapped = "\n".join(good_b64[i : i + 76] for i in range(0, len(good_b64), 76))
    return [
        ("not JSON", b"\x00\x01 not json", js, 422, "JSON body"),
        ("empty body", b"", js, 422, "JSON body"),
        ("JSON null", b"null", js, 422, "JSON body"),
        ("JSON list", b'["' + good_b64.encode() + b'"]', js, 422, "JSON body"),
        ("image is null", b'{"image": null}', js, 422, "image"),
        ("image is a list", b'{"image": ["abc"]}', js, 422, "image"),
        ("image is NaN", b'{"image": NaN}', js, 422, "image"),
        ("image is a 5000-digit number", b'{"image": ' + b"9" * 5000 + b"}", js, 422, "JSON body"),
        (
            f"nested 2x{nest} brackets",
            b'{"image": ' + b"[" * nest + b"]" * nest + b"}",
            js,
            422,
            "JSON body",
        ),
        ("lone surrogate in the string", b'{"image": "\\ud800abc"}', js, 400, "base64"),
        ("latin-1 bytes (invalid UTF-8)", b'{"image": "\xe9\xe9"}', js, 422, "JSON body"),
        (
            "text/plain content type",
            json.dumps({"image": good_b64}).encode(),
            {"Content-Type": "text/plain"},
            422,
            "JSON body",
        ),
        (
            "form-encoded body",
            b"image=abc",
            {"Content-Type": "application/x-www-form-urlencoded"},
            422,
            "JSON body",
        ),
        (
            "data-URL prefix",
            json.dumps({"image": "data:image/png;base64," + good_b64}).encode(),
            js,
            200,
            "",
        ),
        ("base64 with line breaks", json.dumps({"image": wrapped}).encode(), js, 200, ""),
        ("extra field", json.dumps({"image": good_b64, "model": "other"}).encode(), js, 200, ""),
        ("base64 padding only", b'{"image": "===="}', js, 400, "base64"),
        (
            "12 MiB of base64",
            b'{"image": "' + b"A" * (12 * 1024 * 1024) + b'"}',
            js,
            413,
            "at most",
        ),
    ]


class _RawResponse:
    """Just enough of a response for verdict(), parsed from a raw socket answer."""

    def __init__(self, raw: bytes):
        head, _, body = raw.partition(b"\r\n\r\n")
        self.status_code = int(head.split()[1])
        self.text = body.decode(errors="replace")

    def json(self):
        return json.loads(self.text)


def lying_content_length(url: str) -> _RawResponse:
    """POST claiming a 1 GB body and sending 16 bytes (requests cannot lie): the size check must
    answer from the header, not wait for a gigabyte that never comes."""
    host, port = url.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=HTTP_TIMEOUT) as s:
        s.sendall(
            b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000000\r\nConnection: close\r\n\r\n" + b'{"image": "abc"}'
        )
        chunks = []
        try:
            while data := s.recv(65536):
                chunks.append(data)
        except socket.timeout:
            raise requests.Timeout("no answer to a request with a lying Content-Length") from None
    if not chunks:
        raise requests.ConnectionError("connection closed without an answer")
    return _RawResponse(b"".join(chunks))


def _schemathesis(proc, tally: Tally, session, examples: int, seed: int) -> None:
    """Positive and negative cases generated from the service's own OpenAPI document; each answer is
    checked against that document (no 5xx, documented status, content type, schema; bad data
    refused)."""
    import schemathesis
    from schemathesis import GenerationMode
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        negative_data_rejection,
        response_schema_conformance,
        status_code_conformance,
    )

    checks = [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
        negative_data_rejection,
    ]

    def judge(resp, case) -> tuple[str, str]:
        try:
            case.validate_response(resp, checks=checks)
        except Exception as exc:  # a FailureGroup: the answer broke the service's own contract
            bad = "server error" if resp.status_code >= 500 else "unclear"
            return bad, f"{case.body!r:.80}: {str(exc).splitlines()[:3]}"
        # the schema allows any string, so a conforming 2xx is accepted; a 4xx must say what is
        # wrong
        return ("accepted", "") if resp.status_code < 300 else verdict(resp)

    schema = schemathesis.openapi.from_url(f"{proc.url}/openapi.json")
    for result in schema.get_all_operations():
        op = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            name = f"schemathesis {mode.value} {op.label}"

            def check(case, name=name):
                record(
                    tally,
                    proc,
                    name,
                    lambda: case.call(base_url=proc.url, session=session, timeout=HTTP_TIMEOUT),
                    lambda resp: judge(resp, case),
                )

            try:
                hypothesis_run(op.as_strategy(generation_mode=mode), check, examples, seed)
            except Exception as exc:
                if (
                    type(exc).__name__ != "Unsatisfiable"
                ):  # GET /health has no input to make invalid
                    raise


def fuzz_fastapi(proc, examples: int = 100, image_examples: int = 60, seed: int = 0) -> Tally:
    url = proc.url
    tally = Tally(f"FastAPI {proc.name.split('-', 1)[1]}")
    start = time.perf_counter()
    session = requests.Session()
    _schemathesis(proc, tally, session, examples, seed)

    def post(**kw):
        return lambda: session.post(f"{url}/predict", timeout=HTTP_TIMEOUT, **kw)

    for name, data, expected, words in image_corpus():
        exp = 413 if len(data) > food11.MAX_IMAGE_BYTES else expected
        record(
            tally,
            proc,
            f"image: {name}",
            post(json={"image": base64.b64encode(data).decode()}),
            lambda r, exp=exp, words=words: verdict(r, exp, words),
        )
    good = base64.b64encode(seed_images()[0]).decode()
    for name, body, headers, expected, words in raw_bodies(good):
        record(
            tally,
            proc,
            f"raw: {name}",
            post(data=body, headers=headers),
            lambda r, expected=expected, words=words: verdict(r, expected, words),
        )
    record(
        tally,
        proc,
        "raw: Content-Length claims 1 GB",
        lambda: lying_content_length(url),
        lambda r: verdict(r, 413, "at most"),
    )
    for name, method, path, expected in [
        ("GET /predict", "GET", "/predict", 405),
        ("POST /health", "POST", "/health", 405),
        ("unknown path", "GET", "/../../etc/passwd", 404),
    ]:
        record(
            tally,
            proc,
            f"route: {name}",
            lambda method=method, path=path: session.request(
                method, f"{url}{path}", timeout=HTTP_TIMEOUT
            ),
            lambda r, expected=expected: verdict(r, expected, ""),
        )
    hypothesis_run(
        mutated_images(),
        lambda data: record(
            tally,
            proc,
            f"generated image {data[:16]!r}",
            post(json={"image": base64.b64encode(data).decode()}),
            verdict,
        ),
        image_examples,
        seed,
    )
    tally.still_serving = proc.alive() and verdict(post(json={"image": good})())[0] == "accepted"
    tally.seconds = time.perf_counter() - start
    return tally
