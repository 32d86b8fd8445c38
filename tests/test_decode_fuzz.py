"""The decode budget holds on any byte sequence: files crafted to cost seconds of CPU, then
mutated the ways a decoder forgives (stray bytes between segments, unknown markers, repeated
segments) and the ways it does not (flipped bytes, cuts, splices), each through the one decoding
path every service uses (servelab.food11.tensor_from_bytes). For each, the process's CPU time
(time.process_time: the decode's own cost, whatever else the machine runs) must stay under one
decode's budget, MAX_DECODE_CPU_S, and the answer must be a picture or a clear refusal (BadInput).

What the seeds are: the scan bomb (5,000 scans, 86 KB) with a stray byte before its scans (issue
43: 5-7 s of CPU past the structure walk), a progressive photo, EXIF carried as "Raw profile type
exif" text in a PNG (the issue's second bypass), EXIF in WebP and a JPEG, an MPO (the issue's
third: it skipped the reduced-scale decode), a PNG whose text inflates a hundredfold. About 20 s
on the 2-core machine; the mutations come from one fixed seed, so a failure names its case.
"""

from __future__ import annotations

import functools
import random
import time

import pytest
from PIL import Image

from reliability import corpus
from servelab import decode_budget, food11, image_decode

# Pillow warns on each EXIF entry it skips (pointing past its block): expected here
pytestmark = [pytest.mark.timeout(600), pytest.mark.filterwarnings("ignore::UserWarning")]
MUTATIONS_PER_SEED = 24
UNKNOWN_SEGMENT = b"\xff\xf3\x00\x06junk"  # JPG3: a marker no decoder knows, with a length


@functools.lru_cache(maxsize=1)
def seeds() -> dict[str, bytes]:
    import io

    from PIL import PngImagePlugin

    text = PngImagePlugin.PngInfo()
    text.add_text("comment", "x" * 5_000_000, zip=True)  # 5 MB of text in a few KB
    photo = Image.effect_mandelbrot((1600, 1200), (-2, -1.2, 1, 1.2), 60).convert("RGB")
    buf = io.BytesIO()
    photo.save(buf, "JPEG", progressive=True, quality=85)
    exif = corpus.exif_block(6, filler=60_000)
    return {
        "stray-byte scan bomb": corpus.jpeg_stray_scan_bomb(2000, 5000),
        "scan bomb": corpus.jpeg_scan_bomb(2000, 5000),
        "progressive photo": buf.getvalue(),
        "raw profile EXIF (PNG zTXt)": corpus.png_raw_profile_exif(corpus.exif_block(6, 2000)),
        "raw profile EXIF (PNG tEXt)": corpus.png_raw_profile_exif(exif, compressed=False),
        "WebP EXIF": corpus.webp_with_exif(exif),
        "JPEG EXIF": corpus.encode(photo.resize((400, 300)), "JPEG", exif=exif),
        "MPO": corpus.mpo(4000),
        "PNG text bomb": corpus.encode(Image.new("RGB", (64, 48)), "PNG", pnginfo=text),
    }


def mutate(data: bytes, rng: random.Random, others: list[bytes]) -> tuple[str, bytes]:
    """One mutation, named: what libjpeg tolerates (stray bytes, unknown segments, a segment
    repeated) before a marker, or damage anywhere."""
    markers = [
        i for i in range(2, len(data) - 1) if data[i] == 0xFF and data[i + 1] not in (0, 0xFF)
    ]
    at = rng.choice(markers) if markers and rng.random() < 0.7 else rng.randrange(len(data))
    kind = rng.choice(["stray", "unknown", "repeat", "flip", "cut", "splice"])
    if kind == "stray":
        return kind, data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 4))) + data[
            at:
        ]
    if kind == "unknown":
        return kind, data[:at] + UNKNOWN_SEGMENT + data[at:]
    if kind == "repeat":  # the stretch up to the next marker, twice
        end = next((m for m in markers if m > at), len(data))
        return kind, data[:end] + data[at:end] + data[end:]
    if kind == "flip":
        return kind, data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]
    if kind == "cut":
        return kind, data[: max(at, 3)]
    other = rng.choice(others)
    return kind, data[:at] + other[rng.randrange(len(other)) :]


def decode_cpu(data: bytes) -> tuple[float, str]:
    """(CPU seconds of this process, what the decode answered)."""
    start = time.process_time()
    try:
        food11.tensor_from_bytes(data)
        answer = "decoded"
    except image_decode.BadInput as exc:
        answer = f"{exc.status}: {str(exc)[:60]}"
    return time.process_time() - start, answer


def test_every_seed_is_answered_within_the_budget():
    answers = {}
    for name, data in seeds().items():
        cpu, answer = decode_cpu(data)
        answers[name] = answer
        assert cpu < decode_budget.MAX_DECODE_CPU_S, f"{name}: {cpu:.2f} s ({answer})"
    # what each must answer: refused from its structure, or decoded (the MPO at reduced scale)
    assert (
        answers["stray-byte scan bomb"].startswith("413")
        and "scans" in answers["stray-byte scan bomb"]
    )
    assert answers["PNG text bomb"].startswith("413") and "metadata" in answers["PNG text bomb"]
    assert answers["progressive photo"] == answers["MPO"] == answers["WebP EXIF"] == "decoded"
    assert answers["JPEG EXIF"] == answers["raw profile EXIF (PNG tEXt)"] == "decoded"
    assert image_decode.decoded(seeds()["MPO"], lambda img: img.size) == (500, 375)


@pytest.mark.slow  # about 10 s: 216 decodes
def test_mutated_files_cost_less_cpu_than_one_decode_may():
    rng = random.Random(43)
    pool = list(seeds().values())
    worst = (0.0, "", "")
    for name, data in seeds().items():
        for _ in range(MUTATIONS_PER_SEED):
            kind, mutated = mutate(data, rng, pool)
            cpu, answer = decode_cpu(mutated)
            worst = max(worst, (cpu, f"{name}, {kind}", answer))
            assert cpu < decode_budget.MAX_DECODE_CPU_S, f"{name}, {kind}: {cpu:.2f} s ({answer})"
    print(
        f"{len(pool) * MUTATIONS_PER_SEED} mutated files; the costliest: {worst[1]}, "
        f"{worst[0]:.2f} s of CPU ({worst[2]})"
    )


@pytest.mark.parametrize("stray", [b"\x00", b"\x42\x42", b"\xff\x00", UNKNOWN_SEGMENT])
def test_the_scans_after_what_libjpeg_skips_are_still_counted(stray):
    bomb = corpus.jpeg_scan_bomb(2000, 5000)
    every = bomb.replace(b"\xff\xda", stray + b"\xff\xda")  # before every scan header
    for crafted in (corpus.jpeg_stray_scan_bomb(2000, 5000, stray), every):
        cpu, answer = decode_cpu(crafted)
        assert answer.startswith("413") and "JPEG scans" in answer, answer
        assert cpu < 0.5
