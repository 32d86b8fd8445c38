"""Generated bad input for the shared decoding (servelab.food11), in-process: never anything but
BadInput.

Every input either decodes to a finite float32 [3, 224, 224] tensor or raises food11.BadInput with a
4xx status and a message; any other exception would be a 500 in FastAPI, Flask and Triton alike.
The verdict functions the report uses are checked here too: each can say "server error"/"unclear".
"""

import base64

import numpy as np
import pytest
import requests
from hypothesis import HealthCheck, given, settings

from maintainers.reliability import (
    common,
    corpus,
    fuzz_decoding,
    fuzz_fastapi,
    fuzz_flask,
    fuzz_triton,
)
from servelab import food11

pytestmark = pytest.mark.timeout(180)
FUZZ = settings(
    max_examples=300,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
CORPUS = corpus.image_corpus()


def _check(data: bytes) -> str:
    try:
        x = food11.tensor_from_bytes(data)
    except food11.BadInput as exc:
        assert 400 <= exc.status < 500 and str(exc).strip(), (exc.status, str(exc))
        return "rejected"
    assert x.shape == (3, food11.INPUT_SIZE, food11.INPUT_SIZE) and x.dtype == np.float32
    assert np.isfinite(x).all()
    return "accepted"


@FUZZ
@given(data=corpus.mutated_images())
def test_generated_bytes_are_decoded_or_refused_with_a_4xx(data):
    _check(data)


@FUZZ
@given(text=fuzz_decoding.base64_texts())
def test_generated_base64_text_is_decoded_or_refused_with_a_4xx(text):
    try:
        raw = food11.decode_base64(text)
    except food11.BadInput as exc:
        assert exc.status in (400, 413, 422) and str(exc).strip()
        return
    _check(raw)


@pytest.mark.parametrize("name, data, status, words", CORPUS, ids=[c[0] for c in CORPUS])
def test_image_corpus(name, data, status, words):
    """Truncated JPEG/PNG, bombs, CMYK, 16-bit, animated GIF, EXIF rotation, other formats: the
    documented answer."""
    if status is None:
        _check(data)
        return
    if status == 200:
        assert _check(data) == "accepted"
        return
    with pytest.raises(food11.BadInput) as err:
        food11.tensor_from_bytes(data)
    assert err.value.status == status and words in str(err.value), str(err.value)


@pytest.mark.parametrize("name", [c[0] for c in CORPUS if "claims" in c[0] or "Mpx" in c[0]])
def test_bombs_and_lying_headers_say_too_many_pixels(name):
    """Below, at and above Pillow's own limits: always 413 with our pixel limit, never 'not an
    image'."""
    data = next(c[1] for c in CORPUS if c[0] == name)
    with pytest.raises(food11.BadInput) as err:
        food11.tensor_from_bytes(data)
    assert err.value.status == 413 and f"at most {food11.MAX_IMAGE_PIXELS:,} pixels" in str(
        err.value
    )


def test_decoding_fuzz_run_is_clean():
    tally = fuzz_decoding.fuzz_decoding(examples=120)
    assert tally.cases == len(CORPUS) + 120
    assert tally.counts["accepted"] > 0 and tally.counts["rejected"] > 0
    assert tally.problems == 0 and tally.counts["unclear"] == 0, tally.examples


# ---- the judges can fail: a wrong answer is flagged, not counted as fine


def _response(status: int, body: str, content_type: str = "application/json") -> requests.Response:
    resp = requests.Response()
    resp.status_code, resp._content = status, body.encode()
    resp.headers["Content-Type"] = content_type
    return resp


def test_decoding_judge_flags_exceptions_and_wrong_messages():
    tally = common.Tally("judge")
    fuzz_decoding.judge(tally, "boom", lambda: 1 / 0)
    fuzz_decoding.judge(tally, "wrong words", lambda: food11.tensor_from_bytes(b""), 400, "pixels")
    fuzz_decoding.judge(
        tally,
        "accepted, 413 expected",
        lambda: food11.tensor_from_bytes(corpus.seed_images()[0]),
        413,
    )
    assert tally.counts == {"server error": 1, "unclear": 2}


def test_service_judges_flag_5xx_missing_messages_and_tracebacks():
    assert (
        fuzz_fastapi.verdict(_response(500, "Internal Server Error", "text/plain"))[0]
        == "server error"
    )
    assert fuzz_fastapi.verdict(_response(422, "{}"))[0] == "unclear"
    assert (
        fuzz_fastapi.verdict(_response(415, '{"detail": "not an image"}'), 413, "pixels")[0]
        == "unclear"
    )
    assert (
        fuzz_fastapi.verdict(
            _response(413, '{"detail": "at most 40,000,000 pixels"}'), 413, "pixels"
        )[0]
        == "rejected"
    )
    assert (
        fuzz_flask.verdict(
            _response(400, "<pre>Traceback (most recent call last):</pre>", "text/html")
        )[0]
        == "unclear"
    )
    assert fuzz_flask.verdict(_response(502, "bad gateway", "text/html"))[0] == "server error"


def test_triton_judge_separates_its_json_parser_500_from_other_500s():
    parse = _response(
        500,
        "{\"error\": \"Unable to parse 'data': Shape does not match true shape of 'data' field\"}",
    )
    assert fuzz_triton.verdict(parse)[0] == common.TRITON_CORE_500
    assert (
        fuzz_triton.verdict(_response(500, '{"error": "Stub process is not healthy."}'))[0]
        == "server error"
    )
    assert fuzz_triton.verdict(_response(500, ""))[0] == "server error"
    assert (
        fuzz_triton.verdict(_response(400, '{"error": "batch-size must be <= 16"}'))[0]
        == "rejected"
    )
    tally = common.Tally("t")
    tally.add("x", common.TRITON_CORE_500, 500)
    assert tally.problems == 0  # Triton's own parser: listed apart, not a crash of our services


def test_base64_of_a_bomb_is_413_through_the_base64_path_too():
    bomb = corpus.corpus_file("PNG 20000x20000")
    with pytest.raises(food11.BadInput) as err:
        food11.tensor_from_base64(base64.b64encode(bomb).decode())
    assert err.value.status == 413 and "400,000,000 pixels" in str(err.value)
