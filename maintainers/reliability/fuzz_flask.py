"""Bad uploads against the running Flask page (in front of FastAPI): wrong types, empty, oversized,
odd filenames, the image corpus and mutated images. The contract: a result page, or an error page
whose message says what is wrong; never a 5xx or a traceback."""

from __future__ import annotations

import base64
import re
import time

import requests

from maintainers.reliability.common import HTTP_TIMEOUT, Tally, hypothesis_run, record
from maintainers.reliability.corpus import image_corpus, mutated_images, seed_images
from servelab import food11


def verdict(resp, expected=None, words: str = "") -> tuple[str, str]:
    if resp.status_code >= 500:
        return "server error", f"{resp.status_code}: {resp.text[:200]}"
    if "Traceback" in resp.text:
        return "unclear", "a traceback in the page"
    if resp.status_code < 300:
        if expected not in (None, 200):
            return "unclear", f"200 although {expected} ({words}) was expected"
        m = re.search(r'class="label">([^<]+)<', resp.text)
        return (
            ("accepted", "")
            if m and m.group(1) in food11.CLASSES
            else ("unclear", "200 without a label")
        )
    m = re.search(r'<div class="error">(.*?)</div>', resp.text, re.S)
    message = m.group(1) if m else ""
    if not message.strip() and resp.status_code not in (404, 405):  # Flask's own pages for those
        return "unclear", f"{resp.status_code} without the error page: {resp.text[:200]}"
    if (
        expected is not None and resp.status_code != expected
    ) or words.lower() not in resp.text.lower():
        return "unclear", (
            f"{resp.status_code} (expected {expected} with {words!r}): "
            f"{re.sub('<[^>]+>', ' ', message)[:200]}"
        )
    return "rejected", ""


def cases(good: bytes) -> list[tuple[str, dict, int | None, str]]:
    """(name, requests.post keyword arguments, expected status, words the page must contain)."""
    png, gif = seed_images()[1], seed_images()[5]
    too_big = b"\xff" * (food11.MAX_IMAGE_BYTES + 1024 * 1024)

    def one(filename, data, mime="image/jpeg"):
        return {"files": {"file": (filename, data, mime)}}

    return [
        ("no file field", {"data": {}}, 400, "No file was chosen"),
        ("file field with empty filename", one("", good), 400, "No file was chosen"),
        (
            "wrong field name",
            {"files": {"photo": ("a.jpg", good, "image/jpeg")}},
            400,
            "No file was chosen",
        ),
        (
            "JSON body instead of a form",
            {"json": {"image": base64.b64encode(good).decode()}},
            400,
            "No file was chosen",
        ),
        (
            "text file .txt",
            one("notes.txt", b"hello", "text/plain"),
            415,
            "not a JPEG, PNG or WebP",
        ),
        (
            "executable .exe",
            one("setup.exe", b"MZ\x90\x00" * 100, "application/octet-stream"),
            415,
            "not a JPEG, PNG or WebP",
        ),
        ("GIF upload .gif", one("anim.gif", gif, "image/gif"), 415, "not a JPEG, PNG or WebP"),
        ("no extension", one("photo", good), 415, "not a JPEG, PNG or WebP"),
        ("name is only '.jpg'", one(".jpg", good), 200, ""),
        ("upper-case .JPEG", one("PHOTO.JPEG", good), 200, ""),
        (
            "double extension .png.exe",
            one("x.png.exe", png, "image/png"),
            415,
            "not a JPEG, PNG or WebP",
        ),
        ("path traversal name", one("../../../etc/passwd.jpg", good), 200, ""),
        ("unicode name", one("фото 🍜.jpg", good), 200, ""),
        ("5000-character name", one("a" * 5000 + ".jpg", good), 200, ""),
        (
            "HTML in the name (.txt)",
            one("<script>alert(1)</script>.txt", b"x", "text/plain"),
            415,
            "&lt;script&gt;",
        ),
        ("PNG bytes named .jpg", one("really_png.jpg", png), 200, ""),
        (
            "text named .png",
            one("fake.png", b"this is not a png", "image/png"),
            415,
            "not an image",
        ),
        ("empty .jpg", one("empty.jpg", b""), 400, "empty"),
        (
            f"oversized {len(too_big) // 2**20} MiB .jpg",
            one("huge.jpg", too_big),
            413,
            "a photo of at most",
        ),
        (
            "two files",
            {
                "files": [
                    ("file", ("a.jpg", good, "image/jpeg")),
                    ("file", ("b.txt", b"x", "text/plain")),
                ]
            },
            200,
            "",
        ),
    ]


def fuzz_flask(proc, image_examples: int = 40, seed: int = 0) -> Tally:
    url = proc.url
    tally = Tally("Flask upload -> FastAPI")
    start = time.perf_counter()
    session = requests.Session()
    good = seed_images()[0]

    def post(**kw):
        return lambda: session.post(f"{url}/predict", timeout=HTTP_TIMEOUT, **kw)

    for name, kwargs, expected, words in cases(good):
        record(
            tally,
            proc,
            name,
            post(**kwargs),
            lambda r, expected=expected, words=words: verdict(r, expected, words),
        )
    for name, data, expected, words in image_corpus():
        if len(data) > food11.MAX_IMAGE_BYTES:  # Flask's own size cap answers first, in its words
            expected, words = 413, "a photo of at most"
        record(
            tally,
            proc,
            f"image: {name}",
            post(files={"file": ("upload.png", data, "image/png")}),
            lambda r, expected=expected, words=words: verdict(r, expected, words),
        )
    record(
        tally,
        proc,
        "GET /predict",
        lambda: session.get(f"{url}/predict", timeout=HTTP_TIMEOUT),
        lambda r: verdict(r, 405, ""),
    )
    hypothesis_run(
        mutated_images(),
        lambda data: record(
            tally,
            proc,
            f"generated upload {data[:16]!r}",
            post(files={"file": ("gen.jpg", data, "image/jpeg")}),
            verdict,
        ),
        image_examples,
        seed,
    )
    tally.still_serving = (
        proc.alive()
        and verdict(post(files={"file": ("ok.jpg", good, "image/jpeg")})())[0] == "accepted"
    )
    tally.seconds = time.perf_counter() - start
    return tally
